// The packet parser (bpf/parse.bpf.h) and every load from a packet: what
// the egress backstop refuses whatever the address; a packet too short for
// what its headers say is malformed at each load site, with no helper
// error counted; and a load that fails (the test object's seam, since no
// packet can make one fail) is counted at its site and reported as helper,
// never as malformed.
#include <netinet/in.h>

#include "bpf_test.h"

namespace bpft {
namespace {

constexpr const char* kPolicy = R"({"version": 1, "name": "bpf-parse", "on_violation": "deny",
  "rules": [{"action": "allow", "cidr": "10.0.0.0/8"}, {"action": "allow", "cidr": "fd00::/8"},
            {"action": "allow", "domain": "allowed.test"}],
  "dns": {"resolvers": ["10.77.0.53"], "tcp": true}})";

constexpr unsigned kHopByHop = 0, kRouting = 43, kFragment = 44;

class Parse : public SandboxTest {
protected:
	void SetUp() override { use(kPolicy); }
	void TearDown() override
	{
		Programs::get().fail_at(AL_ERR_SITE_MAX);
		SandboxTest::TearDown();
	}

	// Dropped at egress (by prog) for reason; w: the destination as far as
	// the parser got, dns: a query decision.
	void dropped(int prog, const std::string& pkt, uint8_t reason, Want w, bool dns = false)
	{
		EXPECT_EQ(run_skb(prog, pkt), 0);
		al_counters want = egress_denied(reason, pkt.size());
		if (dns)
			want.dns_queries_denied = 1;
		if (reason == AL_REASON_HELPER)
			want.helper_errors[site_] = 1;
		EXPECT_EQ(counters_differ(sb_->counters(), want), "");
		w.reason = reason;
		if (dns)
			w.kind = AL_EVENT_DNS_QUERY;
		expect_one_event(w);
	}

	// The load at site fails in the seam's egress program.
	void helper_fails(unsigned site, const std::string& pkt, Want w, bool dns = false)
	{
		site_ = site;
		Programs::get().fail_at(site);
		dropped(Programs::get().seam_egress(), pkt, AL_REASON_HELPER, w, dns);
	}

	unsigned site_ = AL_ERR_SITE_MAX;
};

const std::string kUdp = udp4(kSandbox4, "10.0.0.7", kClientPort, 9000, "payload");
const std::string kUdp6 = udp6(kSandbox6, "fd00::7", kClientPort, 9000, "payload");
const std::string kNops = std::string(4, '\x01');
const std::string kUdpHeader = Wire().u16(kClientPort).u16(9000).u16(8).u16(0);
// An IPv6 extension header of 8 bytes: next header, length 0, padding.
std::string ext(unsigned next)
{
	return Wire().u8(next).u8(0).raw(std::string(6, '\0'));
}

Want dst4(unsigned protocol, unsigned port)
{
	return to("10.0.0.7", protocol, port);
}

Want dst6(unsigned protocol, unsigned port)
{
	return to("fd00::7", protocol, port);
}

Want resolver(unsigned protocol)
{
	return to(kResolver4, protocol, 53);
}

// -- what the backstop refuses whatever the address ----------------------------

TEST_F(Parse, AnIPv4SourceRouteIsSourceRoute)
{
	std::string lsrr = Wire().u8(0x83).u8(7).u8(4).raw(addr4("10.0.0.9")).u8(0);
	dropped(Programs::get().egress(), ip4(kSandbox4, "10.0.0.7", IPPROTO_UDP, lsrr, kUdpHeader),
		AL_REASON_SOURCE_ROUTE, dst4(IPPROTO_UDP, 0));
}

TEST_F(Parse, AnIPv4OptionOfLengthUnderTwoIsMalformed)
{
	std::string bad = Wire().u8(0x44).u8(1).u16(0);
	dropped(Programs::get().egress(), ip4(kSandbox4, "10.0.0.7", IPPROTO_UDP, bad, kUdpHeader), AL_REASON_MALFORMED,
		dst4(IPPROTO_UDP, 0));
}

