#include "ops/ops.h"
#include "ops/proxy.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <sstream>
#include <cstring>
#include <linux/capability.h>
#include <sys/stat.h>
#include <cerrno>
#include <unistd.h>

#include "events/audit.h"
#include "ops/control.h"
#include "util/mountinfo.h"
#include "kernel/kernel.h"
#include "proxy/world_stats.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/supervisor.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock::ops {

using namespace std::chrono_literals;
using nlohmann::json;

namespace {

SandboxRecord record_or_fail(const Paths& paths, const std::string& name)
{
	auto r = load_record(paths, name);
	if (!r)
		fail("no sandbox named '{}' (airlock status lists them)", name);
	return *r;
}

// The line that records an action already done: a log that cannot be
// written is warned about, and the action stands (reported as done).
void audit_to(const SandboxRecord& r, const json& j)
{
	if (r.audit_log.empty())
		return;
	try {
		AuditLog log(r.audit_log, r.audit_bound);
		log.write(r.name, j);
	} catch (const std::exception& e) {
		spdlog::warn("{}: the audit line '{}' was not written: {}", r.name, j.value("event", ""), e.what());
	}
}

uint64_t suppressed_total(const al_counters& c)
{
	uint64_t n = 0;
	for (const auto& hook : c.suppressed)
		for (uint64_t v : hook)
			n += v;
	return n;
}

json counters_json(const al_counters& c)
{
	json d = json::object();
	for (unsigned h = 0; h < AL_HOOK_MAX; h++) {
		if (!hook_known(h))
			continue;
		json& v = d[hook_name(h)] = json::object();
		for (unsigned verdict = 0; verdict < AL_VERDICT_MAX; verdict++)
			v[verdict_name(verdict)] = c.decisions[h][verdict];
	}
	json reasons = json::object();
	for (unsigned i = 0; i < AL_REASON_MAX; i++)
		if (c.reasons[i])
			reasons[reason_name(i)] = c.reasons[i];
	json helper = json::object();
	for (unsigned i = 0; i < AL_ERR_SITE_MAX; i++)
		if (c.helper_errors[i])
			helper[err_site_name(i)] = c.helper_errors[i];
	return {{"decisions", d},
		{"reasons", reasons},
		{"egress_packets", c.egress_packets},
		{"egress_bytes", c.egress_bytes},
		{"denied_packets", c.denied_packets},
		{"denied_bytes", c.denied_bytes},
		{"violations", c.violations},
		{"events_lost", c.events_lost},
		{"unix_bound_full", c.unix_bound_full},
		{"helper_errors", helper},
		{"events_suppressed", suppressed_total(c)}};
}

json dns_json_of(const al_counters& c, size_t learned, size_t learned_live)
{
	return {{"queries_allowed", c.dns_queries_allowed}, {"queries_denied", c.dns_queries_denied},
		{"answers_learned", c.dns_answers_learned}, {"answers_dropped", c.dns_answers_dropped},
		{"learn_full", c.dns_learn_full},           {"records_off_chain", c.dns_records_off_chain},
		{"learned_addresses", learned_live},        {"learned_entries", learned}};
}

json budgets_json(const std::vector<kernel::Kernel::Budget>& budgets)
{
	json out = json::array();
	for (const auto& b : budgets)
		out.push_back({{"rule", b.rule},
			       {"limit_bytes", b.limit},
			       {"used_bytes", b.used},
			       {"spent", b.used > b.limit}});
	return out;
}

// "docker-4f2a.scope" -> "docker-4f2a.scope"; what is not a sandbox name
// asks for --name.
std::string default_name(const std::string& cgroup_path)
{
	std::string base = cgroup_path.substr(cgroup_path.rfind('/') + 1);
	if (base.size() > 63)
		base = base.substr(0, 63);
	return base;
}

std::string status_field(const std::string& status, const char* key)
{
	auto at = status.find(std::string("\n") + key + ":");
	if (at == std::string::npos)
		return "";
	at += std::strlen(key) + 2;
	auto end = status.find('\n', at);
	std::string v = status.substr(at, end == std::string::npos ? std::string::npos : end - at);
	v.erase(0, v.find_first_not_of(" \t"));
	return v;
}

// Why pid could leave cgroup (relative to the cgroup2 root), if it could.
std::optional<std::string> escape_reason(int pid, const std::string& relative)
{
	std::string status = read_file(fmt::format("/proc/{}/status", pid)).value_or("");
	if (status.empty())
		return std::nullopt;
	uint64_t eff = std::strtoull(status_field(status, "CapEff").c_str(), nullptr, 16);
	if (eff & (1ull << CAP_SYS_ADMIN))
		return "it holds CAP_SYS_ADMIN";
	std::istringstream uids(status_field(status, "Uid"));
	bool uid0 = false;
	for (std::string u; uids >> u;)
		uid0 |= u == "0";
	if (!uid0)
		return std::nullopt;
	// Read from the initial cgroup namespace, the root of a cgroup2 mount
	// is its path on the whole hierarchy.
	for (const auto& m : read_mountinfo(fmt::format("/proc/{}/mountinfo", pid))) {
		if (m.fstype == "bpf")
			return "it runs as uid 0 and sees a bpf mount (" + m.point + ")";
		if (m.fstype == "cgroup2" && m.root != relative && m.root.rfind(relative + "/", 0) != 0)
			return "it runs as uid 0 and sees a cgroup2 mount rooted outside it (" + m.point + ")";
	}
	return std::nullopt;
}

}  // namespace

