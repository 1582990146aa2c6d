// Redirects to a target of the operator's ("to": "HOST:PORT"): the kernel
// rewrites the sandbox's connect or datagram to the target, a simulator the
// operator runs (here tests/clients/target_sim.py, in a cgroup of its own in
// the client namespace), which asks getsockopt(SO_ORIGINAL_DST) where each
// connection was meant to go, as a transparent proxy does under netfilter.
//
// The destinations are the sink's forbidden addresses: had a redirect
// failed, the marker would reach the sink, whose oracles must see 0.
#include <fmt/format.h>

#include <filesystem>

#include "daemon_fixture.h"
#include "fixture.h"
#include "world_fixture.h"

namespace it {
namespace {

class Target : public DaemonTest {
protected:
	std::string sandbox(const std::string& tag) { return "t" + env().id + "-" + tag; }

	// The simulator on 127.0.0.1:port and [::1]:port of the client
	// namespace, in the cgroup CGROUP_PARENT/sim (removed with the test's
	// cgroups); its records in records_.
	void start_target(int port, const std::string& mode = "")
	{
		sim_cgroup_ = cgroup2_mount() + "/" + env().cgroup_parent + "/sim";
		std::filesystem::create_directories(sim_cgroup_);
		records_ = env().path("target.jsonl");
		std::string ready = env().path("target.ready");
		std::vector<std::string> argv = {"sh", "-c", "echo $$ > \"$0\"/cgroup.procs && exec \"$@\"",
						 sim_cgroup_};
		std::vector<std::string> sim = {python(), client_script("target_sim.py"), std::to_string(port),
						records_, ready};
		if (!mode.empty())
			sim.push_back(mode);
		for (const auto& a : env().topo->in_client(sim))
			argv.push_back(a);
		sim_ = &env().start(argv, "target");
		ASSERT_TRUE(wait_until([&] { return exists(ready); }, 10s)) << sim_->describe() << sim_->err();
	}

	// Everything to the sink's forbidden addresses redirected to the target.
	json target_policy(int port, const std::string& protocol = "")
	{
		json rules = json::array();
		for (const auto& [cidr, to] :
		     std::vector<std::pair<std::string, std::string>>{{"10.77.0.3/32",
								       fmt::format("127.0.0.1:{}", port)},
								      {"fd77::3/128", fmt::format("[::1]:{}", port)}}) {
			json r = {{"action", "redirect"}, {"cidr", cidr}, {"to", to}};
			if (!protocol.empty())
				r["protocol"] = protocol;
			rules.push_back(r);
		}
		return json{{"version", 1},
			    {"name", "it-target"},
			    {"mode", "enforce"},
			    {"on_violation", "freeze"},
			    {"rules", rules}};
	}

	std::optional<json> record_with(const std::string& needle)
	{
		for (const auto& j : read_json_lines(records_))
			if (j.dump().find(needle) != std::string::npos)
				return j;
		return std::nullopt;
	}

	// Real clients of every family, run as `user` ("": uid 0).
	void clients_land(const std::string& user);
	// A redirect to a target nothing listens on, the command as `user`.
	void target_down(const std::string& user);

