// mode audit: the same decisions, recorded with verdict "audit", and
// everything let through; it never latches, freezes or kills, even with
// on_violation freeze.
#include "fixture.h"

namespace it {
namespace {

class AuditMode : public AirlockTest {};

TEST_F(AuditMode, WouldBeDenialsPassAndAreRecorded)
{
	std::string policy = env().write_policy("audit.json", base_policy("it-audit", "freeze", "audit"));
	std::string name = "a" + env().id;
	std::string a = env().marker("aud-a"), dt = env().marker("aud-tcp"), du = env().marker("aud-udp"),
		    d6 = env().marker("aud-v6"), after = env().marker("aud-after");
	RunSpec s;
	s.policy = policy;
	s.name = name;
	s.cmd = Sequence({env().py("tcp_send.py",
				   {dest4(kAllowed4, 9000), a, dest4(kDenied4, 9001), dt, dest6(kDenied6, 9003), d6}),
			  env().py("udp_send.py", {dest4(kDenied4, 9002), du, dest4(kAllowed4, 9004), after})});
	RunResult rr = env().run(s, 20s);
	ASSERT_EQ(rr.r.status, 0) << "an audit-mode sandbox must run to completion\n" << rr.describe();
	EXPECT_FALSE(exists(env().sandbox_cgroup(name)));
	for (const auto& m : {a, dt, du, d6, after}) {
		EXPECT_TRUE(Ok(ResultFor(rr, m))) << "audit mode refused " << m << "\n" << rr.describe();
		EXPECT_TRUE(ArrivedIntact(env(), m)) << "audit mode must let everything through";
	}
	auto lines = env().audit();
	auto audited = [&](const std::string& hook, const std::string& dst, int port) {
		Match m;
		m.hook = hook;
		m.verdict = "audit";
		m.reason = "no-rule";
		m.dst = dst;
		m.port = port;
		m.violation = true;
		m.latched = false;
		return Logged(lines, m, name);
	};
	EXPECT_TRUE(audited("connect4", kDenied4, 9001));
	EXPECT_TRUE(audited("connect6", kDenied6, 9003));
	EXPECT_TRUE(audited("sendmsg4", kDenied4, 9002));
	EXPECT_TRUE(NoViolationFor(lines, kAllowed4, 9000));
	EXPECT_TRUE(NoViolationFor(lines, kAllowed4, 9004));
	for (const auto& j : lines) {
		if (j.value("event", "") == "decision") {
			EXPECT_NE(j.value("verdict", ""), "deny") << "audit mode denied: " << j.dump();
			EXPECT_FALSE(j.value("latched", false)) << "audit mode latched: " << j.dump();
		}
	}
	EXPECT_TRUE(events(lines, "frozen").empty()) << dump_lines(lines);
	EXPECT_TRUE(events(lines, "killed").empty()) << dump_lines(lines);
}

TEST_F(AuditMode, RawAndPingSocketsAreAuditedNotRefused)
{
	std::string policy = env().write_policy("audit.json", base_policy("it-audit", "deny", "audit"));
	std::string name = "ar" + env().id;
	std::string m = env().marker("aud-raw"), p = env().marker("aud-ping");
	RunSpec s;
	s.policy = policy;
	s.name = name;
	s.keep_caps = true;
	s.cmd = Sequence({env().py("raw_socket.py", {dest4(kDenied4, 9005), dest6(kDenied6, 9005), m}),
			  env().py("ping.py", {kAllowed4, p})});
	RunResult rr = env().run(s, 20s);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	ASSERT_EQ(rr.out_json.size(), 2u) << rr.describe();
	for (const auto& r : rr.out_json[0]["results"])
		EXPECT_TRUE(r.value("created", false)) << r.dump();
	EXPECT_TRUE(rr.out_json[1].value("created", false)) << rr.out_json[1].dump();
	ASSERT_TRUE(env().fence());
	EXPECT_TRUE(env().sink->wait_frames(m, 4, 3s)) << "audit mode must let raw packets out";
	EXPECT_TRUE(env().sink->wait_frames(p, 1, 3s));
	Match raw;
	raw.hook = "sock_create";
	raw.verdict = "audit";
	raw.reason = "raw-socket";
	EXPECT_TRUE(Logged(env().audit(), raw, name));
	Match icmp = raw;
	icmp.reason = "icmp-socket";
	EXPECT_TRUE(Logged(env().audit(), icmp, name));
}

}  // namespace
}  // namespace it
