// The answer parser (al_dns_answer, bpf/dns_answer.bpf.h) through the production
// ingress program, after the query went out through egress: what is
// learned (the learned table, exactly), what is dropped, every counter of
// the slot, and each event.
#include <bpf/bpf.h>
#include <netinet/in.h>

#include <cstring>

#include "bpf_test.h"

namespace bpft {
namespace {

constexpr uint64_t kSecond = 1000000000ull;

std::string policy(const std::string& top = R"("on_violation": "deny")")
{
	return R"({"version": 1, "name": "bpf-answers", )" + top + R"(,
	  "rules": [
	    {"action": "allow", "domain": "allowed.test", "ports": [9000]},
	    {"action": "allow", "domain": "*.allowed.test", "ports": [9000]},
	    {"action": "allow", "domain": "other.test", "ports": [9000]}],
	  "dns": {"resolvers": ["10.77.0.53", "fd77::53"], "types": ["A", "AAAA", "CNAME"],
	          "min_ttl": 30, "max_ttl": 3600}})";
}

// An answer: header (QR, RD, RA unless flags say otherwise), the question,
// the records.
std::string answer(const std::string& name, unsigned type, const std::vector<std::string>& records, unsigned id = kQid,
		   unsigned flags = 0x8180)
{
	Wire w = dns_header(id, flags, 1, records.size());
	w.name(name).u16(type).u16(1);
	for (const auto& r : records)
		w.raw(r);
	return w;
}

// The question's name, written as a pointer to it.
std::string at_question()
{
	return Wire().ptr(12);
}

std::string a(const std::string& dotted)
{
	return addr4(dotted);
}

// Learned and off-chain addresses are reported too (--log-allowed).
class DnsAnswer : public SandboxTest {
protected:
	void SetUp() override { use(policy()); }
	void use(const std::string& p)
	{
		SandboxTest::use(p, AL_SB_LOG_ALLOWED);
		base_ = {};
	}

	// The query goes out (allowed); its counters are what every later
	// expectation starts from, its event is read.
	void ask(const std::string& name, unsigned type = kTypeA, unsigned id = kQid)
	{
		std::string pkt = udp4(kSandbox4, kResolver4, kClientPort, 53, query(name, type, id));
		ASSERT_EQ(run_skb(Programs::get().egress(), pkt), 1);
		base_ = egress_allowed(pkt.size());
		base_.dns_queries_allowed = 1;
		ASSERT_EQ(counters_differ(sb_->counters(), base_), "");
		ASSERT_EQ(sb_->events().size(), 1u);
	}

	static int deliver(const std::string& msg, const std::string& from = kResolver4, unsigned sport = 53,
			   unsigned dport = kClientPort)
	{
		return run_skb(Programs::get().ingress(), udp4(from, kSandbox4, sport, dport, msg));
	}

	// The answer is dropped for reason: counted, one event with the question
	// as far as it was read, nothing learned.
	void dropped(const std::string& msg, uint8_t reason, Want w, const std::string& from = kResolver4,
		     unsigned dport = kClientPort)
	{
		size_t learned = sb_->learned().size();
		EXPECT_EQ(deliver(msg, from, 53, dport), 0);
		al_counters want = base_;
		want.dns_answers_dropped++;
		EXPECT_EQ(counters_differ(sb_->counters(), want), "");
		w.kind = AL_EVENT_DNS_ANSWER;
		w.hook = AL_HOOK_INGRESS;
		w.reason = reason;
		w.family = AL_FAMILY_IPV4;
		w.protocol = IPPROTO_UDP;
		w.port = 53;
		w.addr = addr4(from);
		expect_one_event(w);
		EXPECT_EQ(sb_->learned().size(), learned) << "a dropped answer teaches nothing";
	}

	// What an address of an answer to the question became: an event each.
	static Want address(const std::string& addr, uint8_t reason, uint8_t learned, uint32_t ttl,
			    const std::string& qname = "allowed.test", uint16_t rule = 0, unsigned qtype = kTypeA)
	{
		return {.kind = AL_EVENT_DNS_ANSWER,
			.hook = AL_HOOK_INGRESS,
			.verdict = AL_VERDICT_ALLOW,
			.reason = reason,
			.rule = rule,
			.family = static_cast<uint8_t>(addr.size() == 4 ? AL_FAMILY_IPV4 : AL_FAMILY_IPV6),
			.addr = addr,
			.qname = qname,
			.qtype = static_cast<uint16_t>(qtype),
			.qid = kQid,
			.learned = learned,
			.ttl = ttl};
	}

