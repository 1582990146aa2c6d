// airlock: kernel-enforced network egress control for sandboxes.
#include <algorithm>
#include <cstdlib>
#include <vector>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/proxy_cmd.h"
#include "policy/policy.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/exit_code.h"
#include "util/log.h"

using namespace airlock;

namespace {

std::string env_or(const char* name, const std::string& fallback)
{
	const char* v = std::getenv(name);
	return v && *v ? v : fallback;
}

void add_audit_bound(CLI::App* cmd, AuditBound& b)
{
	cmd->add_option_function<uint64_t>(
		   "--audit-log-max-bytes",
		   [&b](const uint64_t& v) {
			   if (v && v < AuditBound::kMinMaxBytes)
				   throw CLI::ValidationError("--audit-log-max-bytes",
							      fmt::format("at least {} (or 0: rotated by something else)",
									  AuditBound::kMinMaxBytes));
			   b.max_bytes = v;
		   },
		   fmt::format("Rotate the audit log before it grows past this size (K, M, G suffixes; default {} MiB; "
			       "0: never, an external logrotate does)",
			       AuditBound::kDefaultMaxBytes >> 20))
		->transform(CLI::AsSizeValue(false));
	cmd->add_option_function<unsigned>(
		   "--audit-log-keep", [&b](const unsigned& v) { b.keep = v; },
		   fmt::format("Rotated audit logs kept (LOG.1 ... LOG.N; default {})", AuditBound::kDefaultKeep))
		->check(CLI::Range(0u, 1000u));
}


// The word on the command line where a subcommand was expected and none of
// the known ones stands, with the command it was meant for: ("stauts",
// airlock) or ("chek", airlock policy). Options and their values are
// skipped.
std::pair<const CLI::App*, std::string> unknown_subcommand(const CLI::App& app, int argc, char** argv)
{
	const CLI::App* at = &app;
	for (int i = 1; i < argc; i++) {
		std::string_view a = argv[i];
		if (a == "--")
			break;
		if (!a.empty() && a.front() == '-') {
			if (a.find('=') == std::string_view::npos) {
				const CLI::Option* opt = at->get_option_no_throw(std::string(a));
				if (opt && opt->get_items_expected_min() > 0)
					i++;
			}
			continue;
		}
		const CLI::App* next = nullptr;
		for (const CLI::App* sub : at->get_subcommands({}))
			if (sub->get_name() == a)
				next = sub;
		if (!next)
			return {at->get_subcommands({}).empty() ? nullptr : at, std::string(a)};
		at = next;
	}
	return {nullptr, ""};
}

size_t edit_distance(std::string_view a, std::string_view b)
{
	std::vector<size_t> row(b.size() + 1);
	for (size_t j = 0; j <= b.size(); j++)
		row[j] = j;
	for (size_t i = 1; i <= a.size(); i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= b.size(); j++) {
			size_t up = row[j];
			row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
			diag = up;
		}
	}
	return row[b.size()];
}

// A command line CLI11 could not parse: its message on one line, prefixed
// like every other error, and the documented status: 0 for --help and
// --version, 125 for run and exec (whose other statuses are the command's),
// 1 for the rest. An unknown subcommand is named, with the nearest one.
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv)
{
	if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
		return app.exit(e);
	std::string msg = e.what();
	std::string where;
	const CLI::App* sub = nullptr;
	for (const CLI::App* a : app.get_subcommands())
		sub = a;
	for (const CLI::App* a = sub; a; a = a->get_subcommands().empty() ? nullptr : a->get_subcommands().back())
		where += (where.empty() ? "" : " ") + a->get_name();
	if (e.get_name() == "RequiredError" || e.get_name() == "ExtrasError") {
		auto [parent, word] = unknown_subcommand(app, argc, argv);
		if (parent) {
			std::string best;
			size_t best_d = 3;  // at most two edits away
			for (const CLI::App* a : parent->get_subcommands({})) {
				size_t d = edit_distance(word, a->get_name());
				if (d < best_d) {
					best_d = d;
					best = a->get_name();
				}
			}
			std::string cmd = parent == &app ? "airlock" : "airlock " + where;
			fmt::print(stderr, "airlock error: '{}' is not a subcommand of {}{}; {} --help lists them\n", word, cmd,
				   best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best), cmd);
			return kExitFailure;
		}
	}
	if (!sub) {
		fmt::print(stderr, "airlock error: {}; airlock --help lists the subcommands\n", msg);
		return kExitFailure;
	}
	fmt::print(stderr, "airlock error: {}: {}; airlock {} --help shows its options\n", where, msg, where);
	bool runs_command = sub->get_name() == "run" || sub->get_name() == "exec";
	return runs_command ? kExitAirlockError : kExitFailure;
}

