// `airlock reload`: an atomic swap. A destination both policies allow keeps
// working on every call during 50 swaps under load; one both deny never gets
// through; a bad file is rejected and the old policy keeps enforcing; a
// connected UDP socket whose peer the new policy denies is stopped at egress.
#include <fmt/format.h>

#include <signal.h>

#include "fixture.h"

namespace it {
namespace {

// A and B both allow 10.77.0.2 on 9000-9009 (TCP+UDP). A alone allows 9010,
// B alone 9011 and denies 10.77.0.3 explicitly. Neither allows 10.77.0.3.
json policy_a()
{
	return {{"version", 1},
		{"name", "it-reload-a"},
		{"rules", json::array({json{{"action", "allow"}, {"cidr", "10.77.0.2/32"}, {"ports", {"9000-9009"}}},
				       json{{"action", "allow"}, {"cidr", "10.77.0.2"}, {"ports", {9010}}}})}};
}

json policy_b()
{
	return {{"version", 1},
		{"name", "it-reload-b"},
		{"rules", json::array({json{{"action", "allow"}, {"cidr", "10.77.0.0/24"}, {"ports", {"9000-9009"}}},
				       json{{"action", "allow"}, {"cidr", "10.77.0.2/32"}, {"ports", {9011}}},
				       json{{"action", "deny"}, {"cidr", "10.77.0.3/32"}}})}};
}

// C allows 10.77.0.2 on 9000-9004 alone: 9005-9009, which A allows, not.
json policy_c()
{
	return {{"version", 1},
		{"name", "it-reload-c"},
		{"rules",
		 json::array({json{{"action", "allow"}, {"cidr", "10.77.0.2/32"}, {"ports", {"9000-9004"}}}})}};
}

class Reload : public AirlockTest {
protected:
	void SetUp() override
	{
		AirlockTest::SetUp();
		if (HasFatalFailure())
			return;
		a_ = env().write_policy("a.json", policy_a());
		b_ = env().write_policy("b.json", policy_b());
	}
	json progress()
	{
		json j = json::parse(read_file(env().path("loop.json")), nullptr, false);
		return j.is_discarded() ? json::object() : j;
	}
	int iterations() { return progress().value("iterations", 0); }
	void swaps_under_load(const std::string& a, const std::string& b, int swaps);
	std::string a_, b_;
};

// Every swap under a loop of connects: allowed ones never fail, denied
// ones never succeed, every reload is recorded as ok.
void Reload::swaps_under_load(const std::string& a, const std::string& b, int swaps)
{
	std::string name = "r" + env().id;
	std::string prefix = "AIRLOCK-MARK-reload-" + env().id + "-" + random_hex(8);
	RunSpec s;
	s.policy = a;
	s.name = name;
	s.cmd = env().py("loop.py",
			 {"--proto", "tcp", "--allowed", dest4(kAllowed4, 9000), "--denied", dest4(kDenied4, 9001),
			  "--denied-every", "5", "--prefix", prefix, "--progress", env().path("loop.json"), "--stop",
			  env().path("stop"), "--max", "100000", "--seconds", "120"});
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return iterations() >= 20 || !runner.running(); }, 10s)) << runner.describe();
	ASSERT_TRUE(runner.running()) << runner.describe();

	int before = iterations();
	int failed_reloads = 0;
	for (int k = 0; k < swaps; k++) {
		Result r = env().airlock({"reload", name, k % 2 == 0 ? b : a}, 10s);
		if (r.status != 0 && failed_reloads++ < 3)
			ADD_FAILURE() << "reload " << k << " failed: " << r.describe();
	}
	EXPECT_EQ(failed_reloads, 0);
	int during = iterations() - before;
	write_file(env().path("stop"), "");
	auto rs = runner.wait(15s);
	ASSERT_TRUE(rs) << runner.describe();
	EXPECT_EQ(*rs, 0) << runner.describe();

	json out;
	{
		std::istringstream in(runner.out());
		std::string line;
		while (std::getline(in, line)) {
			json j = json::parse(line, nullptr, false);
			if (!j.is_discarded() && j.value("client", "") == "loop")
				out = j;
		}
	}
	ASSERT_TRUE(out.is_object() && out.contains("allowed")) << runner.describe();
	// The traffic ran until every swap was done.
	EXPECT_EQ(out.value("stopped_by", ""), "stop") << out.dump();
	// The swaps overlapped real traffic.
	EXPECT_GE(during, swaps) << "too few connects while the reloads ran: the test proved little";
	EXPECT_EQ(out["allowed"].value("fail", -1), 0) << "allowed connects failed during reloads: " << out.dump();
	EXPECT_GT(out["allowed"].value("ok", 0), 100) << out.dump();
	EXPECT_EQ(out["denied"].value("ok", -1), 0) << "a denied connect succeeded during reloads: " << out.dump();
	EXPECT_GT(out["denied"].value("fail", 0), 0) << out.dump();
	EXPECT_EQ(out["denied"]["errors"].value("EPERM", 0), out["denied"].value("fail", -1)) << out.dump();

	auto lines = env().audit();
	EXPECT_TRUE(NoViolationFor(lines, kAllowed4, 9000));
	EXPECT_FALSE(decisions(lines, Violation("connect4", "no-rule", kDenied4, 9001)).empty() &&
		     decisions(lines, Violation("connect4", "rule-deny", kDenied4, 9001)).empty())
		<< dump_lines(lines);
	int ok_reloads = 0;
	for (const auto& j : events(lines, "reload"))
		ok_reloads += j.value("result", "") == "ok";
	EXPECT_EQ(ok_reloads, swaps);

	ASSERT_TRUE(env().fence());
	EXPECT_TRUE(NothingArrived(env(), prefix + "-DENY-"));
	size_t want = out["allowed"].value("ok", 0);
	EXPECT_TRUE(wait_until([&] { return env().sink->count_data(prefix + "-ALLOW-") >= want; }, 5s))
		<< "sink got " << env().sink->count_data(prefix + "-ALLOW-") << " of " << want << " allowed payloads";
}