	// The learned table holds exactly these addresses, for qname, each
	// valid for its clamped TTL from the moment it was learned.
	void expect_learned(const std::vector<std::pair<std::string, uint32_t>>& want,
			    const std::string& qname = "allowed.test")
	{
		auto got = sb_->learned();
		ASSERT_EQ(got.size(), want.size());
		for (const auto& [addr, ttl] : want) {
			bool found = false;
			for (const auto& l : got) {
				if (std::string(reinterpret_cast<const char*>(l.key.addr), addr.size()) != addr)
					continue;
				found = true;
				EXPECT_EQ(l.key.family, addr.size() == 4 ? AL_FAMILY_IPV4 : AL_FAMILY_IPV6);
				EXPECT_EQ(l.value.expires_ns - l.value.learned_ns, ttl * kSecond);
				al_dns_event e{};
				std::memcpy(e.name, l.value.name.name, sizeof(l.value.name.name));
				e.name_len = (l.value.name.prefixlen - AL_NAME_KEY_FIXED_BITS) / 8;
				Event as_event{.base = {}, .dns = e};
				EXPECT_EQ(as_event.qname(), qname);
			}
			EXPECT_TRUE(found) << "an address is not learned";
		}
	}

	al_counters base_{};
};

// -- learned -------------------------------------------------------------------

TEST_F(DnsAnswer, TheAddressesOfAnAnswerAreLearnedUnderTheQuestionsName)
{
	ask("allowed.test");
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA,
				 {rr(at_question(), kTypeA, 300, a("192.0.2.1")),
				  rr(at_question(), kTypeA, 300, a("192.0.2.2"))})),
		  1);
	al_counters want = base_;
	want.dns_answers_learned = 2;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	expect_events({address(a("192.0.2.1"), AL_REASON_LEARNED, 1, 300),
		       address(a("192.0.2.2"), AL_REASON_LEARNED, 1, 300)});
	expect_learned({{a("192.0.2.1"), 300}, {a("192.0.2.2"), 300}});
	EXPECT_TRUE(sb_->pending().empty()) << "the query is used up";
}

TEST_F(DnsAnswer, OverIPv6AnAaaaAnswerIsLearned)
{
	std::string q = udp6(kSandbox6, kResolver6, kClientPort, 53, query("www.allowed.test", kTypeAaaa));
	ASSERT_EQ(run_skb(Programs::get().egress(), q), 1);
	sb_->events();
	std::string ans = answer("www.allowed.test", kTypeAaaa,
				 {rr(at_question(), kTypeAaaa, 60, addr6("2001:db8::7"))});
	EXPECT_EQ(run_skb(Programs::get().ingress(), udp6(kResolver6, kSandbox6, 53, kClientPort, ans)), 1);
	al_counters want = egress_allowed(q.size());
	want.dns_queries_allowed = 1;
	want.dns_answers_learned = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	expect_events({address(addr6("2001:db8::7"), AL_REASON_LEARNED, 1, 60, "www.allowed.test", 1, kTypeAaaa)});
	expect_learned({{addr6("2001:db8::7"), 60}}, "www.allowed.test");
}

TEST_F(DnsAnswer, ATtlUnderMinTtlIsRaisedToIt)
{
	ask("allowed.test");
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {rr(at_question(), kTypeA, 5, a("192.0.2.1"))})), 1);
	expect_events({address(a("192.0.2.1"), AL_REASON_LEARNED, 1, 30)});
	expect_learned({{a("192.0.2.1"), 30}});
}

TEST_F(DnsAnswer, ATtlOverMaxTtlIsCutToIt)
{
	ask("allowed.test");
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {rr(at_question(), kTypeA, 0x7fffffff, a("192.0.2.1"))})), 1);
	expect_events({address(a("192.0.2.1"), AL_REASON_LEARNED, 1, 3600)});
	expect_learned({{a("192.0.2.1"), 3600}});
}

TEST_F(DnsAnswer, AtMostSixteenAddressesOfOneAnswerAreTaken)
{
	ask("allowed.test");
	std::vector<std::string> records;
	for (int i = 1; i <= 17; i++)
		records.push_back(rr(at_question(), kTypeA, 300, a("192.0.2." + std::to_string(i))));
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, records)), 1);
	al_counters want = base_;
	want.dns_answers_learned = 16;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	EXPECT_EQ(sb_->events().size(), 16u);
	std::vector<std::pair<std::string, uint32_t>> first16;
	for (int i = 1; i <= 16; i++)
		first16.emplace_back(a("192.0.2." + std::to_string(i)), 300);
	expect_learned(first16);
}

