// `airlock run` and `airlock exec`: a command inside a sandbox (ops/run.h).
// The command is every word after "--" (Globals::command); the positional
// "command" is declared for --help only.
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "confine/capabilities.h"
#include "ops/run.h"

namespace airlock {

void register_run(CLI::App& app, Globals& g)
{
	auto o = std::make_shared<ops::RunOptions>();
	auto* run = app.add_subcommand("run", "Run a command in a new sandbox under a policy");
	run->add_option("--policy,-p", o->policy_file, "Policy file")->required();
	run->add_option("--name,-n", o->name, "Sandbox name (default POLICY-PID)")->check(sandbox_name());
	run->add_option("--audit-log", o->audit_log, "JSON-lines audit log (default /var/log/airlock/audit.jsonl)");
	run->add_flag("--log-allowed", o->log_allowed, "Also log allowed connections and datagrams");
	add_audit_bound(run, o->audit_bound);
	run->add_option("--user,-u", o->user,
			"Run the command as USER[:GROUP] (names or ids); a root command can leave its cgroup "
			"unless the cgroup2 mount has nsdelegate");
	run->add_flag("--standalone", o->standalone,
		      "Supervise the sandbox in this process even when a daemon runs (default: the daemon does)");
	run->add_flag("--keep-caps", o->keep_caps,
		      fmt::format("Do not drop {} from the command",
				  confine::capability_names(confine::dropped_capabilities())));
	auto command_help = std::make_shared<std::vector<std::string>>();
	run->add_option("command", *command_help, "Command and arguments, after --");
	run->footer("Exit status: the command's (128+N if killed by signal N); 120 killed on violation; 121 killed by "
		    "`airlock kill`; 125 airlock error; 126 command not executable; 127 command not found.");
	run->callback([&g, o, command_help] {
		if (g.command.empty() || !command_help->empty())
			throw CLI::ValidationError(
				"run", "the command comes after --: airlock run --policy P.json -- CMD ARGS...");
		g.action = [&g, o] {
			o->command = g.command;
			return ops::run(g.paths, *o);
		};
	});
}

void register_exec(CLI::App& app, Globals& g)
{
	auto o = std::make_shared<ops::RunOptions>();
	auto name = std::make_shared<std::string>();
	auto* exec = app.add_subcommand("exec", "Run a command inside a sandbox the daemon supervises");
	exec->add_option("name", *name, "Sandbox")->required()->check(sandbox_name());
	exec->add_option("--user,-u", o->user, "Run the command as USER[:GROUP] (names or ids)");
	exec->add_flag("--keep-caps", o->keep_caps, "Do not drop the capabilities airlock run drops");
	auto command_help = std::make_shared<std::vector<std::string>>();
	exec->add_option("command", *command_help, "Command and arguments, after --");
	exec->footer("Exit status: the command's; 120 killed on violation; 121 killed by `airlock kill`.");
	exec->callback([&g, o, name, command_help] {
		if (g.command.empty() || !command_help->empty())
			throw CLI::ValidationError("exec",
						   "the command comes after --: airlock exec NAME -- CMD ARGS...");
		g.action = [&g, o, name] {
			o->command = g.command;
			return ops::exec(g.paths, *name, *o);
		};
	});
}

}  // namespace airlock
