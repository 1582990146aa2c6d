// DNS on the agent side: the kernel's name encoding, domain rules compiled
// into name entries (checked against the rule-by-rule definition), the dns
// block, and `policy suggest`.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "policy/compile.h"
#include "policy/dnsname.h"
#include "policy/policy.h"
#include "policy/suggest.h"
#include "policy_errors.h"

namespace airlock {
namespace {

using nlohmann::json;

Policy parse(const std::string& text)
{
	auto r = parse_policy_text(text, "p.json");
	for (const auto& e : errors_in(r))
		ADD_FAILURE() << e.str() << "\n" << text;
	return r ? *r : Policy{};
}

std::vector<std::string> errors_of(const std::string& text)
{
	auto r = parse_policy_text(text, "p.json");
	std::vector<std::string> out;
	for (const auto& e : errors_in(r))
		out.push_back(e.str());
	if (r) {
		auto c = compile_policy(*r, 1);
		for (const auto& e : errors_in(c))
			out.push_back(e.str());
	}
	return out;
}

std::string doc(const std::string& rules, const std::string& dns = "")
{
	return R"({"version": 1, "name": "t", "rules": [)" + rules + "]" + (dns.empty() ? "" : ", \"dns\": " + dns) +
	       "}";
}

CompiledPolicy compile_ok(const Policy& p, uint32_t id = 3)
{
	auto r = compile_policy(p, id);
	for (const auto& e : errors_in(r))
		ADD_FAILURE() << e.str();
	return r ? *r : CompiledPolicy{};
}

std::vector<uint8_t> bytes(const std::string& s)
{
	return std::vector<uint8_t>(s.begin(), s.end());
}

// ---- encoding ----------------------------------------------------------------

TEST(DnsName, KeyIsLabelsInReverseOrderWithLengths)
{
	EXPECT_EQ(name_key_bytes("www.example.com"), bytes("\3com\7example\3www"));
	EXPECT_EQ(name_key_bytes("com"), bytes("\3com"));
	EXPECT_TRUE(name_key_bytes("").empty());
}

TEST(DnsName, NamesBelowShareTheParentsBytesAsAPrefix)
{
	auto parent = name_key_bytes("example.com");
	auto child = name_key_bytes("a.b.example.com");
	auto lookalike = name_key_bytes("badexample.com");
	EXPECT_TRUE(std::equal(parent.begin(), parent.end(), child.begin()));
	// The length byte in front of each label keeps boundaries: "badexample"
	// is not below "example".
	EXPECT_FALSE(std::equal(parent.begin(), parent.end(), lookalike.begin()));
}

TEST(DnsName, DecodesBackAndEscapesWhatIsNotPrintable)
{
	auto k = name_key_bytes("www.example.com");
	EXPECT_EQ(name_from_key(k.data(), k.size()), "www.example.com");
	std::vector<uint8_t> odd = {3, 'c', 'o', 'm', 4, 'a', 0x00, '.', 0xff};
	EXPECT_EQ(name_from_key(odd.data(), odd.size()), "a\\000\\.\\255.com");
	EXPECT_EQ(name_from_key(odd.data(), 0), "");
	std::vector<uint8_t> cut = {3, 'c', 'o'};
	EXPECT_EQ(name_from_key(cut.data(), cut.size()), std::nullopt);
	std::vector<uint8_t> zero = {0};
	EXPECT_EQ(name_from_key(zero.data(), zero.size()), std::nullopt);
}

TEST(DnsName, Types)
{
	EXPECT_EQ(dns_type_number("A"), 1);
	EXPECT_EQ(dns_type_number("AAAA"), 28);
	EXPECT_EQ(dns_type_number("TXT"), 16);
	EXPECT_EQ(dns_type_number("NULL"), 10);
	EXPECT_EQ(dns_type_number("ANY"), 255);
	EXPECT_EQ(dns_type_number("CAA"), 257);
	EXPECT_EQ(dns_type_number("BOGUS"), std::nullopt);
	EXPECT_EQ(dns_type_name(65), "HTTPS");
	EXPECT_EQ(dns_type_name(4242), "TYPE4242");
}

TEST(DnsName, CoversOnLabelBoundaries)
{
	EXPECT_TRUE(domain_covers("example.com", false, "example.com"));
	EXPECT_FALSE(domain_covers("example.com", false, "www.example.com"));
	EXPECT_TRUE(domain_covers("example.com", true, "www.example.com"));
	EXPECT_TRUE(domain_covers("example.com", true, "a.b.example.com"));
	EXPECT_FALSE(domain_covers("example.com", true, "example.com"));
	EXPECT_FALSE(domain_covers("example.com", true, "badexample.com"));
	EXPECT_FALSE(domain_covers("example.com", false, "badexample.com"));
}

// ---- compiling domain rules ------------------------------------------------------

TEST(DnsCompile, ExactAndWildcardEntries)
{
	Policy p = parse(doc(R"({"action": "allow", "domain": "Example.COM.", "ports": [443]},
			       {"action": "allow", "domain": "*.example.com", "ports": [80], "protocol": "tcp"})"));
	CompiledPolicy c = compile_ok(p, 7);
	ASSERT_EQ(c.names.size(), 2u);
	const CompiledName& exact = c.names[0];
	const CompiledName& wild = c.names[1];
	auto k = name_key_bytes("example.com");
	EXPECT_EQ(exact.key.policy_id, 7);
	// Exact: the name, then the first bit of AL_NAME_END.
	EXPECT_EQ(exact.key.prefixlen, AL_NAME_KEY_FIXED_BITS + 8 * k.size() + 1);
	EXPECT_TRUE(std::equal(k.begin(), k.end(), exact.key.name));
	EXPECT_EQ(exact.key.name[k.size()], AL_NAME_END);
	EXPECT_EQ(exact.value.flags, AL_RS_QUERY);
	// Wildcard: the name only.
	EXPECT_EQ(wild.key.prefixlen, AL_NAME_KEY_FIXED_BITS + 8 * k.size());
	EXPECT_EQ(wild.value.flags, AL_RS_QUERY | AL_RS_WILDCARD);
	EXPECT_EQ(wild.value.name_len, k.size());
	// "*.example.com" does not cover example.com: its entry holds its own rule only.
	ASSERT_EQ(exact.value.count, 1u);
	EXPECT_EQ(exact.value.ranges[0].port_lo, 443);
	ASSERT_EQ(wild.value.count, 1u);
	EXPECT_EQ(wild.value.ranges[0].port_lo, 80);
	EXPECT_EQ(wild.value.ranges[0].proto_mask, AL_PROTO_TCP);
}

TEST(DnsCompile, LessSpecificWildcardsFoldIntoMoreSpecificEntries)
{
	Policy p = parse(doc(R"({"action": "allow", "domain": "*.example.com", "ports": [443]},
			       {"action": "deny", "domain": "*.ads.example.com"},
			       {"action": "allow", "domain": "good.ads.example.com", "ports": [8443]})"));
	CompiledPolicy c = compile_ok(p);
	const al_rule_set* good = kernel_name_lookup(c, "good.ads.example.com");
	ASSERT_NE(good, nullptr);
	// Its own rule first, then the deny of *.ads, then the allow of *.example.com
	// (shadowed by the deny, so dropped).
	ASSERT_EQ(good->count, 2u);
	EXPECT_EQ(good->ranges[0].rule, 2);
	EXPECT_EQ(good->ranges[1].rule, 1);
	EXPECT_TRUE(good->flags & AL_RS_QUERY);
	const al_rule_set* ads = kernel_name_lookup(c, "tracker.ads.example.com");
	ASSERT_NE(ads, nullptr);
	EXPECT_FALSE(ads->flags & AL_RS_QUERY) << "a name only deny rules cover must not be queried";
	const al_rule_set* www = kernel_name_lookup(c, "www.example.com");
	ASSERT_NE(www, nullptr);
	EXPECT_TRUE(www->flags & AL_RS_QUERY);
	EXPECT_EQ(kernel_name_lookup(c, "example.com"), nullptr);
	EXPECT_EQ(kernel_name_lookup(c, "badexample.com"), nullptr);
	EXPECT_EQ(kernel_name_lookup(c, "ads.example.com")->ranges[0].rule, 0);
}

// Two rules of the same name and kind (exact or the same wildcard) that
// disagree: deny wins, whichever the policy lists first; written out here,
// not through the comparison the compiler and the reference share.
TEST(DnsCompile, EqualRankRulesWithOppositeActionsDenyWins)
{
	for (const char* domain : {"x.example.com", "*.example.com"}) {
		for (bool deny_first : {false, true}) {
			SCOPED_TRACE(std::string(domain) + (deny_first ? ", deny first" : ", allow first"));
			std::string allow = std::string(R"({"action": "allow", "domain": ")") + domain +
					    R"(", "ports": [443]})";
			std::string deny = std::string(R"({"action": "deny", "domain": ")") + domain +
					   R"(", "ports": [443]})";
			Policy p = parse(doc(deny_first ? deny + "," + allow : allow + "," + deny));
			CompiledPolicy c = compile_ok(p);
			const al_rule_set* rs = kernel_name_lookup(c, "x.example.com");
			ASSERT_NE(rs, nullptr);
			ASSERT_GE(rs->count, 1u);
			EXPECT_EQ(rs->ranges[0].action, AL_ACTION_DENY);
			EXPECT_EQ(rs->ranges[0].rule, deny_first ? 0 : 1);
			EXPECT_EQ(rs->ranges[0].port_lo, 443);
			EXPECT_EQ(rs->ranges[0].port_hi, 443);
			EXPECT_EQ(rs->count, 1u) << "the allow is shadowed by the deny";
			EXPECT_FALSE(rs->flags & AL_RS_QUERY) << "only a deny covers the name: it is never queried";
			KernelDecision d = reference_name_decision(p, "x.example.com", 443, AL_PROTO_TCP);
			EXPECT_FALSE(d.allowed);
			EXPECT_EQ(d.rule, deny_first ? 0 : 1);
		}
	}
}

