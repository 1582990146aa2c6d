#include "ops/oci_enforce.h"

#include <fmt/format.h>

#include "ops/control.h"
#include "sandbox/cgroup.h"
#include "util/text.h"

namespace airlock::ops {

namespace {

Rejection refusal(std::string line)
{
	return Rejection{{std::move(line)}};
}

}  // namespace

Result<std::string> enforce_oci_plan(const Paths& paths, const OciHookPlan& plan)
{
	std::string who = "container " + printable(plan.container);
	std::string policy_from = plan.policy_from_annotation ? fmt::format("annotation {}", kPolicyAnnotation)
							      : std::string("--default-policy");
	std::string no_daemon = fmt::format("{}: no airlock daemon answers at {} to enforce policy '{}' ({}); the "
					    "container is not started unenforced",
					    who, control_socket(paths), plan.policy, policy_from);
	try {
		// No daemon is the first thing to say: nothing else can be done.
		if (!daemon_connect(paths).valid())
			return refusal(no_daemon);
		Request req = Request::of(Request::Cmd::Attach, plan.name);
		req.cgroup = container_cgroup(plan.pid);
		// A container's policy never goes below a sandbox that already
		// decides for its cgroup: the deeper sandbox would decide instead.
		for (const auto& r : load_records(paths))
			if (req.cgroup.rfind(r.cgroup + "/", 0) == 0)
				return refusal(
					fmt::format("{}: its cgroup {} is below sandbox '{}' ({}), whose policy "
						    "decides there; airlock does not put a container's own policy "
						    "beneath it; the container is not started",
						    who, req.cgroup, r.name, r.cgroup));
		// The daemon attaches this very cgroup, or none.
		req.cgroup_id = cgroup::id_of(req.cgroup);
		req.policy = plan.policy;
		auto answer = daemon_call(paths, req);
		if (!answer)
			return refusal(no_daemon);
		if (!*answer) {
			const auto& lines = answer->rejection().lines;
			return refusal(fmt::format("{}: policy '{}' ({}) is rejected: {}; the container is not started",
						   who, plan.policy, policy_from, lines.empty() ? "" : lines.front()));
		}
		return (*answer)->value("message", "");
	} catch (const std::exception& e) {
		return refusal(fmt::format("{}: {}; the container is not started", who, e.what()));
	}
}

}  // namespace airlock::ops
