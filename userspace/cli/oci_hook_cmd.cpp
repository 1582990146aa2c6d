// `airlock oci-hook`: run by a container runtime (runc, crun) at the
// createRuntime or prestart stage with the container's state on standard
// input; has the daemon attach the container's cgroup before the
// container's program runs. Any failure is exit status 1 with one line on
// standard error, which the runtime shows as it refuses to start the
// container: a container that asked for a policy never runs without it.
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "ops/oci_enforce.h"
#include "ops/oci_hook.h"
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
	switch (plan.action) {
	case ops::OciHookPlan::Action::Nothing:
		spdlog::debug("oci-hook: container {}: no {} annotation and no --default-policy: not enforced",
			      printable(plan.container), ops::kPolicyAnnotation);
		return kExitOk;
	case ops::OciHookPlan::Action::Stopped:
		// Its cgroup is removed by the runtime; the daemon lets go of a
		// sandbox whose attached cgroup is gone (within a second).
		return kExitOk;
	case ops::OciHookPlan::Action::Attach:
		break;
	}
	auto enforced = ops::enforce_oci_plan(paths, plan);
	if (!enforced)
		return refuse(enforced.rejection().first());
	spdlog::info("oci-hook: {}", *enforced);
	return kExitOk;
}

}  // namespace

void register_oci_hook(CLI::App& app, Globals& g)
{
	auto o = std::make_shared<ops::OciHookOptions>();
	auto* hook = app.add_subcommand(
		"oci-hook", "Container runtime hook (createRuntime or prestart): has the daemon enforce a container's "
			    "policy before its program runs; the OCI state on standard input");
	hook->add_option("--default-policy", o->default_policy,
			 "Policy for containers without the io.airlock.policy annotation (a name in the daemon's "
			 "--policy-dir, or an absolute path); without it they are left alone");
	hook->add_option("--allow-policy", o->allowed,
			 "A policy the annotation may name (repeat for each); without it, any policy of the daemon's "
			 "--policy-dir");
	hook->footer(
		"Exit status: 0 enforced, or nothing to enforce; 1 the container must not start (one line on "
		"standard error: no daemon, a policy that is not a name or not allowed, a rejected policy, a shared "
		"cgroup, a cgroup below another sandbox).");
	on_parsed(hook, g, [&g, o] { return cmd_oci_hook(g.paths, *o); });
}

}  // namespace airlock