TEST(DnsCompile, DnsBlock)
{
	Policy p = parse(doc("", R"({"resolvers": ["10.0.0.2", "fd00::53", "::ffff:10.0.0.3"], "types": ["a", "TXT"],
				     "max_name_length": 100, "max_label_length": 20, "tcp": true,
				     "queries_per_second": 10, "query_burst": 5, "min_ttl": 5, "max_ttl": 60})"));
	CompiledPolicy c = compile_ok(p);
	EXPECT_EQ(c.dns.flags, AL_DNS_TCP | AL_DNS_EDNS | AL_DNS_EDNS_DO);
	EXPECT_EQ(c.dns.max_name_len, 100);
	EXPECT_EQ(c.dns.max_label_len, 20);
	ASSERT_EQ(c.dns.ntypes, 2);
	EXPECT_EQ(c.dns.types[0], 1);
	EXPECT_EQ(c.dns.types[1], 16);
	ASSERT_EQ(c.dns.nresolvers, 3);
	EXPECT_EQ(c.dns.resolvers[0].family, AL_FAMILY_IPV4);
	EXPECT_EQ(c.dns.resolvers[1].family, AL_FAMILY_IPV6);
	EXPECT_EQ(c.dns.resolvers[2].family, AL_FAMILY_IPV4) << "v4-mapped resolvers are IPv4, as the kernel sees them";
	EXPECT_EQ(c.dns.query_interval_ns, 100000000u);
	EXPECT_EQ(c.dns.query_burst_ns, 400000000u);
	EXPECT_EQ(c.dns.min_ttl, 5u);
	EXPECT_EQ(c.dns.max_ttl, 60u);
}

