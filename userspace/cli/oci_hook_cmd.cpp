// `airlock oci-hook`: run by a container runtime (runc, crun) at the
// createRuntime or prestart stage with the container's state on standard
// input; has the daemon attach the container's cgroup before the
// container's program runs. Any failure is exit status 1 with one line on
// standard error, which the runtime shows as it refuses to start the
// container: a container that asked for a policy never runs without it.
#include <unistd.h>

#include <cerrno>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "ops/control.h"
#include "ops/oci_hook.h"
#include "sandbox/cgroup.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/text.h"

namespace airlock {

namespace {

constexpr size_t kMaxState = 1 << 20;

// Standard input, whole, up to kMaxState bytes.
std::string read_state()
{
	std::string s;
	char buf[65536];
	for (;;) {
		ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail_errno("read the container state from standard input");
		if (n == 0)
			return s;
		s.append(buf, static_cast<size_t>(n));
		if (s.size() > kMaxState)
			fail("the container state on standard input is larger than {} bytes", kMaxState);
	}
}

int refuse(const std::string& line)
{
	fmt::print(stderr, "airlock oci-hook: {}\n", line);
	return kExitFailure;
}

}  // namespace

int cmd_oci_hook(const Paths& paths, const ops::OciHookOptions& o)
{
	std::string state;
	try {
		state = read_state();
	} catch (const std::exception& e) {
		return refuse(e.what());
	}
	auto planned = ops::plan_oci_hook(state, o);
	if (!planned)
		return refuse(planned.rejection().first() + "; the container is not started");
	const auto& plan = *planned;
	std::string who = "container " + printable(plan.container);
	switch (plan.action) {
	case ops::OciHookPlan::Action::Nothing:
		spdlog::debug("oci-hook: {}: no {} annotation and no --default-policy: not enforced", who,
			      ops::kPolicyAnnotation);
		return kExitOk;
	case ops::OciHookPlan::Action::Stopped:
		// Its cgroup is removed by the runtime; the daemon lets go of a
		// sandbox whose attached cgroup is gone (within a second).
		return kExitOk;
	case ops::OciHookPlan::Action::Attach:
		break;
	}
	std::string policy_from = plan.policy_from_annotation ? fmt::format("annotation {}", ops::kPolicyAnnotation)
							      : std::string("--default-policy");
	std::string no_daemon = fmt::format("{}: no airlock daemon answers at {} to enforce policy '{}' ({}); the "
					    "container is not started unenforced",
					    who, control_socket(paths), plan.policy, policy_from);
	try {
		// No daemon is the first thing to say: nothing else can be done.
		if (!daemon_connect(paths).valid())
			return refuse(no_daemon);
		Request req = Request::of(Request::Cmd::Attach, plan.name);
		req.cgroup = ops::container_cgroup(plan.pid);
		// A container's policy never goes below a sandbox that already
		// decides for its cgroup: the deeper sandbox would decide instead.
		for (const auto& r : load_records(paths))
			if (req.cgroup.rfind(r.cgroup + "/", 0) == 0)
				return refuse(fmt::format("{}: its cgroup {} is below sandbox '{}' ({}), whose policy "
							  "decides there; airlock does not put a container's own policy "
							  "beneath it; the container is not started",
							  who, req.cgroup, r.name, r.cgroup));
		// The daemon attaches this very cgroup, or none.
		req.cgroup_id = cgroup::id_of(req.cgroup);
		req.policy = plan.policy;
		auto answer = daemon_call(paths, req);
		if (!answer)
			return refuse(no_daemon);
		if (!*answer) {
			const auto& lines = answer->rejection().lines;
			return refuse(fmt::format("{}: policy '{}' ({}) is rejected: {}; the container is not started", who,
						  plan.policy, policy_from, lines.empty() ? "" : lines.front()));
		}
		spdlog::info("oci-hook: {}", (*answer)->value("message", ""));
		return kExitOk;
	} catch (const std::exception& e) {
		return refuse(fmt::format("{}: {}; the container is not started", who, e.what()));
	}
}

}  // namespace airlock
