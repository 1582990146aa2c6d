#pragma once
// Starting a command inside a sandbox: the one place where a process that
// airlock starts (`run`, `exec`) gets its cgroup, namespaces, seccomp filter,
// Landlock domain, capabilities and identity.
//
// Unless keep_caps, the command runs under a small init of airlock's (PID 1
// of a PID namespace of its own) in a private mount namespace where every
// cgroup, bpf and proc filesystem of the host is detached, cgroup2 is
// mounted again from inside the command's cgroup namespace (so the only
// hierarchy it sees is rooted at its sandbox) and /proc is that of its PID
// namespace (so no /proc/PID/root leads to another mount namespace).
#include <signal.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/policy.h"
#include "util/fd.h"

namespace airlock {

struct LaunchOptions {
	std::string name;    // AIRLOCK_SANDBOX
	std::string cgroup;  // absolute path on the host's cgroup2 mount
	// An existing cgroup (`airlock exec`): the child joins it through
	// cgroup.procs instead of being cloned into it.
	bool join = false;
	std::vector<std::string> command;
	// NAME=VALUE set for the command, over airlock's own environment (the
	// world's CA bundle, say).
	std::vector<std::string> env;
	std::string user;  // USER[:GROUP] or UID[:GID]; empty: airlock's own
	// Keeps every capability, and the host's mount and PID namespaces.
	bool keep_caps = false;
	uint64_t families = kDefaultFamilies;  // Policy::families
	bool io_uring = false;                 // Policy::io_uring
	// Landlock scopes (kernel ABI 6+): abstract unix sockets bound outside
	// the command's Landlock domain, and signals to processes outside it.
	bool scope_abstract_unix = true;
	bool scope_signal = true;
	// Directories whose symbolic links the command's path walks do not
	// follow (nosymfollow bind mounts): those a unix prefix rule allows, so
	// that a name under them reaches what it says (unix_prefix_dirs).
	std::vector<std::string> nosymfollow;
};

// The existing directories of a policy's unix prefix allow rules.
std::vector<std::string> unix_prefix_dirs(const Policy& p);

// What a policy asks of the launch: its socket families, io_uring, the
// Landlock scopes (abstract sockets unless the policy names one outside),
// nosymfollow on its unix prefix directories. The caller sets the rest.
LaunchOptions launch_options(const Policy& p);

// What the command got, for the audit log and status.
struct Confinement {
	bool namespaces = false;                 // private mount namespace and PID namespace
	std::vector<std::string> cgroup_mounts;  // cgroup2 mounted afresh here
	std::vector<std::string> detached;       // host mounts the command cannot see
	std::vector<std::string> nosymfollow;    // directories mounted nosymfollow
	uint64_t families = 0;
	bool io_uring = false;
	int landlock_abi = 0;          // of the running kernel; 0: none
	uint64_t landlock_scoped = 0;  // the scopes applied
	nlohmann::json to_json() const;
};

struct Launched {
	int pid = -1;  // airlock's init when namespaces, else the command
	Fd pidfd;
	Confinement confinement;
};

// Starts the command; returns once it has exec'd or failed to (a failure of
// the child is logged, and its exit status says which: 125, 126, 127).
// Throws when the child cannot be made at all.
Launched launch(const LaunchOptions&);

// The exit status of `airlock run` for a child's end: its own status, or
// 128+N when it died of signal N.
int exit_status_of(const siginfo_t&);
// Killed with SIGKILL (cgroup.kill), also when it was the command under
// airlock's init that died of it.
bool killed_by_sigkill(const siginfo_t&);

// The running kernel's Landlock ABI version, 0 when it has none. ABI 6
// (Linux 6.12) scopes abstract unix sockets and signals.
int landlock_abi();
inline constexpr int kLandlockAbiScope = 6;

}  // namespace airlock
