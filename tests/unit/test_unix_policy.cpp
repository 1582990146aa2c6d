// Unix rules: the exact messages for bad targets, and the compiled entries
// against the rule-by-rule definition (an exact path, else the longest
// prefix; deny wins at equal specificity).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/compile.h"
#include "policy/policy.h"
#include "policy_errors.h"

namespace airlock {
namespace {

std::vector<std::string> errors_of(const std::string& rules)
{
	auto r = parse_policy_text(R"({"version": 1, "name": "t", "rules": [)" + rules + "]}", "p.json");
	std::vector<std::string> out;
	for (const auto& e : errors_in(r))
		out.push_back(e.str());
	return out;
}

Policy parse(const std::string& rules)
{
	auto r = parse_policy_text(R"({"version": 1, "name": "t", "rules": [)" + rules + "]}", "p.json");
	for (const auto& e : errors_in(r))
		ADD_FAILURE() << e.str();
	return r ? *r : Policy{};
}

TEST(UnixPolicy, ARuleNamingABuiltInProbeReplacesIt)
{
	Policy p = parse(R"({"action": "allow", "unix": "/run/nscd/socket"})");
	auto c = compile_policy(p, 1);
	ASSERT_TRUE(c);
	EXPECT_EQ(c->unix_rules.size(), 3u);
	EXPECT_EQ(kernel_unix_lookup(*c, false, "/run/nscd/socket"), (KernelDecision{true, 0}));
	EXPECT_EQ(reference_unix_decision(p, false, "/run/nscd/socket"), (KernelDecision{true, 0}));
	auto errs = errors_of(R"({"action": "refuse", "cidr": "10.0.0.0/8"})");
	ASSERT_EQ(errs.size(), 1u);
	EXPECT_EQ(errs[0], "p.json: rules/0/action: 'refuse' applies to unix rules only");
}

TEST(UnixPolicy, BadTargetsNameTheirPathAndWhy)
{
	struct Case {
		std::string rule, error;
	} cases[] = {
		{R"({"action": "allow", "unix": "run/x.sock"})",
		 "p.json: rules/0/unix: 'run/x.sock' is not a unix socket address: it starts with '/' (a path) or '@' (an "
		 "abstract name)"},
		{R"({"action": "allow", "unix": "/run/../x.sock"})",
		 "p.json: rules/0/unix: '/run/../x.sock' is not a unix socket address: it has an empty, '.' or '..' "
		 "component (write the path as it is)"},
		{R"({"action": "allow", "unix": "/run//x.sock"})",
		 "p.json: rules/0/unix: '/run//x.sock' is not a unix socket address: it has an empty, '.' or '..' component "
		 "(write the path as it is)"},
		{R"({"action": "allow", "unix": "/run/"})",
		 "p.json: rules/0/unix: '/run/' is not a unix socket address: it has an empty, '.' or '..' component "
		 "(write the path as it is)"},
		{R"({"action": "allow", "unix": "/r*n/x"})",
		 "p.json: rules/0/unix: '/r*n/x' is not a unix socket address: '*' may only end it (a prefix)"},
		{R"({"action": "allow", "unix": "@"})",
		 "p.json: rules/0/unix: '@' is not a unix socket address: an abstract name has at least one byte ('@*' "
		 "means every abstract name)"},
		{R"({"action": "allow", "unix": "/)" + std::string(108, 'a') + R"("})",
		 "p.json: rules/0/unix: '/" + std::string(108, 'a') +
			 "' is not a unix socket address: longer than 108 bytes"},
		{R"({"action": "allow", "unix": 7})", "p.json: rules/0/unix: expected a string, got an integer"},
		{R"({"action": "allow", "unix": "/run/x.sock", "ports": [1]})",
		 "p.json: rules/0/ports: does not apply to a unix rule"},
		{R"({"action": "allow", "unix": "/run/x.sock", "cidr": "10.0.0.0/8"})",
		 "p.json: rules/0: needs exactly one of 'cidr', 'domain' or 'unix'"},
	};
	for (const auto& c : cases) {
		auto errs = errors_of(c.rule);
		ASSERT_EQ(errs.size(), 1u) << c.rule << "\n" << (errs.empty() ? "" : errs[0]);
		EXPECT_EQ(errs[0], c.error);
	}
}

TEST(UnixPolicy, TargetsKeepTheirKindPrefixAndBytes)
{
	Policy p = parse(R"({"action": "allow", "unix": "/run/agent/*"}, {"action": "deny", "unix": "@x11*"},
			    {"action": "allow", "unix": "/run/x.sock"}, {"action": "allow", "unix": "@*"})");
	ASSERT_EQ(p.rules.size(), 4u);
	EXPECT_EQ(*p.rules[0].unix_target, (UnixTarget{false, true, "/run/agent/"}));
	EXPECT_EQ(*p.rules[1].unix_target, (UnixTarget{true, true, "x11"}));
	EXPECT_EQ(*p.rules[2].unix_target, (UnixTarget{false, false, "/run/x.sock"}));
	EXPECT_EQ(*p.rules[3].unix_target, (UnixTarget{true, true, ""}));
	EXPECT_EQ(describe(p.rules[1]), "deny unix @x11*");
	EXPECT_TRUE(allows_outside_abstract(p));
	EXPECT_FALSE(allows_outside_abstract(parse(R"({"action": "deny", "unix": "@x"})")));
}

// The compiled entries decide every probe exactly as the definition does.
TEST(UnixPolicy, CompiledEntriesMatchTheDefinition)
{
	Policy p = parse(R"({"action": "allow", "unix": "/run/*"},
			    {"action": "deny", "unix": "/run/docker.sock"},
			    {"action": "allow", "unix": "/run/docker.sock"},
			    {"action": "deny", "unix": "/run/user/*"},
			    {"action": "allow", "unix": "/run/user/1000/bus"},
			    {"action": "allow", "unix": "@svc*"},
			    {"action": "deny", "unix": "@svc-admin"},
			    {"action": "deny", "unix": "/*"})");
	auto c = compile_policy(p, 7);
	ASSERT_TRUE(c);
	// The two docker.sock rules are one entry; three built-in refusals.
	EXPECT_EQ(c->unix_rules.size(), 10u);
	struct Probe {
		bool abstract;
		std::string bytes;
		std::optional<KernelDecision> want;
	} probes[] = {
		{false, "/run/x.sock", KernelDecision{true, 0}},
		{false, "/run/docker.sock", KernelDecision{false, 1}},
		{false, "/run/user/1000/x", KernelDecision{false, 3}},
		{false, "/run/user/1000/bus", KernelDecision{true, 4}},
		{false, "/runx", KernelDecision{false, 7}},
		{false, "/tmp/x", KernelDecision{false, 7}},
		{false, "/run/nscd/socket", KernelDecision{false, AL_RULE_NONE}},
		{false, "/var/run/nscd/socket", KernelDecision{false, AL_RULE_NONE}},
		{false, "/run/systemd/userdb/io.systemd.Multiplexer", KernelDecision{false, AL_RULE_NONE}},
		{true, "svc", KernelDecision{true, 5}},
		{true, "svc-admin", KernelDecision{false, 6}},
		{true, "sv", std::nullopt},
		{true, "/run/x.sock", std::nullopt},
	};
	for (const auto& pr : probes) {
		EXPECT_EQ(reference_unix_decision(p, pr.abstract, pr.bytes), pr.want) << pr.bytes;
		EXPECT_EQ(kernel_unix_lookup(*c, pr.abstract, pr.bytes), pr.want) << pr.bytes;
	}
}

}  // namespace
}  // namespace airlock