TEST_F(Parse, AnIPv4FragmentIsFragment)
{
	dropped(Programs::get().egress(), ip4(kSandbox4, "10.0.0.7", IPPROTO_UDP, "", kUdpHeader, 0x2000),
		AL_REASON_FRAGMENT, dst4(IPPROTO_UDP, 0));
}

TEST_F(Parse, AnIPv6RoutingHeaderIsRoutingHeader)
{
	dropped(Programs::get().egress(), ip6(kSandbox6, "fd00::7", kRouting, ext(IPPROTO_UDP), kUdpHeader),
		AL_REASON_ROUTING_HEADER, dst6(kRouting, 0));
}

TEST_F(Parse, AnIPv6FragmentHeaderIsFragment)
{
	dropped(Programs::get().egress(), ip6(kSandbox6, "fd00::7", kFragment, ext(IPPROTO_UDP), kUdpHeader),
		AL_REASON_FRAGMENT, dst6(kFragment, 0));
}

TEST_F(Parse, IPv6ExtensionHeadersAreWalkedToTheTransport)
{
	std::string pkt = ip6(kSandbox6, "fd00::7", kHopByHop, ext(60) + ext(IPPROTO_UDP), kUdpHeader);
	EXPECT_EQ(run_skb(Programs::get().egress(), pkt), 1);
	EXPECT_EQ(counters_differ(sb_->counters(), egress_allowed(pkt.size())), "");
}

TEST_F(Parse, MoreIPv6ExtensionHeadersThanTheWalkTakesAreMalformed)
{
	std::string chain;
	for (int i = 0; i < 8; i++)
		chain += ext(60);
	chain += ext(IPPROTO_UDP);
	dropped(Programs::get().egress(), ip6(kSandbox6, "fd00::7", 60, chain, kUdpHeader), AL_REASON_MALFORMED,
		dst6(60, 0));
}

TEST_F(Parse, APacketOfNoIpVersionIsMalformed)
{
	std::string v5 = kUdp;
	v5[0] = 0x55;
	dropped(Programs::get().egress(), v5, AL_REASON_MALFORMED, {});
}

// -- cut short at each load site: malformed, no helper error ------------------------
// (Not the fixed IP headers: BPF_PROG_TEST_RUN refuses a packet without one.)

TEST_F(Parse, AnIPv4OptionCutShortIsMalformed)
{
	// The header says 24 bytes; the packet ends after two option bytes.
	std::string pkt = ip4(kSandbox4, "10.0.0.7", IPPROTO_UDP, kNops, "").substr(0, 22);
	dropped(Programs::get().egress(), pkt, AL_REASON_MALFORMED, dst4(IPPROTO_UDP, 0));
}

TEST_F(Parse, AnIPv6ExtensionHeaderCutShortIsMalformed)
{
	std::string pkt = ip6(kSandbox6, "fd00::7", kHopByHop, "", "").substr(0, 40) + std::string(1, IPPROTO_UDP);
	dropped(Programs::get().egress(), pkt, AL_REASON_MALFORMED, dst6(0, 0));
}

TEST_F(Parse, PortsCutShortAreMalformed)
{
	dropped(Programs::get().egress(), ip4(kSandbox4, "10.0.0.7", IPPROTO_UDP, "", kUdpHeader.substr(0, 3)),
		AL_REASON_MALFORMED, dst4(IPPROTO_UDP, 0));
}

// -- a failed load at each site: helper, counted where it failed ---------------------

TEST_F(Parse, AFailedLoadOfTheIPv4HeaderIsAHelperError)
{
	helper_fails(AL_ERR_SITE_IPV4_HEADER, kUdp, {});
}

TEST_F(Parse, AFailedLoadOfAnIPv4OptionIsAHelperError)
{
	helper_fails(AL_ERR_SITE_IPV4_OPTION, ip4(kSandbox4, "10.0.0.7", IPPROTO_UDP, kNops, kUdpHeader),
		     dst4(IPPROTO_UDP, 0));
}

