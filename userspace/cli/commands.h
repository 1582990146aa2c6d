#pragma once
// The subcommands of airlock. Each command file adds its own to the
// application with its options and help, and says what it does once the
// command line is parsed; main() keeps the global options, the table of
// commands in the order --help lists them, and the dispatch.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "events/audit_bound.h"
#include "sandbox/state.h"
#include "util/exit_code.h"
#include "util/result.h"

namespace airlock {

// What every subcommand shares: the global options, the command line past
// "--", and the action of the subcommand that was parsed.
struct Globals {
	Paths paths;
	std::string log_level = "info";
	std::string log_format = "text";
	// Every word after the first "--": the command of run and exec, taken
	// verbatim, never through CLI11, which would split an argument such as
	// "[a,b]" at its commas.
	std::vector<std::string> command;
	// Set by the parsed subcommand's callback; main() runs it once logging
	// is set up.
	std::function<int()> action;
};

using RegisterCommand = void (*)(CLI::App&, Globals&);

void register_policy(CLI::App&, Globals&);  // policy check, show, suggest
void register_run(CLI::App&, Globals&);
void register_exec(CLI::App&, Globals&);
void register_status(CLI::App&, Globals&);
void register_thaw(CLI::App&, Globals&);
void register_kill(CLI::App&, Globals&);
void register_reload(CLI::App&, Globals&);
void register_attach(CLI::App&, Globals&);
void register_detach(CLI::App&, Globals&);
void register_sandbox(CLI::App&, Globals&);  // sandbox create, delete
void register_daemon(CLI::App&, Globals&);
void register_events(CLI::App&, Globals&);
void register_world(CLI::App&, Globals&);  // world show
void register_uninstall(CLI::App&, Globals&);
void register_oci_hook(CLI::App&, Globals&);
void register_proxy(CLI::App&, Globals&);  // hidden: started by airlock itself

// What a command of the callback's (sub)command does once the command line
// is parsed: it becomes the action main() runs.
void on_parsed(CLI::App* cmd, Globals& g, std::function<int()> action);

// A sandbox name argument, judged before anything is asked of the daemon
// or the kernel, naming the value given.
CLI::Validator sandbox_name();

// --audit-log-max-bytes and --audit-log-keep, into b.
void add_audit_bound(CLI::App* cmd, AuditBound& b);

// The line a command through the daemon (or done here) gives, printed;
// or every line of its rejection, on standard error. The exit status.
int print_answer(const Result<std::string>& line);

// A command line CLI11 could not parse: its message on one line, prefixed
// like every other error, and the documented status.
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

}  // namespace airlock
