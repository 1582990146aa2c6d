// Compiling policies into LPM entries, and checking that one longest-prefix
// lookup plus a first-match scan gives the rule-by-rule verdict.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "policy/compile.h"
#include "policy/policy.h"
#include "policy_errors.h"

namespace airlock {
namespace {

const char* kFile = "p.json";
const KernelDecision kDefaultDeny{false, AL_RULE_NONE};

Policy parse(const std::string& text)
{
	auto r = parse_policy_text(text, kFile);
	for (const auto& e : errors_in(r))
		ADD_FAILURE() << e.str() << "\n" << text;
	return r ? *r : Policy{};
}

// A policy document from a list of rules and optional top-level extras.
std::string doc(const std::string& rules, const std::string& extra = "")
{
	return R"({"version": 1, "name": "t", )" + extra + R"("rules": [)" + rules + "]}";
}

CompiledPolicy compile_ok(const Policy& p, uint32_t id)
{
	auto r = compile_policy(p, id);
	for (const auto& e : errors_in(r))
		ADD_FAILURE() << e.str();
	return r ? *r : CompiledPolicy{};
}

Address addr(const char* text)
{
	auto a = parse_address(text);
	EXPECT_TRUE(a) << text;
	return a.value_or(Address{});
}

// Kernel and definition must agree on every question asked here.
struct Checker {
	Policy policy;
	CompiledPolicy compiled;
	uint32_t id;

	explicit Checker(const std::string& text, uint32_t policy_id = 7)
	    : policy(parse(text)), compiled(compile_ok(policy, policy_id)), id(policy_id)
	{
	}

	KernelDecision operator()(const Address& dst, uint16_t port, uint8_t proto) const
	{
		KernelDecision k = kernel_lookup(compiled, id, dst, port, proto);
		KernelDecision ref = reference_decision(policy, dst, port, proto);
		EXPECT_EQ(k, ref) << format_address(dst) << " port " << port << " proto " << int(proto) << ": kernel {"
				  << k.allowed << "," << k.rule << "} reference {" << ref.allowed << "," << ref.rule
				  << "}";
		return k;
	}
	KernelDecision operator()(const char* dst, uint16_t port, uint8_t proto = AL_PROTO_TCP) const
	{
		return (*this)(addr(dst), port, proto);
	}
};

KernelDecision allow(uint16_t rule)
{
	return {true, rule};
}
KernelDecision deny(uint16_t rule)
{
	return {false, rule};
}

const CompiledPrefix* find_entry(const CompiledPolicy& c, const char* address, int len)
{
	Address a = addr(address);
	for (const auto& e : c.prefixes)
		if (e.key.family == a.family && e.key.prefixlen == AL_LPM_FIXED_BITS + static_cast<uint32_t>(len) &&
		    std::equal(a.bytes.begin(), a.bytes.end(), e.key.addr))
			return &e;
	return nullptr;
}

// ---------------------------------------------------------------------------
// Specific cases.

TEST(Compile, MoreSpecificDenyInsideBroadAllow)
{
	// The example of docs/verdicts.md.
	Checker d(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [443]},
		        {"action": "deny", "cidr": "10.1.0.0/16", "ports": [22]})"));
	EXPECT_EQ(d("10.1.2.3", 443), allow(0));  // the /16 does not match 443: the /8 decides
	EXPECT_EQ(d("10.1.2.3", 443, AL_PROTO_UDP), allow(0));
	EXPECT_EQ(d("10.1.2.3", 22), deny(1));
	EXPECT_EQ(d("10.1.2.3", 22, AL_PROTO_UDP), deny(1));
	EXPECT_EQ(d("10.1.2.3", 80), kDefaultDeny);
	EXPECT_EQ(d("10.1.2.3", 0, AL_PROTO_ICMP), kDefaultDeny);
	EXPECT_EQ(d("10.2.0.1", 22), kDefaultDeny);
	EXPECT_EQ(d("10.2.0.1", 443), allow(0));
	EXPECT_EQ(d("11.0.0.1", 443), kDefaultDeny);