TEST_F(Reload, FiftySwapsUnderLoadNeverOpenAWindow)
{
	swaps_under_load(a_, b_, 50);
}

// The same with 4,000 more rules in each policy, so that writing a bank
// and deleting one take milliseconds: a swap in another order (the entry
// switched before its bank is whole, the old bank deleted before the
// switch or before the programs that read it are done) leaves allowed
// connects without their rule for that long, and some fail.
TEST_F(Reload, SwapsOfLargePoliciesKeepTheirOrder)
{
	// In front: the compiler keeps the rules' order, so the rules the
	// loop needs are written last.
	auto pad = [](json p) {
		json rules = json::array();
		for (int i = 0; i < 4000; i++)
			rules.push_back(json{{"action", "allow"},
					     {"cidr", fmt::format("10.99.{}.{}/32", i / 250, i % 250 + 1)},
					     {"ports", {443}}});
		for (const auto& r : p["rules"])
			rules.push_back(r);
		p["rules"] = rules;
		return p;
	};
	swaps_under_load(env().write_policy("big-a.json", pad(policy_a())),
			 env().write_policy("big-b.json", pad(policy_b())), 20);
}

TEST_F(Reload, BadFileIsRejectedOldPolicyStaysGoodFileTakesEffect)
{
	std::string name = "b" + env().id;
	std::string a1 = env().marker("keep-a"), o1 = env().marker("keep-b-only"), d1 = env().marker("keep-d");
	std::string a2 = env().marker("new-b"), o2 = env().marker("new-a-only"), d2 = env().marker("new-d");
	RunSpec s;
	s.policy = a_;
	s.name = name;
	s.cmd = Sequence({env().py("wait_file.py", {env().path("go1")}),
			  env().py("tcp_send.py",
				   {dest4(kAllowed4, 9010), a1, dest4(kAllowed4, 9011), o1, dest4(kDenied4, 9001), d1}),
			  env().py("wait_file.py", {env().path("go2")}),
			  env().py("tcp_send.py", {dest4(kAllowed4, 9011), a2, dest4(kAllowed4, 9010), o2,
						   dest4(kDenied4, 9002), d2})});
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return env().status_of(name).has_value() || !runner.running(); }, 10s))
		<< runner.describe();

	// Bad files: rejected with the file and JSON path, exit 1, old policy stays.
	std::string bad = env().write_text(
		"bad.json", R"({"version":1,"name":"it-bad","rules":[{"action":"allow","cidr":"10.77.0.0/33"}]})");
	Result r = env().airlock({"reload", name, bad});
	EXPECT_EQ(r.status, 1) << r.describe();
	EXPECT_NE(r.err.find(bad + ": rules/0/cidr"), std::string::npos) << r.describe();
	std::string notjson = env().write_text("notjson.json", "{\"version\": 1, \"name\": ");
	Result r2 = env().airlock({"reload", name, notjson});
	EXPECT_EQ(r2.status, 1) << r2.describe();
	Result r3 = env().airlock({"reload", name, env().path("missing.json")});
	EXPECT_EQ(r3.status, 1) << r3.describe();
	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_EQ(st->value("policy", ""), "it-reload-a") << st->dump();
	int errors = 0;
	for (const auto& j : events(env().audit(), "reload"))
		errors += j.value("result", "") == "error";
	EXPECT_GE(errors, 1) << dump_lines(env().audit());

	write_file(env().path("go1"), "");
	ASSERT_TRUE(wait_until([&] { return env().sink->count_data(a1) > 0 || !runner.running(); }, 10s));
	// Wait for the whole first batch: the violation line of d1 comes last.
	ASSERT_TRUE(wait_until(
		[&] { return !decisions(env().audit(), Violation("connect4", "no-rule", kDenied4, 9001)).empty(); },
		5s))
		<< dump_lines(env().audit());
	EXPECT_TRUE(ArrivedIntact(env(), a1)) << "A's own port stopped working after a rejected reload";
	EXPECT_TRUE(NothingArrived(env(), o1)) << "a rejected policy's port opened";
	EXPECT_TRUE(NothingArrived(env(), d1));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kAllowed4, 9011), name));

	// A good reload takes effect for new connections at once.
	Result ok = env().airlock({"reload", name, b_});
	ASSERT_EQ(ok.status, 0) << ok.describe();
	st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_EQ(st->value("policy", ""), "it-reload-b") << st->dump();
	write_file(env().path("go2"), "");
	auto rs = runner.wait(15s);
	ASSERT_TRUE(rs) << runner.describe();
	EXPECT_EQ(*rs, 0) << runner.describe();
	EXPECT_TRUE(ArrivedIntact(env(), a2)) << "B's port after the reload";
	EXPECT_TRUE(NothingArrived(env(), o2)) << "A's port stayed open after reloading to B";
	EXPECT_TRUE(NothingArrived(env(), d2));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kAllowed4, 9010), name));
	Match rd = Violation("connect4", "rule-deny", kDenied4, 9002);
	EXPECT_TRUE(Logged(env().audit(), rd, name));
	for (const auto& j : decisions(env().audit(), rd))
		EXPECT_EQ(j.value("policy", ""), "it-reload-b") << j.dump();
}