// A sandbox name argument, judged before anything is asked of the daemon
// or the kernel, naming the value given.
const CLI::Validator kSandboxName(
	[](std::string& v) { return valid_sandbox_name(v) ? std::string() : not_a_sandbox_name(v); }, "NAME");

}  // namespace

int main(int argc, char** argv)
{
	setup_logging(LogFormat::Text, false);

	CLI::App app{"airlock: kernel-enforced network egress control for sandboxes (cgroup v2 + eBPF)"};
	app.require_subcommand(1);
	app.set_version_flag("--version", AIRLOCK_VERSION_STRING);

	Paths paths;
	paths.bpf_dir = env_or("AIRLOCK_BPF_DIR", paths.bpf_dir);
	paths.state_dir = env_or("AIRLOCK_STATE_DIR", paths.state_dir);
	paths.cgroup_parent = env_or("AIRLOCK_CGROUP_PARENT", paths.cgroup_parent);
	std::string log_level = "info";
	app.add_option("--bpf-dir", paths.bpf_dir, "Where programs, maps and links are pinned (env AIRLOCK_BPF_DIR)")
		->capture_default_str();
	app.add_option("--state-dir", paths.state_dir, "Sandbox records and the lock (env AIRLOCK_STATE_DIR)")
		->capture_default_str();
	app.add_option("--cgroup-parent", paths.cgroup_parent,
		       "Cgroup, relative to the cgroup2 mount, under which sandboxes are made (env AIRLOCK_CGROUP_PARENT)")
		->capture_default_str();
	app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
		->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
		->capture_default_str();
	std::string log_format = "text";
	app.add_option("--log-format", log_format,
		       "text (\"airlock LEVEL: message\"; the daemon's lines start with an RFC 3339 time unless they go "
		       "to the journal) or json (one object per line: ts, level, msg)")
		->check(CLI::IsMember({"text", "json"}))
		->capture_default_str();

	auto* policy = app.add_subcommand("policy", "Validate and inspect policy files");
	policy->require_subcommand(1);
	std::vector<std::string> check_files;
	auto* check = policy->add_subcommand("check", "Validate policy files: exit 0, or one line per error");
	check->add_option("files", check_files, "Policy files")->required();
	std::string show_file;
	auto* show = policy->add_subcommand("show", "Print the rules and the kernel entries a policy compiles to");
	show->add_option("file", show_file, "Policy file")->required();
	std::string suggest_log;
	SuggestOptions suggest_opts;
	auto* suggest = policy->add_subcommand(
		"suggest", "Print a policy that allows exactly what an audit-mode run used (from its audit log)");
	suggest->add_option("audit_log", suggest_log, "Audit log of the run")->required();
	suggest->add_option("--sandbox", suggest_opts.sandbox, "Only this sandbox's lines");
	suggest->add_option("--name", suggest_opts.name, "Name of the suggested policy")->capture_default_str();

	ops::RunOptions run_opts;
	auto* run = app.add_subcommand("run", "Run a command in a new sandbox under a policy");
	run->add_option("--policy,-p", run_opts.policy_file, "Policy file")->required();
	run->add_option("--name,-n", run_opts.name, "Sandbox name (default POLICY-PID)")->check(kSandboxName);
	run->add_option("--audit-log", run_opts.audit_log, "JSON-lines audit log (default /var/log/airlock/audit.jsonl)");
	run->add_flag("--log-allowed", run_opts.log_allowed, "Also log allowed connections and datagrams");
	add_audit_bound(run, run_opts.audit_bound);
	run->add_option("--user,-u", run_opts.user,
			"Run the command as USER[:GROUP] (names or ids); a root command can leave its cgroup "
			"unless the cgroup2 mount has nsdelegate");
	run->add_flag("--standalone", run_opts.standalone,
		      "Supervise the sandbox in this process even when a daemon runs (default: the daemon does)");
	run->add_flag("--keep-caps", run_opts.keep_caps,
		      "Do not drop CAP_NET_RAW, CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, "
		      "CAP_SYS_MODULE from the command");
	// Declared for --help only: the command is taken verbatim from after
	// "--" below, never through CLI11, which would split an argument such
	// as "[a,b]" at its commas.
	std::vector<std::string> command_help;
	run->add_option("command", command_help, "Command and arguments, after --");
	run->footer(
		"Exit status: the command's (128+N if killed by signal N); 120 killed on violation; 121 killed by "
		"`airlock kill`; 125 airlock error; 126 command not executable; 127 command not found.");

	bool status_json = false;
	auto* status = app.add_subcommand("status", "List sandboxes, their state and kernel counters");
	status->add_flag("--json", status_json, "Machine-readable output");

	std::string name, file;
	auto* thaw = app.add_subcommand("thaw", "Lift a sandbox's quarantine and unfreeze it");
	thaw->add_option("name", name, "Sandbox")->required()->check(kSandboxName);
	auto* killc = app.add_subcommand("kill", "Kill every process of a sandbox");
	killc->add_option("name", name, "Sandbox")->required()->check(kSandboxName);
	AttachOptions attach_opts;
	auto* attach = app.add_subcommand("attach", "Enforce a policy on an existing cgroup (a container, a unit)");
	auto* attach_cg = attach->add_option("--cgroup", attach_opts.cgroup,
					     "The cgroup: absolute, or relative to the cgroup2 mount");
	attach->add_option("--pid", attach_opts.pid, "The cgroup of this process (how a container is attached)")
		->excludes(attach_cg);
	attach->add_option("--policy,-p", attach_opts.policy_file, "Policy file")->required();
	attach->add_option("--name,-n", attach_opts.name, "Sandbox name (default: the cgroup's own name)")->check(kSandboxName);
	attach->add_option("--audit-log", attach_opts.audit_log,
			   "JSON-lines audit log (default /var/log/airlock/audit.jsonl)");
	attach->add_flag("--log-allowed", attach_opts.log_allowed, "Also log allowed connections and datagrams");
	add_audit_bound(attach, attach_opts.audit_bound);
	auto* detach = app.add_subcommand("detach", "Stop enforcing on an attached cgroup; its processes run on");
	detach->add_option("name", name, "Sandbox")->required()->check(kSandboxName);
	auto* sandbox = app.add_subcommand("sandbox", "Sandboxes the daemon makes and supervises");
	sandbox->require_subcommand(1);
	SandboxCreateOptions create_opts;
	auto* create = sandbox->add_subcommand("create", "Make an empty sandbox; run commands in it with airlock exec");
	create->add_option("name", create_opts.name, "Sandbox name")->required()->check(kSandboxName);
	create->add_option("--policy,-p", create_opts.policy_file,
			   "Policy file, or the name of a policy in the daemon's --policy-dir")
		->required();
	create->add_option("--audit-log", create_opts.audit_log, "JSON-lines audit log (default: the daemon's)");
	create->add_flag("--log-allowed", create_opts.log_allowed, "Also log allowed connections and datagrams");
	add_audit_bound(create, create_opts.audit_bound);
	auto* delete_ = sandbox->add_subcommand("delete", "Kill a sandbox's processes and remove it");
	delete_->add_option("name", name, "Sandbox")->required()->check(kSandboxName);
	ops::RunOptions exec_opts;
	std::string exec_name;
	auto* exec = app.add_subcommand("exec", "Run a command inside a sandbox the daemon supervises");
	exec->add_option("name", exec_name, "Sandbox")->required()->check(kSandboxName);
	exec->add_option("--user,-u", exec_opts.user, "Run the command as USER[:GROUP] (names or ids)");
	exec->add_flag("--keep-caps", exec_opts.keep_caps, "Do not drop the capabilities airlock run drops");
	std::vector<std::string> exec_help;
	exec->add_option("command", exec_help, "Command and arguments, after --");
	exec->footer("Exit status: the command's; 120 killed on violation; 121 killed by `airlock kill`.");
	DaemonOptions daemon_opts;
	auto* daemon = app.add_subcommand(
		"daemon", "Supervise sandboxes: events to the audit log, violations to freeze or kill, metrics, control socket");
	daemon->add_option("--config,-c", daemon_opts.config, "JSON configuration: metrics, policy_dir, audit_log, sandboxes")
		->check(CLI::ExistingFile);
	daemon->add_option("--metrics", daemon_opts.metrics,
			   "Serve Prometheus metrics on ADDR:PORT (\"off\": none; default 127.0.0.1:9464)");
	daemon->add_option("--policy-dir", daemon_opts.policy_dir,
			   "Policies by name (NAME.json), watched: a changed file reloads every sandbox using it");
	daemon->add_option("--audit-log", daemon_opts.audit_log,
			   "Audit log of sandboxes made through the daemon without one (default /var/log/airlock/audit.jsonl)");
	add_audit_bound(daemon, daemon_opts.audit_bound);
	std::string events_sandbox;
	bool events_follow = false;
	auto* eventsc = app.add_subcommand("events", "Audit lines of the sandboxes the daemon supervises");
	eventsc->add_option("--sandbox", events_sandbox, "Only this sandbox")->check(kSandboxName);
	eventsc->add_flag("--follow,-f", events_follow, "Keep printing new lines");
	// airlock world show: the records of a sandbox's simulated world.
	auto* world = app.add_subcommand("world", "What sandboxes tried in their simulated world");
	world->require_subcommand(1);
	std::string world_records, world_sandbox;
	bool world_json = false;
	auto* world_show = world->add_subcommand(
		"show", "Print a world's records as a table: time, kind, destination, what was sent, body bytes, status");
	std::string world_dir = WorldPolicy{}.records_dir;
	world_show->add_option("RECORDS", world_records,
			       "Records file (the world's records/SANDBOX.jsonl), or a sandbox's name: its file in --dir")
		->required();
	world_show->add_option("--dir", world_dir, "Where a sandbox named by RECORDS has its records")
		->capture_default_str();
	world_show->add_option("--sandbox", world_sandbox, "Only this sandbox's records")->check(kSandboxName);
	world_show->add_flag("--json", world_json, "The records' JSON lines as they are");
	bool uninstall_force = false;
	auto* uninstall = app.add_subcommand(
		"uninstall", "Remove every sandbox, the pins, the cgroup parent and the state directory (no daemon may run)");
	uninstall->add_flag("--force", uninstall_force,
			    "Also when sandboxes have processes: airlock's own are killed, attached cgroups detached");
	ops::OciHookOptions hook_opts;
	auto* oci_hook = app.add_subcommand(
		"oci-hook", "Container runtime hook (createRuntime or prestart): has the daemon enforce a container's "
			    "policy before its program runs; the OCI state on standard input");
	oci_hook->add_option("--default-policy", hook_opts.default_policy,
			     "Policy for containers without the io.airlock.policy annotation (a name in the daemon's "
			     "--policy-dir, or an absolute path); without it they are left alone");
	oci_hook->add_option("--allow-policy", hook_opts.allowed,
			     "A policy the annotation may name (repeat for each); without it, any policy of the daemon's "
			     "--policy-dir");
	oci_hook->footer(
		"Exit status: 0 enforced, or nothing to enforce; 1 the container must not start (one line on "
		"standard error: no daemon, a policy that is not a name or not allowed, a rejected policy, a shared "
		"cgroup, a cgroup below another sandbox).");
	ProxyCommand proxy_cmd;
	auto* proxyc = app.add_subcommand("proxy", "The proxy of a sandbox that redirects (started by airlock)");
	proxyc->group("");  // not for people: `airlock run` and the daemon start it
	proxyc->add_option("--sandbox", proxy_cmd.sandbox)->required();
	proxyc->add_option("--slot", proxy_cmd.slot)->required();
	proxyc->add_option("--policy", proxy_cmd.policy_file)->required();
	proxyc->add_option("--user", proxy_cmd.user);
	proxyc->add_option("--records-fd", proxy_cmd.records_fd)->required();
	proxyc->add_option("--origin-fd", proxy_cmd.origin_fd)->required();
	proxyc->add_option("--ca-fd", proxy_cmd.ca_fd);
	proxyc->add_option("--control-fd", proxy_cmd.control_fd);
	proxyc->add_option("--learned-fd", proxy_cmd.learned_fd);
	proxyc->add_option("--listen-fd", proxy_cmd.listen_fds)->required();
	proxyc->add_option("--udp-fd", proxy_cmd.udp_fds);
	auto* reload = app.add_subcommand("reload", "Swap a running sandbox's policy atomically");
	reload->add_option("name", name, "Sandbox")->required()->check(kSandboxName);
	reload->add_option("file", file, "New policy file")->required();

	int options_end = argc;
	for (int i = 1; i < argc; i++) {
		if (std::string_view(argv[i]) == "--") {
			options_end = i;
			run_opts.command.assign(argv + i + 1, argv + argc);
			exec_opts.command = run_opts.command;
			break;
		}
	}
	try {
		app.parse(options_end, argv);
		if (run->parsed() && (run_opts.command.empty() || !command_help.empty()))
			throw CLI::ValidationError("run", "the command comes after --: airlock run --policy P.json -- CMD ARGS...");
		if (exec->parsed() && (exec_opts.command.empty() || !exec_help.empty()))
			throw CLI::ValidationError("exec", "the command comes after --: airlock exec NAME -- CMD ARGS...");
	} catch (const CLI::ParseError& e) {
		return usage_error(app, e, argc, argv);
	}
	spdlog::set_level(spdlog::level::from_str(log_level));
	setup_logging(*parse_log_format(log_format), daemon->parsed());

	bool is_run = run->parsed();
	bool runs_command = is_run || exec->parsed();
	try {
		if (check->parsed())
			return cmd_policy_check(check_files);
		if (show->parsed())
			return cmd_policy_show(show_file);
		if (suggest->parsed())
			return cmd_policy_suggest(suggest_log, suggest_opts);
		if (is_run)
			return ops::run(paths, run_opts);
		if (status->parsed())
			return cmd_status(paths, status_json);
		if (thaw->parsed())
			return cmd_thaw(paths, name);
		if (killc->parsed())
			return cmd_kill(paths, name);
		if (reload->parsed())
			return cmd_reload(paths, name, file);
		if (attach->parsed()) {
			if (attach_opts.cgroup.empty() && attach_opts.pid <= 0)
				fail("attach: give --cgroup PATH or --pid PID");
			return cmd_attach(paths, attach_opts);
		}
		if (detach->parsed())
			return cmd_detach(paths, name);
		if (create->parsed())
			return cmd_sandbox_create(paths, create_opts);
		if (delete_->parsed())
			return cmd_sandbox_delete(paths, name);
		if (exec->parsed())
			return ops::exec(paths, exec_name, exec_opts);
		if (daemon->parsed())
			return run_daemon(paths, daemon_opts);
		if (uninstall->parsed())
			return cmd_uninstall(paths, uninstall_force);
		if (eventsc->parsed())
			return cmd_events(paths, events_sandbox, events_follow);
		if (world_show->parsed())
			return cmd_world_show(world_records_path(world_records, world_dir), world_sandbox, world_json);
		if (oci_hook->parsed())
			return cmd_oci_hook(paths, hook_opts);
		if (proxyc->parsed())
			return cmd_proxy(proxy_cmd);
	} catch (const std::exception& e) {
		spdlog::error("{}", e.what());
		return runs_command ? kExitAirlockError : kExitFailure;
	}
	return kExitFailure;
}
