// `airlock world show`: what a sandbox tried in its simulated world, from
// the recorder's records file.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "ops/world_records.h"
#include "policy/policy.h"

namespace airlock {

namespace {

struct WorldShowOptions {
	std::string records;  // a records file, or a sandbox's name
	std::string dir = WorldPolicy{}.records_dir;
	proxy::ShowOptions show;
};

int cmd_world_show(const WorldShowOptions& o)
{
	proxy::ShowResult r = ops::read_world_records(ops::world_records_path(o.records, o.dir), o.show);
	for (const auto& e : r.errors)
		fmt::print(stderr, "{}\n", e);
	fmt::print("{}", r.out);
	return kExitOk;
}

}  // namespace

void register_world(CLI::App& app, Globals& g)
{
	auto* world = app.add_subcommand("world", "What sandboxes tried in their simulated world");
	world->require_subcommand(1);
	auto o = std::make_shared<WorldShowOptions>();
	auto* show = world->add_subcommand(
		"show",
		"Print a world's records as a table: time, kind, destination, what was sent, body bytes, status");
	show->add_option("RECORDS", o->records,
			 "Records file (the world's records/SANDBOX.jsonl), or a sandbox's name: its file in --dir")
		->required();
	show->add_option("--dir", o->dir, "Where a sandbox named by RECORDS has its records")->capture_default_str();
	show->add_option("--sandbox", o->show.sandbox, "Only this sandbox's records")->check(sandbox_name());
	show->add_flag("--json", o->show.json, "The records' JSON lines as they are");
	on_parsed(show, g, [o] { return cmd_world_show(*o); });
}

}  // namespace airlock
