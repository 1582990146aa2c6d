// The simulated world and the gates in policy files: redirect rules and
// their targets, the "world" block, "tls" and "budget" on allow rules; every
// error exactly; where redirect sits against allow and deny; what goes
// through the proxy and what the kernel alone rewrites.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "policy/compile.h"
#include "policy/policy.h"
#include "policy_text.h"
#include "sandbox/sandbox.h"

namespace airlock {
namespace {

using policy_test::errors_of;
using policy_test::kFile;
using policy_test::parse_ok;

std::string doc(const std::string& rules, const std::string& extra = "")
{
	return R"({"version": 1, "name": "t", "rules": [)" + rules + "]" + extra + "}";
}

using Lines = std::vector<std::string>;

TEST(PolicyWorld, ARedirectToTheWorldOrASimulator)
{
	Policy p = parse_ok(doc(R"({"action": "redirect", "cidr": "0.0.0.0/0", "to": "world"},
				    {"action": "redirect", "domain": "smtp.example.com", "ports": [25], "protocol": "tcp",
				     "to": "127.0.0.1:2525"},
				    {"action": "redirect", "cidr": "2001:db8::/32", "to": "[::1]:8025"})"));
	// The file's three, and the world's DNS addresses after them.
	ASSERT_EQ(p.rules.size(), 4u);
	EXPECT_EQ(describe(p.rules[3]), "redirect 198.18.0.0/15 to world");
	EXPECT_EQ(p.rules[3].index, 3u);
	EXPECT_EQ(p.rules[0].action, Action::Redirect);
	ASSERT_TRUE(p.rules[0].redirect);
	EXPECT_TRUE(p.rules[0].redirect->world);
	EXPECT_TRUE(p.rules[0].through_proxy());
	ASSERT_TRUE(p.rules[1].redirect);
	EXPECT_FALSE(p.rules[1].redirect->world);
	EXPECT_EQ(format_address(p.rules[1].redirect->address), "127.0.0.1");
	EXPECT_EQ(p.rules[1].redirect->port, 2525);
	EXPECT_EQ(describe(p.rules[0]), "redirect 0.0.0.0/0 to world");
	EXPECT_EQ(describe(p.rules[1]), "redirect smtp.example.com ports 25 tcp to 127.0.0.1:2525");
	EXPECT_EQ(describe(p.rules[2]), "redirect 2001:db8::/32 to [::1]:8025");
	// A redirect to the world brings the world's defaults.
	ASSERT_TRUE(p.world);
	EXPECT_EQ(p.world->records_dir, "/var/log/airlock/world");
	EXPECT_EQ(p.world->max_body_bytes, 65536u);
	EXPECT_TRUE(p.world->synthesize_dns);
	// Only to a simulator: no world.
	EXPECT_FALSE(parse_ok(doc(R"({"action": "redirect", "cidr": "10.0.0.0/8", "to": "10.1.1.1:80"})")).world);
}

TEST(PolicyWorld, ARedirectToASimulatorIsTheKernelsAndCompilesToItsTarget)
{
	Policy p = parse_ok(doc(R"({"action": "redirect", "cidr": "0.0.0.0/0", "to": "world"},
				    {"action": "redirect", "domain": "smtp.example.com", "ports": [25], "protocol": "tcp",
				     "to": "127.0.0.1:2525"},
				    {"action": "redirect", "cidr": "2001:db8::/32", "to": "[::ffff:127.0.0.1]:8025"},
				    {"action": "redirect", "cidr": "2001:db9::/32", "to": "[fd00::5]:80"})"));
	EXPECT_FALSE(p.rules[0].to_target());
	for (size_t i : {1u, 2u, 3u}) {
		EXPECT_TRUE(p.rules[i].to_target()) << i;
		EXPECT_FALSE(p.rules[i].through_proxy()) << i;
	}
	auto c = compile_policy(p, 7);
	ASSERT_TRUE(c);
	ASSERT_EQ(c->targets.size(), 3u);
	EXPECT_EQ(c->targets[0].first, 1);
	EXPECT_EQ(c->targets[0].second.family, AL_FAMILY_IPV4);
	EXPECT_EQ(c->targets[0].second.port, 2525);
	EXPECT_EQ(format_address(from_raw(AL_FAMILY_IPV4, c->targets[0].second.addr)), "127.0.0.1");
	// A v4-mapped target is IPv4, as the kernel routes it.
	EXPECT_EQ(c->targets[1].first, 2);
	EXPECT_EQ(c->targets[1].second.family, AL_FAMILY_IPV4);
	EXPECT_EQ(format_address(from_raw(AL_FAMILY_IPV4, c->targets[1].second.addr)), "127.0.0.1");
	EXPECT_EQ(c->targets[2].second.family, AL_FAMILY_IPV6);
	EXPECT_EQ(format_address(from_raw(AL_FAMILY_IPV6, c->targets[2].second.addr)), "fd00::5");
	EXPECT_EQ(c->targets[2].second.port, 80);
	// The egress program looks a socket's origin up for a target only in a
	// sandbox that has one.
	EXPECT_EQ(c->sandbox_flags & AL_SB_TARGETS, static_cast<uint32_t>(AL_SB_TARGETS));
	auto world = compile_policy(parse_ok(doc(R"({"action": "redirect", "cidr": "0.0.0.0/0", "to": "world"})")), 7);
	ASSERT_TRUE(world);
	EXPECT_EQ(world->sandbox_flags & AL_SB_TARGETS, 0u);
}

TEST(PolicyWorld, RedirectErrorsNameTheirPath)
{
	const std::string R = "p.json: rules/0";
	// A target is one unicast address: not the unspecified one (a connect
	// takes it for loopback), not multicast, not broadcast.
	for (const char* bad :
	     {"0.0.0.0:80", "224.0.0.1:80", "239.1.2.3:80", "255.255.255.255:80", "[::]:80", "[ff02::1]:80"})
		EXPECT_EQ(errors_of(doc(std::string(R"({"action": "redirect", "cidr": "10.0.0.0/8", "to": ")") + bad +
					"\"}")),
			  Lines{R + "/to: '" + bad + "' is not a unicast address (a simulator listens on one address)"})
			<< bad;
	EXPECT_EQ(errors_of(doc(R"({"action": "redirect", "cidr": "10.0.0.0/8", "to": "sim.example.com:25"})")),
		  Lines{R + "/to: 'sim.example.com:25' is not \"world\" nor ADDRESS:PORT ([ADDRESS]:PORT for IPv6; an "
			    "address, not a name)"});
	for (const char* bad : {"127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "::1:80", "[::1]80", "[::1]:", ":80",
				"127.0.0.1:8x", "World"})
		EXPECT_EQ(errors_of(doc(std::string(R"({"action": "redirect", "cidr": "10.0.0.0/8", "to": ")") + bad +
					"\"}"))
				  .size(),
			  1u)
			<< bad;
	EXPECT_EQ(errors_of(doc(R"({"action": "redirect", "cidr": "10.0.0.0/8", "to": 25})")),
		  Lines{R + "/to: expected a string, got an integer"});
	EXPECT_EQ(errors_of(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "to": "world"})")),
		  Lines{R + "/to: applies to redirect rules only"});
	EXPECT_EQ(errors_of(doc(R"({"action": "redirect", "unix": "/run/x.sock", "to": "world"})")),
		  (Lines{R + "/to: does not apply to a unix rule",
			 R + "/action: a unix socket cannot be redirected (allow, deny or refuse it)"}));
	EXPECT_EQ(errors_of(doc(R"({"action": "redirect", "cidr": "10.0.0.0/8", "protocol": "icmp", "to": "world"})")),
		  Lines{R + "/protocol: ICMP cannot be redirected (tcp, udp, or both)"});
}

TEST(PolicyWorld, TheWorldBlock)
{
	Policy p = parse_ok(doc(R"({"action": "redirect", "cidr": "0.0.0.0/0", "to": "world"})",
				R"(, "world": {"records": "/srv/world", "max_body_bytes": 1024, "dns": "resolvers",
				   "responses": [{"host": "*.example.com", "method": "POST", "path": "/api/*", "status": 201,
				   "headers": {"Content-Type": "application/json"}, "body": "{}"}, {"host": "*"}]})"));
	ASSERT_TRUE(p.world);
	EXPECT_EQ(p.world->records_dir, "/srv/world");
	EXPECT_EQ(p.world->max_body_bytes, 1024u);
	EXPECT_FALSE(p.world->synthesize_dns);
	ASSERT_EQ(p.world->responses.size(), 2u);
	EXPECT_EQ(p.world->responses[0].host, "*.example.com");
	EXPECT_EQ(p.world->responses[0].method, "POST");
	EXPECT_EQ(p.world->responses[0].path, "/api/*");
	EXPECT_EQ(p.world->responses[0].status, 201u);
	EXPECT_EQ(p.world->responses[0].headers,
		  (std::vector<std::pair<std::string, std::string>>{{"Content-Type", "application/json"}}));
	EXPECT_EQ(p.world->responses[1].status, 200u);

	const std::string redirect = R"({"action": "redirect", "cidr": "0.0.0.0/0", "to": "world"})";
	EXPECT_EQ(errors_of(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"})", R"(, "world": {})")),
		  Lines{"p.json: world: no rule redirects to \"world\""});
	EXPECT_EQ(errors_of(doc(redirect, R"(, "world": {"record": "/x"})")),
		  Lines{"p.json: world: unknown key 'record'"});
	EXPECT_EQ(errors_of(doc(redirect, R"(, "world": {"records": "rel/dir"})")),
		  Lines{"p.json: world/records: 'rel/dir' is not an absolute directory"});
	EXPECT_EQ(errors_of(doc(redirect, R"(, "world": {"max_body_bytes": -1})")),
		  Lines{"p.json: world/max_body_bytes: -1 is out of range (0-16777216)"});
	EXPECT_EQ(errors_of(doc(redirect, R"(, "world": {"max_body_bytes": 16777217})")),
		  Lines{"p.json: world/max_body_bytes: 16777217 is out of range (0-16777216)"});
	EXPECT_EQ(errors_of(doc(redirect, R"(, "world": {"dns": "real"})")),
		  Lines{"p.json: world/dns: 'real' is not one of synthesize, resolvers"});
	EXPECT_EQ(errors_of(doc(redirect, R"(, "world": {"responses": [{"method": "get", "path": "x", "status": 99,
		  "headers": {"Bad Name": "v", "X-A": "a\nb", "X-B": 1}}]})")),
		  (Lines{"p.json: world/responses/0/host: missing (a name, *.name, or * for any)",
			 "p.json: world/responses/0/method: 'get' is not an HTTP method (GET, POST, ...)",
			 "p.json: world/responses/0/path: 'x' does not start with /",
			 "p.json: world/responses/0/status: 99 is not an HTTP status (100-599)",
			 "p.json: world/responses/0/headers/Bad Name: is not an HTTP header name",
			 "p.json: world/responses/0/headers/X-A: holds a line break",
			 "p.json: world/responses/0/headers/X-B: expected a string, got an integer"}));
}

