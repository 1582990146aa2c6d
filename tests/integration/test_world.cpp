// World mode: redirect rules send a sandbox's TCP connects to its proxy, the
// recorder, which writes down what the agent tried; nothing reaches the
// destination. Real clients (curl, Python, Node) in the client namespace,
// the real kernel rewriting their connects.
//
// The destinations are the sink's forbidden addresses (10.77.0.3, fd77::3,
// routed to the sink): had a redirect failed, the marker would reach the
// sink, whose two oracles (received data, captured frames) must see 0.
#include <dirent.h>
#include <pwd.h>
#include <signal.h>

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "dns_world.h"
#include "fixture.h"
#include "world_fixture.h"

namespace it {
namespace {

class World : public AirlockTest {
protected:
	void SetUp() override
	{
		AirlockTest::SetUp();
		if (HasFatalFailure())
			return;
		records_dir_ = env().path("world");
	}
	std::string sandbox(const std::string& tag) { return "w" + env().id + "-" + tag; }
	std::string records(const std::string& name) const { return records_dir_ + "/" + name + ".jsonl"; }

	json world_policy(const std::string& on_violation = "deny", json extra_rules = json::array(),
			  const std::string& protocol = "")
	{
		return it::world_policy(records_dir_, on_violation, std::move(extra_rules), protocol);
	}

	// What a runner says of the proxy it started ("proxy PID on
	// 127.0.0.1:PORT"), waited for 10 s: {-1, 0} if it did not say it.
	struct Started {
		pid_t pid = -1;
		int port = 0;
	};
	Started proxy_started(Proc& p)
	{
		std::smatch sm;
		std::regex re("proxy ([0-9]+) on 127\\.0\\.0\\.1:([0-9]+)");
		std::string err;
		if (!wait_until(
			    [&] {
				    err = p.err();
				    return std::regex_search(err, sm, re);
			    },
			    10s))
			return {};
		return {std::stoi(sm[1]), std::stoi(sm[2])};
	}

	// The records of a sandbox, waited for until `n` are there.
	std::vector<json> wait_records(const std::string& name, size_t n, Ms timeout = 5s)
	{
		return it::wait_records(records(name), n, timeout);
	}

