#pragma once
// Commands that act on sandboxes, client side: through the daemon's control
// socket when a daemon runs for this state directory (it supervises them,
// and its view stays whole), on the pins and the state directory directly
// when none does. Each gives the line to show, or a Rejection; other
// failures throw.
#include <functional>
#include <string>
#include <string_view>

#include "events/audit_bound.h"
#include "ops/ops.h"
#include "ops/request.h"
#include "sandbox/state.h"
#include "util/result.h"

namespace airlock::ops {

// The daemon's answer to request, or what here gives when no daemon runs.
Result<std::string> via_daemon(const Paths&, const Request& request, const std::function<Result<std::string>()>& here);

// A policy argument as the daemon must see it: an existing file by its
// absolute path; anything else unchanged (a name in the daemon's policy dir).
std::string policy_argument(const std::string& arg);

// `airlock reload`: the policy argument as policy_argument() gives it.
Result<std::string> reload_via_daemon(const Paths&, const std::string& name, const std::string& file);

// `airlock attach`: n as given on the command line (its policy and audit
// log relative to this working directory). Warns first of processes that
// could leave the cgroup.
Result<std::string> attach_via_daemon(const Paths&, NewSandbox n);

struct SandboxCreateOptions {
	std::string name;
	std::string policy_file;  // a file, or a policy in the daemon's --policy-dir
	std::string audit_log;
	AuditBound audit_bound;
	bool log_allowed = false;
};

// `airlock sandbox create`: the daemon's alone; throws when none runs.
Result<std::string> create_via_daemon(const Paths&, const SandboxCreateOptions&);

// The audit lines of the sandboxes the daemon supervises (sandbox: one
// sandbox's), handed to out as they arrive: the last ones it saw, then
// (follow) every new one until interrupted. Throws when no daemon runs, or
// when it refuses.
void follow_events(const Paths&, const std::string& sandbox, bool follow,
		   const std::function<void(std::string_view)>& out);

}  // namespace airlock::ops