TEST(DnsCompile, Defaults)
{
	CompiledPolicy c = compile_ok(parse(doc("")));
	EXPECT_EQ(c.dns.flags, AL_DNS_EDNS | AL_DNS_EDNS_DO);
	// What dig and glibc send: a client cookie of 8 bytes; 1232 and 1200.
	ASSERT_EQ(c.dns.nedns_opts, 1);
	EXPECT_EQ(c.dns.edns_opts[0].code, 10);
	EXPECT_EQ(c.dns.edns_opts[0].max_len, 8);
	ASSERT_EQ(c.dns.nudp_sizes, 5);
	EXPECT_EQ(std::vector<uint16_t>(c.dns.udp_sizes, c.dns.udp_sizes + 5),
		  (std::vector<uint16_t>{512, 1200, 1220, 1232, 4096}));
	EXPECT_EQ(c.dns.nresolvers, 0);
	EXPECT_EQ(c.dns.ntypes, 3);  // A, AAAA, CNAME
	EXPECT_EQ(c.dns.max_label_len, 63);
	EXPECT_EQ(c.dns.query_interval_ns, 20000000u);  // 50 a second
	EXPECT_EQ(c.dns.min_ttl, 30u);
	EXPECT_EQ(c.dns.max_ttl, 3600u);
}

