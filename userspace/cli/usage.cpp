// A command line CLI11 could not parse, said as every other error is, with
// the nearest subcommand when a word is not one.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"

namespace airlock {

namespace {

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

}  // namespace

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
			fmt::print(stderr, "airlock error: '{}' is not a subcommand of {}{}; {} --help lists them\n",
				   word, cmd, best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best), cmd);
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

}  // namespace airlock
