#include "sandbox/sandbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gate/secrets.h"
#include "policy/compile.h"
#include "sandbox/cgroup.h"
#include "sandbox/launch.h"
#include "sandbox/sock_diag.h"
#include "sandbox/targets.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/netns.h"

namespace airlock {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Ends (SOCK_DESTROY) the TCP sockets left in the sandbox's cgroups, and
// those egress marked as its own when it refused one of their packets
// (al_sk_held: one made in a child cgroup removed since), in each of the
// namespaces, before its programs are detached: bytes that
// egress refused wait in a socket's send queue, and a socket its command
// closed lives on in the kernel to retransmit them; with no program left,
// they would leave. Never throws: a kernel that cannot list or end them
// is said in a warning.
void end_sockets(const kernel::Kernel& k, const SandboxRecord& r, const std::vector<Fd>& nets)
{
	std::set<uint64_t> ids = cgroup::ids_within(r.cgroup);
	if (r.cgroup_id)
		ids.insert(r.cgroup_id);
	for (const auto& ns : nets) {
		std::string where = ns.valid() ? fmt::format(" in net:[{}]", netns_inode_of(ns)) : "";
		try {
			Ended e = end_tcp_sockets(sock_diag_socket(ns), ids, k.sk_held_fd(), r.cgroup_id);
			if (e.ended)
				spdlog::info("{}: {} TCP socket(s) of its cgroup ended{}", r.name, e.ended, where);
			if (e.error || e.left)
				spdlog::warn(
					"{}: {} TCP socket(s) of its cgroup left{} ({}): bytes they hold may leave once its "
					"programs are detached",
					r.name, e.left, where,
					e.error ? std::strerror(e.error) : "still there after three passes");
		} catch (const std::exception& ex) {
			spdlog::warn(
				"{}: its TCP sockets{} were not ended ({}): bytes they hold may leave once its programs "
				"are detached",
				r.name, where, ex.what());
		}
	}
}

// A policy that reached here passed load_policy: its compile errors do not
// depend on the id, so a failure now is airlock's own.
CompiledPolicy compile_or_fail(const Policy& p, uint32_t policy_id)
{
	auto res = compile_policy(p, policy_id);
	if (!res)
		fail("policy '{}' does not compile: {}", p.name, res.rejection().first());
	return *res;
}

al_sandbox entry_for(uint32_t slot, uint32_t policy_id, const CompiledPolicy& c, const SandboxRecord& r)
{
	al_sandbox sb{};
	sb.slot = slot;
	sb.policy_id = policy_id;
	sb.flags = c.sandbox_flags | (r.log_allowed ? AL_SB_LOG_ALLOWED : 0) |
		   (r.abstract_scoped ? AL_SB_ABSTRACT_SCOPED : 0);
	sb.on_violation = c.on_violation;
	sb.families = c.families;
	return sb;
}

uint32_t mask_of(const std::vector<SandboxRecord>& records, const std::string& except = "")
{
	uint32_t mask = 0;
	for (const auto& r : records)
		if (r.name != except)
			mask |= 1u << r.level;
	return mask;
}

void copy_policy(const Paths& paths, const std::string& name, unsigned bank, const std::string& file)
{
	auto text = read_file(file);
	if (text)
		write_file_atomic(paths.policy_copy(name, bank), *text);
}

}  // namespace

Result<Policy> load_policy(const std::string& file)
{
	auto res = parse_policy_file(file);
	if (!res)
		return res.rejection().lines();
	// Compile once for the errors only the compiler finds (kernel limits).
	if (auto c = compile_policy(*res, 1); !c)
		return c.rejection().lines();
	// The files the sandbox's proxy reads as it starts: a policy whose
	// secrets or origins' roots it could not read is refused here, once,
	// rather than a proxy that fails at each start.
	if (auto s = gate::read_secrets(*res); !s)
		return s.rejection();
	for (const Rule& r : res->rules) {
		if (!r.http || r.http->upstream_ca.empty())
			continue;
		if (auto ca = gate::read_policy_file(r.http->upstream_ca); !ca)
			return Rejection{{fmt::format("{}: rules/{}/tls/upstream_ca: {}: {}", res->source, r.index,
						      r.http->upstream_ca, ca.rejection().first())}};
	}
	return *res;
}

std::optional<Policy> load_policy_or_report(const std::string& file)
{
	auto p = load_policy(file);
	if (p)
		return *p;
	for (const auto& l : p.rejection().lines)
		fmt::print(stderr, "{}\n", l);
	return std::nullopt;
}

