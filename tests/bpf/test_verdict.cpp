// The verdict library (bpf/verdict.bpf.h): through the production egress
// program on crafted packets, and through the test object's sock_addr
// program (the decision connect4/6 and sendmsg4/6 make, for this task) on
// crafted addresses. Rules come from the agent's policy compiler.
#include <bpf/bpf.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "bpf_test.h"
#include "sandbox/cgroup.h"
#include "util/files.h"

namespace bpft {
namespace {

// Rule indexes are what events name.
std::string policy(const std::string& top = R"("on_violation": "deny")")
{
	return R"({"version": 1, "name": "bpf-verdict", )" + top + R"(,
	  "rules": [
	    {"action": "allow", "cidr": "10.0.0.0/8", "ports": [443]},
	    {"action": "deny", "cidr": "10.1.0.0/16", "ports": [22]},
	    {"action": "allow", "cidr": "10.2.0.0/16", "ports": ["8000-8100"], "protocol": "udp"},
	    {"action": "allow", "cidr": "10.3.0.0/16"},
	    {"action": "deny", "cidr": "10.3.0.0/16", "ports": [25]},
	    {"action": "allow", "cidr": "fd00::/8", "ports": [443], "protocol": "tcp"},
	    {"action": "allow", "domain": "learned.test", "ports": [8443], "protocol": "tcp"},
	    {"action": "deny", "cidr": "10.9.9.0/24"}],
	  "dns": {"resolvers": ["10.77.0.53"], "types": ["A"]}})";
}

uint64_t now_ns()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

al_test_sock_addr connect4(const std::string& dotted, unsigned port, unsigned protocol = IPPROTO_TCP)
{
	al_test_sock_addr t{};
	t.hook = AL_HOOK_CONNECT4;
	t.protocol = protocol;
	t.port = port;
	std::memcpy(&t.addr4, addr4(dotted).data(), 4);
	return t;
}

al_test_sock_addr connect6(const std::string& text, unsigned port, unsigned protocol = IPPROTO_TCP)
{
	al_test_sock_addr t{};
	t.hook = AL_HOOK_CONNECT6;
	t.ipv6 = 1;
	t.protocol = protocol;
	t.port = port;
	std::memcpy(t.addr6, addr6(text).data(), 16);
	return t;
}

class Verdict : public SandboxTest {
protected:
	void SetUp() override { use(policy()); }

	// At egress: let out, counted, never reported.
	void egress_passes(const std::vector<std::string>& pkts)
	{
		size_t bytes = 0;
		for (const auto& p : pkts) {
			EXPECT_EQ(run_skb(Programs::get().egress(), p), 1);
			bytes += p.size();
		}
		EXPECT_EQ(counters_differ(sb_->counters(), egress_allowed(bytes, pkts.size())), "");
		EXPECT_TRUE(sb_->events().empty());
	}

	// At egress: dropped for reason under rule, one violation reported
	// with w's destination.
	void egress_drops(const std::string& pkt, uint8_t reason, uint16_t rule, Want w)
	{
		EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 0);
		EXPECT_EQ(counters_differ(sb_->counters(), egress_denied(reason, pkt.size())), "");
		w.reason = reason;
		w.rule = rule;
		expect_one_event(w);
	}

	// A sock_addr decision: the call fails, one violation reported.
	void call_denied(const al_test_sock_addr& t, uint8_t reason, uint16_t rule, Want w)
	{
		EXPECT_EQ(run_sock_addr(t), 0);
		EXPECT_EQ(counters_differ(sb_->counters(), decided(t.hook, AL_VERDICT_DENY, reason)), "");
		w.hook = t.hook;
		w.reason = reason;
		w.rule = rule;
		w.protocol = t.protocol;
		w.port = t.port;
		expect_one_event(w);
	}

	// The sandbox resolves name to addr (query out, answer in): learned.
	void learn(const std::string& name, const std::string& addr)
	{
		std::string q = query(name);
		ASSERT_EQ(run_skb(Programs::get().egress(), udp4(kSandbox4, kResolver4, kClientPort, 53, q)), 1);
		std::string ans = dns_header(kQid, 0x8180, 1, 1)
					  .name(name)
					  .u16(kTypeA)
					  .u16(1)
					  .raw(rr(Wire().ptr(12), kTypeA, 300, addr4(addr)));
		ASSERT_EQ(run_skb(Programs::get().ingress(), udp4(kResolver4, kSandbox4, 53, kClientPort, ans)), 1);
		ASSERT_EQ(sb_->learned().size(), 1u);
		sb_->events();
		base_ = sb_->counters();
	}

	al_counters base_{};
};