	std::string sim_cgroup_, records_;
	Proc* sim_ = nullptr;
};

// Real clients, every family: each connect lands in the target, which
// learns from SO_ORIGINAL_DST where it was meant to go; the client's
// getpeername says the same; a datagram lands there too and its answer
// seems to come from where it was sent; nothing reaches the sink.
void Target::clients_land(const std::string& user)
{
	int port = free_port();
	start_target(port);
	ASSERT_FALSE(HasFatalFailure());
	std::string name = sandbox("clients");
	std::string m4 = env().marker("py4"), m6 = env().marker("py6"), mm = env().marker("mapped");
	std::string mc = env().marker("curl"), mu = env().marker("udp");
	auto rr = run_logged(env(), name,
			     Sequence({env().py("world_client.py", {dest4(kDenied4, 9001), m4, dest6(kDenied6, 9002),
								    m6, "[::ffff:10.77.0.3]:9003", mm}),
				       {"curl", "-sS", "http://10.77.0.3:9004/curl/" + mc},
				       env().py("udp_exchange.py", {dest4(kDenied4, 9005), mu})}),
			     target_policy(port), 30s, user);
	ASSERT_EQ(rr.r.status, 0) << rr.describe() << sim_->err();

	for (const auto& [marker, peer, port_] : std::vector<std::tuple<std::string, std::string, int>>{
		     {m4, kDenied4, 9001}, {m6, kDenied6, 9002}, {mm, "::ffff:10.77.0.3", 9003}}) {
		json r = ResultFor(rr, marker);
		ASSERT_TRUE(r.is_object()) << marker << "\n" << rr.describe();
		EXPECT_EQ(r.value("ok", false), true) << r.dump();
		EXPECT_EQ(r.value("status", 0), 200) << r.dump();
		EXPECT_EQ(r.value("peer", ""), peer) << r.dump();
		EXPECT_EQ(r.value("peer_port", 0), port_) << r.dump();
	}
	// What the target learned, per connection: SOL_IP for the IPv4 ones
	// (the v4-mapped one included), SOL_IPV6 for the IPv6 one.
	for (const auto& [marker, orig] : std::vector<std::pair<std::string, std::string>>{
		     {m4, "10.77.0.3:9001"}, {m6, "[fd77::3]:9002"}, {mm, "10.77.0.3:9003"}, {mc, "10.77.0.3:9004"}}) {
		auto j = record_with(marker);
		ASSERT_TRUE(j) << marker << "\n" << read_file(records_);
		EXPECT_EQ((*j)["original"], orig) << j->dump();
		EXPECT_EQ((*j)["proto"], "tcp") << j->dump();
	}
	EXPECT_NE(rr.r.out.find("target 10.77.0.3:9004\n"), std::string::npos) << rr.describe();
	// The datagram: received by the target, answered from where it was sent.
	auto u = record_with(mu);
	ASSERT_TRUE(u) << read_file(records_);
	EXPECT_EQ((*u)["proto"], "udp");
	EXPECT_EQ((*u)["data"], mu);
	json answer;
	for (const auto& j : rr.out_json)
		if (j.contains("udp"))
			answer = j;
	EXPECT_EQ(answer.value("from", ""), kDenied4) << rr.describe();
	EXPECT_EQ(answer.value("port_from", 0), 9005) << rr.describe();
	EXPECT_EQ(answer.value("data", ""), "target:" + mu) << rr.describe();

	for (const auto& m : {m4, m6, mm, mc, mu})
		EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_TRUE(Logged(env().audit(), not_a_violation("connect4", "allow", "redirect", kDenied4, 9001), name));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

TEST_F(Target, ConnectsLandInTheTargetWhichLearnsWhereTheyWereMeantToGo)
{
	clients_land("");
}

TEST_F(Target, ConnectsLandInTheTargetWhichLearnsWhereTheyWereMeantToGoAsNobody)
{
	clients_land("nobody");
}

// A later connection of another sandbox from the same address and port to
// the same target is told its own destination, never the closed one's:
// the newest entry answers (the first sandbox, in the lower slot, still
// runs and keeps its table).
TEST_F(Target, AClosedConnectionsOriginNeverAnswersForAnother)
{
	int port = free_port();
	start_target(port);
	ASSERT_FALSE(HasFatalFailure());
	int sport = free_port();
	std::string first = sandbox("first"), second = sandbox("second");
	std::string m1 = env().marker("first"), m2 = env().marker("second");
	std::string done = env().path("first.done"), release = env().path("first.release");
	RunSpec a;
	a.policy = env().write_policy(first + ".json", target_policy(port, "tcp"));
	a.name = first;
	a.cmd = Sequence({env().py("bound_request.py", {std::to_string(sport), dest4(kDenied4, 9001), m1}),
			  {"touch", done},
			  env().py("wait_file.py", {release, "30"})});
	Proc& runner = env().start_run(a);
	ASSERT_TRUE(wait_until([&] { return exists(done); }, 15s)) << runner.describe() << runner.out() << runner.err();

	json policy = target_policy(port, "tcp");
	policy["rules"][0]["cidr"] = std::string(kAllowed4) + "/32";
	auto rr = run_logged(env(), second,
			     env().py("bound_request.py", {std::to_string(sport), dest4(kAllowed4, 9002), m2}), policy);
	write_file(release, "");
	EXPECT_EQ(runner.wait(15s), std::optional<int>(0)) << runner.out() << runner.err();
	ASSERT_EQ(rr.r.status, 0) << rr.describe();

	auto j1 = record_with(m1), j2 = record_with(m2);
	ASSERT_TRUE(j1 && j2) << read_file(records_);
	EXPECT_EQ((*j1)["peer_port"], sport) << j1->dump();
	EXPECT_EQ((*j2)["peer_port"], sport) << j2->dump();
	EXPECT_EQ((*j1)["original"], "10.77.0.3:9001") << j1->dump();
	EXPECT_EQ((*j2)["original"], "10.77.0.2:9002") << j2->dump();
	EXPECT_NE(rr.r.out.find("target 10.77.0.2:9002"), std::string::npos) << rr.describe();
	EXPECT_TRUE(NothingArrived(env(), m1));
	EXPECT_TRUE(NothingArrived(env(), m2));
}

// A client that sends and closes at once (fire and forget): the target
// reads to the end, acknowledges the client's FIN at once, and asks only
// once the client's socket is closed in the kernel (its end a time-wait
// socket; the target's own stays open), and is still told where it was
// meant to go. A connection from outside
// every sandbox, straight to the target while the program is attached,
// gets no answer.
TEST_F(Target, ATargetThatAsksAfterTheClientClosedIsStillTold)
{
	int port = free_port();
	start_target(port, "late");
	ASSERT_FALSE(HasFatalFailure());
	std::string m = env().marker("late"), direct = env().marker("direct");
	std::string release = env().path("late.release");
	RunSpec spec;
	spec.policy = env().write_policy("late.json", target_policy(port, "tcp"));
	spec.name = sandbox("late");
	spec.cmd = Sequence(
		{env().py("send_and_close.py", {dest4(kDenied4, 9011), m}), env().py("wait_file.py", {release, "30"})});
	Proc& runner = env().start_run(spec);
	std::optional<json> j;
	EXPECT_TRUE(wait_until([&] { return (j = record_with(m)).has_value(); }, 10s)) << read_file(records_);
	Result d = env().in_client(env().py("send_and_close.py", {fmt::format("127.0.0.1:{}", port), direct}));
	EXPECT_EQ(d.status, 0) << d.describe();
	std::optional<json> dj;
	EXPECT_TRUE(wait_until([&] { return (dj = record_with(direct)).has_value(); }, 10s)) << read_file(records_);
	write_file(release, "");
	EXPECT_EQ(runner.wait(15s), std::optional<int>(0)) << runner.describe() << runner.err();
	ASSERT_TRUE(j && dj) << read_file(records_);
	EXPECT_EQ((*j)["closed"], true) << j->dump();
	EXPECT_EQ((*j)["original"], "10.77.0.3:9011") << j->dump();
	EXPECT_TRUE((*dj)["original"].is_null()) << dj->dump();
	EXPECT_TRUE(NothingArrived(env(), m));
}

// A simulator on port 53 as the target of UDP (a DNS simulator taking
// 10.77.0.3:5353): its answer, from port 53, is not taken for a resolver's
// (unsolicited, dropped) but reaches the client, from where it sent.
// (Port 53 itself is the DNS policy's, judged before any rule.)
TEST_F(Target, AnAnswerFromATargetOnPort53ReachesTheClient)
{
	start_target(53);
	ASSERT_FALSE(HasFatalFailure());
	json policy = target_policy(53, "udp");
	policy["rules"][0]["ports"] = {5353};
	std::string m = env().marker("dns");
	auto rr = run_logged(env(), sandbox("dns53"), env().py("udp_exchange.py", {dest4(kDenied4, 5353), m}), policy);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	json answer;
	for (const auto& j : rr.out_json)
		if (j.contains("udp"))
			answer = j;
	EXPECT_EQ(answer.value("from", ""), kDenied4) << rr.describe();
	EXPECT_EQ(answer.value("port_from", 0), 5353) << rr.describe();
	EXPECT_EQ(answer.value("data", ""), "target:" + m) << rr.describe();
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
	EXPECT_TRUE(NothingArrived(env(), m));
}

// A connected UDP socket redirected to the target keeps its rewritten
// peer, and its sends pass no sendmsg hook: after a reload that drops the
// redirect, egress judges its datagrams by the rules, and the next one
// never reaches the target.
TEST_F(Target, AReloadThatDropsTheRedirectStopsTheSocketsDatagrams)
{
	int port = free_port();
	start_target(port);
	ASSERT_FALSE(HasFatalFailure());
	std::string name = sandbox("reload");
	// The client's files (connected.json, go) in a directory of its own.
	std::string dir = env().path("udp-client");
	std::filesystem::create_directories(dir);
	std::string prefix = env().marker("reload");
	std::string m1 = prefix + "-BEFORE-", m2 = prefix + "-AFTER-";
	json policy = target_policy(port, "udp");
	policy["on_violation"] = "deny";
	RunSpec spec;
	spec.policy = env().write_policy(name + ".json", policy);
	spec.name = name;
	spec.cmd = env().py("udp_connected_wait.py", {"--dir", dir, "--prefix", prefix, dest4(kDenied4, 9005)});
	Proc& runner = env().start_run(spec);
	ASSERT_TRUE(wait_until([&] { return exists(dir + "/connected.json") && record_with(m1).has_value(); }, 15s))
		<< runner.describe() << runner.err() << read_file(records_);
	json dropped = {{"version", 1},
			{"name", "it-target-dropped"},
			{"mode", "enforce"},
			{"on_violation", "deny"},
			{"rules", json::array()}};
	Result r = env().airlock({"reload", name, env().write_policy(name + "-dropped.json", dropped)}, 10s);
	ASSERT_EQ(r.status, 0) << r.describe();
	write_file(dir + "/go", "");
	ASSERT_EQ(runner.wait(15s), std::optional<int>(0)) << runner.describe() << runner.err();
	// The client sent its second datagram (whatever send() said).
	json client;
	for (const auto& j : json_objects_in(runner.out()))
		if (j.value("client", "") == "udp_connected_wait")
			client = j;
	ASSERT_TRUE(client.contains("after")) << runner.describe() << runner.out();
	// A datagram that had reached the target would be recorded by now: the
	// target records each as it arrives, and this fence follows it.
	std::string fence = env().marker("fence");
	Result f = env().in_client(env().py("udp_send.py", {fmt::format("127.0.0.1:{}", port), fence}));
	ASSERT_EQ(f.status, 0) << f.describe();
	ASSERT_TRUE(wait_until([&] { return record_with(fence).has_value(); }, 10s)) << read_file(records_);
	EXPECT_FALSE(record_with(m2)) << read_file(records_);
	EXPECT_TRUE(NothingArrived(env(), m2));
}

// An unmodified transparent proxy: mitmproxy in transparent mode, which
// asks SO_ORIGINAL_DST (mitmproxy/platform/linux.py) and forwards each
// request there. The policy has no rule but the redirect: the request can
// reach the sink only through mitmproxy, and only to where mitmproxy was
// told the connection was meant to go.
TEST_F(Target, AnUnmodifiedTransparentProxyForwardsToTheOriginalDestination)
{
	int port = free_port();
	sim_cgroup_ = cgroup2_mount() + "/" + env().cgroup_parent + "/mitm";
	std::filesystem::create_directories(sim_cgroup_);
	std::vector<std::string> argv = {"sh", "-c", "echo $$ > \"$0\"/cgroup.procs && exec \"$@\"", sim_cgroup_};
	for (const auto& a :
	     env().topo->in_client({"mitmdump", "--mode", "transparent", "--listen-host", "127.0.0.1", "--listen-port",
				    std::to_string(port), "--set", "confdir=" + env().path("mitm")}))
		argv.push_back(a);
	Proc& mitm = env().start(argv, "mitmdump");
	ASSERT_TRUE(wait_until([&] { return mitm.out().find("listening at") != std::string::npos; }, 30s))
		<< mitm.describe() << mitm.out() << mitm.err();

	json policy = target_policy(port, "tcp");
	policy["rules"].erase(1);  // IPv4 only: mitmproxy listens on 127.0.0.1
	std::string name = sandbox("mitm");
	std::string m = env().marker("mitm");
	// The sink never answers: mitmproxy waits for it, curl gives up.
	auto rr = run_logged(env(), name, {"curl", "-sS", "-m", "3", "http://10.77.0.3:9007/through/" + m}, policy);
	EXPECT_TRUE(env().sink->wait_data(m, 1, 10s)) << rr.describe() << mitm.out() << mitm.err();
	// Where it arrived: the original address and port.
	json arrived;
	for (const auto& j : read_json_lines(env().sink->log_path()))
		if (j.value("kind", "") == "tcp" && j.value("data", "").find("GET /through/" + m) != std::string::npos)
			arrived = j;
	ASSERT_TRUE(arrived.is_object()) << env().sink->summary() << mitm.out();
	EXPECT_EQ(arrived.value("dst", ""), kDenied4) << env().sink->summary();
	EXPECT_EQ(arrived.value("port", 0), 9007) << env().sink->summary();
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
	EXPECT_EQ(mitm.out().find("Transparent mode failure"), std::string::npos) << mitm.out();
}

// A policy whose redirects all go to targets needs no proxy: the daemon
// makes its sandbox (sandbox create), finds the target's listener in its
// own network namespace (here the client namespace) and answers
// SO_ORIGINAL_DST there; a command exec'd into the sandbox lands in it.
TEST_F(Target, TheDaemonMakesASandboxThatRedirectsToATarget)
{
	int port = free_port();
	start_target(port);
	ASSERT_FALSE(HasFatalFailure());
	Proc& d = env().start(env().topo->in_client(env().airlock_argv(
				      {"daemon", "--metrics", "off", "--audit-log", env().audit_path()})),
			      "daemon");
	ASSERT_TRUE(wait_until([&] { return d.err().find("watching") != std::string::npos || !d.running(); }, 10s) &&
		    d.running())
		<< d.describe() << d.err();
	std::string name = sandbox("daemon");
	Result made = env().airlock({"sandbox", "create", name, "--policy",
				     env().write_policy(name + ".json", target_policy(port, "tcp"))});
	ASSERT_EQ(made.status, 0) << made.describe() << d.err();
	std::string m = env().marker("daemon");
	RunResult rr = exec(name, env().py("world_client.py", {dest4(kDenied4, 9001), m}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	json r = ResultFor(rr, m);
	EXPECT_EQ(r.value("status", 0), 200) << r.dump();
	EXPECT_EQ(r.value("peer", ""), kDenied4) << r.dump();
	auto j = record_with(m);
	ASSERT_TRUE(j) << read_file(records_) << d.err();
	EXPECT_EQ((*j)["original"], "10.77.0.3:9001") << j->dump() << d.err();
	EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_EQ(env().airlock({"sandbox", "delete", name}).status, 0);
}

// Nothing listens on the target: the connect is refused there, and nothing
// goes to the destination instead.
void Target::target_down(const std::string& user)
{
	int port = free_port();
	std::string name = sandbox("down");
	std::string m = env().marker("down");
	auto rr = run_logged(env(), name, env().py("world_client.py", {dest4(kDenied4, 9001), m}), target_policy(port),
			     30s, user);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	json r = ResultFor(rr, m);
	EXPECT_EQ(r.value("ok", true), false) << r.dump();
	EXPECT_EQ(Errno(r), "ECONNREFUSED") << r.dump();
	EXPECT_NE(rr.r.err.find(fmt::format("nothing listens on 127.0.0.1:{} (TCP)", port)), std::string::npos)
		<< rr.describe();
	EXPECT_TRUE(NothingArrived(env(), m));
}

TEST_F(Target, ATargetThatIsDownRefusesAndNothingLeaves)
{
	target_down("");
}

TEST_F(Target, ATargetThatIsDownRefusesAndNothingLeavesAsNobody)
{
	target_down("nobody");
}

// An IPv4 socket cannot reach an IPv6 target: refused at connect
// (redirect-family), nothing leaves. UDP beside a TCP-only redirect to a
// target is refused as for the world (redirect-udp).
TEST_F(Target, WhatCannotReachTheTargetIsRefusedNeverSentOn)
{
	int port = free_port();
	start_target(port);
	ASSERT_FALSE(HasFatalFailure());
	std::string name = sandbox("family");
	json policy = target_policy(port, "tcp");
	policy["rules"][0]["to"] = fmt::format("[::1]:{}", port);
	std::string m = env().marker("v4"), mu = env().marker("udp");
	auto rr = run_logged(env(), name,
			     Sequence({env().py("world_client.py", {dest4(kDenied4, 9001), m}),
				       env().py("udp_send.py", {dest4(kDenied4, 9002), mu})}),
			     policy);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	json r = ResultFor(rr, m);
	EXPECT_EQ(r.value("ok", true), false) << r.dump();
	EXPECT_EQ(Errno(r), "EPERM") << r.dump();
	json u = ResultFor(rr, mu);
	EXPECT_EQ(u.value("ok", true), false) << u.dump();
	EXPECT_EQ(Errno(u), "EPERM") << u.dump();
	EXPECT_TRUE(
		Logged(env().audit(), not_a_violation("connect4", "deny", "redirect-family", kDenied4, 9001), name));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
	EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_TRUE(NothingArrived(env(), mu));
	EXPECT_FALSE(record_with(m)) << read_file(records_);
}

}  // namespace
}  // namespace it
