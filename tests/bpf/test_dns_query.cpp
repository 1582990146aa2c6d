// The query parser (al_dns_query, bpf/dns_query.bpf.h) through the production
// egress program: one test per verdict, each with the program's return
// value, every counter of the slot, and the event, exactly.
#include <netinet/in.h>

#include "bpf_test.h"

namespace bpft {
namespace {

// Rules 0 to 4; the dns block's other keys and the top level's mode or
// on_violation come from the test.
std::string policy(const std::string& dns_extra = "", const std::string& top = R"("on_violation": "deny")")
{
	return R"({"version": 1, "name": "bpf-dns", )" + top + R"(,
	  "rules": [
	    {"action": "allow", "domain": "allowed.test", "ports": [9000]},
	    {"action": "allow", "domain": "*.allowed.test", "ports": [9000]},
	    {"action": "deny", "domain": "*.blocked.allowed.test"},
	    {"action": "allow", "domain": "cdn.test", "ports": [443], "protocol": "tcp"},
	    {"action": "allow", "domain": "*.wild.test", "ports": [9000]}],
	  "dns": {"resolvers": ["10.77.0.53", "fd77::53"], "types": ["A", "AAAA", "CNAME"],
	          "max_name_length": 40, "max_label_length": 20, "tcp": true)" +
	       dns_extra + "}}";
}

// Allowed decisions are reported too (the runner's --log-allowed).
class DnsQuery : public SandboxTest {
protected:
	void SetUp() override { use(policy()); }
	void use(const std::string& p) { SandboxTest::use(p, AL_SB_LOG_ALLOWED); }

	static std::string udp(const std::string& msg) { return udp4(kSandbox4, kResolver4, kClientPort, 53, msg); }
	// One whole message in a TCP segment, its length in front.
	static std::string tcp(const std::string& msg)
	{
		return tcp4(kSandbox4, kResolver4, kClientPort, 53, Wire().u16(msg.size()).raw(msg));
	}

	// w, a query decision about the resolver of that family, over UDP
	// unless w says otherwise.
	static Want about_query(Want w, uint8_t family = AL_FAMILY_IPV4)
	{
		unsigned protocol = w.protocol ? w.protocol : static_cast<unsigned>(IPPROTO_UDP);
		Want dst = to(family == AL_FAMILY_IPV4 ? kResolver4 : kResolver6, protocol, 53);
		w.kind = AL_EVENT_DNS_QUERY;
		w.family = dst.family;
		w.protocol = dst.protocol;
		w.port = dst.port;
		w.addr = dst.addr;
		return w;
	}

	// The packet leaves as a query for the question in w (reason dns-allow).
	void allowed(const std::string& pkt, Want w, uint8_t family = AL_FAMILY_IPV4)
	{
		EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 1);
		al_counters want = egress_allowed(pkt.size());
		want.dns_queries_allowed = 1;
		EXPECT_EQ(counters_differ(sb_->counters(), want), "");
		w.verdict = AL_VERDICT_ALLOW;
		w.reason = AL_REASON_DNS_ALLOW;
		expect_one_event(about_query(w, family));
	}

	// The packet is dropped as a query for reason; w: its question as far
	// as the parser read it; base: the counters before.
	void denied(const std::string& pkt, uint8_t reason, Want w, const al_counters& base = {})
	{
		EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 0);
		al_counters want = sum(base, egress_denied(reason, pkt.size()));
		want.dns_queries_denied = 1;
		EXPECT_EQ(counters_differ(sb_->counters(), want), "");
		w.reason = reason;
		expect_one_event(about_query(w));
	}
};

// -- let out -------------------------------------------------------------

TEST_F(DnsQuery, AnExactNameLeavesAndIsRememberedForItsAnswer)
{
	allowed(udp(query("allowed.test")), {.rule = 0, .qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
	auto p = sb_->pending();
	ASSERT_EQ(p.size(), 1u);
	const auto& [k, v] = p[0];
	EXPECT_EQ(k.family, AL_FAMILY_IPV4);
	EXPECT_EQ(k.port, kClientPort);
	EXPECT_EQ(k.id, kQid);
	EXPECT_EQ(std::string(reinterpret_cast<const char*>(k.resolver), 4), addr4(kResolver4));
	EXPECT_EQ(v.qtype, kTypeA);
	EXPECT_EQ(v.name.policy_id, sb_->policy_id());
	// \4test\7allowed, then the end mark.
	EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.name.name), 14), std::string("\4test\7allowed\xff", 14));
}

