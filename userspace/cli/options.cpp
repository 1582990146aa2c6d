// What the command files share: how a subcommand's action is set, the
// options several subcommands take, and how an answer is printed.
#include <fmt/format.h>

#include <cstdio>
#include <utility>

#include "cli/commands.h"
#include "events/audit_bound.h"
#include "sandbox/state.h"

namespace airlock {

void on_parsed(CLI::App* cmd, Globals& g, std::function<int()> action)
{
	cmd->callback([&g, action = std::move(action)] { g.action = action; });
}

CLI::Validator sandbox_name()
{
	return CLI::Validator(
		[](std::string& v) { return valid_sandbox_name(v) ? std::string() : not_a_sandbox_name(v); }, "NAME");
}

void add_audit_bound(CLI::App* cmd, AuditBound& b)
{
	cmd->add_option_function<uint64_t>(
		   "--audit-log-max-bytes",
		   [&b](const uint64_t& v) {
			   if (v && v < AuditBound::kMinMaxBytes)
				   throw CLI::ValidationError(
					   "--audit-log-max-bytes",
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

int print_answer(const Result<std::string>& line)
{
	if (!line) {
		for (const auto& l : line.rejection().lines)
			fmt::print(stderr, "{}\n", l);
		return kExitFailure;
	}
	fmt::print("{}\n", *line);
	return kExitOk;
}

}  // namespace airlock