std::string tcp_to(const std::string& dst, unsigned port)
{
	return tcp4(kSandbox4, dst, kClientPort, port, "x");
}

std::string udp_to(const std::string& dst, unsigned port)
{
	return udp4(kSandbox4, dst, kClientPort, port, "x");
}

// -- one longest-prefix lookup, then the first range that matches -------------

TEST_F(Verdict, TheLongestPrefixWithAMatchingRangeDecides)
{
	// 10.1.0.0/16 has a range for port 22 only: for 443 the /8's rule does.
	egress_passes({tcp_to("10.1.2.3", 443)});
}

TEST_F(Verdict, AMoreSpecificDenyWins)
{
	egress_drops(tcp_to("10.1.2.3", 22), AL_REASON_RULE_DENY, 1, to("10.1.2.3", IPPROTO_TCP, 22));
}

TEST_F(Verdict, WhatNoRangeMatchesIsDeniedByDefault)
{
	egress_drops(tcp_to("10.2.0.1", 22), AL_REASON_NO_RULE, AL_RULE_NONE, to("10.2.0.1", IPPROTO_TCP, 22));
}

TEST_F(Verdict, APortRangeHoldsBothItsEnds)
{
	egress_passes({udp_to("10.2.0.1", 8000), udp_to("10.2.0.1", 8100)});
}

TEST_F(Verdict, APortRangeHoldsNothingBelowIt)
{
	egress_drops(udp_to("10.2.0.1", 7999), AL_REASON_NO_RULE, AL_RULE_NONE, to("10.2.0.1", IPPROTO_UDP, 7999));
}

TEST_F(Verdict, APortRangeHoldsNothingAboveIt)
{
	egress_drops(udp_to("10.2.0.1", 8101), AL_REASON_NO_RULE, AL_RULE_NONE, to("10.2.0.1", IPPROTO_UDP, 8101));
}

TEST_F(Verdict, ARangeKeepsItsProtocol)
{
	egress_drops(tcp_to("10.2.0.1", 8050), AL_REASON_NO_RULE, AL_RULE_NONE, to("10.2.0.1", IPPROTO_TCP, 8050));
}

TEST_F(Verdict, AtEqualPrefixDenyBeatsAllow)
{
	egress_drops(tcp_to("10.3.0.1", 25), AL_REASON_RULE_DENY, 4, to("10.3.0.1", IPPROTO_TCP, 25));
}

TEST_F(Verdict, AtEqualPrefixTheAllowHoldsWhereTheDenyDoesNot)
{
	egress_passes({tcp_to("10.3.0.1", 24), tcp_to("10.3.0.1", 26)});
}

TEST_F(Verdict, IPv6RulesHoldForIPv6)
{
	egress_passes({tcp6(kSandbox6, "fd00::1", kClientPort, 443, "x")});
}

TEST_F(Verdict, IPv4RulesDoNotHoldForIPv6)
{
	egress_drops(tcp6(kSandbox6, "::a01:203", kClientPort, 443, "x"), AL_REASON_NO_RULE, AL_RULE_NONE,
		     to("::a01:203", IPPROTO_TCP, 443));
}

TEST_F(Verdict, AnIPv4MappedAddressIsJudgedAsIPv4)
{
	call_denied(connect6("::ffff:10.1.2.3", 22), AL_REASON_RULE_DENY, 1, to("10.1.2.3", 0, 0));
	EXPECT_EQ(run_sock_addr(connect6("::ffff:10.1.2.3", 443)), 1);
	al_counters want = decided(AL_HOOK_CONNECT6, AL_VERDICT_DENY, AL_REASON_RULE_DENY);
	want.decisions[AL_HOOK_CONNECT6][AL_VERDICT_ALLOW] = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
}

TEST_F(Verdict, AProtocolNoRuleCanNameIsProtocol)
{
	egress_drops(ip4(kSandbox4, "10.0.0.1", 47, "", "gre!"), AL_REASON_PROTOCOL, AL_RULE_NONE,
		     to("10.0.0.1", 47, 0));
}

TEST_F(Verdict, IcmpIsDeniedWithoutAnIcmpRule)
{
	std::string echo = Wire().u8(8).u8(0).u16(0).u16(1).u16(1);
	egress_drops(ip4(kSandbox4, "10.0.0.1", IPPROTO_ICMP, "", echo), AL_REASON_NO_RULE, AL_RULE_NONE,
		     to("10.0.0.1", IPPROTO_ICMP, 0));
}

TEST_F(Verdict, AConnectIsReportedWithItsTask)
{
	call_denied(connect4("192.0.2.1", 80), AL_REASON_NO_RULE, AL_RULE_NONE, to("192.0.2.1", 0, 0));
}