	ASSERT_EQ(d.compiled.prefixes.size(), 2u);
	const CompiledPrefix* sixteen = find_entry(d.compiled, "10.1.0.0", 16);
	ASSERT_TRUE(sixteen);
	ASSERT_EQ(sixteen->value.count, 2u);
	EXPECT_EQ(sixteen->value.ranges[0].action, AL_ACTION_DENY);
	EXPECT_EQ(sixteen->value.ranges[0].rule, 1);
	EXPECT_EQ(sixteen->value.ranges[0].port_lo, 22);
	EXPECT_EQ(sixteen->value.ranges[0].port_hi, 22);
	EXPECT_EQ(sixteen->value.ranges[0].proto_mask, AL_PROTO_TCP | AL_PROTO_UDP);
	EXPECT_EQ(sixteen->value.ranges[1].action, AL_ACTION_ALLOW);
	EXPECT_EQ(sixteen->value.ranges[1].rule, 0);
	EXPECT_EQ(sixteen->value.ranges[1].port_lo, 443);
	EXPECT_EQ(sixteen->value.ranges[1].port_hi, 443);
	const CompiledPrefix* eight = find_entry(d.compiled, "10.0.0.0", 8);
	ASSERT_TRUE(eight);
	ASSERT_EQ(eight->value.count, 1u);
	EXPECT_EQ(eight->value.ranges[0].rule, 0);
}

TEST(Compile, RuleOrderDoesNotChangeSpecificity)
{
	// The same two rules the other way round: the /16 still wins on 22.
	Checker d(doc(R"({"action": "deny", "cidr": "10.1.0.0/16", "ports": [22]},
		        {"action": "allow", "cidr": "10.0.0.0/8", "ports": [443]})"));
	EXPECT_EQ(d("10.1.2.3", 443), allow(1));
	EXPECT_EQ(d("10.1.2.3", 22), deny(0));
	// A more specific allow inside a broad deny opens only its own port.
	Checker e(doc(R"({"action": "deny", "cidr": "10.0.0.0/8"},
		        {"action": "allow", "cidr": "10.1.2.0/24", "ports": [443], "protocol": "tcp"})"));
	EXPECT_EQ(e("10.1.2.9", 443), allow(1));
	EXPECT_EQ(e("10.1.2.9", 443, AL_PROTO_UDP), deny(0));
	EXPECT_EQ(e("10.1.2.9", 80), deny(0));
	EXPECT_EQ(e("10.1.3.9", 443), deny(0));
}

TEST(Compile, EqualPrefixDenyBeatsAllow)
{
	Checker d(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"},
		        {"action": "deny", "cidr": "10.0.0.0/8"})"));
	EXPECT_EQ(d("10.9.9.9", 443), deny(1));
	EXPECT_EQ(d("10.9.9.9", 53, AL_PROTO_UDP), deny(1));
	ASSERT_EQ(d.compiled.prefixes.size(), 1u);  // one entry per distinct prefix
	// The deny covers the allow entirely: the allow range is dropped.
	EXPECT_EQ(d.compiled.prefixes[0].value.count, 1u);

	Checker ports(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"},
			    {"action": "deny", "cidr": "10.0.0.0/8", "ports": [22]})"));
	EXPECT_EQ(ports("10.0.0.1", 22), deny(1));
	EXPECT_EQ(ports("10.0.0.1", 80), allow(0));

	// Equal prefix, same action: the lower index names the decision.
	Checker same(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["1-100"]},
			   {"action": "allow", "cidr": "10.0.0.0/8", "ports": ["50-200"]})"));
	EXPECT_EQ(same("10.0.0.1", 60), allow(0));
	EXPECT_EQ(same("10.0.0.1", 150), allow(1));

	// A deny of equal prefix but another protocol does not take the allow's traffic.
	Checker proto(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "tcp"},
			    {"action": "deny", "cidr": "10.0.0.0/8", "protocol": "udp"})"));
	EXPECT_EQ(proto("10.0.0.1", 443), allow(0));
	EXPECT_EQ(proto("10.0.0.1", 443, AL_PROTO_UDP), deny(1));
}

TEST(Compile, FamiliesAreKeptApart)
{
	Checker six(doc(R"({"action": "allow", "cidr": "::/0"})"));
	EXPECT_EQ(six("2001:db8::1", 443), allow(0));
	EXPECT_EQ(six("::1", 443), allow(0));
	EXPECT_EQ(six("10.0.0.1", 443), kDefaultDeny);
	EXPECT_EQ(six("0.0.0.0", 443), kDefaultDeny);
	EXPECT_EQ(six("::ffff:10.0.0.1", 443), kDefaultDeny);  // it is IPv4
	// Even an un-normalised mapped destination is judged as IPv4.
	Address raw_mapped;
	raw_mapped.family = AL_FAMILY_IPV6;
	raw_mapped.bytes = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
	EXPECT_EQ(six(raw_mapped, 443, AL_PROTO_TCP), kDefaultDeny);
	ASSERT_EQ(six.compiled.prefixes.size(), 1u);
	EXPECT_EQ(six.compiled.prefixes[0].key.family, AL_FAMILY_IPV6);

	Checker four(doc(R"({"action": "allow", "cidr": "0.0.0.0/0"})"));
	EXPECT_EQ(four("10.0.0.1", 443), allow(0));
	EXPECT_EQ(four("::ffff:10.0.0.1", 443), allow(0));
	EXPECT_EQ(four(raw_mapped, 443, AL_PROTO_TCP), allow(0));
	EXPECT_EQ(four("::1", 443), kDefaultDeny);
	EXPECT_EQ(four("::", 443), kDefaultDeny);
	EXPECT_EQ(four("::10.0.0.1", 443), kDefaultDeny);  // IPv4-compatible is IPv6
	ASSERT_EQ(four.compiled.prefixes.size(), 1u);
	EXPECT_EQ(four.compiled.prefixes[0].key.family, AL_FAMILY_IPV4);

	// Both, with a deny in one family only.
	Checker both(doc(R"({"action": "allow", "cidr": "0.0.0.0/0"}, {"action": "allow", "cidr": "::/0"},
		           {"action": "deny", "cidr": "::/0", "ports": [25]})"));
	EXPECT_EQ(both("10.0.0.1", 25), allow(0));
	EXPECT_EQ(both("2001:db8::1", 25), deny(2));
	EXPECT_EQ(both("2001:db8::1", 26), allow(1));
}

TEST(Compile, V4MappedRuleHitsTheIpv4Destination)
{
	Checker d(doc(R"({"action": "allow", "cidr": "::ffff:10.0.0.0/104", "ports": [443]},
		        {"action": "deny", "cidr": "::ffff:10.1.2.3"})"));
	EXPECT_EQ(d("10.9.8.7", 443), allow(0));
	EXPECT_EQ(d("::ffff:10.9.8.7", 443), allow(0));
	EXPECT_EQ(d("10.1.2.3", 443), deny(1));
	EXPECT_EQ(d("::ffff:10.1.2.3", 443), deny(1));
	EXPECT_EQ(d("11.0.0.1", 443), kDefaultDeny);
	EXPECT_EQ(d("::ffff:a09:807", 80), kDefaultDeny);

	const CompiledPrefix* e = find_entry(d.compiled, "10.0.0.0", 8);
	ASSERT_TRUE(e) << "the mapped /104 compiles as IPv4 10.0.0.0/8";
	EXPECT_EQ(e->key.family, AL_FAMILY_IPV4);
	EXPECT_TRUE(find_entry(d.compiled, "10.1.2.3", 32));
	for (const auto& p : d.compiled.prefixes)
		EXPECT_EQ(p.key.family, AL_FAMILY_IPV4);
}

TEST(Compile, IcmpBit)
{
	Checker d(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "icmp"},
		        {"action": "allow", "cidr": "10.1.0.0/16"},
		        {"action": "allow", "cidr": "2001:db8::/32", "protocol": "icmp"})"));
	EXPECT_EQ(d("10.2.0.1", 0, AL_PROTO_ICMP), allow(0));
	EXPECT_EQ(d("10.2.0.1", 80), kDefaultDeny);
	EXPECT_EQ(d("10.2.0.1", 80, AL_PROTO_UDP), kDefaultDeny);
	// A rule without "protocol" covers TCP and UDP, never ICMP; the /8 still does.
	EXPECT_EQ(d("10.1.0.1", 80), allow(1));
	EXPECT_EQ(d("10.1.0.1", 0, AL_PROTO_ICMP), allow(0));
	EXPECT_EQ(d("2001:db8::1", 0, AL_PROTO_ICMP), allow(2));  // ICMPv6 shares the bit
	EXPECT_EQ(d("2001:db8::1", 443), kDefaultDeny);

	const CompiledPrefix* e = find_entry(d.compiled, "10.0.0.0", 8);
	ASSERT_TRUE(e);
	ASSERT_EQ(e->value.count, 1u);
	EXPECT_EQ(e->value.ranges[0].proto_mask, AL_PROTO_ICMP);
	EXPECT_EQ(e->value.ranges[0].port_lo, 0);  // ICMP has no port: the range covers all
	EXPECT_EQ(e->value.ranges[0].port_hi, 65535);

	Checker deny_icmp(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"},
				{"action": "deny", "cidr": "10.0.0.0/8", "protocol": "icmp"})"));
	EXPECT_EQ(deny_icmp("10.0.0.1", 0, AL_PROTO_ICMP), deny(1));
	EXPECT_EQ(deny_icmp("10.0.0.1", 80), allow(0));
}

TEST(Compile, AuditModeFlag)
{
	Policy audit = parse(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"})", R"("mode": "audit", )"));
	EXPECT_EQ(compile_ok(audit, 1).sandbox_flags, static_cast<uint32_t>(AL_SB_AUDIT));
	Policy enforce = parse(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"})", R"("mode": "enforce", )"));
	EXPECT_EQ(compile_ok(enforce, 1).sandbox_flags, 0u);
	Policy dflt = parse(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"})"));
	EXPECT_EQ(compile_ok(dflt, 1).sandbox_flags, 0u);
	// Audit changes flags, not entries: the kernel decides the same way.
	EXPECT_EQ(compile_ok(audit, 1).prefixes.size(), compile_ok(enforce, 1).prefixes.size());
	// The runner's flag is never the compiler's.
	EXPECT_EQ(compile_ok(audit, 1).sandbox_flags & AL_SB_LOG_ALLOWED, 0u);
}

