#pragma once
// One function per subcommand; each returns the process exit status.
#include <string>
#include <vector>

#include "events/audit_bound.h"
#include "policy/suggest.h"
#include "daemon/daemon.h"
#include "ops/oci_hook.h"
#include "ops/run.h"
#include "sandbox/state.h"
#include "util/exit_code.h"

namespace airlock {

struct SandboxCreateOptions {
	std::string name;
	std::string policy_file;  // a file, or a policy in the daemon's --policy-dir
	std::string audit_log;
	AuditBound audit_bound;
	bool log_allowed = false;
};

struct AttachOptions {
	std::string cgroup;  // absolute, or relative to the cgroup2 mount
	int pid = 0;         // or the cgroup of this process
	std::string policy_file;
	std::string name;
	std::string audit_log;
	AuditBound audit_bound;
	bool log_allowed = false;
};

int cmd_policy_check(const std::vector<std::string>& files);
int cmd_policy_show(const std::string& file);
int cmd_policy_suggest(const std::string& audit_log, const SuggestOptions& o);
int cmd_status(const Paths&, bool json);
int cmd_thaw(const Paths&, const std::string& name);
int cmd_kill(const Paths&, const std::string& name);
int cmd_reload(const Paths&, const std::string& name, const std::string& file);
int cmd_attach(const Paths&, const AttachOptions&);
int cmd_detach(const Paths&, const std::string& name);
int cmd_sandbox_create(const Paths&, const SandboxCreateOptions&);
int cmd_sandbox_delete(const Paths&, const std::string& name);
// The audit lines of the sandboxes the daemon supervises: the last ones it
// saw, then (follow) every new one until interrupted.
int cmd_events(const Paths&, const std::string& sandbox, bool follow);
int cmd_uninstall(const Paths&, bool force);
// The container runtime's hook: the container's state on standard input.
int cmd_oci_hook(const Paths&, const ops::OciHookOptions&);
// The records of a sandbox's simulated world (a records file) as a table,
// or (json) their lines as they are; sandbox: only its records.
int cmd_world_show(const std::string& records, const std::string& sandbox, bool json);
// What `world show` reads for its argument: a path as it is; a sandbox's
// name (no '/', not a file here) its records in dir.
std::string world_records_path(const std::string& arg, const std::string& dir);
// A policy argument as the daemon must see it: an existing file by its
// absolute path; anything else unchanged (a name in the daemon's policy dir).
std::string policy_argument(const std::string& arg);

}  // namespace airlock
