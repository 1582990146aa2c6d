#pragma once
// `airlock oci-hook`, once its plan is made (ops/oci_hook.h): the daemon
// has the container's cgroup attached before the container's program runs,
// or the container must not start.
#include <string>

#include "ops/oci_hook.h"
#include "sandbox/state.h"
#include "util/result.h"

namespace airlock::ops {

// Attaches the cgroup of an Action::Attach plan through the daemon: the
// daemon's message, or the one line the runtime shows as it refuses to
// start the container (no daemon, a rejected policy, a cgroup below
// another sandbox, or whatever else failed).
Result<std::string> enforce_oci_plan(const Paths&, const OciHookPlan&);

}  // namespace airlock::ops
