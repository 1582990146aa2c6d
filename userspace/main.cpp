// airlock: kernel-enforced network egress control for sandboxes.
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "util/exit_code.h"
#include "util/log.h"

using namespace airlock;

namespace {

// The subcommands, in the order --help lists them.
constexpr RegisterCommand kCommands[] = {
	register_policy,    register_run,      register_status, register_thaw,   register_kill,   register_attach,
	register_detach,    register_sandbox,  register_exec,   register_daemon, register_events, register_world,
	register_uninstall, register_oci_hook, register_proxy,  register_reload,
};

std::string env_or(const char* name, const std::string& fallback)
{
	const char* v = std::getenv(name);
	return v && *v ? v : fallback;
}

void add_global_options(CLI::App& app, Globals& g)
{
	g.paths.bpf_dir = env_or("AIRLOCK_BPF_DIR", g.paths.bpf_dir);
	g.paths.state_dir = env_or("AIRLOCK_STATE_DIR", g.paths.state_dir);
	g.paths.cgroup_parent = env_or("AIRLOCK_CGROUP_PARENT", g.paths.cgroup_parent);
	app.add_option("--bpf-dir", g.paths.bpf_dir, "Where programs, maps and links are pinned (env AIRLOCK_BPF_DIR)")
		->capture_default_str();
	app.add_option("--state-dir", g.paths.state_dir, "Sandbox records and the lock (env AIRLOCK_STATE_DIR)")
		->capture_default_str();
	app.add_option(
		   "--cgroup-parent", g.paths.cgroup_parent,
		   "Cgroup, relative to the cgroup2 mount, under which sandboxes are made (env AIRLOCK_CGROUP_PARENT)")
		->capture_default_str();
	app.add_option("--log-level", g.log_level, "trace, debug, info, warn, error")
		->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
		->capture_default_str();
	app.add_option(
		   "--log-format", g.log_format,
		   "text (\"airlock LEVEL: message\"; the daemon's lines start with an RFC 3339 time unless they go "
		   "to the journal) or json (one object per line: ts, level, msg)")
		->check(CLI::IsMember({"text", "json"}))
		->capture_default_str();
}

}  // namespace

int main(int argc, char** argv)
{
	setup_logging(LogFormat::Text, false);

	CLI::App app{"airlock: kernel-enforced network egress control for sandboxes (cgroup v2 + eBPF)"};
	app.require_subcommand(1);
	app.set_version_flag("--version", AIRLOCK_VERSION_STRING);
	Globals g;
	add_global_options(app, g);
	for (RegisterCommand add : kCommands)
		add(app, g);

	// CLI11 parses up to the first "--"; the rest is the command of run or exec.
	int options_end = argc;
	for (int i = 1; i < argc; i++) {
		if (std::string_view(argv[i]) == "--") {
			options_end = i;
			g.command.assign(argv + i + 1, argv + argc);
			break;
		}
	}
	try {
		app.parse(options_end, argv);
	} catch (const CLI::ParseError& e) {
		return usage_error(app, e, argc, argv);
	}
	spdlog::set_level(spdlog::level::from_str(g.log_level));
	setup_logging(*parse_log_format(g.log_format), app.got_subcommand("daemon"));

	bool runs_command = app.got_subcommand("run") || app.got_subcommand("exec");
	try {
		if (g.action)
			return g.action();
	} catch (const std::exception& e) {
		spdlog::error("{}", e.what());
		return runs_command ? kExitAirlockError : kExitFailure;
	}
	return kExitFailure;
}
