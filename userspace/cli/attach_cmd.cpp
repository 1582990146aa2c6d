// `airlock attach` and `airlock detach`: enforce a policy on a cgroup that
// airlock did not create (a container, a systemd unit), and stop doing so.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "events/audit.h"
#include "kernel/kernel.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock {

using nlohmann::json;

namespace {

// "docker-4f2a.scope" -> "docker-4f2a.scope"; what is not a sandbox name
// asks for --name.
std::string default_name(const std::string& cgroup_path)
{
	std::string base = cgroup_path.substr(cgroup_path.rfind('/') + 1);
	if (base.size() > 63)
		base = base.substr(0, 63);
	return base;
}

}  // namespace

int cmd_attach(const Paths& paths, const AttachOptions& o)
{
	auto loaded = load_policy_or_report(o.policy_file);
	if (!loaded)
		return kExitFailure;
	Policy policy = std::move(*loaded);
	std::string audit_path = o.audit_log.empty() ? "/var/log/airlock/audit.jsonl" : o.audit_log;
	make_dirs(paths.state_dir);
	SandboxRecord rec;
	bool adopted = false;
	{
		FileLock lock(paths.lock_file());
		std::string cg = resolve_attach_target(paths, o.cgroup, o.pid);
		std::string name = o.name.empty() ? default_name(cg) : o.name;
		if (!valid_sandbox_name(name))
			fail("'{}' is not a sandbox name: give one with --name (1-63 of A-Z a-z 0-9 . _ -)", name);
		kernel::Kernel k = kernel::Kernel::load_or_adopt(paths.bpf_dir, load_records(paths).empty());
		adopted = k.adopted();
		CreateOptions co{name, policy, o.policy_file, audit_path, o.log_allowed, 0, cg};
		rec = create_sandbox(k, paths, co);
	}
	auto ev = cgroup::events(rec.cgroup);
	AuditLog audit(audit_path);
	audit.write(rec.name, json{{"event", "attached"}, {"cgroup", rec.cgroup}, {"cgroup_id", rec.cgroup_id},
				   {"policy", policy.name}, {"policy_file", rec.policy_file},
				   {"populated", ev && ev->populated}});
	fmt::print("{}: enforcing '{}' on {} (cgroup id {}); programs {}\n", rec.name, policy.name, rec.cgroup,
		   rec.cgroup_id, adopted ? "adopted from pins" : "loaded and pinned");
	return kExitOk;
}

int cmd_detach(const Paths& paths, const std::string& name)
{
	FileLock lock(paths.lock_file());
	auto r = load_record(paths, name);
	if (!r)
		fail("no sandbox named '{}' (airlock status lists them)", name);
	if (!r->attached)
		fail("sandbox '{}' was made by airlock run, which owns its cgroup: end it with airlock kill {}", name, name);
	kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
	destroy_sandbox(k, paths, *r);
	if (!r->audit_log.empty()) {
		AuditLog audit(r->audit_log);
		audit.write(r->name, json{{"event", "detached"}, {"cgroup", r->cgroup}});
	}
	fmt::print("{}: detached from {}; its processes run on, unenforced\n", name, r->cgroup);
	return kExitOk;
}

}  // namespace airlock
