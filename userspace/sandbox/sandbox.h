#pragma once
// A sandbox's lifecycle in kernel maps, pins and cgroups: create, reload,
// destroy. Callers hold the state lock (Paths::lock_file) around each.
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel.h"
#include "policy/policy.h"
#include "sandbox/state.h"
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

// Kills what is left in the cgroup, then removes links, entries and the
// cgroup. An attached cgroup keeps its processes and stays.
void destroy_sandbox(kernel::Kernel&, const Paths&, const SandboxRecord&);

// The cgroup that `airlock attach` names: an absolute path under the cgroup2
// mount, a path relative to it, or the cgroup of a process. Checked: it
// exists, it is not the root, no sandbox holds it yet.
std::string resolve_attach_target(const Paths&, const std::string& cgroup, int pid);

// Parses and compiles FILE for a check: the policy, or every error.
Result<Policy> load_policy(const std::string& file);
// The same, printing every error line to stderr.
std::optional<Policy> load_policy_or_report(const std::string& file);

}  // namespace airlock