TEST_F(Reload, ConnectedUdpIsStoppedAtEgressWhenItsPeerBecomesDenied)
{
	// connect() was judged under A; after the reload, send() on the same
	// socket runs no sock_addr hook: only cgroup_skb/egress can stop it.
	std::string cf = env().write_policy("c.json", policy_c());
	std::string name = "c" + env().id;
	std::string prefix = env().marker("cudp-reload");
	RunSpec s;
	s.policy = a_;
	s.name = name;
	s.cmd = env().py("udp_connected_wait.py", {"--dir", env().tmp, "--prefix", prefix, dest4(kAllowed4, 9005)});
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return exists(env().path("connected.json")) || !runner.running(); }, 10s))
		<< runner.describe();
	json conn = json::parse(read_file(env().path("connected.json")));
	ASSERT_TRUE(Ok(conn["connect"])) << conn.dump();
	EXPECT_TRUE(ArrivedIntact(env(), prefix + "-BEFORE-"));
	Result r = env().airlock({"reload", name, cf});
	ASSERT_EQ(r.status, 0) << r.describe();
	write_file(env().path("go"), "");
	auto rs = runner.wait(10s);
	ASSERT_TRUE(rs) << runner.describe();
	EXPECT_EQ(*rs, 0) << runner.describe();
	EXPECT_TRUE(NothingArrived(env(), prefix + "-AFTER-")) << "a connected socket kept its old verdict";
	Match m = Violation("egress", "no-rule", kAllowed4, 9005);
	m.protocol = "udp";
	EXPECT_TRUE(Logged(env().audit(), m, name));
}