	std::string records_dir_;
};

// Every client, every family: the connect lands in the recorder, the request
// is recorded with its original destination, the answer comes back,
// getpeername shows the original address, and nothing reaches the sink.
TEST_F(World, RealClientsLandInTheRecorderAndNothingLeaves)
{
	std::string name = sandbox("clients");
	std::string m4 = env().marker("py4"), m6 = env().marker("py6"), mm = env().marker("mapped");
	std::string mc = env().marker("curl"), mp = env().marker("post"), mn = env().marker("node");
	std::string node_js = fmt::format(
		"require('http').get('http://10.77.0.3:9005/node/{}', r => {{ let b = ''; r.on('data', c => b += c); "
		"r.on('end', () => console.log(JSON.stringify({{node: r.statusCode, body: b}}))); }})"
		".on('error', e => {{ console.log(JSON.stringify({{node: 'error', error: e.code}})); }});",
		mn);
	auto rr = run_logged(env(), name,
			     Sequence({env().py("world_client.py", {dest4(kDenied4, 9001), m4, dest6(kDenied6, 9002),
								    m6, "[::ffff:10.77.0.3]:9003", mm}),
				       {"curl", "-sS", "-H", "X-Marker: " + mc,
					"http://10.77.0.3:9004/curl/path?q=" + mc},
				       {"curl", "-sS", "-d", "body=" + mp, "http://203.0.113.10/submit"},
				       {"curl", "-sS", "http://10.77.0.3:9006/fixture"},
				       {"node", "-e", node_js}}),
			     world_policy());
	ASSERT_EQ(rr.r.status, 0) << rr.describe();

	// What the clients saw: an answer, and their peer as they meant it.
	for (const auto& [marker, peer, port] : std::vector<std::tuple<std::string, std::string, int>>{
		     {m4, kDenied4, 9001}, {m6, kDenied6, 9002}, {mm, "::ffff:10.77.0.3", 9003}}) {
		json r = ResultFor(rr, marker);
		ASSERT_TRUE(r.is_object()) << marker << "\n" << rr.describe();
		EXPECT_EQ(r.value("ok", false), true) << r.dump();
		EXPECT_EQ(r.value("status", 0), 200) << r.dump();
		EXPECT_EQ(r.value("peer", ""), peer) << r.dump();
		EXPECT_EQ(r.value("peer_port", 0), port) << r.dump();
	}
	EXPECT_NE(rr.r.out.find("from the fixture\n"), std::string::npos) << rr.describe();
	EXPECT_NE(rr.r.out.find("{\"node\":200"), std::string::npos) << rr.describe();

	// What the recorder wrote.
	auto lines = wait_records(name, 7);
	ASSERT_GE(lines.size(), 7u) << read_file(records(name));
	struct Want {
		std::string marker, dst;
		int port;
		std::string method;
	};
	for (const auto& w : std::vector<Want>{{m4, kDenied4, 9001, "GET"},
					       {m6, kDenied6, 9002, "GET"},
					       {mm, kDenied4, 9003, "GET"},
					       {mc, kDenied4, 9004, "GET"},
					       {mn, kDenied4, 9005, "GET"}}) {
		auto j = record_with(lines, "path", w.marker);
		ASSERT_TRUE(j) << "no record for " << w.marker << "\n" << read_file(records(name));
		EXPECT_EQ(j->value("sandbox", ""), name) << j->dump();
		EXPECT_EQ(j->value("kind", ""), "http") << j->dump();
		EXPECT_EQ(j->value("dst", ""), w.dst) << j->dump();
		EXPECT_EQ(j->value("port", 0), w.port) << j->dump();
		EXPECT_EQ(j->value("method", ""), w.method) << j->dump();
		EXPECT_EQ(j->value("status", 0), 200) << j->dump();
	}
	auto curl = record_with(lines, "path", mc);
	ASSERT_TRUE(curl);
	EXPECT_EQ((*curl)["headers"].value("X-Marker", ""), mc) << curl->dump();
	auto post = record_with(lines, "body", mp);
	ASSERT_TRUE(post) << read_file(records(name));
	EXPECT_EQ(post->value("dst", ""), "203.0.113.10");
	EXPECT_EQ(post->value("port", 0), 80);
	EXPECT_EQ(post->value("method", ""), "POST");
	EXPECT_EQ(post->value("path", ""), "/submit");
	EXPECT_EQ(post->value("body", ""), "body=" + mp);
	EXPECT_EQ(post->value("body_bytes", 0), static_cast<int>(("body=" + mp).size()));
	auto fixture = record_with(lines, "path", "/fixture");
	ASSERT_TRUE(fixture);
	EXPECT_EQ(fixture->value("status", 0), 201);
	// The table, by the sandbox's name.
	Result show = env().airlock({"world", "show", name, "--dir", records_dir_});
	EXPECT_EQ(show.status, 0) << show.describe();
	std::regex post_row("\\n[0-9:.]+ +http +203\\.0\\.113\\.10:80 +POST 203\\.0\\.113\\.10/submit +" +
			    std::to_string(("body=" + mp).size()) + " +200\\n");
	EXPECT_TRUE(std::regex_search(show.out, post_row)) << show.out;

	// Nothing reached a destination.
	for (const auto& m : {m4, m6, mm, mc, mp, mn})
		EXPECT_TRUE(NothingArrived(env(), m));
	// The connects were redirects, allowed, logged with their rule.
	Match redirect = not_a_violation("connect4", "allow", "redirect", kDenied4, 9001);
	EXPECT_TRUE(Logged(env().audit(), redirect, name));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

// The proxy's port is the proxy's: a sandbox that names it, even with a
// rule that allows loopback, is denied; only a redirect gets there.
TEST_F(World, TheProxyPortIsReachedOnlyThroughARedirect)
{
	std::string name = sandbox("port");
	json extra = json::array({{{"action", "allow"}, {"cidr", "127.0.0.0/8"}, {"protocol", "tcp"}},
				  {{"action", "allow"}, {"cidr", "0.0.0.0/32"}, {"protocol", "tcp"}},
				  {{"action", "allow"}, {"cidr", "::1/128"}, {"protocol", "tcp"}},
				  {{"action", "allow"}, {"cidr", "::/128"}, {"protocol", "tcp"}}});
	// The command learns the proxy's port from the kernel's own view: the
	// port of a redirected connection's local end of the proxy's listener
	// is not visible to it, so it reads it from the agent's log, passed in
	// a file by the test.
	std::string port_file = env().path("proxy-port");
	// Its address, the unspecified one a connect takes for loopback, each
	// family, and v4-mapped.
	const std::vector<std::string> ways = {"127.0.0.1", "0.0.0.0", "[::1]", "[::]", "[::ffff:127.0.0.1]"};
	std::string args;
	std::vector<std::string> markers;
	for (const auto& w : ways) {
		markers.push_back(env().marker("direct"));
		args += " " + w + ":$P " + markers.back();
	}
	RunSpec s;
	s.policy = env().write_policy(name + ".json", world_policy("deny", extra));
	s.name = name;
	s.cmd = Sequence(
		{env().py("wait_file.py", {port_file, "10"}),
		 {"sh", "-c",
		  "P=$(cat " + port_file + "); exec " + python() + " " + client_script("tcp_send.py") + args}});
	s.log_allowed = true;
	Proc& p = env().start_run(s);
	int port = proxy_started(p).port;
	ASSERT_GT(port, 0) << p.err();
	write_file(port_file, std::to_string(port));
	ASSERT_EQ(p.wait(20s), std::optional<int>(0)) << p.describe() << p.out() << p.err();
	json results;
	for (const auto& j : json_objects_in(p.out())) {
		if (j.contains("results"))
			results = j["results"];
	}
	ASSERT_EQ(results.size(), ways.size()) << p.out();
	for (size_t i = 0; i < ways.size(); i++) {
		EXPECT_EQ(results[i].value("ok", true), false) << results[i].dump();
		EXPECT_EQ(results[i].value("errno", ""), "EPERM") << results[i].dump();
		EXPECT_EQ(results[i].value("stage", ""), "connect") << results[i].dump();
	}
	for (const char* a : {"127.0.0.1", "0.0.0.0"})
		EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "proxy-port", a, port), name)) << a;
	for (const char* a : {"::1", "::"})
		EXPECT_TRUE(Logged(env().audit(), Violation("connect6", "proxy-port", a, port), name)) << a;
	EXPECT_TRUE(read_json_lines(records(name)).empty()) << read_file(records(name));
}

