// Inputs crafted against the parser and the compiler rather than mistakes:
// text that would break a message onto several lines, repeated keys that
// JSON parsers usually resolve in silence, and policies large enough that a
// quadratic compiler would stall a reload.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "policy/compile.h"
#include "policy/policy.h"
#include "policy_errors.h"

namespace airlock {
namespace {

std::vector<std::string> errors_of(const std::string& text)
{
	auto r = parse_policy_text(text, "p.json");
	std::vector<std::string> out;
	for (const auto& e : errors_in(r))
		out.push_back(e.str());
	EXPECT_EQ(r.ok(), out.empty()) << text;
	return out;
}

std::string with_rule(const std::string& rule)
{
	return R"({"version": 1, "name": "t", "rules": [)" + rule + "]}";
}

using Lines = std::vector<std::string>;

// Every place a message echoes user text: a newline or a terminal escape
// there would forge a line in the audit log or on the operator's terminal.
TEST(MessagesStayOnOneLine, EchoedTextIsEscaped)
{
	EXPECT_EQ(errors_of(with_rule(R"({"action": "allow", "cidr": "10.0.0.0\n/8"})")),
		  Lines{"p.json: rules/0/cidr: '10.0.0.0\\x0a/8' is not a CIDR"});
	EXPECT_EQ(errors_of(with_rule(R"({"action": "allow", "cidr": "10.0.0.0/\u001b8"})")),
		  Lines{"p.json: rules/0/cidr: '10.0.0.0/\\x1b8' is not a CIDR"});
	EXPECT_EQ(errors_of(with_rule(R"({"action": "al\nlow", "cidr": "10.0.0.0/8"})")),
		  Lines{"p.json: rules/0/action: 'al\\x0alow' is not one of allow, deny, refuse, redirect"});
	EXPECT_EQ(errors_of(with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "a\nb": 1})")),
		  Lines{"p.json: rules/0: unknown key 'a\\x0ab'"});
	EXPECT_EQ(errors_of(with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["1-\n2"]})")),
		  Lines{"p.json: rules/0/ports/0: '1-\\x0a2' is not a port range (\"LO-HI\", 1 <= LO <= HI <= 65535)"});
	EXPECT_EQ(errors_of(with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "t\rcp"})")),
		  Lines{"p.json: rules/0/protocol: 't\\x0dcp' is not one of tcp, udp, icmp"});
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "a\nb", "rules": []})"),
		  Lines{"p.json: name: 'a\\x0ab' is not a policy name (1-64 of A-Z a-z 0-9 . _ -)"});
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "a", "mode": "x\ny", "rules": []})"),
		  Lines{"p.json: mode: 'x\\x0ay' is not one of enforce, audit"});
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "a", "on_violation": "x\ny", "rules": []})"),
		  Lines{"p.json: on_violation: 'x\\x0ay' is not one of deny, freeze, kill"});
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "a", "rules": [], "x\ny": 1})"),
		  Lines{"p.json: (root): unknown key 'x\\x0ay'"});
}

TEST(MessagesStayOnOneLine, NoMessageEverHoldsAControlCharacter)
{
	// Each field that takes a string, fed a string full of control bytes.
	const std::string nasty = R"(\n\r\t\u001b[2J\u0000\u007f)";
	std::vector<std::string> docs = {
		R"({"version": 1, "name": ")" + nasty + R"(", "rules": []})",
		R"({"version": 1, "name": "a", "mode": ")" + nasty + R"(", "rules": []})",
		R"({"version": 1, "name": "a", "on_violation": ")" + nasty + R"(", "rules": []})",
		R"({"version": 1, "name": "a", "rules": [], ")" + nasty + R"(": 0})",
		R"({"version": 1, "name": "a", "rules": [], "dns": {"resolvers": [")" + nasty + R"("]}})",
		R"({"version": 1, "name": "a", "rules": [], "dns": {"types": [")" + nasty + R"("]}})",
		R"({"version": 1, "name": "a", "rules": [], "dns": {")" + nasty + R"(": 0}})",
		with_rule(R"({"action": ")" + nasty + R"(", "cidr": "10.0.0.0/8"})"),
		with_rule(R"({"action": "allow", "cidr": ")" + nasty + R"("})"),
		with_rule(R"({"action": "allow", "cidr": "10.0.0.0/)" + nasty + R"("})"),
		with_rule(R"({"action": "allow", "domain": ")" + nasty + R"("})"),
		with_rule(R"({"action": "allow", "domain": "a)" + nasty + R"(.com"})"),
		with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": ")" + nasty + R"("})"),
		with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [")" + nasty + R"("]})"),
		with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", ")" + nasty + R"(": 0})"),
		with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "x": 0, "x": 0, ")" + nasty + R"(": 0, ")" +
			  nasty + R"(": 0})"),
	};
	for (const auto& text : docs) {
		auto errs = errors_of(text);
		EXPECT_FALSE(errs.empty()) << text;
		for (const auto& e : errs)
			for (unsigned char c : e)
				EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c) << " in: " << e;
	}
}