// -- addresses learned from answers ------------------------------------------------

TEST_F(Verdict, ALearnedAddressIsAllowedByItsNamesRules)
{
	use(policy(), AL_SB_LOG_ALLOWED);
	learn("learned.test", "192.0.2.80");
	EXPECT_EQ(run_sock_addr(connect4("192.0.2.80", 8443)), 1);
	EXPECT_EQ(counters_differ(sb_->counters(), sum(base_, decided(AL_HOOK_CONNECT4, AL_VERDICT_ALLOW))), "");
	Want w = to("192.0.2.80", IPPROTO_TCP, 8443, AL_REASON_LEARNED);
	w.hook = AL_HOOK_CONNECT4;
	w.verdict = AL_VERDICT_ALLOW;
	w.rule = 6;
	expect_one_event(w);
}

TEST_F(Verdict, ALearnedAddressOpensOnlyItsNamesPorts)
{
	learn("learned.test", "192.0.2.80");
	EXPECT_EQ(run_sock_addr(connect4("192.0.2.80", 80)), 0);
	EXPECT_EQ(counters_differ(sb_->counters(),
				  sum(base_, decided(AL_HOOK_CONNECT4, AL_VERDICT_DENY, AL_REASON_NO_RULE))),
		  "");
}

TEST_F(Verdict, ADenyRuleBeatsALearnedAddress)
{
	learn("learned.test", "10.9.9.9");
	std::string pkt = tcp_to("10.9.9.9", 8443);
	EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 0);
	EXPECT_EQ(counters_differ(sb_->counters(), sum(base_, egress_denied(AL_REASON_RULE_DENY, pkt.size()))), "");
	Want w = to("10.9.9.9", IPPROTO_TCP, 8443);
	w.reason = AL_REASON_RULE_DENY;
	w.rule = 7;
	expect_one_event(w);
}

TEST_F(Verdict, AnExpiredLearnedAddressAdmitsNoNewFlowButKeepsOldOnesGoing)
{
	learn("learned.test", "192.0.2.80");
	auto l = sb_->learned()[0];
	l.value.expires_ns = 1;
	airlock::Fd table = sb_->learned_table();
	ASSERT_EQ(bpf_map_update_elem(table.get(), &l.key, &l.value, BPF_EXIST), 0);
	EXPECT_EQ(run_sock_addr(connect4("192.0.2.80", 8443)), 0);
	std::string pkt = tcp_to("192.0.2.80", 8443);
	EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 1) << "a packet at egress belongs to a flow let through";
	al_counters want = sum(base_, decided(AL_HOOK_CONNECT4, AL_VERDICT_DENY, AL_REASON_NO_RULE));
	EXPECT_EQ(counters_differ(sb_->counters(), sum(want, egress_allowed(pkt.size()))), "");
}

// -- the latch, audit mode ------------------------------------------------------------

TEST_F(Verdict, AQuarantinedSandboxDeniesEverythingUnreported)
{
	sb_->set_latch({.violated_ns = 1, .cgroup_id = sb_->cgroup_id()});
	std::string pkt = tcp_to("10.1.2.3", 443);
	EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 0);
	EXPECT_EQ(run_sock_addr(connect4("10.1.2.3", 443)), 0);
	al_counters want = sum(egress_denied(AL_REASON_QUARANTINED, pkt.size()),
			       decided(AL_HOOK_CONNECT4, AL_VERDICT_DENY, AL_REASON_QUARANTINED));
	EXPECT_EQ(counters_differ(sb_->counters(), want), "") << "quarantined calls are no violations";
	EXPECT_TRUE(sb_->events().empty());
}

TEST_F(Verdict, UnderFreezeTheFirstViolationLatchesInTheSameCall)
{
	use(policy(R"("on_violation": "freeze")"));
	uint64_t before = now_ns();
	Want latched = to("192.0.2.1", 0, 0);
	latched.latched = 1;
	call_denied(connect4("192.0.2.1", 80), AL_REASON_NO_RULE, AL_RULE_NONE, latched);
	uint64_t after = now_ns();
	al_latch l = sb_->latch();
	EXPECT_GE(l.violated_ns, before);
	EXPECT_LE(l.violated_ns, after);
	EXPECT_EQ(l.cgroup_id, sb_->cgroup_id());
	EXPECT_EQ(run_sock_addr(connect4("10.1.2.3", 443)), 0) << "what the policy allows is quarantined now";
	EXPECT_EQ(sb_->counters().reasons[AL_REASON_QUARANTINED], 1u);
	EXPECT_EQ(sb_->latch().violated_ns, l.violated_ns) << "the first violation's time stays";
}