// Datagrams to redirected destinations land in the recorder, one record
// each: unconnected, connected, from an IPv6 socket to a v4-mapped address,
// and a connected socket sending with ancillary data (judged on where it
// meant to go, not on the proxy it is connected to). Nothing reaches the
// sink, nothing is a violation: the freezing policy does not freeze.
TEST_F(World, DatagramsLandInTheRecorderAndNothingLeaves)
{
	std::string name = sandbox("udp");
	std::string m4 = env().marker("u4"), m6 = env().marker("u6"), mm = env().marker("umapped");
	std::string mc = env().marker("ucmsg"), after = env().marker("after");
	std::string mmc = env().marker("umappedconnect"), mmm = env().marker("umappedcmsg");
	auto rr = run_logged(env(), name,
			     Sequence({env().py("udp_send.py", {"--mode", "sendto", dest4(kDenied4, 9010), m4}),
				       env().py("udp_send.py", {"--mode", "connect", dest6(kDenied6, 9011), m6}),
				       env().py("udp_send.py", {"--mode", "sendto", "[::ffff:10.77.0.3]:9012", mm}),
				       env().py("udp_send.py", {"--mode", "cmsg", dest4(kDenied4, 9013), mc}),
				       env().py("udp_send.py", {"--mode", "connect", "[::ffff:10.77.0.3]:9016", mmc}),
				       env().py("udp_send.py", {"--mode", "cmsg", "[::ffff:10.77.0.3]:9017", mmm}),
				       env().py("world_client.py", {dest4(kDenied4, 9014), after})}),
			     world_policy("freeze"));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	for (const auto& m : {m4, m6, mm, mc, mmc, mmm})
		EXPECT_EQ(ResultFor(rr, m).value("ok", false), true) << m << "\n" << rr.describe();
	EXPECT_EQ(ResultFor(rr, after).value("status", 0), 200) << rr.describe();

	auto lines = wait_records(name, 7);
	struct Want {
		std::string marker, dst;
		int port;
	};
	for (const auto& w : std::vector<Want>{{m4, kDenied4, 9010},
					       {m6, kDenied6, 9011},
					       {mm, kDenied4, 9012},
					       {mc, kDenied4, 9013},
					       {mmc, kDenied4, 9016},
					       {mmm, kDenied4, 9017}}) {
		std::string head;
		for (unsigned char ch : w.marker)
			head += fmt::format("{:02x}", ch);
		auto j = record_with(lines, "head_hex", head);
		ASSERT_TRUE(j) << "no record for " << w.marker << "\n" << read_file(records(name));
		EXPECT_EQ(j->value("sandbox", ""), name) << j->dump();
		EXPECT_EQ(j->value("kind", ""), "udp") << j->dump();
		EXPECT_EQ(j->value("dst", ""), w.dst) << j->dump();
		EXPECT_EQ(j->value("port", 0), w.port) << j->dump();
		EXPECT_EQ(j->value("protocol", ""), "udp") << j->dump();
		EXPECT_EQ(j->value("bytes_in", 0), static_cast<int>(w.marker.size())) << j->dump();
		EXPECT_EQ(j->value("head_hex", ""), head) << j->dump();
	}
	for (const auto& m : {m4, m6, mm, mc, mmc, mmm})
		EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_TRUE(Logged(env().audit(), not_a_violation("sendmsg4", "allow", "redirect", kDenied4, 9010), name));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

// UDP to where only TCP is redirected (QUIC to a web server, say) is
// refused at the call, counted, and no violation, so that the client
// falls back to TCP: a freezing policy does not freeze, and nothing
// reaches the sink.
TEST_F(World, UdpWhereOnlyTcpIsRedirectedIsRefusedWithoutAViolation)
{
	std::string name = sandbox("quic");
	std::string m = env().marker("quic"), after = env().marker("after");
	auto rr = run_logged(env(), name,
			     Sequence({env().py("udp_send.py", {dest4(kDenied4, 9015), m}),
				       env().py("world_client.py", {dest4(kDenied4, 9015), after})}),
			     world_policy("freeze", json::array(), "tcp"));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	json r = ResultFor(rr, m);
	EXPECT_EQ(r.value("ok", true), false) << rr.describe();
	EXPECT_EQ(r.value("errno", ""), "EPERM") << rr.describe();
	// Not frozen: the TCP request after it was answered.
	EXPECT_EQ(ResultFor(rr, after).value("status", 0), 200) << rr.describe();
	Match refused = not_a_violation("sendmsg4", "deny", "redirect-udp", kDenied4, 9015);
	EXPECT_TRUE(Logged(env().audit(), refused, name));
	EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

// The proxy: its own unprivileged user, no capabilities, no new privileges,
// a seccomp filter, outside the sandbox's cgroup. Killed, it is started
// again; killed too often, it stays down for the window (10 s) while
// redirected connects fail closed (EPERM, no-proxy, not a violation), never
// reaching the destination, and then it is started again.
TEST_F(World, TheProxyIsUnprivilegedAndItsDeathFailsClosed)
{
	std::string name = sandbox("dead");
	std::string go = env().path("go"), again = env().path("again");
	std::string m = env().marker("dead"), back = env().marker("back");
	RunSpec s;
	s.policy = env().write_policy(name + ".json", world_policy("freeze"));
	s.name = name;
	s.cmd = Sequence({env().py("wait_file.py", {go, "30"}), env().py("world_client.py", {dest4(kDenied4, 9020), m}),
			  env().py("wait_file.py", {again, "30"}),
			  env().py("world_client.py", {dest4(kDenied4, 9020), back})});
	Proc& p = env().start_run(s);
	std::regex re("proxy ([0-9]+) on 127");
	auto proxy_pid = [&]() -> pid_t {
		std::string err = p.err();
		pid_t last = -1;
		for (std::sregex_iterator it(err.begin(), err.end(), re), end; it != end; ++it)
			last = std::stoi((*it)[1]);
		return last;
	};
	ASSERT_TRUE(wait_until([&] { return proxy_pid() > 0; }, 10s)) << p.err();
	pid_t pid = proxy_pid();
	std::string status;
	ASSERT_TRUE(wait_until(
		[&] {
			status = read_file(fmt::format("/proc/{}/status", pid));
			return status.find("Seccomp:\t2") != std::string::npos;
		},
		5s))
		<< status;
	auto field = [&](const std::string& key) {
		std::smatch sm;
		std::regex r("\n" + key + ":\\s*([^\n]*)");
		return std::regex_search(status, sm, r) ? sm[1].str() : std::string();
	};
	// Its own user where the package made it, else nobody.
	struct passwd* pw = ::getpwnam("airlock-proxy");
	std::string uid = std::to_string(pw ? pw->pw_uid : 65534);
	EXPECT_EQ(field("Uid").substr(0, field("Uid").find('\t')), uid) << status;
	EXPECT_EQ(field("CapEff"), "0000000000000000") << status;
	EXPECT_EQ(field("CapBnd"), "0000000000000000") << status;
	EXPECT_EQ(field("NoNewPrivs"), "1") << status;
	// It leads a session of its own: no controlling terminal.
	EXPECT_EQ(field("NSsid"), std::to_string(pid)) << status;
	std::string cg = read_file(fmt::format("/proc/{}/cgroup", pid));
	EXPECT_EQ(cg.find(name), std::string::npos) << cg;
	// Its four sockets (TCP and UDP, 127.0.0.1 and ::1) are bound to the
	// device lo: nothing it sends from them leaves the host.
	Result ss = env().in_client({"ss", "-H", "-a", "-n", "-p", "-t", "-u"});
	ASSERT_EQ(ss.status, 0) << ss.describe();
	std::istringstream lines(ss.out);
	std::string line;
	int sockets = 0, on_lo = 0;
	while (std::getline(lines, line))
		if (line.find(fmt::format("pid={},", pid)) != std::string::npos) {
			sockets++;
			on_lo += std::regex_search(line, std::regex(R"((127\.0\.0\.1|\[::1\])%lo:[0-9]+ )"));
		}
	EXPECT_EQ(sockets, 4) << ss.out;
	EXPECT_EQ(on_lo, 4) << ss.out;

	// Killed five times within the window: started again each time, then no more.
	pid_t cur = -1;
	for (int i = 0; i < 5; i++) {
		cur = proxy_pid();
		::kill(cur, SIGKILL);
		if (i < 4) {
			ASSERT_TRUE(wait_until([&] { return proxy_pid() != cur; }, 5s)) << p.err();
		}
	}
	ASSERT_TRUE(wait_until([&] { return p.err().find("it stays down for 10 s") != std::string::npos; }, 5s))
		<< p.err();
	// The first start and four restarts, as status (and metrics) count them.
	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_EQ((*st)["proxy"].value("proxy_starts", 0), 5) << st->dump();
	write_file(go, "go");
	std::vector<json> results;
	auto client_results = [&] {
		results.clear();
		for (const auto& j : json_objects_in(p.out()))
			if (j.contains("results"))
				results.push_back(j["results"][0]);
		return results.size();
	};
	ASSERT_TRUE(wait_until([&] { return client_results() == 1; }, 5s)) << p.out() << p.err();
	// Down: refused, not redirected elsewhere, and still down after.
	EXPECT_EQ(results[0].value("ok", true), false) << p.out();
	EXPECT_EQ(results[0].value("errno", ""), "EPERM") << p.out();
	EXPECT_EQ(p.err().find("it starts again"), std::string::npos) << p.err();
	// Its time come, it runs again: the same port, a sixth start.
	ASSERT_TRUE(wait_until([&] { return p.err().find("it starts again") != std::string::npos; }, 15s)) << p.err();
	ASSERT_TRUE(wait_until([&] { return proxy_pid() != cur && ::kill(proxy_pid(), 0) == 0; }, 5s)) << p.err();
	st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_EQ((*st)["proxy"].value("proxy_starts", 0), 6) << st->dump();
	write_file(again, "go");
	ASSERT_EQ(p.wait(20s), std::optional<int>(0)) << p.describe() << p.out() << p.err();
	ASSERT_EQ(client_results(), 2u) << p.out();
	EXPECT_EQ(results[1].value("ok", false), true) << p.out();
	EXPECT_EQ(results[1].value("status", 0), 200) << p.out();
	EXPECT_EQ(results[1].value("peer", ""), kDenied4) << p.out();
	Match down = not_a_violation("connect4", "deny", "no-proxy", kDenied4, 9020);
	EXPECT_TRUE(Logged(env().audit(), down, name));
	EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_TRUE(NothingArrived(env(), back));
}

// A flow opened before its destination was redirected (a reload) has no
// connect left to rewrite: its later packets never leave, TCP and UDP
// alike (egress, `not-redirected`), while the bytes it sent before did.
TEST_F(World, AFlowOpenedBeforeARedirectNeverLeavesAfterIt)
{
	std::string name = sandbox("before");
	std::string prefix = env().marker("before");
	std::string dir = env().path("probe-" + name);
	std::filesystem::create_directories(dir);
	RunSpec s;
	s.policy = env().write_policy(name + "-a.json", base_policy("it-before"));
	s.name = name;
	s.cmd = env().py("latch_probe.py",
			 {dest4(kAllowed4, 9003), dest4(kAllowed4, 9004), dest4(kDenied4, 9005), dir, prefix});
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return exists(dir + "/ready") || !runner.running(); }, 10s)) << runner.describe();
	ASSERT_TRUE(env().sink->wait_data(prefix + "-PRE-TCP", 1, 5s)) << "the TCP flow never carried its first bytes";
	ASSERT_TRUE(env().sink->wait_data(prefix + "-PRE-UDP", 1, 5s)) << "the UDP flow never carried its first bytes";

	json world = world_policy();
	world["name"] = "it-before-world";
	Result r = env().airlock({"reload", name, env().write_policy(name + "-b.json", world)});
	ASSERT_EQ(r.status, 0) << r.describe();
	write_file(dir + "/go", "");
	write_file(dir + "/latched", "");
	ASSERT_TRUE(wait_until([&] { return exists(dir + "/result.json"); }, 10s)) << runner.describe();
	json res = json::parse(read_file(dir + "/result.json"));
	EXPECT_EQ(res["post_udp"].value("errno", ""), "EPERM") << res.dump();
	Match tcp = Violation("egress", "not-redirected", kAllowed4, 9003);
	Match udp = Violation("egress", "not-redirected", kAllowed4, 9004);
	// Each is written when the agent reads its event: waited for, both.
	EXPECT_TRUE(wait_until([&] { return !decisions(env().audit(), tcp).empty(); }, 5s))
		<< dump_lines(env().audit());
	EXPECT_TRUE(wait_until([&] { return !decisions(env().audit(), udp).empty(); }, 5s))
		<< dump_lines(env().audit());
	EXPECT_TRUE(Logged(env().audit(), udp, name)) << dump_lines(env().audit());
	EXPECT_TRUE(NothingArrived(env(), prefix + "-POST-TCP"));
	EXPECT_TRUE(NothingArrived(env(), prefix + "-POST-UDP"));
	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
}

