#pragma once
// The daemon's configuration file (`airlock daemon --config FILE`):
//
//   {"metrics": "127.0.0.1:9464", "policy_dir": "/etc/airlock/policies",
//    "audit_log": "/var/log/airlock/audit.jsonl",
//    "audit_log_max_bytes": 67108864, "audit_log_keep": 4,
//    "sandboxes": [{"name": "coder", "policy": "coder"},
//                  {"name": "web", "policy": "web", "cgroup": "system.slice/web.service"}]}
//
// Every key is optional. A declared sandbox without "cgroup" is made by the
// daemon (as `airlock sandbox create`); with one, that cgroup is attached.
#include <string>
#include <vector>

#include "events/audit_bound.h"
#include "util/result.h"

namespace airlock {

struct DeclaredSandbox {
	std::string name, policy, cgroup, audit_log;
	bool log_allowed = false;
};

struct DaemonConfig {
	std::string metrics, policy_dir, audit_log;
	AuditBound audit_bound;  // "audit_log_max_bytes", "audit_log_keep"
	std::vector<DeclaredSandbox> sandboxes;
};

// The configuration, or every mistake, one line each: FILE: PATH: MESSAGE.
Result<DaemonConfig> load_daemon_config(const std::string& file);
// The same for text already read; file names it in the lines.
Result<DaemonConfig> parse_daemon_config(const std::string& text, const std::string& file);

}  // namespace airlock