json unix_coverage(const kernel::Kernel& k, const SandboxRecord& r)
{
	return {{"hooks", k.has_prog(kernel::ConnectUnix) ? "kernel" : "unavailable"},
		{"abstract", r.abstract_scoped ? "landlock-scoped" : "rules-only"}};
}

std::vector<std::string> escape_warnings(const std::string& cgroup_path)
{
	std::vector<std::string> out;
	const std::string& mount = cgroup::mount_point();
	std::string relative = cgroup_path.size() > mount.size() ? cgroup_path.substr(mount.size()) : "/";
	for (int pid : cgroup::pids_within(cgroup_path))
		if (auto why = escape_reason(pid, relative))
			out.push_back(fmt::format("process {} could leave the sandbox: {}", pid, *why));
	return out;
}

// The counts of the sandbox's proxy, as its agent last wrote them; null
// without a proxy.
json proxy_json(const Paths& paths, const std::string& name)
{
	auto text = read_file(paths.proxy_stats(name));
	auto c = text ? proxy::parse_proxy_counts(*text) : std::nullopt;
	return c ? json::parse(proxy::proxy_counts_json(*c)) : json(nullptr);
}

json status(const Paths& paths)
{
	auto records = load_records(paths);
	std::optional<kernel::Kernel> k;
	if (!records.empty())
		k.emplace(kernel::Kernel::adopt(paths.bpf_dir));
	json out = {{"sandboxes", json::array()}};
	for (const auto& r : records) {
		auto ev = cgroup::events(r.cgroup);
		al_latch l = k->latch(r.slot);
		bool frozen = ev && ev->frozen;
		al_counters counters = k->counters(r.slot);
		auto learned = k->learned(r.slot);
		uint64_t now = monotonic_ns();
		size_t live = std::count_if(learned.begin(), learned.end(),
					    [&](const kernel::Kernel::Learned& l) { return l.value.expires_ns > now; });
		std::string state = !ev ? "gone" : frozen ? "frozen" : l.violated_ns ? "quarantined" : "running";
		json s = {{"name", r.name},
			  {"state", state},
			  {"cgroup", r.cgroup},
			  {"cgroup_id", r.cgroup_id},
			  {"policy", r.policy_name},
			  {"policy_file", r.policy_file},
			  {"runner_pid", r.runner_pid},
			  {"runner_alive", runner_alive(r)},
			  {"attached", r.attached},
			  {"managed", r.managed},
			  {"latched", l.violated_ns != 0},
			  {"populated", ev && ev->populated},
			  {"created", r.created},
			  {"counters", counters_json(counters)},
			  {"dns", dns_json_of(counters, learned.size(), live)},
			  {"budgets", budgets_json(k->budgets(r.slot))},
			  {"proxy", proxy_json(paths, r.name)},
			  {"unix", unix_coverage(*k, r)}};
		out["sandboxes"].push_back(s);
	}
	// Decisions of programs that found no sandbox entry (fail-closed denials).
	if (k) {
		out["unattributed"] = counters_json(k->counters(AL_SLOT_UNKNOWN));
		out["stop_in_call"] = kernel::can_stop_in_call();
	}
	return out;
}

