#pragma once
// A sandbox's lifecycle in kernel maps, pins and cgroups: create, reload,
// destroy. Callers hold the state lock (Paths::lock_file) around each.
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel.h"
#include "policy/policy.h"
#include "sandbox/state.h"
#include "util/fd.h"
#include "util/error.h"
#include "util/result.h"

namespace airlock {

struct CreateOptions {
	std::string name;
	Policy policy;
	std::string policy_file;
	std::string audit_log;
	bool log_allowed = false;
	int runner_pid = 0;
	// An existing cgroup (absolute path) to enforce instead of creating
	// <parent>/<name>: its processes are judged from the moment this returns.
	std::string existing_cgroup;
	bool managed = false;  // SandboxRecord::managed
	AuditBound audit_bound;
};

// Everything is in place when this returns: entry, rules, ring, links. A
// process put in the cgroup afterwards is enforced from its first call.
SandboxRecord create_sandbox(kernel::Kernel&, const Paths&, const CreateOptions&);

// Writes the idle bank, switches the sandbox entry in one map update, waits
// for programs that may hold the old id, then deletes the old bank: every
// call sees the old policy or the new one, never a mix or nothing.
void reload_sandbox(kernel::Kernel&, const Paths&, SandboxRecord&, const Policy&, const std::string& file);

// The network namespaces a sandbox's sockets may be in, one Fd each:
// this process's (an invalid Fd), then those of the processes in its
// cgroup subtree now; for one whose processes may have held CAP_SYS_ADMIN
// (an attached cgroup, a command that kept its capabilities), which can
// join any namespace and leave its sockets there, also those mounted
// under /run/netns and those of the host's other processes; at most 512.
// (A socket stays in the namespace it was made in.) Without
// CAP_SYS_ADMIN a process can only make namespaces of its own, whose
// sockets have no way out of the host.
std::vector<Fd> network_namespaces(const Paths&, const SandboxRecord&);

// Kills what is left in the cgroup; with no process left in it, ends its
// TCP sockets and those egress marked as its own (al_sk_held)
// (SOCK_DESTROY) in the namespaces `nets` (found by
// network_namespaces() before a kill made earlier; when empty, found here
// before the kill), before its programs are detached: bytes egress refused wait
// in a socket's send queue, and one its command closed lives on in the
// kernel to retransmit them. Then removes links, entries and the cgroup.
// An attached cgroup keeps its processes (and their sockets) and stays.
void destroy_sandbox(kernel::Kernel&, const Paths&, const SandboxRecord&, std::vector<Fd> nets = {});

// The cgroup that `airlock attach` names: an absolute path under the cgroup2
// mount, a path relative to it, or the cgroup of a process. Checked: it
// exists, it is not the root, no sandbox holds it yet.
std::string resolve_attach_target(const Paths&, const std::string& cgroup, int pid);

// Parses and compiles FILE for a check: the policy, or every error.
Result<Policy> load_policy(const std::string& file);
// The same, printing every error line to stderr.
std::optional<Policy> load_policy_or_report(const std::string& file);

}  // namespace airlock