TEST(Compile, AllowIcmpFlag)
{
	auto flags = [](const std::string& rules, const std::string& extra = "") {
		return compile_ok(parse(doc(rules, extra)), 1).sandbox_flags;
	};
	EXPECT_EQ(flags(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "icmp"})"),
		  static_cast<uint32_t>(AL_SB_ALLOW_ICMP));
	EXPECT_EQ(flags(R"({"action": "allow", "cidr": "::/0", "protocol": "icmp"})"),
		  static_cast<uint32_t>(AL_SB_ALLOW_ICMP));
	EXPECT_EQ(flags(R"({"action": "deny", "cidr": "10.0.0.0/8", "protocol": "icmp"})"), 0u);
	EXPECT_EQ(flags(R"({"action": "allow", "cidr": "10.0.0.0/8"})"), 0u);
	EXPECT_EQ(flags(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "tcp"},
			   {"action": "allow", "cidr": "10.0.0.0/8", "protocol": "udp"})"),
		  0u);
	// Set even when a deny shadows the allow: ping sockets may still reach other rules.
	EXPECT_EQ(flags(R"({"action": "deny", "cidr": "10.0.0.0/8", "protocol": "icmp"},
			   {"action": "allow", "cidr": "10.0.0.0/8", "protocol": "icmp"})"),
		  static_cast<uint32_t>(AL_SB_ALLOW_ICMP));
	EXPECT_EQ(flags(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "icmp"})", R"("mode": "audit", )"),
		  static_cast<uint32_t>(AL_SB_ALLOW_ICMP | AL_SB_AUDIT));
}

