// `airlock events`: the audit lines of the sandboxes the daemon supervises,
// as they arrive.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "ops/via_daemon.h"

namespace airlock {

void register_events(CLI::App& app, Globals& g)
{
	auto sandbox = std::make_shared<std::string>();
	auto follow = std::make_shared<bool>(false);
	auto* events = app.add_subcommand("events", "Audit lines of the sandboxes the daemon supervises");
	events->add_option("--sandbox", *sandbox, "Only this sandbox")->check(sandbox_name());
	events->add_flag("--follow,-f", *follow, "Keep printing new lines");
	on_parsed(events, g, [&g, sandbox, follow] {
		ops::follow_events(g.paths, *sandbox, *follow, [](std::string_view chunk) {
			std::fwrite(chunk.data(), 1, chunk.size(), stdout);
			std::fflush(stdout);
		});
		return kExitOk;
	});
}

}  // namespace airlock