std::string thaw(const Paths& paths, const std::string& name)
{
	SandboxRecord r = record_or_fail(paths, name);
	kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
	// Lift the quarantine before the processes run again, so they resume
	// with working egress rather than into a wall of denials.
	k.clear_latch(r.slot);
	cgroup::thaw(r.cgroup);
	if (!cgroup::wait_frozen(r.cgroup, false, 5s))
		fail("sandbox '{}' did not report frozen 0 within 5 s", name);
	audit_to(r, {{"event", "thawed"}});
	return name + ": thawed";
}

std::string kill(const Paths& paths, const std::string& name)
{
	SandboxRecord r = record_or_fail(paths, name);
	write_file_atomic(paths.kill_marker(name), "operator\n");
	// Where its sockets are, known only while its processes live: for the
	// removal below (a live runner removes the sandbox itself).
	std::vector<Fd> nets;
	if (!runner_alive(r) && !r.attached)
		nets = network_namespaces(paths, r);
	cgroup::kill(r.cgroup);
	if (!cgroup::wait_empty(r.cgroup, 5s))
		fail("processes of sandbox '{}' did not exit within 5 s of cgroup.kill", name);
	audit_to(r, {{"event", "killed"}, {"by", "operator"}});
	// A sandbox of `airlock run` whose runner is gone (made through the
	// daemon or not): nobody else will clean it up.
	if (!runner_alive(r) && !r.attached && (!r.managed || r.runner_pid)) {
		FileLock lock(paths.lock_file());
		kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
		destroy_sandbox(k, paths, r, std::move(nets));
		return name + ": killed and removed (its runner was gone)";
	}
	return name + ": killed";
}

Result<std::string> reload(const Paths& paths, const std::string& name, const std::string& file)
{
	SandboxRecord r = record_or_fail(paths, name);
	auto loaded = load_policy(file);
	if (!loaded) {
		auto lines = loaded.rejection().lines;
		audit_to(r, {{"event", "reload"}, {"result", "error"}, {"policy_file", file}, {"errors", lines}});
		lines.push_back(fmt::format("{}: reload rejected; policy '{}' stays enforced", name, r.policy_name));
		return Rejection{lines};
	}
	const Policy& policy = *loaded;
	FileLock lock(paths.lock_file());
	r = record_or_fail(paths, name);
	kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
	reload_sandbox(k, paths, r, policy, file);
	audit_to(r, {{"event", "reload"}, {"result", "ok"}, {"policy", policy.name}, {"policy_file", r.policy_file}});
	return fmt::format("{}: now enforcing '{}'", name, policy.name);
}