// A policy whose only ICMP allow is a domain rule still lets ping sockets
// exist: they are denied only "unless some rule allows ICMP".
TEST(Compile, DomainRuleAllowingIcmpSetsAllowIcmp)
{
	Policy p = parse(doc(R"({"action": "allow", "domain": "example.com", "protocol": "icmp"})"));
	EXPECT_EQ(compile_ok(p, 1).sandbox_flags & AL_SB_ALLOW_ICMP, static_cast<uint32_t>(AL_SB_ALLOW_ICMP));
}

TEST(Compile, OnViolationMapping)
{
	auto ov = [](const char* v) {
		return compile_ok(parse(doc("", std::string(R"("on_violation": ")") + v + "\", ")), 1).on_violation;
	};
	EXPECT_EQ(ov("deny"), AL_ON_VIOLATION_DENY);
	EXPECT_EQ(ov("freeze"), AL_ON_VIOLATION_FREEZE);
	EXPECT_EQ(ov("kill"), AL_ON_VIOLATION_KILL);
	EXPECT_EQ(compile_ok(parse(doc("")), 1).on_violation, AL_ON_VIOLATION_DENY);  // the default
}

TEST(Compile, DomainRulesCompileToNoEntries)
{
	Checker d(doc(R"({"action": "allow", "domain": "pypi.org", "ports": [443]},
		        {"action": "deny", "domain": "*.example.com"},
		        {"action": "allow", "cidr": "10.0.0.0/8", "ports": [443]})"));
	ASSERT_EQ(d.compiled.prefixes.size(), 1u);
	ASSERT_EQ(d.compiled.prefixes[0].value.count, 1u);
	EXPECT_EQ(d.compiled.prefixes[0].value.ranges[0].rule, 2);  // index in the file, domains counted
	EXPECT_EQ(d("10.0.0.1", 443), allow(2));

	Checker only(doc(R"({"action": "allow", "domain": "pypi.org"}, {"action": "allow", "domain": "*.pypi.org"})"));
	EXPECT_TRUE(only.compiled.prefixes.empty());
	EXPECT_EQ(only("151.101.0.223", 443), kDefaultDeny);

	Checker none(doc(""));
	EXPECT_TRUE(none.compiled.prefixes.empty());
	EXPECT_EQ(none("10.0.0.1", 443), kDefaultDeny);
}

TEST(Compile, LpmKey)
{
	const uint32_t id = 0xabc123;
	Checker d(doc(R"({"action": "allow", "cidr": "10.20.0.0/16"},
		        {"action": "allow", "cidr": "2001:db8:ab00::/40"},
		        {"action": "allow", "cidr": "0.0.0.0/0"},
		        {"action": "allow", "cidr": "192.0.2.7"},
		        {"action": "allow", "cidr": "::/0"},
		        {"action": "allow", "cidr": "fd00:ec2::254/128"})"),
		  id);
	ASSERT_EQ(d.compiled.prefixes.size(), 6u);
	struct Want {
		uint8_t family;
		uint32_t len;
		std::array<uint8_t, 16> addr;
	};
	const std::vector<Want> want = {
		{AL_FAMILY_IPV4, 16, {10, 20}},
		{AL_FAMILY_IPV6, 40, {0x20, 0x01, 0x0d, 0xb8, 0xab}},
		{AL_FAMILY_IPV4, 0, {}},
		{AL_FAMILY_IPV4, 32, {192, 0, 2, 7}},
		{AL_FAMILY_IPV6, 0, {}},
		{AL_FAMILY_IPV6, 128, {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54}},
	};
	for (const Want& w : want) {
		auto it = std::find_if(d.compiled.prefixes.begin(), d.compiled.prefixes.end(),
				       [&](const CompiledPrefix& e) {
					       return e.key.family == w.family &&
						      e.key.prefixlen == AL_LPM_FIXED_BITS + w.len &&
						      std::equal(w.addr.begin(), w.addr.end(), e.key.addr);
				       });
		ASSERT_NE(it, d.compiled.prefixes.end()) << int(w.family) << "/" << w.len;
		EXPECT_EQ(it->key.policy_id, id);
	}
	// Lookups with another policy id find nothing: entries of two policies share the map.
	EXPECT_EQ(kernel_lookup(d.compiled, id + 1, addr("10.20.1.1"), 443, AL_PROTO_TCP), kDefaultDeny);
	EXPECT_EQ(d("10.20.1.1", 443), allow(0));
}

TEST(Compile, LpmKeyAddressIsMasked)
{
	Checker d(doc(R"({"action": "allow", "cidr": "10.1.2.0/23"})"), 3);
	ASSERT_EQ(d.compiled.prefixes.size(), 1u);
	const al_lpm_key& k = d.compiled.prefixes[0].key;
	EXPECT_EQ(k.prefixlen, AL_LPM_FIXED_BITS + 23u);
	EXPECT_EQ(k.policy_id, 3u);
	EXPECT_EQ(k.family, static_cast<uint32_t>(AL_FAMILY_IPV4));
	const uint8_t want[16] = {10, 1, 2, 0};
	EXPECT_TRUE(std::equal(want, want + 16, k.addr));
	EXPECT_EQ(d("10.1.3.255", 1), allow(0));
	EXPECT_EQ(d("10.1.4.0", 1), kDefaultDeny);
}

std::string ports_json(int n, int first)
{
	std::string s;
	for (int i = 0; i < n; i++)
		s += (i ? "," : "") + std::to_string(first + 2 * i);
	return "[" + s + "]";
}

TEST(Compile, TooManyRangesIsAnErrorNamingThePrefix)
{
	Policy at_limit = parse(
		doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": )" + ports_json(AL_MAX_RANGES, 1000) + "}"));
	CompiledPolicy ok = compile_ok(at_limit, 1);
	ASSERT_EQ(ok.prefixes.size(), 1u);
	EXPECT_EQ(ok.prefixes[0].value.count, static_cast<uint32_t>(AL_MAX_RANGES));

	Policy one_over = parse(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": )" +
				    ports_json(AL_MAX_RANGES + 1, 1000) + "}"));
	auto r = compile_policy(one_over, 1);
	EXPECT_FALSE(r);
	ASSERT_EQ(errors_in(r).size(), 1u);
	EXPECT_EQ(errors_in(r)[0].str(), "p.json: rules: 10.0.0.0/8 needs 33 port ranges once less specific rules are "
					 "folded in; the kernel holds 32");

	// Folding: the /8 fits alone, the /16 does not once the /8's ranges join its own.
	Policy folded = parse(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": )" + ports_json(20, 1000) +
				  R"(}, {"action": "deny", "cidr": "10.1.0.0/16", "ports": )" + ports_json(13, 2000) +
				  R"(}, {"action": "deny", "cidr": "2001:db8::/32", "ports": )" + ports_json(13, 2000) +
				  "}"));
	r = compile_policy(folded, 1);
	EXPECT_FALSE(r);
	ASSERT_EQ(errors_in(r).size(), 1u);
	EXPECT_EQ(errors_in(r)[0].str(), "p.json: rules: 10.1.0.0/16 needs 33 port ranges once less specific rules are "
					 "folded in; the kernel holds 32");

	// Ranges that a more specific deny shadows are not counted.
	Policy shadowed = parse(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": )" + ports_json(40, 1000) +
				    R"(, "protocol": "tcp"}, {"action": "deny", "cidr": "10.1.0.0/16"})"));
	r = compile_policy(shadowed, 1);
	ASSERT_EQ(errors_in(r).size(), 1u);  // the /8 itself still needs 40
	EXPECT_EQ(errors_in(r)[0].str(), "p.json: rules: 10.0.0.0/8 needs 40 port ranges once less specific rules are "
					 "folded in; the kernel holds 32");
}