TEST(DnsCompile, EdnsBlock)
{
	CompiledPolicy c = compile_ok(parse(doc("", R"({"edns": {"options": {"padding": 64, "65001": 4, "NSID": 0},
							 "udp_sizes": [1400, 1400, 512], "dnssec_ok": false}})")));
	EXPECT_EQ(c.dns.flags, AL_DNS_EDNS);
	ASSERT_EQ(c.dns.nedns_opts, 3);
	std::map<uint16_t, uint16_t> opts;
	for (int i = 0; i < c.dns.nedns_opts; i++)
		opts[c.dns.edns_opts[i].code] = c.dns.edns_opts[i].max_len;
	EXPECT_EQ(opts, (std::map<uint16_t, uint16_t>{{3, 0}, {12, 64}, {65001, 4}}));
	ASSERT_EQ(c.dns.nudp_sizes, 2) << "a size listed twice counts once";
	EXPECT_EQ(c.dns.udp_sizes[0], 1400);
	EXPECT_EQ(c.dns.udp_sizes[1], 512);

	c = compile_ok(parse(doc("", R"({"edns": false})")));
	EXPECT_EQ(c.dns.flags, 0u);
	EXPECT_EQ(c.dns.nedns_opts, 0);
	EXPECT_EQ(c.dns.nudp_sizes, 0);
	c = compile_ok(parse(doc("", R"({"edns": {"options": {}}})")));
	EXPECT_EQ(c.dns.flags, AL_DNS_EDNS | AL_DNS_EDNS_DO);
	EXPECT_EQ(c.dns.nedns_opts, 0) << "no option at all, as glibc sends";
}

TEST(DnsCompile, EdnsErrorsNameThePath)
{
	EXPECT_EQ(
		errors_of(doc("", R"({"edns": {"options": {"BOGUS": 8}}})")),
		std::vector<std::string>{
			"p.json: dns/edns/options/BOGUS: 'BOGUS' is not an EDNS option name airlock knows or a code (0-65535)"});
	EXPECT_EQ(
		errors_of(doc("", R"({"edns": {"options": {"65536": 8}}})")),
		std::vector<std::string>{
			"p.json: dns/edns/options/65536: '65536' is not an EDNS option name airlock knows or a code (0-65535)"});
	EXPECT_EQ(errors_of(doc("", R"({"edns": {"options": {"COOKIE": 125}}})")),
		  std::vector<std::string>{"p.json: dns/edns/options/COOKIE: 125 is out of range (0-124)"});
	EXPECT_EQ(errors_of(doc("", R"({"edns": {"options": {"COOKIE": 8, "10": 8}}})")),
		  std::vector<std::string>{"p.json: dns/edns/options/COOKIE: option 10 is listed twice"});
	EXPECT_EQ(errors_of(doc("", R"({"edns": {"options": {"COOKIE": "8"}}})")),
		  std::vector<std::string>{"p.json: dns/edns/options/COOKIE: expected an integer, got a string"});
	EXPECT_EQ(errors_of(doc("", R"({"edns": {"udp_sizes": [511]}})")),
		  std::vector<std::string>{"p.json: dns/edns/udp_sizes/0: 511 is out of range (512-65535)"});
	EXPECT_EQ(
		errors_of(doc("", R"({"edns": {"udp_sizes": []}})")),
		std::vector<std::string>{
			"p.json: dns/edns/udp_sizes: is empty (a query with EDNS always states a size; use \"edns\": false)"});
	EXPECT_EQ(errors_of(doc("", R"({"edns": {"udp_sizes": [512,513,514,515,516,517,518,519,520]}})")),
		  std::vector<std::string>{"p.json: dns/edns/udp_sizes: 9 sizes; at most 8"});
	EXPECT_EQ(errors_of(doc("", R"({"edns": {"dnssec_ok": 1}})")),
		  std::vector<std::string>{"p.json: dns/edns/dnssec_ok: expected a boolean, got an integer"});
	EXPECT_EQ(errors_of(doc("", R"({"edns": {"cookie": true}})")),
		  std::vector<std::string>{"p.json: dns/edns: unknown key 'cookie'"});
	EXPECT_EQ(errors_of(doc("", R"({"edns": "yes"})")),
		  std::vector<std::string>{"p.json: dns/edns: expected a boolean or an object, got a string"});
}

