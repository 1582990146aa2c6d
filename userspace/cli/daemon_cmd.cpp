// `airlock daemon`: the node agent (daemon/daemon.h).
#include <memory>

#include "cli/commands.h"
#include "daemon/daemon.h"

namespace airlock {

void register_daemon(CLI::App& app, Globals& g)
{
	auto o = std::make_shared<DaemonOptions>();
	auto* daemon = app.add_subcommand(
		"daemon",
		"Supervise sandboxes: events to the audit log, violations to freeze or kill, metrics, control socket");
	daemon->add_option("--config,-c", o->config, "JSON configuration: metrics, policy_dir, audit_log, sandboxes")
		->check(CLI::ExistingFile);
	daemon->add_option("--metrics", o->metrics,
			   "Serve Prometheus metrics on ADDR:PORT (\"off\": none; default 127.0.0.1:9464)");
	daemon->add_option("--policy-dir", o->policy_dir,
			   "Policies by name (NAME.json), watched: a changed file reloads every sandbox using it");
	daemon->add_option(
		"--audit-log", o->audit_log,
		"Audit log of sandboxes made through the daemon without one (default /var/log/airlock/audit.jsonl)");
	add_audit_bound(daemon, o->audit_bound);
	on_parsed(daemon, g, [&g, o] { return run_daemon(g.paths, *o); });
}

}  // namespace airlock