TEST_F(Parse, AFailedLoadOfTheIPv6HeaderIsAHelperError)
{
	helper_fails(AL_ERR_SITE_IPV6_HEADER, kUdp6, {});
}

TEST_F(Parse, AFailedLoadOfAnIPv6ExtensionHeaderIsAHelperError)
{
	helper_fails(AL_ERR_SITE_IPV6_EXT, ip6(kSandbox6, "fd00::7", kHopByHop, ext(IPPROTO_UDP), kUdpHeader),
		     dst6(0, 0));
}

TEST_F(Parse, AFailedLoadOfThePortsIsAHelperError)
{
	helper_fails(AL_ERR_SITE_L4_PORTS, kUdp, dst4(IPPROTO_UDP, 0));
}

TEST_F(Parse, AFailedLoadOfATcpDataOffsetToAResolverIsAHelperError)
{
	helper_fails(AL_ERR_SITE_DNS_TCP_HEADER,
		     tcp4(kSandbox4, kResolver4, kClientPort, 53,
			  Wire().u16(query("allowed.test").size()).raw(query("allowed.test"))),
		     resolver(IPPROTO_TCP), true);
}

TEST_F(Parse, AFailedLoadOfADnsLengthOverTcpIsAHelperError)
{
	helper_fails(AL_ERR_SITE_DNS_TCP_LENGTH,
		     tcp4(kSandbox4, kResolver4, kClientPort, 53,
			  Wire().u16(query("allowed.test").size()).raw(query("allowed.test"))),
		     resolver(IPPROTO_TCP), true);
}

TEST_F(Parse, AFailedCopyOfAQueryIsAHelperError)
{
	helper_fails(AL_ERR_SITE_DNS_QUERY, udp4(kSandbox4, kResolver4, kClientPort, 53, query("allowed.test")),
		     resolver(IPPROTO_UDP), true);
}

TEST_F(Parse, AFailedCopyOfAnAnswerDropsItAsAHelperError)
{
	Programs::get().fail_at(AL_ERR_SITE_DNS_ANSWER);
	std::string ans = dns_header(kQid, 0x8180).name("allowed.test").u16(kTypeA).u16(1);
	EXPECT_EQ(run_skb(Programs::get().seam_ingress(), udp4(kResolver4, kSandbox4, 53, kClientPort, ans)), 0);
	al_counters want{};
	want.dns_answers_dropped = 1;
	want.helper_errors[AL_ERR_SITE_DNS_ANSWER] = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "") << "an answer is never the sandbox's violation";
	Want w = to(kResolver4, IPPROTO_UDP, 53, AL_REASON_HELPER);
	w.kind = AL_EVENT_DNS_ANSWER;
	w.hook = AL_HOOK_INGRESS;
	expect_one_event(w);
}

TEST_F(Parse, AtIngressAPacketAFailedLoadKeptUnreadPassesCounted)
{
	Programs::get().fail_at(AL_ERR_SITE_L4_PORTS);
	std::string ans = dns_header(kQid, 0x8180).name("allowed.test").u16(kTypeA).u16(1);
	EXPECT_EQ(run_skb(Programs::get().seam_ingress(), udp4(kResolver4, kSandbox4, 53, kClientPort, ans)), 1);
	al_counters want{};
	want.helper_errors[AL_ERR_SITE_L4_PORTS] = 1;
	EXPECT_EQ(counters_differ(sb_->counters(), want), "");
	EXPECT_TRUE(sb_->events().empty());
	EXPECT_TRUE(sb_->learned().empty());
}

TEST_F(Parse, TheSeamFailsOnlyItsOwnSite)
{
	Programs::get().fail_at(AL_ERR_SITE_DNS_ANSWER);
	EXPECT_EQ(run_skb(Programs::get().seam_egress(), kUdp), 1);
	EXPECT_EQ(counters_differ(sb_->counters(), egress_allowed(kUdp.size())), "");
}

}  // namespace
}  // namespace bpft