SandboxRecord create_sandbox(kernel::Kernel& k, const Paths& paths, const CreateOptions& o)
{
	if (!valid_sandbox_name(o.name))
		fail("{}", not_a_sandbox_name(o.name));
	if (load_record(paths, o.name))
		fail("a sandbox named '{}' exists already (airlock status)", o.name);
	bool attached = !o.existing_cgroup.empty();
	std::string cg = attached ? o.existing_cgroup : cgroup::path_of(paths.cgroup_parent + "/" + o.name);
	if (!attached && fs::exists(cg))
		fail("cgroup {} exists already", cg);

	auto records = load_records(paths);
	std::set<uint32_t> used;
	for (const auto& r : records)
		used.insert(r.slot);
	uint32_t slot = 0;
	while (used.count(slot))
		slot++;
	if (slot >= AL_MAX_SANDBOXES)
		fail("all {} sandbox slots are in use", AL_MAX_SANDBOXES);

	CompiledPolicy compiled = compile_or_fail(o.policy, policy_id_of(slot, 0));

	SandboxRecord r;
	r.name = o.name;
	r.cgroup = cg;
	r.slot = slot;
	r.bank = 0;
	r.policy_file = fs::absolute(o.policy_file).lexically_normal().string();
	r.policy_name = o.policy.name;
	r.runner_pid = o.runner_pid;
	r.runner_start = o.runner_pid ? process_start_time(o.runner_pid) : 0;
	r.audit_log = o.audit_log;
	r.audit_bound = o.audit_bound.resolved();
	r.log_allowed = o.log_allowed;
	r.created = now_rfc3339();
	r.attached = attached;
	r.managed = o.managed;
	// Processes airlock starts are scoped where the kernel can, unless the
	// policy names an abstract socket outside; an attached cgroup's are not
	// airlock's to scope.
	r.abstract_scoped = !attached && landlock_abi() >= kLandlockAbiScope && !allows_outside_abstract(o.policy);

	if (!attached)
		cgroup::create(cg);
	try {
		r.cgroup_id = cgroup::id_of(cg);
		r.level = cgroup::level_of(cg);
		if (r.level <= 0 || r.level >= AL_MAX_LEVELS)
			fail("cgroup {} is at depth {}; airlock handles 1 to {}", cg, r.level, AL_MAX_LEVELS - 1);
		// The record first, so that a failure below is cleaned up like any sandbox.
		save_record(paths, r);
		k.clear_latch(slot);
		k.set_proxy(slot, al_proxy{});
		k.delete_origin_table(slot);
		k.delete_target_origin_table(slot);
		k.reset_counters(slot);
		k.delete_rules(policy_id_of(slot, 0));
		k.delete_rules(policy_id_of(slot, 1));
		k.create_ring(slot);
		k.create_dns_tables(slot);
		k.create_unix_table(slot);
		k.install_rules(compiled, policy_id_of(slot, 0));
		k.set_budgets(slot, compiled.budgets, false);
		k.put_sandbox(r.cgroup_id, entry_for(slot, policy_id_of(slot, 0), compiled, r));
		k.set_level_mask(k.config().level_mask | (1u << r.level));

		std::string links = kernel::links_dir(paths.bpf_dir, o.name);
		fs::remove_all(links);
		make_dirs(links);
		Fd cgfd(::open(cg.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		if (!cgfd.valid())
			fail_errno("open cgroup " + cg);
		prepare_targets(k, paths, r, o.policy);
		for (int p = 0; p < kernel::ProgCount; p++)
			k.attach_and_pin(static_cast<kernel::Prog>(p), cgfd.get(),
					 links + "/" + kernel::kProgs[p].name);
		copy_policy(paths, o.name, 0, o.policy_file);
		if (!k.has_prog(kernel::ConnectUnix))
			spdlog::warn(
				"{}: this kernel has no cgroup unix-socket hooks (Linux 6.7+): connects and datagrams "
				"to unix sockets outside the sandbox are not decided (docs/security.md)",
				o.name);
	} catch (...) {
		try {
			destroy_sandbox(k, paths, r);
		} catch (...) {
		}
		throw;
	}
	return r;
}

void reload_sandbox(kernel::Kernel& k, const Paths& paths, SandboxRecord& r, const Policy& policy,
		    const std::string& file)
{
	unsigned next = 1 - r.bank;
	uint32_t old_id = policy_id_of(r.slot, r.bank);
	uint32_t new_id = policy_id_of(r.slot, next);
	CompiledPolicy compiled = compile_or_fail(policy, new_id);

	auto current = k.sandbox(r.cgroup_id);
	if (!current)
		fail("sandbox '{}' has no kernel entry (cgroup {})", r.name, r.cgroup_id);
	prepare_targets(k, paths, r, policy);
	k.delete_rules(new_id);
	k.install_rules(compiled, new_id);
	k.set_budgets(r.slot, compiled.budgets, true);
	k.put_sandbox(r.cgroup_id, entry_for(r.slot, new_id, compiled, r));
	k.wait_for_readers();
	k.delete_rules(old_id);

	r.bank = next;
	r.policy_file = fs::absolute(file).lexically_normal().string();
	r.policy_name = policy.name;
	copy_policy(paths, r.name, next, file);
	save_record(paths, r);
}

std::vector<Fd> network_namespaces(const Paths& paths, const SandboxRecord& r)
{
	constexpr size_t kMax = 512;
	std::vector<Fd> out;
	out.emplace_back();
	std::set<uint64_t> seen{netns_inode_of(Fd())};
	auto add = [&](const std::string& path) {
		if (out.size() >= kMax)
			return;
		Fd ns(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
		uint64_t ino = ns.valid() ? netns_inode_of(ns) : 0;
		if (ino && seen.insert(ino).second)
			out.push_back(std::move(ns));
	};
	for (int pid : cgroup::pids_within(r.cgroup))
		add(fmt::format("/proc/{}/ns/net", pid));
	std::error_code ec;
	if (!r.attached && !fs::exists(paths.privileged_marker(r.name), ec))
		return out;
	for (const auto& e : fs::directory_iterator("/run/netns", ec))
		add(e.path().string());
	for (const auto& e : fs::directory_iterator("/proc", ec)) {
		const std::string name = e.path().filename().string();
		if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
			add(e.path().string() + "/ns/net");
	}
	if (out.size() >= kMax)
		spdlog::warn(
			"more than {} network namespaces on this host: a sandbox's sockets are looked for in the first {} "
			"(its own processes' first)",
			kMax, kMax);
	return out;
}

void destroy_sandbox(kernel::Kernel& k, const Paths& paths, const SandboxRecord& r, std::vector<Fd> nets)
{
	auto ev = cgroup::events(r.cgroup);
	if (nets.empty())
		nets = network_namespaces(paths, r);
	if (!r.attached && ev && ev->populated) {
		cgroup::kill(r.cgroup);
		if (!cgroup::wait_empty(r.cgroup, 5s))
			fail("processes of sandbox '{}' did not exit after cgroup.kill", r.name);
	}
	// No process is left to use its sockets (an attached cgroup's that
	// still has some keeps them: detaching lifts the policy off them).
	if (ev = cgroup::events(r.cgroup); !ev || !ev->populated)
		end_sockets(k, r, nets);
	std::error_code ec;
	fs::remove_all(kernel::links_dir(paths.bpf_dir, r.name), ec);
	if (r.cgroup_id) {
		k.delete_sandbox(r.cgroup_id);
		k.set_level_mask(mask_of(load_records(paths), r.name));
		k.wait_for_readers();
	}
	k.delete_rules(policy_id_of(r.slot, 0));
	k.delete_rules(policy_id_of(r.slot, 1));
	k.delete_ring(r.slot);
	k.delete_dns_tables(r.slot);
	k.delete_unix_table(r.slot);
	k.set_proxy(r.slot, al_proxy{});
	k.delete_origin_table(r.slot);
	k.delete_target_origin_table(r.slot);
	k.set_budgets(r.slot, {}, false);
	k.clear_latch(r.slot);
	if (!r.attached)
		cgroup::remove(r.cgroup);
	// Its proxy's counts, which the agent that ran it may not have removed
	// (it was killed).
	::unlink(paths.proxy_stats(r.name).c_str());
	remove_record(paths, r.name);
	forget_targets(paths);
}

std::string resolve_attach_target(const Paths& paths, const std::string& cgroup, int pid)
{
	std::string cg;
	if (pid > 0) {
		if (!fs::exists("/proc/" + std::to_string(pid)))
			fail("--pid {}: no such process", pid);
		cg = cgroup::of_pid(pid);
	} else if (!cgroup.empty() && cgroup.front() == '/' &&
		   fs::path(cgroup).lexically_normal().string().rfind(cgroup::mount_point(), 0) == 0) {
		cg = fs::path(cgroup).lexically_normal().string();
	} else {
		cg = cgroup::path_of(cgroup);
	}
	while (cg.size() > 1 && cg.back() == '/')
		cg.pop_back();
	std::error_code ec;
	if (!fs::is_directory(cg, ec) || !fs::exists(cg + "/cgroup.procs", ec))
		fail("{} is not a cgroup under {}", cg, cgroup::mount_point());
	if (cgroup::level_of(cg) <= 0)
		fail("{} is the root cgroup: attach to a cgroup below it", cg);
	uint64_t id = cgroup::id_of(cg);
	for (const auto& r : load_records(paths))
		if (r.cgroup_id == id || r.cgroup == cg)
			fail("{} is sandbox '{}' already (airlock detach {} first)", cg, r.name, r.name);
	return cg;
}

}  // namespace airlock