TEST(Compile, ShadowedRangesDropped)
{
	// The /16's deny on every port (TCP and UDP) hides the /8's allow 443/tcp.
	Checker d(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [443], "protocol": "tcp"},
		        {"action": "deny", "cidr": "10.1.0.0/16"})"));
	const CompiledPrefix* sixteen = find_entry(d.compiled, "10.1.0.0", 16);
	ASSERT_TRUE(sixteen);
	ASSERT_EQ(sixteen->value.count, 1u);
	EXPECT_EQ(sixteen->value.ranges[0].rule, 1);
	EXPECT_EQ(d("10.1.0.1", 443), deny(1));
	EXPECT_EQ(d("10.2.0.1", 443), allow(0));

	// Within one rule: 80 lies inside "1-100" listed before it.
	Checker inner(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["1-100", 80, "90-100", "100-101"]})"));
	ASSERT_EQ(inner.compiled.prefixes.size(), 1u);
	ASSERT_EQ(inner.compiled.prefixes[0].value.count, 2u);
	EXPECT_EQ(inner.compiled.prefixes[0].value.ranges[0].port_lo, 1);
	EXPECT_EQ(inner.compiled.prefixes[0].value.ranges[0].port_hi, 100);
	EXPECT_EQ(inner.compiled.prefixes[0].value.ranges[1].port_lo, 100);
	EXPECT_EQ(inner.compiled.prefixes[0].value.ranges[1].port_hi, 101);
	EXPECT_EQ(inner("10.0.0.1", 101), allow(0));

	// Another protocol is not covered: a TCP deny does not hide a UDP allow.
	Checker proto(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [53], "protocol": "udp"},
			    {"action": "deny", "cidr": "10.1.0.0/16", "protocol": "tcp"})"));
	const CompiledPrefix* p16 = find_entry(proto.compiled, "10.1.0.0", 16);
	ASSERT_TRUE(p16);
	EXPECT_EQ(p16->value.count, 2u);
	EXPECT_EQ(proto("10.1.0.1", 53, AL_PROTO_UDP), allow(0));
	EXPECT_EQ(proto("10.1.0.1", 53, AL_PROTO_TCP), deny(1));

	// A partial overlap is kept: 400-500 is not inside 443.
	Checker part(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["400-500"]},
			   {"action": "deny", "cidr": "10.1.0.0/16", "ports": [443]})"));
	EXPECT_EQ(find_entry(part.compiled, "10.1.0.0", 16)->value.count, 2u);
	EXPECT_EQ(part("10.1.0.1", 443), deny(1));
	EXPECT_EQ(part("10.1.0.1", 444), allow(0));

	// Identical rules: the later one is unreachable.
	Checker twice(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"}, {"action": "allow", "cidr": "10.0.0.0/8"})"));
	EXPECT_EQ(twice.compiled.prefixes[0].value.count, 1u);
	EXPECT_EQ(twice("10.0.0.1", 443), allow(0));
}

