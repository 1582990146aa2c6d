// Commands that act on sandboxes another airlock process runs (or ran): they
// work on the pins and the state directory, so they need no daemon.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "events/audit.h"
#include "kernel/kernel.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/supervisor.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock {

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

void audit_to(const SandboxRecord& r, const json& j)
{
	if (r.audit_log.empty())
		return;
	AuditLog log(r.audit_log);
	log.write(r.name, j);
}

json counters_json(const al_counters& c)
{
	json d = json::object();
	for (unsigned h = 0; h < AL_HOOK_MAX; h++) {
		if (std::string(hook_name(h)) == "unknown")
			continue;
		d[hook_name(h)] = {{"allow", c.decisions[h][AL_VERDICT_ALLOW]},
				   {"deny", c.decisions[h][AL_VERDICT_DENY]},
				   {"audit", c.decisions[h][AL_VERDICT_AUDIT]}};
	}
	json reasons = json::object();
	for (unsigned i = 0; i < AL_REASON_MAX; i++)
		if (c.reasons[i])
			reasons[reason_name(i)] = c.reasons[i];
	return {{"decisions", d},
		{"reasons", reasons},
		{"egress_packets", c.egress_packets},
		{"egress_bytes", c.egress_bytes},
		{"denied_packets", c.denied_packets},
		{"denied_bytes", c.denied_bytes},
		{"violations", c.violations},
		{"events_lost", c.events_lost}};
}

json dns_json_of(const al_counters& c, size_t learned, size_t learned_live)
{
	return {{"queries_allowed", c.dns_queries_allowed},
		{"queries_denied", c.dns_queries_denied},
		{"answers_learned", c.dns_answers_learned},
		{"answers_dropped", c.dns_answers_dropped},
		{"learn_full", c.dns_learn_full},
		{"learned_addresses", learned_live},
		{"learned_entries", learned}};
}

}  // namespace

int cmd_status(const Paths& paths, bool as_json)
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
			  {"latched", l.violated_ns != 0},
			  {"populated", ev && ev->populated},
			  {"created", r.created},
			  {"counters", counters_json(counters)},
			  {"dns", dns_json_of(counters, learned.size(), live)}};
		out["sandboxes"].push_back(s);
	}
	// Decisions of programs that found no sandbox entry (fail-closed denials).
	if (k)
		out["unattributed"] = counters_json(k->counters(AL_SLOT_UNKNOWN));
	if (as_json) {
		fmt::print("{}\n", out.dump(2));
		return kExitOk;
	}
	if (records.empty()) {
		fmt::print("no sandboxes\n");
		return kExitOk;
	}
	fmt::print("{:<24} {:<12} {:<20} {:>8} {:>10} {:>12} {:>9} {:>8}  {}\n", "NAME", "STATE", "POLICY", "RUNNER",
		   "VIOLATIONS", "EGRESS", "DNS-DENY", "LEARNED", "CGROUP");
	for (const auto& s : out["sandboxes"]) {
		std::string runner = s["runner_alive"].get<bool>() ? std::to_string(s["runner_pid"].get<int>())
				     : s["attached"].get<bool>() ? "attached"
								  : "dead";
		fmt::print("{:<24} {:<12} {:<20} {:>8} {:>10} {:>12} {:>9} {:>8}  {}\n", s["name"].get<std::string>(),
			   s["state"].get<std::string>(), s["policy"].get<std::string>(), runner,
			   s["counters"]["violations"].get<uint64_t>(),
			   fmt::format("{} B", s["counters"]["egress_bytes"].get<uint64_t>()),
			   s["dns"]["queries_denied"].get<uint64_t>(), s["dns"]["learned_addresses"].get<uint64_t>(),
			   s["cgroup"].get<std::string>());
	}
	return kExitOk;
}

int cmd_thaw(const Paths& paths, const std::string& name)
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
	fmt::print("{}: thawed\n", name);
	return kExitOk;
}

int cmd_kill(const Paths& paths, const std::string& name)
{
	SandboxRecord r = record_or_fail(paths, name);
	write_file_atomic(paths.kill_marker(name), "operator\n");
	cgroup::kill(r.cgroup);
	if (!cgroup::wait_empty(r.cgroup, 5s))
		fail("processes of sandbox '{}' did not exit within 5 s of cgroup.kill", name);
	audit_to(r, {{"event", "killed"}, {"by", "operator"}});
	if (!runner_alive(r)) {
		// Nobody else will clean up an orphaned sandbox.
		FileLock lock(paths.lock_file());
		kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
		destroy_sandbox(k, paths, r);
		fmt::print("{}: killed and removed (its runner was gone)\n", name);
	} else {
		fmt::print("{}: killed\n", name);
	}
	return kExitOk;
}

int cmd_reload(const Paths& paths, const std::string& name, const std::string& file)
{
	SandboxRecord r = record_or_fail(paths, name);
	Policy policy;
	try {
		policy = load_policy(file);
	} catch (const PolicyRejected& e) {
		for (const auto& l : e.lines())
			fmt::print(stderr, "{}\n", l);
		audit_to(r, {{"event", "reload"}, {"result", "error"}, {"policy_file", file}, {"errors", e.lines()}});
		fmt::print(stderr, "{}: reload rejected; policy '{}' stays enforced\n", name, r.policy_name);
		return kExitFailure;
	}
	FileLock lock(paths.lock_file());
	r = record_or_fail(paths, name);
	kernel::Kernel k = kernel::Kernel::adopt(paths.bpf_dir);
	reload_sandbox(k, paths, r, policy, file);
	audit_to(r, {{"event", "reload"}, {"result", "ok"}, {"policy", policy.name}, {"policy_file", r.policy_file}});
	fmt::print("{}: now enforcing '{}'\n", name, policy.name);
	return kExitOk;
}

}  // namespace airlock
