// `airlock status`, `thaw`, `kill` and `reload`: through the daemon when one
// runs for this state directory, here when none does (ops/via_daemon.h).
#include <fmt/format.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ops/control.h"
#include "ops/ops.h"
#include "ops/via_daemon.h"

namespace airlock {

using nlohmann::json;

namespace {

Request about(Request::Cmd cmd, const std::string& name)
{
	return Request::of(cmd, name);
}

int cmd_status(const Paths& paths, bool as_json)
{
	auto answer = daemon_ask(paths, Request::of(Request::Cmd::Status));
	json out = answer ? (*answer)["status"] : ops::status(paths);
	if (as_json) {
		fmt::print("{}\n", out.dump(2));
		return kExitOk;
	}
	if (out["sandboxes"].empty()) {
		fmt::print("no sandboxes\n");
		return kExitOk;
	}
	fmt::print("{:<24} {:<12} {:<20} {:>8} {:>10} {:>12} {:>9} {:>8}  {}\n", "NAME", "STATE", "POLICY", "RUNNER",
		   "VIOLATIONS", "EGRESS", "DNS-DENY", "LEARNED", "CGROUP");
	for (const auto& s : out["sandboxes"]) {
		std::string runner = s["runner_alive"].get<bool>() ? std::to_string(s["runner_pid"].get<int>())
				     : s["attached"].get<bool>()   ? "attached"
				     : s.value("managed", false)   ? "daemon"
								   : "dead";
		fmt::print("{:<24} {:<12} {:<20} {:>8} {:>10} {:>12} {:>9} {:>8}  {}\n", s["name"].get<std::string>(),
			   s["state"].get<std::string>(), s["policy"].get<std::string>(), runner,
			   s["counters"]["violations"].get<uint64_t>(),
			   fmt::format("{} B", s["counters"]["egress_bytes"].get<uint64_t>()),
			   s["dns"]["queries_denied"].get<uint64_t>(), s["dns"]["learned_addresses"].get<uint64_t>(),
			   s["cgroup"].get<std::string>());
		if (s.contains("unix") && s["unix"].value("hooks", "") != "kernel")
			fmt::print("  {}: unix sockets not decided (no cgroup unix hooks in this kernel)\n",
				   s["name"].get<std::string>());
	}
	return kExitOk;
}

}  // namespace

void register_status(CLI::App& app, Globals& g)
{
	auto as_json = std::make_shared<bool>(false);
	auto* status = app.add_subcommand("status", "List sandboxes, their state and kernel counters");
	status->add_flag("--json", *as_json, "Machine-readable output");
	on_parsed(status, g, [&g, as_json] { return cmd_status(g.paths, *as_json); });
}

void register_thaw(CLI::App& app, Globals& g)
{
	auto name = std::make_shared<std::string>();
	auto* thaw = app.add_subcommand("thaw", "Lift a sandbox's quarantine and unfreeze it");
	thaw->add_option("name", *name, "Sandbox")->required()->check(sandbox_name());
	on_parsed(thaw, g, [&g, name] {
		return print_answer(ops::via_daemon(g.paths, about(Request::Cmd::Thaw, *name),
						    [&] { return ops::thaw(g.paths, *name); }));
	});
}

void register_kill(CLI::App& app, Globals& g)
{
	auto name = std::make_shared<std::string>();
	auto* kill = app.add_subcommand("kill", "Kill every process of a sandbox");
	kill->add_option("name", *name, "Sandbox")->required()->check(sandbox_name());
	on_parsed(kill, g, [&g, name] {
		return print_answer(ops::via_daemon(g.paths, about(Request::Cmd::Kill, *name),
						    [&] { return ops::kill(g.paths, *name); }));
	});
}

void register_reload(CLI::App& app, Globals& g)
{
	auto name = std::make_shared<std::string>();
	auto file = std::make_shared<std::string>();
	auto* reload = app.add_subcommand("reload", "Swap a running sandbox's policy atomically");
	reload->add_option("name", *name, "Sandbox")->required()->check(sandbox_name());
	reload->add_option("file", *file, "New policy file")->required();
	on_parsed(reload, g, [&g, name, file] { return print_answer(ops::reload_via_daemon(g.paths, *name, *file)); });
}

}  // namespace airlock
