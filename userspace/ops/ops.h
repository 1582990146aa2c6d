#pragma once
// What the sandbox commands do, without printing. `airlock` runs them itself
// when no daemon is up; the daemon runs them for its control socket. Each
// returns the line to show; a bad policy is a Rejection, other failures throw.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/state.h"
#include "util/result.h"

namespace airlock::ops {

// `airlock status --json`: every sandbox, its state and kernel counters.
nlohmann::json status(const Paths&);

// Lifts the quarantine, then unfreezes.
std::string thaw(const Paths&, const std::string& name);
// Kills every process. A sandbox nobody else owns (its runner gone, not
// managed, not attached) is removed as well.
std::string kill(const Paths&, const std::string& name);
// Stops enforcing on an attached cgroup; its processes run on.
std::string detach(const Paths&, const std::string& name);
// Removes a sandbox made by `sandbox create` (its processes are killed).
std::string remove(const Paths&, const std::string& name);
// Throws unless `detach` (an attached cgroup) or `remove` (airlock's own,
// not a live runner's) is the way to end this sandbox.
void check_removable(const SandboxRecord&, bool detach);
// Swaps the policy atomically; a bad file is audited and rejected.
Result<std::string> reload(const Paths&, const std::string& name, const std::string& file);

struct NewSandbox {
	std::string name;  // "" for attach: the cgroup's own name
	std::string policy_file;
	std::string audit_log;
	bool log_allowed = false;
	// attach: the cgroup (absolute, or relative to the cgroup2 mount) or a
	// process whose cgroup it is. Neither: a new cgroup under the parent.
	std::string cgroup;
	int pid = 0;
	uint64_t cgroup_id = 0;  // if set: the cgroup found must be this one
	bool managed = false;    // made through the daemon, which supervises it
	int runner_pid = 0;      // `airlock run` through the daemon
	AuditBound audit_bound;
	// The caller (the daemon) starts the proxy that a policy which
	// redirects to the world, or gates by SNI, needs; without it such a
	// policy is refused.
	bool starts_proxy = false;
};
// One line per process of the cgroup (and its descendants) that could move
// itself out of it: CAP_SYS_ADMIN in its effective set, or uid 0 with a
// cgroup2 mount rooted outside the cgroup or a bpf mount in its mount
// namespace.
std::vector<std::string> escape_warnings(const std::string& cgroup);

// Enforces a policy on an existing cgroup, or makes a new one.
Result<SandboxRecord> add(const Paths&, const NewSandbox&, std::string* message);
// Removes everything airlock made on this node: every sandbox (airlock's
// own cgroups killed and removed, attached ones detached), the pins, the
// cgroup parent and the state directory. Refused while a daemon runs, and
// while a sandbox has processes unless force. The lines say what was done.
Result<std::vector<std::string>> uninstall(const Paths&, bool force);

// An attached sandbox whose cgroup is gone (a container that ended: its
// runtime removed the cgroup) is let go: its kernel entries, pins and record
// removed, a "detached" line with the reason written. Returns whether it was.
// A cgroup made again at the same path is another cgroup (another id): the
// old sandbox is let go as well.
bool release_if_removed(const Paths&, const std::string& name);
bool cgroup_removed(const SandboxRecord&);

// Takes back what add() made when a later step fails (detached again, or
// removed), recording why in its audit log.
void unmake(const Paths&, const SandboxRecord&, const std::string& why);

}  // namespace airlock::ops
