// `airlock attach` and `detach`: a policy on an existing cgroup (a
// container, a unit), through the daemon when one runs.
#include <memory>

#include "cli/commands.h"
#include "ops/ops.h"
#include "ops/via_daemon.h"
#include "util/error.h"

namespace airlock {

void register_attach(CLI::App& app, Globals& g)
{
	auto o = std::make_shared<ops::NewSandbox>();
	auto* attach = app.add_subcommand("attach", "Enforce a policy on an existing cgroup (a container, a unit)");
	auto* cgroup = attach->add_option("--cgroup", o->cgroup,
					  "The cgroup: absolute, or relative to the cgroup2 mount");
	attach->add_option("--pid", o->pid, "The cgroup of this process (how a container is attached)")
		->excludes(cgroup);
	attach->add_option("--policy,-p", o->policy_file, "Policy file")->required();
	attach->add_option("--name,-n", o->name, "Sandbox name (default: the cgroup's own name)")
		->check(sandbox_name());
	attach->add_option("--audit-log", o->audit_log, "JSON-lines audit log (default /var/log/airlock/audit.jsonl)");
	attach->add_flag("--log-allowed", o->log_allowed, "Also log allowed connections and datagrams");
	add_audit_bound(attach, o->audit_bound);
	on_parsed(attach, g, [&g, o] {
		if (o->cgroup.empty() && o->pid <= 0)
			fail("attach: give --cgroup PATH or --pid PID");
		return print_answer(ops::attach_via_daemon(g.paths, *o));
	});
}

void register_detach(CLI::App& app, Globals& g)
{
	auto name = std::make_shared<std::string>();
	auto* detach = app.add_subcommand("detach", "Stop enforcing on an attached cgroup; its processes run on");
	detach->add_option("name", *name, "Sandbox")->required()->check(sandbox_name());
	on_parsed(detach, g, [&g, name] {
		return print_answer(ops::via_daemon(g.paths, Request::of(Request::Cmd::Detach, *name),
						    [&] { return ops::detach(g.paths, *name); }));
	});
}

}  // namespace airlock