// A socket bound to a device (SO_BINDTODEVICE, IP_UNICAST_IF) makes the
// route lookup for a loopback address skip lo: the packet would leave
// through the device, to whatever answers for 127.0.0.1 there (here a
// neighbour entry sends it to the sink). Loopback the rules allow and the
// proxy a redirect rewrote to alike: denied at egress (loopback-dev),
// nothing reaches the sink.
TEST_F(World, LoopbackThroughAnotherDeviceNeverLeaves)
{
	std::string name = sandbox("dev");
	const std::string& c = env().topo->client_ns;
	const std::string& dev = env().topo->client_if;
	auto neigh = [&](const char* op) {
		std::vector<std::string> a = {"ip", "-n", c, "neigh", op, "127.0.0.1", "dev", dev};
		if (std::string(op) == "replace")
			a.insert(a.end(), {"lladdr", kSinkMac, "nud", "permanent"});
		return run(a, 5s);
	};
	Result added = neigh("replace");
	ASSERT_EQ(added.status, 0) << added.describe();
	struct Undo {
		std::function<void()> f;
		~Undo() { f(); }
	} undo{[&] { neigh("del"); }};

	std::vector<std::string> markers;
	std::vector<std::string> args = {dev};
	const std::vector<std::pair<std::string, std::string>> tries = {{"udp-bind", dest4("127.0.0.1", 9030)},
									{"udp-ucast", dest4("127.0.0.1", 9031)},
									{"udp-bind", dest4(kDenied4, 9032)},
									{"tcp-bind", dest4(kDenied4, 9033)}};
	for (const auto& [mode, dest] : tries) {
		markers.push_back(env().marker("dev"));
		args.insert(args.end(), {mode, dest, markers.back()});
	}
	json extra = json::array({{{"action", "allow"}, {"cidr", "127.0.0.0/8"}}});
	auto rr = run_logged(env(), name, env().py("bound_send.py", args), world_policy("deny", extra));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	json r1 = ResultFor(rr, markers[0]);
	EXPECT_EQ(r1.value("ok", true), false) << rr.describe();
	EXPECT_EQ(r1["errno"], json("EPERM")) << rr.describe();
	for (const auto& m : markers)
		EXPECT_TRUE(NothingArrived(env(), m)) << m;
	EXPECT_TRUE(Logged(env().audit(), Violation("egress", "loopback-dev", "127.0.0.1", 9030), name))
		<< dump_lines(env().audit());
	EXPECT_TRUE(Logged(env().audit(), Violation("egress", "loopback-dev", "127.0.0.1", 9031), name))
		<< dump_lines(env().audit());
	EXPECT_TRUE(read_json_lines(records(name)).empty()) << read_file(records(name));
}