// A gated allow rule is a redirect in the kernel, for TCP only: its
// connects go to the proxy, its UDP (QUIC) is not taken, and its name's
// queries still leave for the real resolvers.
TEST(PolicyWorld, AGatedRuleIsARedirectOfTcpInTheKernel)
{
	Policy p = parse_ok(doc(R"({"action": "allow", "domain": "pypi.org", "ports": [443], "protocol": "tcp",
				    "tls": {"sni": "require"}},
				    {"action": "allow", "domain": "example.org", "ports": [443], "protocol": "tcp"})"));
	auto c = compile_policy(p, 1);
	ASSERT_TRUE(c);
	EXPECT_EQ(reference_name_decision(p, "pypi.org", 443, AL_PROTO_TCP), (KernelDecision{false, 0, true}));
	EXPECT_EQ(reference_name_decision(p, "example.org", 443, AL_PROTO_TCP), (KernelDecision{true, 1, false}));
	const al_rule_set* rs = kernel_name_lookup(*c, "pypi.org");
	ASSERT_NE(rs, nullptr);
	ASSERT_EQ(rs->count, 1u);
	EXPECT_EQ(rs->ranges[0].action, AL_ACTION_REDIRECT);
	EXPECT_EQ(rs->ranges[0].proto_mask, AL_PROTO_TCP);
	EXPECT_EQ(rs->ranges[0].port_lo, 443);
	EXPECT_EQ(rs->ranges[0].port_hi, 443);
	EXPECT_TRUE(rs->flags & AL_RS_QUERY) << "the gate needs the name's real addresses";
}

