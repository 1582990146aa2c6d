#pragma once
// `airlock run` and `airlock exec`: a command inside a sandbox, started
// (sandbox/launch.h), supervised and waited for. Each returns the exit
// status to leave with: the command's, or 120 (killed on a violation), 121
// (killed by `airlock kill`), 125-127 (airlock could not run it).
#include <string>
#include <vector>

#include "events/audit_bound.h"
#include "sandbox/state.h"

namespace airlock::ops {

struct RunOptions {
	std::string policy_file;
	std::string name;
	std::string audit_log;
	AuditBound audit_bound;
	bool log_allowed = false;
	bool keep_caps = false;
	bool standalone = false;  // supervise here even when a daemon runs
	std::string user;         // USER[:GROUP] or UID[:GID] to run the command as
	std::vector<std::string> command;
};

// A new sandbox for one command, removed when it exits. Through the daemon
// when one runs (it supervises), unless standalone.
int run(const Paths&, const RunOptions&);
// Runs a command inside a sandbox the daemon supervises (`sandbox create`).
int exec(const Paths&, const std::string& name, const RunOptions&);

}  // namespace airlock::ops