TEST(Compile, TooManyRules)
{
	// Rule indexes are 16 bits and AL_RULE_NONE is taken.
	auto many = [](size_t n) {
		std::string rules;
		for (size_t i = 0; i < n; i++)
			rules += std::string(i ? "," : "") + R"({"action":"allow","cidr":"10.0.0.0/8"})";
		return parse(doc(rules));
	};
	auto over = compile_policy(many(AL_RULE_NONE), 1);
	EXPECT_FALSE(over);
	ASSERT_EQ(errors_in(over).size(), 1u);
	EXPECT_EQ(errors_in(over)[0].str(), "p.json: rules: 65535 rules; at most 65534");
	auto at = compile_policy(many(AL_RULE_NONE - 1), 1);
	EXPECT_TRUE(at);
	EXPECT_TRUE(errors_in(at).empty());
}

// ---------------------------------------------------------------------------
// Property: for random policies, kernel_lookup(compile_policy(p)) decides as
// the rule-by-rule definition does, for the verdict and the rule, on every
// protocol. The policies are written as JSON and go through the parser; the
// generator keeps its own model of each rule so that a third, independent
// definition (below) checks the parser's reading as well.

struct ModelRule {
	bool is_domain = false;
	bool allow = false;
	uint8_t family = AL_FAMILY_IPV4;
	std::array<uint8_t, 16> addr{};
	int len = 0;
	std::vector<std::pair<int, int>> ports;  // empty: every port
	uint8_t proto = AL_PROTO_TCP | AL_PROTO_UDP;
};

struct Base {
	uint8_t family;
	std::array<uint8_t, 16> addr;
	int len;
};

// Nested bases in both families, so random rules overlap a lot.
const std::vector<Base> kBases = {
	{AL_FAMILY_IPV4, {}, 0},
	{AL_FAMILY_IPV4, {10}, 8},
	{AL_FAMILY_IPV4, {10, 1}, 16},
	{AL_FAMILY_IPV4, {10, 1, 2}, 24},
	{AL_FAMILY_IPV4, {10, 1, 2, 128}, 28},
	{AL_FAMILY_IPV4, {192, 168}, 16},
	{AL_FAMILY_IPV6, {}, 0},
	{AL_FAMILY_IPV6, {0x20, 0x01, 0x0d, 0xb8}, 32},
	{AL_FAMILY_IPV6, {0x20, 0x01, 0x0d, 0xb8, 0, 1}, 48},
	{AL_FAMILY_IPV6, {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2}, 64},
	{AL_FAMILY_IPV6, {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}, 120},
	{AL_FAMILY_IPV6, {0xfd}, 8},
};

const int kPortPool[] = {1, 22, 53, 80, 443, 444, 8080, 65535};

class Gen {
public:
	explicit Gen(uint32_t seed) : rng_(seed) {}

	// Uniform enough in [0, n); mt19937's output is fixed by the standard,
	// so the sequence is the same on every platform.
	uint32_t below(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }
	bool chance(uint32_t percent) { return below(100) < percent; }

	static bool bit(const std::array<uint8_t, 16>& a, int i) { return (a[i / 8] >> (7 - i % 8)) & 1; }
	static void set_bit(std::array<uint8_t, 16>& a, int i, bool v)
	{
		uint8_t m = static_cast<uint8_t>(0x80u >> (i % 8));
		a[i / 8] = v ? static_cast<uint8_t>(a[i / 8] | m) : static_cast<uint8_t>(a[i / 8] & ~m);
	}

	// A random address inside (family, addr, len): host bits random, or all
	// zeros / all ones, to hit the edges of prefixes.
	std::array<uint8_t, 16> inside(uint8_t family, const std::array<uint8_t, 16>& a, int len)
	{
		int bits = family == AL_FAMILY_IPV4 ? 32 : 128;
		std::array<uint8_t, 16> out = a;
		uint32_t style = below(10);
		for (int i = len; i < bits; i++)
			set_bit(out, i, style == 0 ? false : style == 1 ? true : (rng_() & 1) != 0);
		return out;
	}

	int port()
	{
		if (chance(60))
			return kPortPool[below(std::size(kPortPool))];
		return 1 + static_cast<int>(below(65535));
	}

	ModelRule rule()
	{
		ModelRule r;
		r.allow = chance(50);
		if (chance(5)) {
			r.is_domain = true;
			return r;
		}
		const Base& b = kBases[below(kBases.size())];
		int bits = b.family == AL_FAMILY_IPV4 ? 32 : 128;
		r.family = b.family;
		// Lengthen the base by a few bits, mostly, sometimes to a host.
		int extra = chance(10) ? bits - b.len : static_cast<int>(below(std::min(9, bits - b.len + 1)));
		r.len = b.len + extra;
		r.addr = inside(b.family, b.addr, b.len);
		for (int i = r.len; i < bits; i++)
			set_bit(r.addr, i, false);

		uint32_t proto = below(10);
		if (proto < 5)
			r.proto = AL_PROTO_TCP | AL_PROTO_UDP;
		else if (proto < 7)
			r.proto = AL_PROTO_TCP;
		else if (proto < 9)
			r.proto = AL_PROTO_UDP;
		else
			r.proto = AL_PROTO_ICMP;
		if (r.proto != AL_PROTO_ICMP && chance(60)) {
			int n = 1 + static_cast<int>(below(3));
			for (int i = 0; i < n; i++) {
				int lo = port();
				if (chance(50)) {
					r.ports.push_back({lo, lo});
				} else {
					int hi = std::min(65535, lo + static_cast<int>(below(chance(50) ? 10 : 2000)));
					r.ports.push_back({lo, hi});
				}
			}
		}
		return r;
	}