TEST_F(DnsAnswer, AFullTableRefusesNewAddressesAndEvictsNothing)
{
	ask("allowed.test");
	airlock::Fd table = sb_->learned_table();
	for (uint32_t i = 0; i < AL_LEARNED_PER_SANDBOX; i++) {
		al_learned_key k{};
		k.family = AL_FAMILY_IPV4;
		k.addr[0] = 198;
		k.addr[1] = 51;
		k.addr[2] = static_cast<uint8_t>(i >> 8);
		k.addr[3] = static_cast<uint8_t>(i);
		al_learned v{};
		ASSERT_EQ(bpf_map_update_elem(table.get(), &k, &v, BPF_NOEXIST), 0) << i;
	}
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {rr(at_question(), kTypeA, 300, a("192.0.2.1"))})), 1);
	al_counters want = base_;
	want.dns_learn_full = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	expect_events({address(a("192.0.2.1"), AL_REASON_DNS_TABLE, 0, 300)});
	EXPECT_EQ(sb_->learned().size(), AL_LEARNED_PER_SANDBOX);
}

// -- only along the CNAME chain ---------------------------------------------------

TEST_F(DnsAnswer, ARecordOwnedByAnotherNameIsOffTheChain)
{
	ask("allowed.test");
	Wire evil;
	evil.name("other.test");
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {rr(evil, kTypeA, 300, a("192.0.2.66"))})), 1);
	al_counters want = base_;
	want.dns_records_off_chain = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	expect_events({address(a("192.0.2.66"), AL_REASON_DNS_OFF_CHAIN, 0, 300)});
	EXPECT_TRUE(sb_->learned().empty());
}

TEST_F(DnsAnswer, ACnameChainTeachesTheAddressesAtItsEnd)
{
	ask("allowed.test");
	// question at 12 (14 bytes), its type and class; the first record at 30.
	std::string cname = rr(at_question(), kTypeCname, 300, Wire().name("edge.cdn.example"));
	std::string target = Wire().ptr(30 + 12);  // the CNAME's rdata
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {cname, rr(target, kTypeA, 120, a("192.0.2.9"))})), 1);
	al_counters want = base_;
	want.dns_answers_learned = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	expect_events({address(a("192.0.2.9"), AL_REASON_LEARNED, 1, 120)});
	expect_learned({{a("192.0.2.9"), 120}});
}

TEST_F(DnsAnswer, AnAddressBeforeTheCnameThatLeadsToItIsOffTheChain)
{
	ask("allowed.test");
	// The A record of edge.cdn.example comes first: the chain is not there yet.
	Wire edge;
	edge.name("edge.cdn.example");
	std::string a_first = rr(edge, kTypeA, 120, a("192.0.2.9"));
	std::string cname = rr(at_question(), kTypeCname, 300, Wire().ptr(30));
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {a_first, cname})), 1);
	al_counters want = base_;
	want.dns_records_off_chain = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	expect_events({address(a("192.0.2.9"), AL_REASON_DNS_OFF_CHAIN, 0, 120)});
}

TEST_F(DnsAnswer, AnAddressOfTheQuestionAfterItsCnameIsOffTheChain)
{
	ask("allowed.test");
	std::string cname = rr(at_question(), kTypeCname, 300, Wire().name("edge.cdn.example"));
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {cname, rr(at_question(), kTypeA, 300, a("192.0.2.5"))})), 1);
	expect_events({address(a("192.0.2.5"), AL_REASON_DNS_OFF_CHAIN, 0, 300)});
	EXPECT_TRUE(sb_->learned().empty());
}

TEST_F(DnsAnswer, ACnameOwnedOffTheChainLeadsNowhere)
{
	ask("allowed.test");
	Wire other;
	other.name("other.test");  // at 30, 12 bytes: its rdata at 52
	std::string cname = rr(other, kTypeCname, 300, Wire().name("edge.cdn.example"));
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {cname, rr(Wire().ptr(52), kTypeA, 300, a("192.0.2.9"))})), 1);
	expect_events({address(a("192.0.2.9"), AL_REASON_DNS_OFF_CHAIN, 0, 300)});
	EXPECT_TRUE(sb_->learned().empty());
}

TEST_F(DnsAnswer, AChainWrittenWithPointersAndMixedCaseIsFollowed)
{
	ask("allowed.test");
	// CNAME target "EDGE." + pointer to the question's "test" label... of
	// another name: "Edge.AlLoWeD.test" written as a label and a pointer.
	std::string cname = rr(at_question(), kTypeCname, 300, Wire().u8(4).raw("Edge").ptr(12));
	// The A record's owner: "EDGE" and a pointer to the question, in other case.
	std::string owner = Wire().u8(4).raw("eDGe").ptr(12);
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {cname, rr(owner, kTypeA, 300, a("192.0.2.10"))})), 1);
	expect_events({address(a("192.0.2.10"), AL_REASON_LEARNED, 1, 300)});
	expect_learned({{a("192.0.2.10"), 300}});
}

