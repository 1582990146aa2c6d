#pragma once
// What airlock remembers about a sandbox outside the kernel: one JSON file
// per sandbox under the state directory, replaced atomically. The kernel
// maps hold what enforcement needs; this holds what people and later
// commands need (names, paths, who runs it).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "events/audit_bound.h"

namespace airlock {

struct Paths {
	std::string bpf_dir = "/sys/fs/bpf/airlock";
	std::string state_dir = "/run/airlock";
	std::string cgroup_parent = "airlock";  // relative to the cgroup2 mount
	std::string lock_file() const { return state_dir + "/lock"; }
	std::string record_file(const std::string& name) const { return state_dir + "/sandboxes/" + name + ".json"; }
	// The policy a bank of a sandbox was compiled from, kept verbatim so
	// events can be explained after the file on disk changed.
	std::string policy_copy(const std::string& name, unsigned bank) const
	{
		return state_dir + "/sandboxes/" + name + ".policy." + std::to_string(bank) + ".json";
	}
	std::string kill_marker(const std::string& name) const { return state_dir + "/sandboxes/" + name + ".killed"; }
	// There when a command of the sandbox kept its capabilities (`run
	// --keep-caps`, `exec --keep-caps`): one that holds CAP_SYS_ADMIN can
	// join any network namespace, and leave its sockets there.
	std::string privileged_marker(const std::string& name) const
	{
		return state_dir + "/sandboxes/" + name + ".privileged";
	}
	// A sandbox's proxy's counts, as its agent last heard them (JSON,
	// proxy/world_stats.h names them): what metrics and `status` show.
	std::string proxy_stats(const std::string& name) const { return state_dir + "/world/" + name + ".stats.json"; }
};

struct SandboxRecord {
	std::string name;
	std::string cgroup;  // absolute path
	uint64_t cgroup_id = 0;
	int level = 0;
	uint32_t slot = 0;
	unsigned bank = 0;  // which of the slot's two policy ids is live
	std::string policy_file;
	std::string policy_name;
	int runner_pid = 0;
	uint64_t runner_start = 0;  // /proc/PID/stat starttime, to tell PID reuse
	std::string audit_log;
	AuditBound audit_bound;  // every writer of the log rotates it by this
	bool log_allowed = false;
	std::string created;    // RFC 3339
	bool attached = false;  // an existing cgroup: airlock neither kills its processes nor removes it
	// Made through the daemon (`airlock sandbox create`, or `airlock run`
	// while a daemon runs): the daemon supervises it even while a runner
	// lives, and it stays until `airlock sandbox delete`.
	bool managed = false;
	// Every process airlock starts in it is under Landlock's abstract-unix
	// scope (decided once, at creation: a reload cannot lift a scope from
	// running processes, nor add one).
	bool abstract_scoped = false;
};

// The kernel policy id of a slot's bank: two per slot, so a reload writes
// the idle one while the live one keeps deciding.
inline uint32_t policy_id_of(uint32_t slot, unsigned bank)
{
	return slot * 2 + bank + 1;
}

void save_record(const Paths&, const SandboxRecord&);
std::optional<SandboxRecord> load_record(const Paths&, const std::string& name);
std::vector<SandboxRecord> load_records(const Paths&);
void remove_record(const Paths&, const std::string& name);

uint64_t process_start_time(int pid);  // 0 if the process is gone
bool runner_alive(const SandboxRecord&);
bool valid_sandbox_name(const std::string& name);
// "'NAME' is not a sandbox name (...)": the one message for a bad name,
// the name shown escaped.
std::string not_a_sandbox_name(const std::string& name);

}  // namespace airlock