	Address destination(const std::vector<ModelRule>& rules)
	{
		Address a;
		uint32_t kind = below(100);
		std::vector<const ModelRule*> cidrs;
		for (const auto& r : rules)
			if (!r.is_domain)
				cidrs.push_back(&r);
		if (kind < 60 && !cidrs.empty()) {
			const ModelRule& r = *cidrs[below(cidrs.size())];
			a.family = r.family;
			a.bytes = inside(r.family, r.addr, r.len);
			// Just outside a rule's prefix: flip its last prefix bit.
			if (r.len > 0 && chance(15))
				set_bit(a.bytes, r.len - 1, !bit(a.bytes, r.len - 1));
		} else if (kind < 90) {
			const Base& b = kBases[below(kBases.size())];
			a.family = b.family;
			a.bytes = inside(b.family, b.addr, b.len);
		} else {
			a.family = chance(50) ? AL_FAMILY_IPV4 : AL_FAMILY_IPV6;
			for (int i = 0; i < (a.family == AL_FAMILY_IPV4 ? 4 : 16); i++)
				a.bytes[i] = static_cast<uint8_t>(rng_());
		}
		// Traffic to ::ffff:a.b.c.d, as connect6 sees it, not yet normalised.
		if (a.family == AL_FAMILY_IPV4 && chance(10)) {
			Address m;
			m.family = AL_FAMILY_IPV6;
			m.bytes[10] = m.bytes[11] = 0xff;
			std::copy(a.bytes.begin(), a.bytes.begin() + 4, m.bytes.begin() + 12);
			return m;
		}
		return a;
	}

	uint16_t dest_port(const std::vector<ModelRule>& rules)
	{
		std::vector<int> edges;
		for (const auto& r : rules)
			for (const auto& [lo, hi] : r.ports)
				for (int p : {lo - 1, lo, hi, hi + 1})
					if (p >= 0 && p <= 65535)
						edges.push_back(p);
		uint32_t kind = below(100);
		if (kind < 50 && !edges.empty())
			return static_cast<uint16_t>(edges[below(edges.size())]);
		if (kind < 80)
			return static_cast<uint16_t>(port());
		if (kind < 85)
			return 0;
		return static_cast<uint16_t>(below(65536));
	}

private:
	std::mt19937 rng_;
};

std::string cidr_text(const ModelRule& r, bool mapped, bool omit_len)
{
	std::ostringstream s;
	if (r.family == AL_FAMILY_IPV4) {
		if (mapped)
			s << "::ffff:";
		s << int(r.addr[0]) << "." << int(r.addr[1]) << "." << int(r.addr[2]) << "." << int(r.addr[3]);
		if (!omit_len)
			s << "/" << (mapped ? r.len + 96 : r.len);
	} else {
		// All eight groups, hex: no help from inet_ntop.
		s << std::hex;
		for (int g = 0; g < 8; g++)
			s << (g ? ":" : "") << ((r.addr[2 * g] << 8) | r.addr[2 * g + 1]);
		s << std::dec;
		if (!omit_len)
			s << "/" << r.len;
	}
	return s.str();
}

std::string rule_json(const ModelRule& r, Gen& g)
{
	std::string s = std::string(R"({"action": ")") + (r.allow ? "allow" : "deny") + "\"";
	if (r.is_domain)
		return s + R"(, "domain": "svc.example.com"})";
	int bits = r.family == AL_FAMILY_IPV4 ? 32 : 128;
	bool mapped = r.family == AL_FAMILY_IPV4 && g.chance(20);
	bool omit_len = r.len == bits && g.chance(50);
	s += R"(, "cidr": ")" + cidr_text(r, mapped, omit_len) + "\"";
	if (!r.ports.empty()) {
		s += R"(, "ports": [)";
		for (size_t i = 0; i < r.ports.size(); i++) {
			auto [lo, hi] = r.ports[i];
			s += i ? ", " : "";
			s += lo == hi && g.chance(70) ? std::to_string(lo)
						      : "\"" + std::to_string(lo) + "-" + std::to_string(hi) + "\"";
		}
		s += "]";
	}
	if (r.proto == AL_PROTO_TCP)
		s += R"(, "protocol": "tcp")";
	else if (r.proto == AL_PROTO_UDP)
		s += R"(, "protocol": "udp")";
	else if (r.proto == AL_PROTO_ICMP)
		s += R"(, "protocol": "icmp")";
	return s + "}";
}