// -- names that cannot be walked: the whole answer is dropped ------------------------

TEST_F(DnsAnswer, AnOwnerThatPointsAtItselfIsMalformed)
{
	ask("allowed.test");
	dropped(answer("allowed.test", kTypeA, {rr(Wire().ptr(30), kTypeA, 300, a("192.0.2.1"))}),
		AL_REASON_DNS_MALFORMED, {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsAnswer, AForwardPointerIsMalformed)
{
	ask("allowed.test");
	dropped(answer("allowed.test", kTypeA, {rr(Wire().ptr(44), kTypeA, 300, a("192.0.2.1"))}),
		AL_REASON_DNS_MALFORMED, {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsAnswer, APointerLoopInACnameTargetIsMalformed)
{
	ask("allowed.test");
	// The CNAME's rdata (at 42) points at itself; the next owner is compared with it.
	std::string cname = rr(at_question(), kTypeCname, 300, Wire().ptr(42));
	dropped(answer("allowed.test", kTypeA, {cname, rr(at_question(), kTypeA, 300, a("192.0.2.1"))}),
		AL_REASON_DNS_MALFORMED, {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

// A record of another type whose rdata is `hops - 1` pointers, each to the
// one before (the first to the question), then an A record whose owner
// points at the last: comparing it with the question follows `hops`.
std::string pointer_chain_answer(int hops)
{
	Wire chain;
	unsigned prev = 12, at = 30 + 12;  // the first record's rdata
	for (int i = 0; i < hops - 1; i++) {
		chain.ptr(prev);
		prev = at;
		at += 2;
	}
	return answer("allowed.test", kTypeA,
		      {rr(at_question(), kTypeNull, 300, chain),
		       rr(Wire().ptr(prev), kTypeA, 300, addr4("192.0.2.1"))});
}

TEST_F(DnsAnswer, ThirtyTwoPointerHopsAreFollowed)
{
	ask("allowed.test");
	EXPECT_EQ(deliver(pointer_chain_answer(2 * AL_DNS_PTR_HOPS)), 1);
	expect_events({address(a("192.0.2.1"), AL_REASON_LEARNED, 1, 300)});
}

TEST_F(DnsAnswer, ThirtyThreePointerHopsAreMalformed)
{
	ask("allowed.test");
	dropped(pointer_chain_answer(2 * AL_DNS_PTR_HOPS + 1), AL_REASON_DNS_MALFORMED,
		{.qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsAnswer, ARecordLabelPastTheEndIsMalformed)
{
	ask("allowed.test");
	std::string msg = answer("allowed.test", kTypeA, {});
	msg[7] = 1;  // one answer record: an owner label that runs out
	msg += Wire().u8(40).raw("short");
	dropped(msg, AL_REASON_DNS_MALFORMED, {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsAnswer, AnARecordOfAnotherLengthIsMalformed)
{
	ask("allowed.test");
	dropped(answer("allowed.test", kTypeA, {rr(at_question(), kTypeA, 300, a("192.0.2.1") + "x")}),
		AL_REASON_DNS_MALFORMED, {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

// -- answers no query of the sandbox asked for ----------------------------------------

const std::string kOneAddress = answer("allowed.test", kTypeA, {rr(at_question(), kTypeA, 300, addr4("192.0.2.1"))});
const Want kQuestion = {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid};

TEST_F(DnsAnswer, AnAnswerNoQueryAskedForIsUnsolicited)
{
	dropped(kOneAddress, AL_REASON_DNS_UNSOLICITED, kQuestion);
}

TEST_F(DnsAnswer, AnotherIdIsUnsolicitedAndLeavesTheQueryPending)
{
	ask("allowed.test");
	std::string msg = answer("allowed.test", kTypeA, {rr(at_question(), kTypeA, 300, a("192.0.2.1"))}, kQid + 1);
	dropped(msg, AL_REASON_DNS_UNSOLICITED, {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid + 1});
	EXPECT_EQ(sb_->pending().size(), 1u);
}

TEST_F(DnsAnswer, AnotherPortIsUnsolicited)
{
	ask("allowed.test");
	dropped(kOneAddress, AL_REASON_DNS_UNSOLICITED, kQuestion, kResolver4, kClientPort + 1);
}

TEST_F(DnsAnswer, AnotherQuestionIsUnsolicited)
{
	ask("allowed.test");
	dropped(answer("other.test", kTypeA, {rr(at_question(), kTypeA, 300, a("192.0.2.1"))}),
		AL_REASON_DNS_UNSOLICITED, {.qname = "other.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsAnswer, AnotherTypeIsUnsolicited)
{
	ask("allowed.test", kTypeAaaa);
	dropped(kOneAddress, AL_REASON_DNS_UNSOLICITED, kQuestion);
}

TEST_F(DnsAnswer, AnAnswerFromAnAddressThatIsNoResolverIsUnsolicitedUnread)
{
	ask("allowed.test");
	dropped(kOneAddress, AL_REASON_DNS_UNSOLICITED, {}, "10.77.0.54");
}

TEST_F(DnsAnswer, AReplayedAnswerIsUnsolicited)
{
	ask("allowed.test");
	ASSERT_EQ(deliver(kOneAddress), 1);
	sb_->events();
	base_.dns_answers_learned = 1;
	dropped(kOneAddress, AL_REASON_DNS_UNSOLICITED, kQuestion);
}

TEST_F(DnsAnswer, AMessageWithoutQrIsUnsolicited)
{
	ask("allowed.test");
	dropped(answer("allowed.test", kTypeA, {}, kQid, 0x0100), AL_REASON_DNS_UNSOLICITED, {.qid = kQid});
}

TEST_F(DnsAnswer, AnAnswerCutInItsHeaderIsUnsolicitedUnread)
{
	ask("allowed.test");
	dropped(kOneAddress.substr(0, 8), AL_REASON_DNS_UNSOLICITED, {});
}

// -- what passes without teaching ------------------------------------------------------

TEST_F(DnsAnswer, ATruncatedAnswerTeachesNothingAndUsesTheQueryUp)
{
	ask("allowed.test");
	std::string tc = answer("allowed.test", kTypeA, {rr(at_question(), kTypeA, 300, a("192.0.2.1"))}, kQid, 0x8380);
	EXPECT_EQ(deliver(tc), 1);
	EXPECT_EQ(counters_differ(sb_->counters(), base_), "");
	EXPECT_TRUE(sb_->events().empty());
	EXPECT_TRUE(sb_->learned().empty());
	EXPECT_TRUE(sb_->pending().empty());
}

TEST_F(DnsAnswer, AnErrorAnswerTeachesNothing)
{
	ask("allowed.test");
	EXPECT_EQ(deliver(answer("allowed.test", kTypeA, {}, kQid, 0x8183)), 1);
	EXPECT_EQ(counters_differ(sb_->counters(), base_), "");
	EXPECT_TRUE(sb_->events().empty());
	EXPECT_TRUE(sb_->pending().empty());
}

TEST_F(DnsAnswer, PacketsFromOtherPortsPassUnread)
{
	EXPECT_EQ(deliver(kOneAddress, kResolver4, 80), 1);
	EXPECT_EQ(counters_differ(sb_->counters(), {}), "");
	EXPECT_TRUE(sb_->events().empty());
}

TEST_F(DnsAnswer, ALatchedSandboxDropsAnswersUnread)
{
	ask("allowed.test");
	sb_->set_latch({.violated_ns = 1, .cgroup_id = sb_->cgroup_id()});
	EXPECT_EQ(deliver(kOneAddress), 0);
	al_counters want = base_;
	want.dns_answers_dropped = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	EXPECT_TRUE(sb_->events().empty());
	EXPECT_TRUE(sb_->learned().empty());
}

TEST_F(DnsAnswer, InAuditModeAnUnsolicitedAnswerPassesAndIsCounted)
{
	use(policy(R"("mode": "audit")"));
	EXPECT_EQ(deliver(kOneAddress), 1);
	al_counters want{};
	want.dns_answers_dropped = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	ASSERT_EQ(sb_->events().size(), 1u);
}

TEST_F(DnsAnswer, InAuditModeAnAnswerToADeniedNameTeachesNothing)
{
	use(policy(R"("mode": "audit")"));
	std::string q = udp4(kSandbox4, kResolver4, kClientPort, 53, query("denied.test"));
	ASSERT_EQ(run_skb(Programs::get().egress(), q), 1);
	sb_->events();
	std::string msg = answer("denied.test", kTypeA, {rr(at_question(), kTypeA, 300, a("192.0.2.1"))});
	EXPECT_EQ(deliver(msg), 1);
	expect_events({address(a("192.0.2.1"), AL_REASON_NO_RULE, 0, 300, "denied.test", AL_RULE_NONE)});
	EXPECT_TRUE(sb_->learned().empty());
}

}  // namespace
}  // namespace bpft