TEST(DnsCompile, ErrorsNameThePath)
{
	EXPECT_EQ(errors_of(doc("", R"({"min_ttl": 100, "max_ttl": 10})")),
		  std::vector<std::string>{"p.json: dns/min_ttl: 100 is more than max_ttl (10)"});
	EXPECT_EQ(errors_of(doc("", R"({"queries_per_second": 0})")),
		  std::vector<std::string>{"p.json: dns/queries_per_second: 0 is out of range (1-100000)"});
	EXPECT_EQ(errors_of(doc("", R"({"burst": 3})")), std::vector<std::string>{"p.json: dns: unknown key 'burst'"});
	std::string nine = R"({"resolvers": [)";
	for (int i = 1; i <= 9; i++)
		nine += (i > 1 ? "," : "") + std::string("\"10.0.0.") + std::to_string(i) + "\"";
	nine += "]}";
	EXPECT_EQ(errors_of(doc("", nine)), std::vector<std::string>{"p.json: dns/resolvers: 9 resolvers; at most 8"});
	// 253 characters is a valid name, one more than the kernel matches.
	std::string longest;
	while (longest.size() < 253)
		longest += longest.empty() ? "a" : ".a";
	ASSERT_EQ(longest.size(), 253u);
	EXPECT_EQ(errors_of(doc(R"({"action": "allow", "domain": ")" + longest + R"("})")),
		  std::vector<std::string>{
			  "p.json: rules/0/domain: 253 characters; the kernel matches names of at most 252"});
}

// The kernel's two lookups (exact entry, else the longest wildcard strictly
// above) and first-match scan give the rule-by-rule definition, for random
// policies over a small universe of names that overlap a lot.
TEST(DnsCompileProperty, KernelLookupMatchesTheDefinition)
{
	const std::vector<std::string> universe = {"com",
						   "example.com",
						   "www.example.com",
						   "a.www.example.com",
						   "ads.example.com",
						   "x.ads.example.com",
						   "badexample.com",
						   "example.org",
						   "b.example.org",
						   "deep.a.www.example.com"};
	const std::vector<std::string> ports = {"[443]", "[80, 443]", "[\"1-1024\"]", "[53]", ""};
	const std::vector<std::string> protos = {"tcp", "udp", "icmp", ""};
	std::mt19937 rng(20261202);
	auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
	size_t checked = 0;
	for (int round = 0; round < 300; round++) {
		std::string rules;
		int n = 1 + rng() % 8;
		for (int i = 0; i < n; i++) {
			std::string name = pick(universe);
			bool wild = rng() % 2;
			std::string r = R"({"action": ")" + std::string(rng() % 3 ? "allow" : "deny") +
					R"(", "domain": ")" + (wild ? "*." : "") + name + "\"";
			std::string pp = pick(ports), pr = pick(protos);
			if (!pp.empty() && pr != "icmp")
				r += ", \"ports\": " + pp;
			if (!pr.empty())
				r += ", \"protocol\": \"" + pr + "\"";
			rules += (i ? "," : "") + r + "}";
		}
		Policy p = parse(doc(rules));
		auto cr = compile_policy(p, 5);
		ASSERT_TRUE(cr) << rules;
		for (const auto& name : universe) {
			for (int port : {1, 53, 80, 443, 1024, 8080}) {
				for (uint8_t bit : {AL_PROTO_TCP, AL_PROTO_UDP, AL_PROTO_ICMP}) {
					KernelDecision want = reference_name_decision(p, name, port, bit);
					KernelDecision got{false, AL_RULE_NONE};
					if (const al_rule_set* rs = kernel_name_lookup(*cr, name)) {
						for (uint32_t i = 0; i < rs->count; i++) {
							const al_range& r = rs->ranges[i];
							if (!(r.proto_mask & bit) || port < r.port_lo ||
							    port > r.port_hi)
								continue;
							got = {r.action == AL_ACTION_ALLOW, r.rule};
							break;
						}
						// A query may leave exactly when some range allows.
						bool any_allow = false;
						for (uint32_t i = 0; i < rs->count; i++)
							any_allow |= rs->ranges[i].action == AL_ACTION_ALLOW;
						EXPECT_EQ(bool(rs->flags & AL_RS_QUERY), any_allow)
							<< rules << " name " << name;
					}
					ASSERT_EQ(got, want) << rules << "\nname " << name << " port " << port
							     << " proto " << int(bit);
					checked++;
				}
			}
		}
	}
	EXPECT_EQ(checked, 300u * 10 * 6 * 3);
}