// A TCP connection whose peer a reload denies: its later bytes are refused
// at egress and wait in its send queue; its command closes it and exits.
// When the run ends, that socket is ended before the programs are
// detached: none is left to the port (an orphan retransmitting them
// otherwise, to the sink once nothing refuses), and the bytes never
// arrive.
TEST_F(Reload, BytesADeniedConnectionHoldsNeverLeaveOnceTheSandboxIsGone)
{
	std::string cf = env().write_policy("c.json", policy_c());
	std::string name = "t" + env().id;
	std::string prefix = env().marker("tcp-reload");
	RunSpec s;
	s.policy = a_;
	s.name = name;
	s.cmd = env().py("udp_connected_wait.py",
			 {"--tcp", "--dir", env().tmp, "--prefix", prefix, dest4(kAllowed4, 9006)});
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return exists(env().path("connected.json")) || !runner.running(); }, 10s))
		<< runner.describe();
	json conn = json::parse(read_file(env().path("connected.json")));
	ASSERT_TRUE(Ok(conn["connect"])) << conn.dump();
	ASSERT_TRUE(env().sink->wait_data(prefix + "-BEFORE-", 1, 5s));
	Result r = env().airlock({"reload", name, cf});
	ASSERT_EQ(r.status, 0) << r.describe();
	write_file(env().path("go"), "");
	auto rs = runner.wait(15s);
	ASSERT_TRUE(rs) << runner.describe();
	EXPECT_EQ(*rs, 0) << runner.describe();
	EXPECT_NE(runner.err().find(name + ": 1 TCP socket(s) of its cgroup ended"), std::string::npos)
		<< runner.describe();
	EXPECT_EQ(TcpSocketsTo(env(), 9006), "");
	EXPECT_TRUE(NothingArrived(env(), prefix + "-AFTER-"));
	Match m = Violation("egress", "no-rule", kAllowed4, 9006);
	EXPECT_TRUE(Logged(env().audit(), m, name));
}

// SIGHUP to `airlock run` re-reads the sandbox's policy file and swaps it in
// the same way `airlock reload` does.
TEST_F(Reload, SighupReloadsThePolicyFile)
{
	std::string name = "h" + env().id;
	std::string file = env().write_policy("hup.json", policy_a());
	std::string before = env().marker("hup-before"), after = env().marker("hup-after");
	RunSpec s;
	s.policy = file;
	s.name = name;
	s.cmd = Sequence({env().py("tcp_send.py", {dest4(kAllowed4, 9011), before}),
			  env().py("wait_file.py", {env().path("go")}),
			  env().py("tcp_send.py", {dest4(kAllowed4, 9011), after})});
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until(
		[&] {
			return !decisions(env().audit(), Violation("connect4", "no-rule", kAllowed4, 9011)).empty() ||
			       !runner.running();
		},
		10s))
		<< runner.describe();
	env().write_policy("hup.json", policy_b());
	runner.signal(SIGHUP);
	ASSERT_TRUE(wait_until(
		[&] {
			for (const auto& j : events(env().audit(), "reload"))
				if (j.value("result", "") == "ok" && j.value("by", "") == "SIGHUP")
					return true;
			return false;
		},
		10s))
		<< dump_lines(env().audit());
	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_EQ(st->value("policy", ""), "it-reload-b") << st->dump();
	write_file(env().path("go"), "");
	EXPECT_TRUE(ArrivedIntact(env(), after)) << "the reloaded file's port did not open";
	EXPECT_TRUE(NothingArrived(env(), before));
	ASSERT_TRUE(runner.wait(15s).has_value()) << runner.describe();
	EXPECT_EQ(*runner.status(), 0) << runner.describe();
}

}  // namespace
}  // namespace it