// The definition of docs/verdicts.md, from the generator's own model and
// without the library's contains() or precedence: longest prefix, then deny,
// then the lower index.
KernelDecision model_decision(const std::vector<ModelRule>& rules, const Address& dst_in, uint16_t port, uint8_t proto)
{
	Address dst = dst_in;
	static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (dst.family == AL_FAMILY_IPV6 && std::equal(kMapped, kMapped + 12, dst.bytes.begin())) {
		dst.family = AL_FAMILY_IPV4;
		std::array<uint8_t, 16> v4{};
		std::copy(dst.bytes.begin() + 12, dst.bytes.end(), v4.begin());
		dst.bytes = v4;
	}
	int best = -1;
	for (size_t i = 0; i < rules.size(); i++) {
		const ModelRule& r = rules[i];
		if (r.is_domain || r.family != dst.family || !(r.proto & proto))
			continue;
		bool in = true;
		for (int b = 0; b < r.len && in; b++)
			in = Gen::bit(r.addr, b) == Gen::bit(dst.bytes, b);
		if (!in)
			continue;
		bool port_ok = r.ports.empty() || std::any_of(r.ports.begin(), r.ports.end(), [&](auto pr) {
				       return pr.first <= port && port <= pr.second;
			       });
		if (!port_ok)
			continue;
		if (best < 0) {
			best = static_cast<int>(i);
			continue;
		}
		const ModelRule& b = rules[best];
		if (r.len > b.len || (r.len == b.len && !r.allow && b.allow))
			best = static_cast<int>(i);  // equal and same action: the earlier stays
	}
	if (best < 0)
		return {false, AL_RULE_NONE};
	return {rules[best].allow, static_cast<uint16_t>(best)};
}

std::string show(const KernelDecision& d)
{
	return std::string(d.allowed ? "allow" : "deny") + " rule " +
	       (d.rule == AL_RULE_NONE ? std::string("none") : std::to_string(d.rule));
}

TEST(CompileProperty, KernelLookupMatchesTheDefinition)
{
	constexpr int kPolicies = 400;
	constexpr int kDestinations = 2000;
	const uint8_t kProtos[] = {AL_PROTO_TCP, AL_PROTO_UDP, AL_PROTO_ICMP};
	Gen g(20240611);

	int compiled = 0, too_many_ranges = 0, attempts = 0;
	long lookups = 0, allowed = 0, denied_by_rule = 0, default_denied = 0, max_ranges = 0;
	int mismatches = 0;
	while (compiled < kPolicies && attempts < 4 * kPolicies) {
		attempts++;
		std::vector<ModelRule> rules;
		int n = 1 + static_cast<int>(g.below(12));
		std::string json_rules;
		for (int i = 0; i < n; i++) {
			rules.push_back(g.rule());
			json_rules += (i ? ",\n  " : "") + rule_json(rules.back(), g);
		}
		std::string text = doc(json_rules, g.chance(20) ? R"("mode": "audit", )" : "");
		SCOPED_TRACE("policy:\n" + text);

		auto parsed = parse_policy_text(text, kFile);
		ASSERT_TRUE(parsed.ok()) << (errors_in(parsed).empty() ? "" : errors_in(parsed)[0].str());
		const Policy& p = *parsed;
		ASSERT_EQ(p.rules.size(), rules.size());

		uint32_t id = 1 + static_cast<uint32_t>(attempts) * 2654435761u % 100000u;
		auto c = compile_policy(p, id);
		if (!c) {
			// The only way a generated policy can fail.
			ASSERT_FALSE(errors_in(c).empty());
			for (const auto& e : errors_in(c))
				ASSERT_NE(e.message.find("port ranges once less specific rules are folded in"),
					  std::string::npos)
					<< e.str();
			too_many_ranges++;
			continue;
		}
		compiled++;
		for (const auto& e : c->prefixes) {
			ASSERT_EQ(e.key.policy_id, id);
			ASSERT_LE(e.value.count, static_cast<uint32_t>(AL_MAX_RANGES));
			max_ranges = std::max<long>(max_ranges, e.value.count);
		}

		for (int d = 0; d < kDestinations && mismatches < 5; d++) {
			Address dst = g.destination(rules);
			uint16_t port = g.dest_port(rules);
			for (uint8_t proto : kProtos) {
				KernelDecision k = kernel_lookup(*c, id, dst, port, proto);
				KernelDecision ref = reference_decision(p, dst, port, proto);
				KernelDecision model = model_decision(rules, dst, port, proto);
				lookups++;
				if (k.allowed)
					allowed++;
				else if (k.rule == AL_RULE_NONE)
					default_denied++;
				else
					denied_by_rule++;
				if (!(k == ref && k == model)) {
					mismatches++;
					ADD_FAILURE()
						<< "destination " << format_address(dst) << " port " << port
						<< " proto bit " << int(proto) << ": kernel_lookup " << show(k)
						<< ", reference_decision " << show(ref) << ", model " << show(model);
				}
			}
		}
		// Another policy's id never matches these entries.
		ASSERT_EQ(kernel_lookup(*c, id + 1, g.destination(rules), 443, AL_PROTO_TCP), kDefaultDeny);
		if (mismatches >= 5)
			break;
	}
	EXPECT_EQ(mismatches, 0);
	EXPECT_GE(compiled, 300);
	EXPECT_GE(lookups, 300L * 2000 * 3);
	// The generator must exercise every outcome, or the property says little.
	EXPECT_GT(allowed, lookups / 20);
	EXPECT_GT(denied_by_rule, lookups / 20);
	EXPECT_GT(default_denied, lookups / 20);
	RecordProperty("policies", compiled);
	RecordProperty("too_many_ranges", too_many_ranges);
	std::cout << "[ property ] " << compiled << " policies (" << too_many_ranges << " over " << AL_MAX_RANGES
		  << " ranges skipped), " << lookups << " lookups: " << allowed << " allowed, " << denied_by_rule
		  << " denied by a rule, " << default_denied << " default-denied; up to " << max_ranges
		  << " ranges in one entry\n";
}

}  // namespace
}  // namespace airlock