TEST(PolicyWorld, TlsAndBudgetOnAllowRules)
{
	Policy p = parse_ok(doc(R"({"action": "allow", "domain": "pypi.org", "ports": [443], "protocol": "tcp",
				    "tls": {"sni": "require"}, "budget": {"egress_bytes": 1048576}},
				    {"action": "allow", "cidr": "10.0.0.0/8", "budget": {"egress_bytes": 1}})"));
	ASSERT_EQ(p.rules.size(), 2u);
	EXPECT_TRUE(p.rules[0].tls_sni_require);
	EXPECT_TRUE(p.rules[0].through_proxy());
	EXPECT_EQ(p.rules[0].budget_egress_bytes, 1048576u);
	EXPECT_EQ(describe(p.rules[0]), "allow pypi.org ports 443 tcp sni-gate budget 1048576 bytes");
	EXPECT_FALSE(p.rules[1].through_proxy()) << "a budget is counted in the kernel";
	EXPECT_FALSE(p.world);

	const std::string R = "p.json: rules/0";
	EXPECT_EQ(errors_of(doc(
			  R"({"action": "allow", "domain": "a.com", "protocol": "tcp", "tls": {"sni": "prefer"}})")),
		  Lines{R + "/tls/sni: 'prefer' is not require"});
	EXPECT_EQ(errors_of(doc(R"({"action": "allow", "domain": "a.com", "protocol": "tcp", "tls": {}})")),
		  Lines{R + "/tls/sni: missing (\"require\")"});
	EXPECT_EQ(errors_of(doc(R"({"action": "allow", "domain": "a.com", "tls": {"sni": "require"}})")),
		  Lines{R +
			"/tls: needs \"protocol\": \"tcp\" (UDP to the same destination would pass beside the gate: "
			"QUIC falls back to TCP when it is denied)"});
	EXPECT_EQ(
		errors_of(doc(
			R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "tcp", "tls": {"sni": "require"}})")),
		Lines{R + "/tls: applies to domain rules (the ClientHello's name is checked against the rule's)"});
	EXPECT_EQ(errors_of(doc(R"({"action": "deny", "domain": "a.com", "tls": {"sni": "require"}, "budget": {}})")),
		  (Lines{R + "/tls: applies to allow rules only", R + "/budget: applies to allow rules only"}));
	EXPECT_EQ(errors_of(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "budget": {"egress_bytes": 0}})")),
		  Lines{R + "/budget/egress_bytes: 0 is out of range (1-1125899906842624)"});
	EXPECT_EQ(errors_of(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "budget": {"bytes": 5}})")),
		  (Lines{R + "/budget: unknown key 'bytes'", R + "/budget/egress_bytes: missing"}));
	EXPECT_EQ(errors_of(doc(R"({"action": "allow", "cidr": "10.0.0.0/8", "budget": {"egress_bytes": "5"}})")),
		  Lines{R + "/budget/egress_bytes: expected an integer, got a string"});
}