// ---- policy suggest ------------------------------------------------------------------

TEST(Suggest, ResolvedNamesBecomeDomainRulesTheRestCidrs)
{
	std::vector<json> lines = {
		{{"sandbox", "s"}, {"event", "sandbox-start"}},
		{{"sandbox", "s"},
		 {"event", "decision"},
		 {"hook", "egress"},
		 {"verdict", "audit"},
		 {"dst", "10.0.0.53"},
		 {"port", 53},
		 {"protocol", "udp"},
		 {"qname", "api.example.com"},
		 {"qtype", "A"}},
		{{"sandbox", "s"},
		 {"event", "decision"},
		 {"hook", "egress"},
		 {"verdict", "audit"},
		 {"dst", "10.0.0.53"},
		 {"port", 53},
		 {"protocol", "udp"},
		 {"qname", "api.example.com"},
		 {"qtype", "AAAA"}},
		{{"sandbox", "s"}, {"event", "dns-answer"}, {"qname", "api.example.com"}, {"addr", "192.0.2.7"}},
		{{"sandbox", "s"},
		 {"event", "decision"},
		 {"hook", "egress"},
		 {"verdict", "audit"},
		 {"dst", "10.0.0.53"},
		 {"port", 53},
		 {"protocol", "udp"},
		 {"qname", "unused.example.com"},
		 {"qtype", "A"}},
		{{"sandbox", "s"},
		 {"event", "decision"},
		 {"hook", "connect4"},
		 {"verdict", "audit"},
		 {"dst", "192.0.2.7"},
		 {"port", 443},
		 {"protocol", "tcp"}},
		{{"sandbox", "s"},
		 {"event", "decision"},
		 {"hook", "connect4"},
		 {"verdict", "audit"},
		 {"dst", "192.0.2.7"},
		 {"port", 444},
		 {"protocol", "tcp"}},
		{{"sandbox", "s"},
		 {"event", "decision"},
		 {"hook", "sendmsg4"},
		 {"verdict", "audit"},
		 {"dst", "198.51.100.1"},
		 {"port", 123},
		 {"protocol", "udp"}},
		// Another sandbox's line is not this run's.
		{{"sandbox", "other"},
		 {"event", "decision"},
		 {"hook", "connect4"},
		 {"verdict", "audit"},
		 {"dst", "203.0.113.9"},
		 {"port", 22},
		 {"protocol", "tcp"}},
	};
	Suggestion s = suggest_policy(lines, {"s", "learned"});
	json p = json::parse(s.policy.dump());
	EXPECT_EQ(p["name"], "learned");
	EXPECT_EQ(p["mode"], "enforce");
	json rules = p["rules"];
	ASSERT_EQ(rules.size(), 3u) << p.dump(2);
	EXPECT_EQ(rules[0], json({{"action", "allow"},
				  {"domain", "api.example.com"},
				  {"ports", {"443-444"}},
				  {"protocol", "tcp"}}));
	EXPECT_EQ(rules[1]["domain"], "unused.example.com");
	EXPECT_EQ(rules[1]["ports"], json({53}));
	EXPECT_EQ(rules[2],
		  json({{"action", "allow"}, {"cidr", "198.51.100.1/32"}, {"ports", {123}}, {"protocol", "udp"}}));
	EXPECT_EQ(p["dns"]["resolvers"], json({"10.0.0.53"}));
	EXPECT_EQ(p["dns"]["types"], json({"A", "AAAA"}));
	EXPECT_EQ(s.flows, 3u);
	EXPECT_EQ(s.names, 2u);
	// What it suggests is a valid policy.
	EXPECT_TRUE(errors_of(s.policy.dump()).empty()) << s.policy.dump(2);
}

