// `airlock uninstall`: everything airlock made on this node removed.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "ops/ops.h"

namespace airlock {

namespace {

int cmd_uninstall(const Paths& paths, bool force)
{
	auto done = ops::uninstall(paths, force);
	if (!done) {
		for (const auto& l : done.rejection().lines)
			fmt::print(stderr, "{}\n", l);
		return kExitFailure;
	}
	for (const auto& l : *done)
		fmt::print("{}\n", l);
	return kExitOk;
}

}  // namespace

void register_uninstall(CLI::App& app, Globals& g)
{
	auto force = std::make_shared<bool>(false);
	auto* uninstall = app.add_subcommand(
		"uninstall",
		"Remove every sandbox, the pins, the cgroup parent and the state directory (no daemon may run)");
	uninstall->add_flag("--force", *force,
			    "Also when sandboxes have processes: airlock's own are killed, attached cgroups detached");
	on_parsed(uninstall, g, [&g, force] { return cmd_uninstall(g.paths, *force); });
}

}  // namespace airlock