// At equal specificity: deny, then redirect, then allow; a more specific
// rule wins whatever its action.
TEST(PolicyWorld, RedirectSitsBetweenDenyAndAllow)
{
	Policy p = parse_ok(doc(R"({"action": "allow", "cidr": "10.0.0.0/8"},
				    {"action": "redirect", "cidr": "10.0.0.0/8", "to": "world"},
				    {"action": "deny", "cidr": "10.9.0.0/16", "ports": [22]},
				    {"action": "redirect", "cidr": "10.9.0.0/16", "ports": [22], "to": "world"},
				    {"action": "allow", "cidr": "10.8.0.0/16"},
				    {"action": "allow", "domain": "a.example", "ports": [443]},
				    {"action": "redirect", "domain": "a.example", "to": "world"},
				    {"action": "allow", "domain": "b.a.example"})"));
	auto compiled = compile_policy(p, 7);
	ASSERT_TRUE(compiled);
	const CompiledPolicy& c = *compiled;
	auto at = [&](const char* a, uint16_t port) {
		return kernel_lookup(c, 7, *parse_address(a), port, AL_PROTO_TCP);
	};
	EXPECT_EQ(at("10.1.2.3", 80), (KernelDecision{false, 1, true})) << "redirect beats allow at /8";
	EXPECT_EQ(at("10.9.1.1", 22), (KernelDecision{false, 2, false})) << "deny beats redirect at /16";
	EXPECT_EQ(at("10.9.1.1", 80), (KernelDecision{false, 1, true})) << "the /16's other ports fall to the /8";
	EXPECT_EQ(at("10.8.1.1", 80), (KernelDecision{true, 4, false})) << "a longer allow beats the redirect";
	for (const char* a : {"10.1.2.3", "10.9.1.1", "10.8.1.1"})
		for (uint16_t port : {22, 80, 443})
			EXPECT_EQ(at(a, port), reference_decision(p, *parse_address(a), port, AL_PROTO_TCP))
				<< a << port;
	EXPECT_EQ(reference_name_decision(p, "a.example", 443, AL_PROTO_TCP), (KernelDecision{false, 6, true}));
	EXPECT_EQ(reference_name_decision(p, "b.a.example", 443, AL_PROTO_TCP), (KernelDecision{true, 7, false}));
	const al_rule_set* rs = kernel_name_lookup(c, "a.example");
	ASSERT_NE(rs, nullptr);
	ASSERT_GE(rs->count, 1u);
	EXPECT_EQ(rs->ranges[0].action, AL_ACTION_REDIRECT);
	EXPECT_EQ(rs->ranges[0].rule, 6);
}

// world.dns "synthesize": every query goes to the world (AL_DNS_WORLD) and
// the addresses it answers with are redirected to it; a resolver listed
// beside it is an error naming its path. "resolvers": neither.
TEST(PolicyWorld, ASynthesizingWorldTakesEveryQueryAndItsAddresses)
{
	std::string rule = R"({"action": "redirect", "cidr": "203.0.113.0/24", "to": "world"})";
	Policy p = parse_ok(doc(rule));
	auto c = compile_policy(p, 1);
	ASSERT_TRUE(c);
	EXPECT_TRUE(c->dns.flags & AL_DNS_WORLD);
	ASSERT_EQ(p.rules.size(), 2u);
	EXPECT_EQ(describe(p.rules[1]), "redirect 198.18.0.0/15 to world");

	Policy r = parse_ok(doc(rule, R"(, "world": {"dns": "resolvers"}, "dns": {"resolvers": ["10.0.0.53"]})"));
	auto rc = compile_policy(r, 1);
	ASSERT_TRUE(rc);
	EXPECT_FALSE(rc->dns.flags & AL_DNS_WORLD);
	EXPECT_EQ(r.rules.size(), 1u);

	EXPECT_EQ(errors_of(doc(rule, R"(, "dns": {"resolvers": ["10.0.0.53"]})")),
		  Lines{"p.json: dns/resolvers: not used: world.dns is \"synthesize\" (the world answers every query); "
			"remove them, or set world.dns to \"resolvers\""});
}

// A redirect to the world whose DNS is synthesized lets no query leave for
// its names; to the resolvers, or to a simulator, queries may leave.
TEST(PolicyWorld, QueriesLeaveOnlyWhereTheWorldDoesNotAnswerThem)
{
	auto query_flag = [](const std::string& extra, const std::string& to) {
		Policy p = parse_ok(
			doc(R"({"action": "redirect", "domain": "x.example", "to": ")" + to + "\"}", extra));
		auto c = compile_policy(p, 1);
		EXPECT_TRUE(c);
		const al_rule_set* rs = c ? kernel_name_lookup(*c, "x.example") : nullptr;
		return rs && (rs->flags & AL_RS_QUERY);
	};
	EXPECT_FALSE(query_flag("", "world"));
	EXPECT_TRUE(query_flag(R"(, "world": {"dns": "resolvers"})", "world"));
	EXPECT_TRUE(query_flag("", "127.0.0.1:53"));
}

// Where a policy is enforced (run, attach, create, reload), every redirect,
// the SNI gate and a byte budget are enforced: such a policy loads.
TEST(PolicyWorld, APolicyWithEveryRedirectAndGateLoadsWhereItIsEnforced)
{
	std::string dir = ::testing::TempDir() + "/airlock-world-" + std::to_string(::getpid());
	std::filesystem::create_directories(dir);
	std::string file = dir + "/w.json";
	std::ofstream(file) << doc(R"({"action": "allow", "cidr": "10.0.0.0/8"},
				      {"action": "redirect", "cidr": "0.0.0.0/0", "to": "world"},
				      {"action": "redirect", "cidr": "::/0", "to": "[2001:db8::1]:8080"},
				      {"action": "allow", "domain": "a.com", "protocol": "tcp", "tls": {"sni": "require"},
				       "budget": {"egress_bytes": 10}})");
	EXPECT_TRUE(load_policy(file));
	EXPECT_TRUE(load_policy(std::string(AIRLOCK_SOURCE_DIR) + "/policies/eval-world.json"));
	std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace airlock