// The proxy never outlives the agent that started it: `airlock run`
// killed (SIGKILL, no chance to stop it) once its command runs, its proxy,
// which runs as another user, is killed too (listening no more, holding
// its records no more); the sandbox, enforced still, has its redirected
// connect fail closed (no proxy), never reaching the destination.
TEST_F(World, TheProxyEndsWithTheAgentThatStartedIt)
{
	std::string name = sandbox("orphan");
	std::string started = env().path("started"), go = env().path("go-orphan"), released = env().path("released");
	std::string m = env().marker("orphaned");
	RunSpec s;
	s.policy = env().write_policy(name + ".json", world_policy());
	s.name = name;
	s.cmd = Sequence({{"touch", started},
			  env().py("wait_file.py", {go, "60"}),
			  env().py("world_client.py", {dest4(kDenied4, 9030), m}),
			  {"touch", released}});
	Proc& runner = env().start_run(s);
	pid_t proxy = proxy_started(runner).pid;
	ASSERT_GT(proxy, 0) << runner.describe();
	ASSERT_TRUE(pid_alive(proxy));
	// The proxy starts before the command: a runner killed in between
	// would leave no command to go on.
	ASSERT_TRUE(wait_until([&] { return exists(started) || !runner.running(); }, 10s)) << runner.describe();
	ASSERT_TRUE(exists(started)) << runner.describe();

	runner.signal(SIGKILL);
	ASSERT_TRUE(runner.reap_now(5s)) << runner.describe();
	EXPECT_TRUE(wait_until([&] { return !pid_alive(proxy); }, 5s))
		<< "proxy " << proxy << " outlived its agent: state " << pid_state(proxy);

	write_file(go, "");
	ASSERT_TRUE(wait_until([&] { return exists(released); }, 15s));
	EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_TRUE(read_json_lines(records(name)).empty()) << read_file(records(name));
	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
}