Result<SandboxRecord> add(const Paths& paths, const NewSandbox& o, std::string* message)
{
	auto loaded = load_policy(o.policy_file);
	if (!loaded)
		return loaded.rejection();
	const Policy& policy = *loaded;
	if (needs_proxy(policy) && !o.starts_proxy)
		return Rejection{
			{fmt::format("{}: policy '{}' needs a proxy (a redirect to the world, or the SNI "
				     "gate), which `airlock daemon` or `airlock run` starts: no daemon runs for {}",
				     o.policy_file, policy.name, paths.state_dir)}};
	std::string audit_path = o.audit_log.empty() ? "/var/log/airlock/audit.jsonl" : o.audit_log;
	bool attach = !o.cgroup.empty() || o.pid > 0;
	// Opened before anything is made: a log that cannot be written fails the
	// request with nothing attached or created.
	AuditLog audit(audit_path, o.audit_bound);
	make_dirs(paths.state_dir);
	SandboxRecord rec;
	bool adopted = false;
	{
		FileLock lock(paths.lock_file());
		std::string cg = attach ? resolve_attach_target(paths, o.cgroup, o.pid) : "";
		if (attach && o.cgroup_id && cgroup::id_of(cg) != o.cgroup_id)
			fail("{} is not the cgroup asked for (id {}, asked {}): it was removed and made again", cg,
			     cgroup::id_of(cg), o.cgroup_id);
		std::string name = !o.name.empty() ? o.name : default_name(cg);
		if (!valid_sandbox_name(name))
			fail("{}{}", not_a_sandbox_name(name), attach ? ": give one with --name" : "");
		kernel::Kernel k = kernel::Kernel::load_or_adopt(paths.bpf_dir, load_records(paths).empty());
		adopted = k.adopted();
		CreateOptions co{name,         policy, o.policy_file, audit_path,   o.log_allowed,
				 o.runner_pid, cg,     o.managed,     o.audit_bound};
		rec = create_sandbox(k, paths, co);
	}
	if (attach) {
		auto ev = cgroup::events(rec.cgroup);
		audit.write(rec.name, json{{"event", "attached"},
					   {"cgroup", rec.cgroup},
					   {"cgroup_id", rec.cgroup_id},
					   {"policy", policy.name},
					   {"policy_file", rec.policy_file},
					   {"populated", ev && ev->populated}});
	} else {
		audit.write(rec.name, json{{"event", "sandbox-created"},
					   {"cgroup", rec.cgroup},
					   {"cgroup_id", rec.cgroup_id},
					   {"policy", policy.name},
					   {"policy_file", rec.policy_file}});
	}
	if (message)
		*message = fmt::format("{}: enforcing '{}' on {} (cgroup id {}); programs {}", rec.name, policy.name,
				       rec.cgroup, rec.cgroup_id, adopted ? "adopted from pins" : "loaded and pinned");
	return rec;
}

void check_removable(const SandboxRecord& r, bool detach)
{
	if (detach && !r.attached)
		fail("sandbox '{}' is airlock's own cgroup, not an attached one: end it with airlock {} {}", r.name,
		     r.managed ? "sandbox delete" : "kill", r.name);
	if (!detach && r.attached)
		fail("sandbox '{}' is an attached cgroup: let go of it with airlock detach {}", r.name, r.name);
	if (!detach && !r.managed && runner_alive(r))
		fail("sandbox '{}' belongs to airlock run (pid {}): end it with airlock kill {}", r.name, r.runner_pid,
		     r.name);
}

std::string detach(const Paths& paths, const std::string& name)
{
	FileLock lock(paths.lock_file());
	SandboxRecord r = record_or_fail(paths, name);
	check_removable(r, true);
	kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
	destroy_sandbox(k, paths, r);
	audit_to(r, {{"event", "detached"}, {"cgroup", r.cgroup}});
	return fmt::format("{}: detached from {}; its processes run on, unenforced", name, r.cgroup);
}

bool cgroup_removed(const SandboxRecord& r)
{
	if (!r.attached || !r.cgroup_id)
		return false;
	// Judged only under the cgroup2 mount as the record knows it: a
	// daemon that sees another tree (another mount, a missing one) lets
	// nothing go.
	std::error_code ec;
	std::string mount;
	try {
		mount = cgroup::mount_point();
	} catch (const std::exception&) {
		return false;
	}
	if (r.cgroup.rfind(mount + "/", 0) != 0 || !std::filesystem::exists(mount + "/cgroup.controllers", ec))
		return false;
	struct stat st;
	if (::stat(r.cgroup.c_str(), &st) != 0)
		return errno == ENOENT;
	return static_cast<uint64_t>(st.st_ino) != r.cgroup_id;
}

