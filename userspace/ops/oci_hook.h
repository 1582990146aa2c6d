#pragma once
// `airlock oci-hook`: what a container runtime's hook asks of airlock, read
// from the container's state (the OCI runtime specification's "state"
// object, given on the hook's standard input).
//
// At createRuntime or prestart the container's cgroup exists and holds only
// the runtime's init process, which has not yet started the container's
// program: the hook has the daemon attach that cgroup then, so the program
// is enforced from its first instruction. The policy is the container's
// annotation io.airlock.policy (a name in the daemon's policy directory,
// never a path: a container does not choose files on the node), else the
// hook's --default-policy; neither means the hook does nothing.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace airlock::ops {

inline constexpr const char* kPolicyAnnotation = "io.airlock.policy";

struct OciHookPlan {
	enum class Action {
		Nothing,  // no policy for this container (or a pod's infrastructure container): left alone
		Attach,   // attach the cgroup of pid under policy, as sandbox name
		Stopped,  // the container has stopped: the daemon lets go of its sandbox once the cgroup is gone
	};
	Action action = Action::Nothing;
	std::string container;  // the container's id
	std::string name;       // the sandbox's name: container_sandbox_name(container)
	std::string policy;     // a name in the daemon's policy directory, or the default
	bool policy_from_annotation = false;
	int pid = 0;
};

struct OciHookOptions {
	std::string default_policy;        // for containers without the annotation; "" none
	std::vector<std::string> allowed;  // the policies an annotation may name; empty: any in the directory
};

// A rejection is one line naming what is wrong ("container ID: ...").
Result<OciHookPlan> plan_oci_hook(std::string_view state, const OciHookOptions& options);

// The cgroup of a container's process, checked to be the container's own:
// it holds that process and no other (a runtime run with cgroups disabled
// leaves the container in its own cgroup, which must not be enforced
// instead). Throws a line naming what is wrong.
std::string container_cgroup(int pid);

// The sandbox name of a container id: ctr- and the id whole up to 59
// characters; of a longer id, its first 12 when it is 64 hex digits (as
// `podman ps` shows them), else its first 38 and a hash of the whole id.
// None when the id has characters a sandbox name cannot.
std::optional<std::string> container_sandbox_name(const std::string& id);

}  // namespace airlock::ops