// Another sandbox's proxy is no loopback port like any other: a sandbox
// whose rules allow loopback is denied its port (proxy-port) by its
// address, and nothing of it lands in the world sandbox's records.
TEST_F(World, AnotherSandboxsProxyIsNotReachable)
{
	std::string a = sandbox("owner"), b = sandbox("other");
	std::string go = env().path("go-owner");
	RunSpec s;
	s.policy = env().write_policy(a + ".json", world_policy());
	s.name = a;
	s.cmd = env().py("wait_file.py", {go, "30"});
	Proc& owner = env().start_run(s);
	int port = proxy_started(owner).port;
	ASSERT_GT(port, 0) << owner.err();

	json other = base_policy("it-other");
	other["rules"].push_back({{"action", "allow"}, {"cidr", "127.0.0.0/8"}});
	other["rules"].push_back({{"action", "allow"}, {"cidr", "::1/128"}});
	// The other sandbox's command as uid 0, then as nobody.
	std::vector<RunResult> runs;
	for (const std::string user : {"", "nobody"}) {
		std::string tag = user.empty() ? "root" : user;
		std::string m4 = env().marker("other4-" + tag), m6 = env().marker("other6-" + tag);
		RunSpec o;
		o.policy = env().write_policy(b + tag + ".json", other);
		o.name = b + "-" + tag;
		o.user = user;
		o.cmd = env().py("tcp_send.py", {dest4("127.0.0.1", port), m4, dest6("::1", port), m6});
		RunResult rr = env().run(o, 30s);
		EXPECT_EQ(rr.r.status, 0) << rr.describe();
		for (const auto& m : {m4, m6}) {
			json r = ResultFor(rr, m);
			EXPECT_EQ(r.value("ok", true), false) << rr.describe();
			EXPECT_EQ(r["errno"], json("EPERM")) << rr.describe();
		}
		EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "proxy-port", "127.0.0.1", port), o.name))
			<< tag;
		EXPECT_TRUE(Logged(env().audit(), Violation("connect6", "proxy-port", "::1", port), o.name)) << tag;
	}
	write_file(go, "go");
	ASSERT_EQ(owner.wait(20s), std::optional<int>(0)) << owner.describe();
	EXPECT_TRUE(read_json_lines(records(a)).empty()) << read_file(records(a));
}

// A proxy port is one proxy's on the host, whatever network namespace its
// listeners are in. `airlock run` in another namespace, whose port range
// makes the first sandbox's proxy port the first one bind gives it, does
// not take that port (claimed in the kernel only if no proxy has it): it
// says so and binds another; both sandboxes' redirected connections land
// in their own recorders, no violation (a port taken over would make the
// first's proxy-port violations).
TEST_F(World, AProxyPortOfAnotherNamespaceIsNeverTakenOver)
{
	std::string a = sandbox("first"), b = sandbox("second");
	std::string go_a = env().path("go-first"), go_b = env().path("go-second"), then = env().path("then-first");
	std::string ma = env().marker("first");
	RunSpec s;
	s.policy = env().write_policy(a + ".json", world_policy());
	s.name = a;
	// A connection once the second sandbox's proxy runs.
	s.cmd = Sequence({env().py("wait_file.py", {then, "60"}),
			  env().py("world_client.py", {dest4(kDenied4, 9021), ma}),
			  env().py("wait_file.py", {go_a, "60"})});
	Proc& first = env().start_run(s);
	int port = proxy_started(first).port;
	ASSERT_GT(port, 0) << first.err();

	// A namespace of its own, loopback up, handing out [port - 1, port]:
	// bind(0) tries the port of the other parity than the range's low end
	// first, i.e. the first sandbox's.
	std::string ns = "alw" + env().id;
	struct Netns {
		std::string name;
		~Netns() { run({"ip", "netns", "del", name}, 10s); }
	} guard{ns};
	ASSERT_EQ(run({"ip", "netns", "add", ns}, 10s).status, 0);
	ASSERT_EQ(run({"ip", "-n", ns, "link", "set", "lo", "up"}, 10s).status, 0);
	Result range = run({"ip", "netns", "exec", ns, "sysctl", "-q", "-w",
			    fmt::format("net.ipv4.ip_local_port_range={} {}", port - 1, port)},
			   10s);
	ASSERT_EQ(range.status, 0) << range.describe();

	std::string mb = env().marker("second");
	RunSpec o;
	o.policy = env().write_policy(b + ".json", world_policy());
	o.name = b;
	o.in_client_ns = false;
	o.cmd = Sequence(
		{env().py("world_client.py", {dest4(kDenied4, 9020), mb}), env().py("wait_file.py", {go_b, "60"})});
	std::vector<std::string> argv = {"nsenter", "--net=/run/netns/" + ns};
	for (const auto& x : env().run_argv(o))
		argv.push_back(x);
	Proc& second = env().start(argv, "run-" + b);
	ASSERT_TRUE(wait_until([&] { return !read_json_lines(records(b)).empty() || !second.running(); }, 15s))
		<< second.describe();
	EXPECT_NE(second.err().find(
			  fmt::format("{}: port {} is another sandbox's proxy port; binding another", b, port)),
		  std::string::npos)
		<< second.describe();
	int port2 = proxy_started(second).port;
	ASSERT_GT(port2, 0) << second.describe();
	EXPECT_EQ(port2, port - 1) << second.describe();
	auto jb = record_with(read_json_lines(records(b)), "path", mb);
	ASSERT_TRUE(jb) << read_file(records(b));
	EXPECT_EQ(jb->value("dst", ""), kDenied4);

	// The first sandbox's redirected connections go on to its own proxy.
	write_file(then, "");
	EXPECT_TRUE(wait_until([&] { return !read_json_lines(records(a)).empty() || !first.running(); }, 15s))
		<< first.describe();
	write_file(go_a, "go");
	write_file(go_b, "go");
	EXPECT_EQ(first.wait(20s), std::optional<int>(0)) << first.describe();
	EXPECT_EQ(second.wait(20s), std::optional<int>(0)) << second.describe();
	EXPECT_TRUE(record_with(read_json_lines(records(a)), "path", ma)) << read_file(records(a));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
	EXPECT_TRUE(NothingArrived(env(), ma));
	EXPECT_TRUE(NothingArrived(env(), mb));
}

