#pragma once
// `airlock daemon`: the node agent. It supervises every sandbox that has no
// `airlock run` of its own (attached cgroups, sandboxes made through it,
// orphans of a runner that died): their events go to their audit logs,
// their latches to a freeze or a kill. It serves the control socket and
// follows policy files. Enforcement never depends on it: it lives in the
// kernel.
#include <string>

#include "events/audit_bound.h"
#include "sandbox/state.h"

namespace airlock {

struct DaemonOptions {
	std::string config;      // JSON file: the options below and declared sandboxes
	std::string metrics;     // ADDR:PORT, "off": none; default 127.0.0.1:9464
	std::string policy_dir;  // policies by name; watched
	std::string audit_log;   // default for sandboxes made through the daemon
	AuditBound audit_bound;  // likewise
};

// Runs until SIGINT or SIGTERM; returns the exit status. Throws what stops
// it from starting (another daemon, a bad configuration file).
int run_daemon(const Paths&, const DaemonOptions&);

}  // namespace airlock
