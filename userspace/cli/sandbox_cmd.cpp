// `airlock sandbox create` and `delete`: sandboxes the daemon makes and
// supervises.
#include <memory>

#include "cli/commands.h"
#include "ops/ops.h"
#include "ops/via_daemon.h"

namespace airlock {

void register_sandbox(CLI::App& app, Globals& g)
{
	auto* sandbox = app.add_subcommand("sandbox", "Sandboxes the daemon makes and supervises");
	sandbox->require_subcommand(1);

	auto o = std::make_shared<ops::SandboxCreateOptions>();
	auto* create = sandbox->add_subcommand("create", "Make an empty sandbox; run commands in it with airlock exec");
	create->add_option("name", o->name, "Sandbox name")->required()->check(sandbox_name());
	create->add_option("--policy,-p", o->policy_file,
			   "Policy file, or the name of a policy in the daemon's --policy-dir")
		->required();
	create->add_option("--audit-log", o->audit_log, "JSON-lines audit log (default: the daemon's)");
	create->add_flag("--log-allowed", o->log_allowed, "Also log allowed connections and datagrams");
	add_audit_bound(create, o->audit_bound);
	on_parsed(create, g, [&g, o] { return print_answer(ops::create_via_daemon(g.paths, *o)); });

	auto name = std::make_shared<std::string>();
	auto* remove = sandbox->add_subcommand("delete", "Kill a sandbox's processes and remove it");
	remove->add_option("name", *name, "Sandbox")->required()->check(sandbox_name());
	on_parsed(remove, g, [&g, name] {
		return print_answer(ops::via_daemon(g.paths, Request::of(Request::Cmd::Delete, *name),
						    [&] { return ops::remove(g.paths, *name); }));
	});
}

}  // namespace airlock