bool release_if_removed(const Paths& paths, const std::string& name)
{
	FileLock lock(paths.lock_file());
	auto r = load_record(paths, name);
	if (!r || !cgroup_removed(*r))
		return false;
	kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
	destroy_sandbox(k, paths, *r);
	audit_to(*r, {{"event", "detached"},
		      {"cgroup", r->cgroup},
		      {"cgroup_id", r->cgroup_id},
		      {"by", "airlock"},
		      {"reason", "its cgroup was removed"}});
	return true;
}

void unmake(const Paths& paths, const SandboxRecord& made, const std::string& why)
{
	FileLock lock(paths.lock_file());
	auto r = load_record(paths, made.name);
	if (!r || r->cgroup_id != made.cgroup_id)
		return;
	kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
	destroy_sandbox(k, paths, *r);
	audit_to(*r, {{"event", r->attached ? "detached" : "sandbox-deleted"},
		      {"cgroup", r->cgroup},
		      {"by", "airlock"},
		      {"reason", why}});
}

Result<std::vector<std::string>> uninstall(const Paths& paths, bool force)
{
	if (daemon_connect(paths).valid())
		return Rejection{
			{fmt::format("airlock uninstall: a daemon runs for {} (its control socket answers): stop it "
				     "first (systemctl stop airlock), or it would make its sandboxes again",
				     paths.state_dir)}};
	std::vector<std::string> done;
	std::error_code ec;
	if (std::filesystem::is_directory(paths.state_dir, ec)) {
		FileLock lock(paths.lock_file());
		auto records = load_records(paths);
		std::vector<std::string> busy;
		for (const auto& r : records) {
			auto ev = cgroup::events(r.cgroup);
			if (runner_alive(r) && !r.managed)
				busy.push_back(fmt::format("sandbox '{}' runs under airlock run (pid {})", r.name,
							   r.runner_pid));
			else if (ev && ev->populated)
				busy.push_back(fmt::format("sandbox '{}' has processes in {}", r.name, r.cgroup));
		}
		if (!busy.empty() && !force) {
			busy.emplace_back(
				"airlock uninstall: refused while sandboxes run; end them (airlock kill, airlock detach) "
				"or give --force (airlock's own sandboxes are killed, attached cgroups detached)");
			return Rejection{busy};
		}
		if (!records.empty()) {
			kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
			for (const auto& r : records) {
				destroy_sandbox(k, paths, r);
				audit_to(r, {{"event", r.attached ? "detached" : "sandbox-deleted"},
					     {"cgroup", r.cgroup},
					     {"by", "uninstall"}});
				done.push_back(fmt::format("{}: {}", r.name,
							   r.attached ? "detached from " + r.cgroup
								      : "killed and removed " + r.cgroup));
			}
		}
	}
	if (std::filesystem::exists(paths.bpf_dir, ec)) {
		std::filesystem::remove_all(paths.bpf_dir, ec);
		if (ec)
			fail("remove the pins in {}: {}", paths.bpf_dir, ec.message());
		done.push_back("removed the pins in " + paths.bpf_dir);
	}
	std::string parent = cgroup::path_of(paths.cgroup_parent);
	if (std::filesystem::is_directory(parent, ec)) {
		if (::rmdir(parent.c_str()) == 0)
			done.push_back("removed the cgroup " + parent);
		else
			done.push_back(fmt::format("left the cgroup {}: {} (cgroups airlock did not make are in it)",
						   parent, std::strerror(errno)));
	}
	if (std::filesystem::exists(paths.state_dir, ec)) {
		std::filesystem::remove_all(paths.state_dir, ec);
		if (ec)
			fail("remove {}: {}", paths.state_dir, ec.message());
		done.push_back("removed the state directory " + paths.state_dir);
	}
	if (done.empty())
		done.emplace_back("nothing of airlock's is on this node");
	return done;
}

std::string remove(const Paths& paths, const std::string& name)
{
	FileLock lock(paths.lock_file());
	SandboxRecord r = record_or_fail(paths, name);
	check_removable(r, false);
	kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
	destroy_sandbox(k, paths, r);
	audit_to(r, {{"event", "sandbox-deleted"}, {"cgroup", r.cgroup}});
	return fmt::format("{}: deleted (its processes killed, its cgroup removed)", name);
}

}  // namespace airlock::ops