TEST_F(DnsQuery, ANameBelowAWildcardLeavesUnderTheWildcardsRule)
{
	allowed(udp(query("a.b.allowed.test", kTypeAaaa)),
		{.rule = 1, .qname = "a.b.allowed.test", .qtype = kTypeAaaa, .qid = kQid});
}

TEST_F(DnsQuery, MixedCaseIsMatchedAndReportedInLowerCase)
{
	allowed(udp(query("AlLoWeD.TeSt")), {.rule = 0, .qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, IPv6ToAListedResolverLeaves)
{
	allowed(udp6(kSandbox6, kResolver6, kClientPort, 53, query("allowed.test")),
		{.rule = 0, .qname = "allowed.test", .qtype = kTypeA, .qid = kQid}, AL_FAMILY_IPV6);
	ASSERT_EQ(sb_->pending().size(), 1u);
	EXPECT_EQ(sb_->pending()[0].first.family, AL_FAMILY_IPV6);
}

TEST_F(DnsQuery, OfTheHeaderFlagsRdAdAndCdMayBeSet)
{
	std::string msg = dns_header(kQid, 0x0130).name("allowed.test").u16(kTypeA).u16(1);
	allowed(udp(msg), {.rule = 0, .qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, AnOptRecordWithAnEightByteCookieLeaves)
{
	std::string msg = dns_header(kQid, 0x0120, 1, 0, 0, 1)
				  .name("allowed.test")
				  .u16(kTypeA)
				  .u16(1)
				  .raw(opt_record(edns_option(10, std::string(8, 'c')), 1232, 0x8000));
	allowed(udp(msg), {.rule = 0, .qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, OverTcpOneWholeMessageLeavesAndIsNotRemembered)
{
	allowed(tcp(query("allowed.test")),
		{.rule = 0, .protocol = IPPROTO_TCP, .qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
	EXPECT_TRUE(sb_->pending().empty()) << "answers over TCP are not learned";
}

TEST_F(DnsQuery, ATcpSegmentWithoutDataIsNoQuery)
{
	std::string syn = tcp4(kSandbox4, kResolver4, kClientPort, 53, "", 0x02);
	EXPECT_EQ(run_skb(Programs::get().egress(), syn), 1);
	EXPECT_EQ(counters_differ(sb_->counters(), egress_allowed(syn.size())), "");
	EXPECT_TRUE(sb_->events().empty());
}

TEST_F(DnsQuery, ANameAtBothLengthLimitsLeaves)
{
	std::string name = std::string(20, 'a') + ".bbbbbb.allowed.test";  // label 20, name 40
	allowed(udp(query(name)), {.rule = 1, .qname = name, .qtype = kTypeA, .qid = kQid});
}

// -- port 53 is the DNS policy's ---------------------------------------------

TEST_F(DnsQuery, Port53OfAnAddressThatIsNoResolverIsDnsResolver)
{
	std::string pkt = udp4(kSandbox4, "10.77.0.2", kClientPort, 53, query("allowed.test"));
	EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 0);
	EXPECT_EQ(counters_differ(sb_->counters(), egress_denied(AL_REASON_DNS_RESOLVER, pkt.size())), "");
	expect_one_event(to("10.77.0.2", IPPROTO_UDP, 53, AL_REASON_DNS_RESOLVER));
}

TEST_F(DnsQuery, TcpWithoutDnsTcpIsDnsTcp)
{
	use(R"({"version": 1, "name": "no-tcp", "rules": [{"action": "allow", "domain": "allowed.test"}],
	        "dns": {"resolvers": ["10.77.0.53"]}})");
	std::string syn = tcp4(kSandbox4, kResolver4, kClientPort, 53, "", 0x02);
	EXPECT_EQ(run_skb(Programs::get().egress(), syn), 0);
	EXPECT_EQ(counters_differ(sb_->counters(), egress_denied(AL_REASON_DNS_TCP, syn.size())), "");
	expect_one_event(to(kResolver4, IPPROTO_TCP, 53, AL_REASON_DNS_TCP));
}

// -- malformed ----------------------------------------------------------------

TEST_F(DnsQuery, AHeaderCutShortIsMalformed)
{
	denied(udp(std::string("\x12\x34\x01\x00", 4)), AL_REASON_DNS_MALFORMED, {});
}

TEST_F(DnsQuery, AnEmptyDatagramIsMalformed)
{
	denied(udp(""), AL_REASON_DNS_MALFORMED, {});
}

TEST_F(DnsQuery, AQueryOver512BytesIsMalformed)
{
	std::string msg = query("allowed.test");
	msg.resize(513, '\0');
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {});
}

// A header that alone condemns the query: flags and section counts.
struct BadHeader {
	const char* what;
	unsigned flags, qd, an, ns;
};

void PrintTo(const BadHeader& h, std::ostream* os)
{
	*os << h.what;
}

class DnsQueryHeader : public DnsQuery, public ::testing::WithParamInterface<BadHeader> {};

TEST_P(DnsQueryHeader, IsMalformed)
{
	const BadHeader& h = GetParam();
	std::string msg = dns_header(kQid, h.flags, h.qd, h.an, h.ns).name("allowed.test").u16(kTypeA).u16(1);
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {.qid = kQid});
}

INSTANTIATE_TEST_SUITE_P(Bad, DnsQueryHeader,
			 ::testing::Values(BadHeader{"QrSet", 0x8100, 1, 0, 0},
					   BadHeader{"AnotherOpcode", 0x0900, 1, 0, 0},
					   BadHeader{"AaSet", 0x0500, 1, 0, 0}, BadHeader{"TcSet", 0x0300, 1, 0, 0},
					   BadHeader{"RaSet", 0x0180, 1, 0, 0}, BadHeader{"ZSet", 0x0140, 1, 0, 0},
					   BadHeader{"AnRcode", 0x0101, 1, 0, 0}, BadHeader{"NoQuestion", kRd, 0, 0, 0},
					   BadHeader{"AnAnswerCount", kRd, 1, 1, 0},
					   BadHeader{"AnAuthorityCount", kRd, 1, 0, 1}),
			 [](const auto& info) { return std::string(info.param.what); });

TEST_F(DnsQuery, TwoQuestionsAreMalformed)
{
	std::string msg = dns_header(kQid, kRd, 2)
				  .name("allowed.test")
				  .u16(kTypeA)
				  .u16(1)
				  .name("allowed.test")
				  .u16(kTypeA)
				  .u16(1);
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {.qid = kQid});
}

TEST_F(DnsQuery, ACompressionPointerInTheQuestionIsMalformed)
{
	std::string msg = dns_header(kQid).u8(7).raw("allowed").ptr(12).u16(kTypeA).u16(1);
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {.qid = kQid});
}

TEST_F(DnsQuery, APointerIsNeverReadAsALabel)
{
	// 0xc0 and 192 bytes: a pointer, not a 192-byte label (that would be dns-length).
	std::string msg = dns_header(kQid).u8(0xc0).raw(std::string(192, 'a')).u8(0).u16(kTypeA).u16(1);
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {.qid = kQid});
}

TEST_F(DnsQuery, AnObsoleteLabelTypeIsMalformed)
{
	std::string msg = dns_header(kQid).u8(0x41).raw(std::string(1, 'a')).u8(0).u16(kTypeA).u16(1);
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {.qid = kQid});
}