TEST_F(Verdict, UnderDenyAViolationNeverLatches)
{
	call_denied(connect4("192.0.2.1", 80), AL_REASON_NO_RULE, AL_RULE_NONE, to("192.0.2.1", 0, 0));
	EXPECT_EQ(sb_->latch().violated_ns, 0u);
}

TEST_F(Verdict, InAuditModeADenialGoesOnIsReportedAndNeverLatches)
{
	use(policy(R"("mode": "audit", "on_violation": "freeze")"));
	EXPECT_EQ(run_sock_addr(connect4("192.0.2.1", 80)), 1);
	EXPECT_EQ(counters_differ(sb_->counters(), decided(AL_HOOK_CONNECT4, AL_VERDICT_AUDIT, AL_REASON_NO_RULE)), "");
	Want w = to("192.0.2.1", IPPROTO_TCP, 80, AL_REASON_NO_RULE);
	w.hook = AL_HOOK_CONNECT4;
	w.verdict = AL_VERDICT_AUDIT;
	expect_one_event(w);
	EXPECT_EQ(sb_->latch().violated_ns, 0u);
}

TEST_F(Verdict, InAuditModeThePacketsOfADeniedFlowPassQuietly)
{
	use(policy(R"("mode": "audit")"));
	std::string pkt = tcp_to("192.0.2.1", 80);
	EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 1);
	al_counters want = decided(AL_HOOK_EGRESS, AL_VERDICT_AUDIT, AL_REASON_NO_RULE);
	want.egress_packets = 1;
	want.egress_bytes = pkt.size();
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	EXPECT_TRUE(sb_->events().empty()) << "its connect or sendmsg was reported";
}

// -- finding the sandbox ---------------------------------------------------------------

TEST_F(Verdict, WithoutASandboxEntryEgressFailsClosed)
{
	sb_->remove_entry();
	unknown_used = true;
	EXPECT_EQ(run_skb(Programs::get().egress(), tcp_to("10.1.2.3", 443)), 0);
	EXPECT_EQ(counters_differ(sb_->unknown_counters(),
				  decided(AL_HOOK_EGRESS, AL_VERDICT_DENY, AL_REASON_NO_SANDBOX)),
		  "");
	EXPECT_EQ(counters_differ(sb_->counters(), {}), "");
	Want w = to("10.1.2.3", IPPROTO_TCP, 443);
	w.reason = AL_REASON_NO_SANDBOX;
	expect_one_event(w, true);
}

TEST_F(Verdict, WithoutASandboxEntryAConnectFailsClosed)
{
	sb_->remove_entry();
	unknown_used = true;
	EXPECT_EQ(run_sock_addr(connect4("10.1.2.3", 443)), 0);
	EXPECT_EQ(counters_differ(sb_->unknown_counters(),
				  decided(AL_HOOK_CONNECT4, AL_VERDICT_DENY, AL_REASON_NO_SANDBOX)),
		  "");
	EXPECT_EQ(counters_differ(sb_->counters(), {}), "");
	Want w = to("10.1.2.3", IPPROTO_TCP, 443);
	w.hook = AL_HOOK_CONNECT4;
	w.reason = AL_REASON_NO_SANDBOX;
	expect_one_event(w, true);
}

TEST_F(Verdict, OnlyTheLevelsWhereSandboxesSitAreTried)
{
	Programs::get().kernel().set_level_mask(1u << (Programs::get().cgroup().level() + 1));
	unknown_used = true;
	EXPECT_EQ(run_skb(Programs::get().egress(), tcp_to("10.1.2.3", 443)), 0);
	EXPECT_EQ(counters_differ(sb_->unknown_counters(),
				  decided(AL_HOOK_EGRESS, AL_VERDICT_DENY, AL_REASON_NO_SANDBOX)),
		  "");
}

TEST_F(Verdict, AChildCgroupIsJudgedByItsSandbox)
{
	namespace cg = airlock::cgroup;
	std::string own = Programs::get().cgroup().path(), child = own + "/child";
	cg::create(child);
	airlock::write_control(child + "/cgroup.procs", std::to_string(getpid()));
	int ret = run_sock_addr(connect4("10.1.2.3", 22));
	airlock::write_control(own + "/cgroup.procs", std::to_string(getpid()));
	cg::remove(child);
	EXPECT_EQ(ret, 0);
	EXPECT_EQ(sb_->counters().reasons[AL_REASON_RULE_DENY], 1u);
	Want w = to("10.1.2.3", IPPROTO_TCP, 22);
	w.hook = AL_HOOK_CONNECT4;
	w.reason = AL_REASON_RULE_DENY;
	w.rule = 1;
	expect_one_event(w);
}

}  // namespace
}  // namespace bpft