// A second "action" must not quietly turn a deny into an allow.
TEST(DuplicateKeys, AreErrorsAtTheObjectsPath)
{
	EXPECT_EQ(errors_of(with_rule(R"({"action": "deny", "cidr": "10.0.0.0/8", "action": "allow"})")),
		  Lines{"p.json: rules/0: duplicate key 'action'"});
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "a", "mode": "enforce", "mode": "audit", "rules": []})"),
		  Lines{"p.json: (root): duplicate key 'mode'"});
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "a", "rules": [], "dns": {"tcp": false, "tcp": true}})"),
		  Lines{"p.json: dns: duplicate key 'tcp'"});
	// The index counts every earlier element, scalars and arrays included.
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "a", "rules": [
		{"action": "allow", "cidr": "10.0.0.0/8", "ports": [1, "2-3", 4]},
		{"action": "allow", "domain": "a.b", "comment": "x"},
		{"action": "deny", "cidr": "10.1.0.0/16", "cidr": "10.2.0.0/16"}]})"),
		  Lines{"p.json: rules/2: duplicate key 'cidr'"});
	// A key repeated in two different objects is not a duplicate.
	EXPECT_EQ(errors_of(with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8"},
				       {"action": "allow", "cidr": "10.1.0.0/16"})")),
		  Lines{});
}

TEST(DuplicateKeys, CollectedWithTheOtherErrors)
{
	EXPECT_EQ(errors_of(R"({"version": 2, "version": 1, "name": "a", "rules": [
		{"action": "allow", "cidr": "10.0.0.1/8", "ports": [0], "ports": [1]}]})"),
		  (Lines{"p.json: (root): duplicate key 'version'", "p.json: rules/0: duplicate key 'ports'",
			 "p.json: rules/0/cidr: '10.0.0.1/8' has host bits set; did you mean '10.0.0.0/8'?"}));
}

TEST(DuplicateKeys, ASyntaxErrorIsTheOnlyReport)
{
	auto errs = errors_of(R"({"mode": "audit", "mode": "audit", )");
	ASSERT_EQ(errs.size(), 1u);
	EXPECT_NE(errs[0].find("invalid JSON"), std::string::npos) << errs[0];
}

TEST(DomainRule, APrefixPointsAtCidr)
{
	EXPECT_EQ(errors_of(with_rule(R"({"action": "allow", "domain": "10.0.0.0/8"})")),
		  Lines{"p.json: rules/0/domain: '10.0.0.0/8' is not a domain name: it is an address (use 'cidr' for "
			"addresses)"});
	EXPECT_EQ(errors_of(with_rule(R"({"action": "allow", "domain": "fd00::/8"})")),
		  Lines{"p.json: rules/0/domain: 'fd00::/8' is not a domain name: it is an address (use 'cidr' for "
			"addresses)"});
}

// A blocklist the size of one sandbox's share of the LPM map, under a broad
// allow: every /32 folds in the /8.
TEST(CompileScale, LargeBlocklistCompilesAndDecidesLikeTheDefinition)
{
	const int n = 16000;
	std::string rules = R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [443], "protocol": "tcp"})";
	for (int i = 0; i < n; i++)
		rules += R"(, {"action": "deny", "cidr": "10.)" + std::to_string(i / 256) + "." +
			 std::to_string(i % 256) + R"(.7/32"})";
	auto pr = parse_policy_text(with_rule(rules), "p.json");
	ASSERT_TRUE(pr.ok());
	auto cr = compile_policy(*pr, 3);
	ASSERT_TRUE(cr) << (errors_in(cr).empty() ? "" : errors_in(cr)[0].str());
	ASSERT_EQ(cr->prefixes.size(), size_t(n) + 1);

	std::mt19937 rng(20261202);
	// Both models scan linearly; a few hundred samples keep the test quick.
	for (int i = 0; i < 300; i++) {
		Address a{};
		a.family = AL_FAMILY_IPV4;
		a.bytes[0] = 10;
		a.bytes[1] = uint8_t(rng() % 70);
		a.bytes[2] = uint8_t(rng());
		a.bytes[3] = (rng() % 2) ? 7 : uint8_t(rng());
		uint16_t port = (rng() % 2) ? 443 : uint16_t(rng());
		KernelDecision want = reference_decision(*pr, a, port, AL_PROTO_TCP);
		EXPECT_EQ(kernel_lookup(*cr, 3, a, port, AL_PROTO_TCP), want) << format_address(a) << ":" << port;
	}
}

}  // namespace
}  // namespace airlock