TEST_F(DnsQuery, ALabelPastTheEndIsMalformed)
{
	std::string msg = dns_header(kQid).u8(63).raw("allowed");
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {.qid = kQid});
}

TEST_F(DnsQuery, ALabelPastTheEndIsMalformedWhereTheNameWouldBeTooLong)
{
	// 4 labels of 62 bytes (252 bytes), then one of 40 that the message cuts.
	Wire msg = dns_header(kQid);
	for (int i = 0; i < 4; i++)
		msg.u8(62).raw(std::string(62, 'a'));
	msg.u8(40).raw("short");
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {.qid = kQid});
}

TEST_F(DnsQuery, AQuestionCutAfterItsNameIsMalformedAndNamed)
{
	std::string msg = dns_header(kQid).name("allowed.test").u16(kTypeA);
	denied(udp(msg), AL_REASON_DNS_MALFORMED, {.qname = "allowed.test", .qid = kQid});
}

TEST_F(DnsQuery, BytesAfterTheQuestionAreMalformed)
{
	denied(udp(query("allowed.test") + "trailing"), AL_REASON_DNS_MALFORMED,
	       {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, OverTcpALengthThatIsNotTheSegmentsIsMalformed)
{
	// Two messages in one segment: the length names the first only.
	std::string two = Wire().u16(query("allowed.test").size()).raw(query("allowed.test")).u16(5).raw("hello");
	denied(tcp4(kSandbox4, kResolver4, kClientPort, 53, two), AL_REASON_DNS_MALFORMED, {.protocol = IPPROTO_TCP});
}

TEST_F(DnsQuery, OverTcpASegmentCutInItsHeaderIsMalformed)
{
	// The ports, and eight bytes of the rest of a TCP header.
	std::string cut = ip4(kSandbox4, kResolver4, IPPROTO_TCP, "", Wire().u16(kClientPort).u16(53).u32(1).u32(0));
	denied(cut, AL_REASON_DNS_MALFORMED, {.protocol = IPPROTO_TCP});
}

TEST_F(DnsQuery, OverTcpOneByteOfLengthIsMalformed)
{
	denied(tcp4(kSandbox4, kResolver4, kClientPort, 53, std::string(1, '\0')), AL_REASON_DNS_MALFORMED,
	       {.protocol = IPPROTO_TCP});
}

// -- lengths ------------------------------------------------------------------

TEST_F(DnsQuery, ALabelOverMaxLabelLengthIsDnsLength)
{
	std::string name = std::string(21, 'a') + ".allowed.test";
	denied(udp(query(name)), AL_REASON_DNS_LENGTH, {.qname = name, .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, ANameOverMaxNameLengthIsDnsLength)
{
	std::string name = std::string(20, 'a') + ".bbbbbbb.allowed.test";  // 41
	denied(udp(query(name)), AL_REASON_DNS_LENGTH, {.qname = name, .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, ANameLongerThanAnyKeyIsDnsLengthUnread)
{
	// 254 bytes of labels: more than a name key holds, found while walking.
	std::string name;
	for (int i = 0; i < 4; i++)
		name += std::string(62, 'a') + ".";
	name += "bb";
	denied(udp(query(name)), AL_REASON_DNS_LENGTH, {.qid = kQid});
}

// -- types --------------------------------------------------------------------

TEST_F(DnsQuery, AnUnlistedTypeIsDnsType)
{
	denied(udp(query("allowed.test", kTypeTxt)), AL_REASON_DNS_TYPE,
	       {.qname = "allowed.test", .qtype = kTypeTxt, .qid = kQid});
}

TEST_F(DnsQuery, AClassOtherThanInIsDnsType)
{
	std::string msg = dns_header(kQid).name("allowed.test").u16(kTypeA).u16(3);
	denied(udp(msg), AL_REASON_DNS_TYPE, {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

// -- names --------------------------------------------------------------------

TEST_F(DnsQuery, ANameNoRuleCoversIsDnsName)
{
	denied(udp(query("denied.test")), AL_REASON_DNS_NAME, {.qname = "denied.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, ADenyWildcardBelowAnAllowWildcardIsDnsNameUnderTheDenyRule)
{
	denied(udp(query("x.blocked.allowed.test")), AL_REASON_DNS_NAME,
	       {.rule = 2, .qname = "x.blocked.allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, AnExactRuleDoesNotCoverTheNamesBelowIt)
{
	denied(udp(query("x.cdn.test")), AL_REASON_DNS_NAME, {.qname = "x.cdn.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, AWildcardDoesNotCoverItsOwnName)
{
	denied(udp(query("wild.test")), AL_REASON_DNS_NAME, {.qname = "wild.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, LabelsCompareWhole)
{
	denied(udp(query("badallowed.test")), AL_REASON_DNS_NAME,
	       {.qname = "badallowed.test", .qtype = kTypeA, .qid = kQid});
}

// -- the budget and the tables ----------------------------------------------------

TEST_F(DnsQuery, OverTheBudgetIsDnsRate)
{
	use(policy(R"(, "queries_per_second": 1, "query_burst": 1)"));
	std::string first = udp(query("allowed.test", kTypeA, 1));
	ASSERT_EQ(run_skb(Programs::get().egress(), first), 1);
	sb_->events();
	al_counters base = egress_allowed(first.size());
	base.dns_queries_allowed = 1;
	denied(udp(query("allowed.test", kTypeA, 2)), AL_REASON_DNS_RATE,
	       {.rule = 0, .qname = "allowed.test", .qtype = kTypeA, .qid = 2}, base);
}

TEST_F(DnsQuery, NoPendingTableIsDnsTable)
{
	sb_->drop_pending_table();
	denied(udp(query("allowed.test")), AL_REASON_DNS_TABLE,
	       {.rule = 0, .qname = "allowed.test", .qtype = kTypeA, .qid = kQid});
}

TEST_F(DnsQuery, NoFreeScratchIsDnsTableUnread)
{
	std::string pkt = udp(query("allowed.test"));
	Programs::get().hold_scratch(true);
	int ret = run_skb(Programs::get().egress(), pkt);
	Programs::get().hold_scratch(false);
	EXPECT_EQ(ret, 0);
	EXPECT_EQ(counters_differ(sb_->counters(), egress_denied(AL_REASON_DNS_TABLE, pkt.size())), "");
	expect_one_event(to(kResolver4, IPPROTO_UDP, 53, AL_REASON_DNS_TABLE));
}

// -- EDNS ---------------------------------------------------------------------------

std::string with_additional(const std::string& additional, unsigned ar = 1)
{
	return dns_header(kQid, kRd, 1, 0, 0, ar).name("allowed.test").u16(kTypeA).u16(1).raw(additional);
}

const Want kEdnsDenied = {.qname = "allowed.test", .qtype = kTypeA, .qid = kQid};

TEST_F(DnsQuery, TwoAdditionalRecordsAreDnsEdns)
{
	denied(udp(with_additional(opt_record("") + opt_record(""), 2)), AL_REASON_DNS_EDNS, kEdnsDenied);
}

TEST_F(DnsQuery, AnUnlistedOptionIsDnsEdns)
{
	denied(udp(with_additional(opt_record(edns_option(65001, "EXFILTRATE")))), AL_REASON_DNS_EDNS, kEdnsDenied);
}

TEST_F(DnsQuery, ACookieOverItsLengthIsDnsEdns)
{
	denied(udp(with_additional(opt_record(edns_option(10, std::string(9, 'c'))))), AL_REASON_DNS_EDNS, kEdnsDenied);
}

TEST_F(DnsQuery, AnUnlistedUdpSizeIsDnsEdns)
{
	denied(udp(with_additional(opt_record("", 1400))), AL_REASON_DNS_EDNS, kEdnsDenied);
}

TEST_F(DnsQuery, AFlagOtherThanDoIsDnsEdns)
{
	denied(udp(with_additional(opt_record("", 1232, 0x4000))), AL_REASON_DNS_EDNS, kEdnsDenied);
}

TEST_F(DnsQuery, AnOptRecordWhenEdnsIsOffIsDnsEdns)
{
	use(policy(R"(, "edns": false)"));
	denied(udp(with_additional(opt_record(""))), AL_REASON_DNS_EDNS, kEdnsDenied);
}

TEST_F(DnsQuery, PaddingThatIsNotZeroIsDnsEdns)
{
	use(policy(R"(, "edns": {"options": {"PADDING": 16}})"));
	denied(udp(with_additional(opt_record(edns_option(12, std::string(7, '\0') + "x")))), AL_REASON_DNS_EDNS,
	       kEdnsDenied);
}

// -- what a sandbox's mode and on_violation make of a denial ------------------------

TEST_F(DnsQuery, InAuditModeADeniedQueryLeavesAndIsRemembered)
{
	use(policy("", R"("mode": "audit")"));
	std::string pkt = udp(query("denied.test"));
	EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 1);
	al_counters want = decided(AL_HOOK_EGRESS, AL_VERDICT_AUDIT, AL_REASON_DNS_NAME);
	want.egress_packets = 1;
	want.egress_bytes = pkt.size();
	want.dns_queries_denied = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	expect_one_event(about_query({.verdict = AL_VERDICT_AUDIT,
				      .reason = AL_REASON_DNS_NAME,
				      .qname = "denied.test",
				      .qtype = kTypeA,
				      .qid = kQid}));
	EXPECT_EQ(sb_->pending().size(), 1u);
	EXPECT_EQ(sb_->latch().violated_ns, 0u) << "audit mode never latches";
}

TEST_F(DnsQuery, UnderFreezeADeniedQueryLatchesAndTheNextIsQuarantined)
{
	use(policy("", R"("on_violation": "freeze")"));
	std::string bad = udp(query("denied.test")), good = udp(query("allowed.test"));
	EXPECT_EQ(run_skb(Programs::get().egress(), bad), 0);
	EXPECT_EQ(run_skb(Programs::get().egress(), good), 0);
	al_latch l = sb_->latch();
	EXPECT_NE(l.violated_ns, 0u);
	EXPECT_EQ(l.cgroup_id, sb_->cgroup_id());
	al_counters want = egress_denied(AL_REASON_DNS_NAME, bad.size() + good.size(), 1);
	want.decisions[AL_HOOK_EGRESS][AL_VERDICT_DENY] = 2;
	want.reasons[AL_REASON_QUARANTINED] = 1;
	want.denied_packets = 2;
	want.dns_queries_denied = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	expect_one_event(about_query(
		{.reason = AL_REASON_DNS_NAME, .latched = 1, .qname = "denied.test", .qtype = kTypeA, .qid = kQid}));
}

}  // namespace
}  // namespace bpft
