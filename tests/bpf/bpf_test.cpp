#include "bpf_test.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include "events/audit.h"
#include "sandbox/state.h"
#include "util/files.h"

namespace bpft {

Wire dns_header(unsigned id, unsigned flags, unsigned qd, unsigned an, unsigned ns, unsigned ar)
{
	return Wire().u16(id).u16(flags).u16(qd).u16(an).u16(ns).u16(ar);
}

std::string query(const std::string& name, unsigned type, unsigned id)
{
	return dns_header(id).name(name).u16(type).u16(1);
}

std::string opt_record(const std::string& options, unsigned udp_size, unsigned flags)
{
	return Wire().u8(0).u16(kTypeOpt).u16(udp_size).u8(0).u8(0).u16(flags).u16(options.size()).raw(options);
}

std::string edns_option(unsigned code, const std::string& data)
{
	return Wire().u16(code).u16(data.size()).raw(data);
}

std::string rr(const std::string& owner, unsigned type, uint32_t ttl, const std::string& rdata)
{
	return Wire().raw(owner).u16(type).u16(1).u32(ttl).u16(rdata.size()).raw(rdata);
}

Want to(const std::string& addr, unsigned protocol, unsigned port, uint8_t reason)
{
	bool v6 = addr.find(':') != std::string::npos;
	return {.reason = reason,
		.family = static_cast<uint8_t>(v6 ? AL_FAMILY_IPV6 : AL_FAMILY_IPV4),
		.protocol = static_cast<uint8_t>(protocol),
		.port = static_cast<uint16_t>(port),
		.addr = v6 ? addr6(addr) : addr4(addr)};
}

namespace {

uint64_t monotonic_ns()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string comm()
{
	std::string c = airlock::read_file("/proc/self/comm").value_or("");
	while (!c.empty() && c.back() == '\n')
		c.pop_back();
	return c.substr(0, AL_COMM_LEN - 1);
}

template <typename T>
void field(std::string& out, const char* name, T got, T want)
{
	if (got != want)
		out += fmt::format("  {}: {}, want {}\n", name, got, want);
}

}  // namespace

std::string event_differs(const Event& e, const Want& w, bool unknown)
{
	const al_event& b = e.base;
	std::string out;
	field<unsigned>(out, "kind", b.kind, w.kind);
	field<std::string>(out, "hook", airlock::hook_name(b.hook), airlock::hook_name(w.hook));
	field<std::string>(out, "verdict", airlock::verdict_name(b.verdict), airlock::verdict_name(w.verdict));
	field<std::string>(out, "reason", airlock::reason_name(b.reason), airlock::reason_name(w.reason));
	field<unsigned>(out, "rule", b.rule, w.rule);
	field<unsigned>(out, "family", b.family, w.family);
	field<unsigned>(out, "protocol", b.protocol, w.protocol);
	field<unsigned>(out, "port", b.port, w.port);
	std::string addr(reinterpret_cast<const char*>(b.addr), 16), want_addr = w.addr;
	want_addr.resize(16, '\0');
	if (addr != want_addr)
		out += "  addr differs\n";
	field<unsigned>(out, "latched", b.latched, w.latched);
	field<unsigned>(out, "signal", b.signal, AL_SIGNAL_NONE);
	field<uint64_t>(out, "cgroup_id", b.cgroup_id, Programs::get().cgroup().id());
	field<uint32_t>(out, "slot", b.slot, unknown ? AL_SLOT_UNKNOWN : Sandbox::kSlot);
	field<uint32_t>(out, "policy_id", b.policy_id, unknown ? 0 : airlock::policy_id_of(Sandbox::kSlot, 0));
	if (b.ts_ns == 0 || b.ts_ns > monotonic_ns())
		out += fmt::format("  ts_ns {} is not a time before now\n", b.ts_ns);
	// The task: sock_addr hooks always; cgroup_skb egress where the kernel
	// lets it read the task; never at ingress (softirq).
	bool task = (w.hook != AL_HOOK_EGRESS && w.hook != AL_HOOK_INGRESS) ||
		    (w.hook == AL_HOOK_EGRESS && Programs::get().skb_task_info());
	field<uint32_t>(out, "pid", b.pid, task ? static_cast<uint32_t>(syscall(SYS_gettid)) : 0);
	field<uint32_t>(out, "tgid", b.tgid, task ? static_cast<uint32_t>(getpid()) : 0);
	field<std::string>(out, "comm", std::string(reinterpret_cast<const char*>(b.comm)), task ? comm() : "");
	bool dns = w.kind == AL_EVENT_DNS_QUERY || w.kind == AL_EVENT_DNS_ANSWER;
	if (dns != e.dns.has_value())
		return out + fmt::format("  a {} record, want a {} one\n", e.dns ? "DNS" : "decision",
					 dns ? "DNS" : "decision");
	if (!dns)
		return out;
	field<std::string>(out, "qname", e.qname(), w.qname);
	field<unsigned>(out, "name_len", e.dns->name_len,
			w.qname.empty() ? 0 : static_cast<unsigned>(w.qname.size() + 2));
	field<unsigned>(out, "qtype", e.dns->qtype, w.qtype);
	field<unsigned>(out, "qid", e.dns->qid, w.qid);
	field<unsigned>(out, "learned", e.dns->learned, w.learned);
	field<uint32_t>(out, "ttl", e.dns->ttl, w.ttl);
	return out;
}

al_counters decided(uint8_t hook, uint8_t verdict, uint8_t reason, uint64_t n)
{
	al_counters c{};
	c.decisions[hook][verdict] = n;
	if (verdict != AL_VERDICT_ALLOW) {
		c.reasons[reason] = n;
		c.violations = reason == AL_REASON_QUARANTINED ? 0 : n;
	}
	return c;
}

al_counters egress_allowed(uint64_t bytes, uint64_t n)
{
	al_counters c = decided(AL_HOOK_EGRESS, AL_VERDICT_ALLOW, 0, n);
	c.egress_packets = n;
	c.egress_bytes = bytes;
	return c;
}

al_counters egress_denied(uint8_t reason, uint64_t bytes, uint64_t n)
{
	al_counters c = decided(AL_HOOK_EGRESS, AL_VERDICT_DENY, reason, n);
	c.denied_packets = n;
	c.denied_bytes = bytes;
	return c;
}

void SandboxTest::TearDown()
{
	if (!unknown_used) {
		EXPECT_EQ(counters_differ(sb_->unknown_counters(), {}), "") << "a program found no sandbox";
	}
	sb_.reset();
}

void SandboxTest::use(const std::string& policy, uint32_t flags)
{
	sb_.reset();
	sb_ = std::make_unique<Sandbox>(policy, flags);
}

void SandboxTest::expect_events(const std::vector<Want>& want, bool unknown)
{
	auto ev = unknown ? sb_->unknown_events() : sb_->events();
	ASSERT_EQ(ev.size(), want.size());
	for (size_t i = 0; i < want.size(); i++)
		EXPECT_EQ(event_differs(ev[i], want[i], unknown), "") << "event " << i << ": " << ev[i].describe();
}

}  // namespace bpft