TEST(Suggest, SharedAddressGoesToTheNameAnsweredLast)
{
	auto answer = [](const char* name) {
		return json{{"sandbox", "s"}, {"event", "dns-answer"}, {"qname", name}, {"addr", "192.0.2.7"}};
	};
	auto connect = [](int port) {
		return json{{"sandbox", "s"},     {"event", "decision"}, {"hook", "connect4"}, {"verdict", "audit"},
			    {"dst", "192.0.2.7"}, {"port", port},        {"protocol", "tcp"}};
	};
	std::vector<json> lines = {answer("a.example.com"), connect(443), answer("b.example.com"), connect(8443)};
	json rules = json::parse(suggest_policy(lines, {"s", "x"}).policy.dump())["rules"];
	ASSERT_EQ(rules.size(), 2u) << rules.dump(2);
	EXPECT_EQ(rules[0]["domain"], "a.example.com");
	EXPECT_EQ(rules[0]["ports"], json({443}));
	EXPECT_EQ(rules[1]["domain"], "b.example.com");
	EXPECT_EQ(rules[1]["ports"], json({8443}));
}

TEST(Suggest, UnixSocketsAndSocketFamiliesBecomeRules)
{
	auto unix_line = [](const char* hook, const char* verdict, json dst) {
		return json{{"sandbox", "s"},   {"event", "decision"}, {"hook", hook},    {"verdict", verdict},
			    {"family", "unix"}, {"dst", dst},          {"port", nullptr}, {"protocol", nullptr}};
	};
	auto socket_line = [](json family) {
		return json{{"sandbox", "s"},          {"event", "decision"}, {"hook", "socket"},   {"verdict", "deny"},
			    {"socket_family", family}, {"port", nullptr},     {"protocol", nullptr}};
	};
	std::vector<json> lines = {
		unix_line("connect_unix", "audit", "/run/proxy.sock"),
		unix_line("connect_unix", "audit", "/run/proxy.sock"),
		// The log's escapes come back as the name's bytes.
		unix_line("sendmsg_unix", "audit", "@agent\\x00bus\\x5cx"),
		unix_line("connect_unix", "audit", nullptr),   // unreadable
		unix_line("connect_unix", "audit", "@star*"),  // would read as a prefix
		unix_line("connect_unix", "deny", "/run/denied.sock"),
		socket_line("vsock"),
		socket_line(99),
	};
	Suggestion s = suggest_policy(lines, {"s", "x"});
	json p = json::parse(s.policy.dump());
	json rules = p["rules"];
	ASSERT_EQ(rules.size(), 2u) << p.dump(2);
	EXPECT_EQ(rules[0], json({{"action", "allow"}, {"unix", "/run/proxy.sock"}}));
	EXPECT_EQ(rules[1], json({{"action", "allow"}, {"unix", std::string("@agent\0bus\\x", 12)}}));
	EXPECT_EQ(p["families"], json({"unix", "inet", "inet6", "vsock", "netlink-route"}));
	ASSERT_EQ(s.notes.size(), 3u);
	EXPECT_EQ(s.notes[0], "a unix socket whose address could not be read was not turned into a rule");
	EXPECT_EQ(s.notes[1],
		  "unix socket @star*: an address ending in '*' reads as a prefix in a rule; write its rule by hand");
	EXPECT_EQ(s.notes[2], "a socket of a family airlock has no name for was not turned into a rule");
	EXPECT_EQ(s.flows, 2u);
	EXPECT_TRUE(errors_of(s.policy.dump()).empty()) << s.policy.dump(2);
}

TEST(Suggest, DefaultFamiliesAreLeftOut)
{
	json p = json::parse(suggest_policy({}, {"s", "x"}).policy.dump());
	EXPECT_FALSE(p.contains("families")) << p.dump(2);
}

}  // namespace
}  // namespace airlock