// world.dns "synthesize": every query, to any address, is answered by the
// world with an address of 198.18.0.0/15 bound to the name, and seems to
// come from where it was sent (recvmsg4/6): glibc's getaddrinfo over
// resolv.conf, sendto/recvfrom from IPv4 and IPv6 sockets (native and
// v4-mapped), dig; urllib then reaches the name, and its request is recorded
// with the name. The real resolver of the test world never hears of the
// names, and nothing is a violation.
TEST_F(World, TheWorldAnswersDnsFromWhereItWasAskedAndRecordsCarryTheName)
{
	DnsWorld w(env());
	ASSERT_NO_THROW(w.start());
	std::string name = sandbox("dns");
	json policy = world_policy("freeze");
	policy["world"]["dns"] = "synthesize";
	std::string marker = env().marker("dnsworld");
	std::vector<std::string> py = env().py("world_dns.py", {"api.example.com", kResolver4, kDenied6, marker});
	std::vector<std::string> cmd = {"/bin/sh", "-c", "\"$@\" && dig +short +tries=1 +time=3 dig.example A", "sh"};
	cmd.insert(cmd.end(), py.begin(), py.end());
	RunSpec s;
	s.policy = env().write_policy(name + ".json", policy);
	s.name = name;
	s.cmd = cmd;
	s.log_allowed = true;
	RunResult rr = w.run(s, 40s);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	ASSERT_FALSE(rr.out_json.empty()) << rr.describe();
	const json& out = rr.out_json[0];
	EXPECT_EQ(out["getaddrinfo"], json::array({"198.18.0.1"})) << out.dump();
	ASSERT_EQ(out["raw"].size(), 3u) << out.dump();
	const std::vector<std::pair<std::string, int>> raw = {{kResolver4, 0x1111},
							      {std::string("::ffff:") + kResolver4, 0x2222},
							      {kDenied6, 0x3333}};
	for (size_t i = 0; i < raw.size(); i++) {
		const json& r = out["raw"][i];
		EXPECT_EQ(r.value("from", ""), raw[i].first) << r.dump();
		EXPECT_EQ(r.value("from_port", 0), 53) << r.dump();
		EXPECT_EQ(r.value("id", 0), raw[i].second) << r.dump();
		EXPECT_EQ(r.value("answer", ""), "198.18.0.1") << r.dump();
	}
	EXPECT_EQ(out["http"].value("status", 0), 200) << out.dump();
	EXPECT_NE(rr.r.out.find("\n198.18.0.2\n"), std::string::npos) << rr.describe();

	auto lines = wait_records(name, 1);
	auto http = record_with(lines, "path", marker);
	ASSERT_TRUE(http) << read_file(records(name));
	EXPECT_EQ(http->value("dst", ""), "198.18.0.1");
	EXPECT_EQ(http->value("port", 0), 80);
	EXPECT_EQ(http->value("name", ""), "api.example.com");
	EXPECT_EQ(http->value("host", ""), "api.example.com");
	std::set<std::string> asked;
	for (const auto& j : lines)
		if (j.value("kind", "") == "dns" && j.value("qtype", "") == "A")
			asked.insert(j.value("dst", "") + " " + j.value("protocol", "") + " " + j.value("query", "") +
				     " " + j.value("answer", ""));
	EXPECT_TRUE(asked.count(std::string(kResolver4) + " udp api.example.com 198.18.0.1"))
		<< read_file(records(name));
	EXPECT_TRUE(asked.count(std::string(kDenied6) + " udp api.example.com 198.18.0.1")) << read_file(records(name));
	EXPECT_TRUE(asked.count(std::string(kResolver4) + " udp dig.example 198.18.0.2")) << read_file(records(name));

	EXPECT_TRUE(NeverQueried(w, "api.example.com"));
	EXPECT_TRUE(NeverQueried(w, "dig.example"));
	EXPECT_TRUE(NothingArrived(env(), marker));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

// TLS to the world ends in the recorder with the sandbox's CA, which
// `airlock run` offers the command through SSL_CERT_FILE, CURL_CA_BUNDLE,
// NODE_EXTRA_CA_CERTS and the others: curl, Python's urllib and Node's https
// verify it (each with its default settings, the address as the name) and
// get the world's answer; each request is recorded with "tls"; the bundle
// holds one certificate, the CA's, and no key; nothing reaches the sink.
TEST_F(World, TlsEndsInTheWorldWithTheSandboxsCa)
{
	std::string name = sandbox("tls");
	std::string mc = env().marker("tlscurl"), mp = env().marker("tlspy"), mn = env().marker("tlsnode");
	std::string script = fmt::format(
		"set -e; env | grep -E '^(SSL_CERT_FILE|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NODE_EXTRA_CA_CERTS|GIT_SSL_CAINFO)=' "
		"| sort; grep -c 'BEGIN CERTIFICATE' \"$SSL_CERT_FILE\"; ! grep -q PRIVATE \"$SSL_CERT_FILE\"; "
		"curl -sS --noproxy '*' --max-time 10 -w ' curl=%{{http_code}}\\n' https://{0}/{1}; "
		"python3 -c 'import urllib.request as u; o=u.build_opener(u.ProxyHandler({{}})); "
		"r=o.open(\"https://[{2}]/{3}\", timeout=10); print(r.read().decode().strip(), \"python=%d\" % r.status)'; "
		"node -e 'require(\"https\").get(\"https://{0}/{4}\", r => {{ let b=\"\"; r.on(\"data\", d => b += d); "
		"r.on(\"end\", () => console.log(b.trim(), \"node=\" + r.statusCode)); }}).on(\"error\", e => {{ "
		"console.log(\"node error\", e.message); process.exit(1); }})'",
		"203.0.113.10", mc, kDenied6, mp, mn);
	auto rr = run_logged(env(), name, {"/bin/sh", "-c", script}, world_policy());
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_NE(rr.r.out.find("CURL_CA_BUNDLE=/"), std::string::npos) << rr.r.out;
	EXPECT_NE(rr.r.out.find("GIT_SSL_CAINFO=/"), std::string::npos) << rr.r.out;
	EXPECT_NE(rr.r.out.find("NODE_EXTRA_CA_CERTS=/"), std::string::npos) << rr.r.out;
	EXPECT_NE(rr.r.out.find("REQUESTS_CA_BUNDLE=/"), std::string::npos) << rr.r.out;
	EXPECT_NE(rr.r.out.find("SSL_CERT_FILE=/"), std::string::npos) << rr.r.out;
	EXPECT_NE(rr.r.out.find("\n1\n"), std::string::npos) << rr.r.out;
	EXPECT_NE(rr.r.out.find("airlock world: recorded\n curl=200"), std::string::npos) << rr.r.out;
	EXPECT_NE(rr.r.out.find("airlock world: recorded python=200"), std::string::npos) << rr.r.out;
	EXPECT_NE(rr.r.out.find("airlock world: recorded node=200"), std::string::npos) << rr.r.out;

	auto lines = wait_records(name, 3);
	const std::vector<std::pair<std::string, std::string>> want = {{mc, "203.0.113.10"},
								       {mp, kDenied6},
								       {mn, "203.0.113.10"}};
	for (const auto& [marker, dst] : want) {
		auto r = record_with(lines, "path", marker);
		ASSERT_TRUE(r) << marker << "\n" << read_file(records(name));
		EXPECT_EQ(r->value("kind", ""), "http");
		EXPECT_EQ(r->value("dst", ""), dst);
		EXPECT_EQ(r->value("port", 0), 443);
		EXPECT_EQ(r->value("tls", false), true);
		EXPECT_EQ(r->value("status", 0), 200);
	}
	for (const auto& m : {mc, mp, mn})
		EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

// Each world sandbox has its own origin table: another world sandbox that
// files 40,000 origins (datagrams from as many loopback addresses and
// ports, more than a table holds) evicts only its own. The first sandbox's
// connection waits in its stopped proxy's backlog meanwhile, and is
// recorded and answered once the proxy runs again (one table shared by
// both fails it: the connection is refused for want of an origin).
TEST_F(World, AnotherSandboxCannotEvictAWorldSandboxsOrigins)
{
	std::string a = sandbox("held"), b = sandbox("flood");
	std::string start = env().path("held-start"), connected = env().path("held-connected"),
		    go = env().path("held-go");
	std::string marker = env().marker("held");
	RunSpec s;
	s.policy = env().write_policy(a + ".json", world_policy());
	s.name = a;
	s.cmd = env().py("held_request.py", {start, connected, go, dest4(kDenied4, 80), marker});
	Proc& held = env().start_run(s);
	pid_t proxy = proxy_started(held).pid;
	ASSERT_GT(proxy, 0) << held.err();
	ASSERT_EQ(::kill(proxy, SIGSTOP), 0);
	write_file(start, "go");
	bool ok = wait_until([&] { return std::filesystem::exists(connected); }, 15s);
	if (ok) {
		RunSpec f;
		f.policy = env().write_policy(b + ".json", world_policy());
		f.name = b;
		f.cmd = env().py("origin_flood.py", {"40000", dest4("203.0.113.11", 9)});
		RunResult fr = env().run(f, 120s);
		EXPECT_EQ(fr.r.status, 0) << fr.describe();
		EXPECT_NE(fr.r.out.find("\"sent\":40000"), std::string::npos) << fr.r.out;
	}
	::kill(proxy, SIGCONT);
	write_file(go, "go");
	ASSERT_TRUE(ok) << held.describe();
	ASSERT_EQ(held.wait(30s), std::optional<int>(0)) << held.describe();
	EXPECT_NE(held.out().find("\"status\":200"), std::string::npos) << held.describe();
	EXPECT_TRUE(record_with(read_json_lines(records(a)), "path", marker)) << read_file(records(a));
	EXPECT_TRUE(NothingArrived(env(), marker));
}

}  // namespace
}  // namespace it
