// Containment, one technique per test (THREATS.md, "Paths out"). Each test
// runs real clients inside an `airlock run` sandbox in the client namespace
// and judges with both oracles: the forbidden marker reaches the sink 0
// times (after a fence), and the audit log holds the violation with the right
// hook, reason and destination. Every test also has a legitimate case that
// must arrive intact, so that "deny everything" cannot pass.
//
// Policy (base_policy): allow 10.77.0.2 and fd77::2 on 9000-9039 (TCP+UDP).
// 10.77.0.3 and fd77::3 are the forbidden destinations: the sink listens on
// them too, so a failed denial delivers.
#include <signal.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "fixture.h"

namespace it {
namespace {

class Enforce : public AirlockTest {
protected:
	void SetUp() override
	{
		AirlockTest::SetUp();
		if (HasFatalFailure())
			return;
		policy_ = env().write_policy("policy.json", base_policy("it-enforce"));
	}

	std::string sandbox(const std::string& tag) { return "e" + env().id + "-" + tag; }

	struct Opts {
		bool keep_caps = false;
		bool log_allowed = false;
		std::string policy;  // default: base policy
		Opts& caps()
		{
			keep_caps = true;
			return *this;
		}
		Opts& allowed()
		{
			log_allowed = true;
			return *this;
		}
		Opts& with(const std::string& p)
		{
			policy = p;
			return *this;
		}
	};

	RunResult sandboxed(const std::string& name, const std::vector<std::string>& cmd, Opts o)
	{
		RunSpec s;
		s.policy = o.policy.empty() ? policy_ : o.policy;
		s.name = name;
		s.cmd = cmd;
		s.keep_caps = o.keep_caps;
		s.log_allowed = o.log_allowed;
		RunResult rr = env().run(s, 25s);
		expect_clean_exit(rr, name);
		return rr;
	}
	RunResult sandboxed(const std::string& name, const std::vector<std::string>& cmd)
	{
		return sandboxed(name, cmd, Opts{});
	}

	// The command's status is passed through, the sandbox is gone, and the
	// audit log has its start and exit.
	void expect_clean_exit(const RunResult& rr, const std::string& name)
	{
		EXPECT_FALSE(rr.r.timed_out) << rr.describe();
		EXPECT_EQ(rr.r.status, 0) << rr.describe();
		EXPECT_FALSE(exists(env().sandbox_cgroup(name)))
			<< "sandbox cgroup left behind after `airlock run` exited: " << env().sandbox_cgroup(name);
		auto lines = env().audit();
		bool started = false, exited = false;
		for (const auto& j : events(lines, "sandbox-start"))
			if (j.value("sandbox", "") == name) {
				started = true;
				EXPECT_EQ(j.value("cgroup", ""), env().sandbox_cgroup(name)) << j.dump();
			}
		for (const auto& j : events(lines, "sandbox-exit"))
			if (j.value("sandbox", "") == name) {
				exited = true;
				EXPECT_EQ(j.value("status", -1), rr.r.status) << j.dump();
			}
		EXPECT_TRUE(started) << "no sandbox-start line for " << name << "\n" << dump_lines(lines);
		EXPECT_TRUE(exited) << "no sandbox-exit line for " << name << "\n" << dump_lines(lines);
	}

	// The two oracles for a denied attempt, and EPERM at the syscall.
	void expect_denied(const RunResult& rr, const std::string& marker, Match m, bool expect_eperm = true)
	{
		json r = ResultFor(rr, marker);
		ASSERT_TRUE(r.is_object()) << "the client reported nothing for " << marker << "\n" << rr.describe();
		if (expect_eperm) {
			EXPECT_FALSE(Ok(r)) << "the denied attempt succeeded: " << r.dump();
			EXPECT_EQ(Errno(r), "EPERM") << r.dump();
		}
		EXPECT_TRUE(NothingArrived(env(), marker));
		EXPECT_TRUE(Logged(env().audit(), m, rr_name_));
	}

	void expect_allowed(const RunResult& rr, const std::string& marker, const std::string& dst, int port)
	{
		json r = ResultFor(rr, marker);
		EXPECT_TRUE(Ok(r)) << "a legitimate attempt failed: " << r.dump() << "\n" << rr.describe();
		EXPECT_TRUE(ArrivedIntact(env(), marker));
		EXPECT_TRUE(NoViolationFor(env().audit(), dst, port));
	}

	std::string policy_;
	std::string rr_name_;  // sandbox whose lines Logged() looks for
};

TEST_F(Enforce, TcpConnect)
{
	std::string a = env().marker("tcp-a"), d = env().marker("tcp-d");
	rr_name_ = sandbox("tcp");
	auto rr = sandboxed(rr_name_, env().py("tcp_send.py", {dest4(kAllowed4, 9000), a, dest4(kDenied4, 9001), d}),
			    Opts().allowed());
	expect_allowed(rr, a, kAllowed4, 9000);
	Match m = Violation("connect4", "no-rule", kDenied4, 9001);
	m.protocol = "tcp";
	m.family = "ipv4";
	expect_denied(rr, d, m);
	// --log-allowed: the allowed connect is logged, with the rule that allowed it.
	Match allow;
	allow.hook = "connect4";
	allow.verdict = "allow";
	allow.reason = "rule-allow";
	allow.dst = kAllowed4;
	allow.port = 9000;
	allow.violation = false;
	EXPECT_TRUE(Logged(env().audit(), allow, rr_name_));
	for (const auto& j : decisions(env().audit(), allow)) {
		EXPECT_EQ(j.value("rule", json()), json(0)) << j.dump();
		EXPECT_EQ(j.value("policy", ""), "it-enforce") << j.dump();
	}
	for (const auto& j : decisions(env().audit(), Violation("connect4", "no-rule", kDenied4, 9001))) {
		EXPECT_EQ(j.value("policy", ""), "it-enforce") << j.dump();
		EXPECT_TRUE(j["rule"].is_null()) << j.dump();
		EXPECT_TRUE(j.contains("pid") && j.contains("tgid") && j.contains("comm") && j.contains("cgroup_id") &&
			    j.contains("ts"))
			<< j.dump();
	}
}

TEST_F(Enforce, UdpSendto)
{
	std::string a = env().marker("udp-a"), d = env().marker("udp-d");
	rr_name_ = sandbox("udp");
	auto rr = sandboxed(rr_name_, env().py("udp_send.py", {dest4(kAllowed4, 9002), a, dest4(kDenied4, 9003), d}));
	expect_allowed(rr, a, kAllowed4, 9002);
	Match m = Violation("sendmsg4", "no-rule", kDenied4, 9003);
	m.protocol = "udp";
	expect_denied(rr, d, m);
	// Without --log-allowed, allowed decisions are not logged.
	Match allow;
	allow.verdict = "allow";
	EXPECT_TRUE(decisions(env().audit(), allow).empty()) << dump_lines(env().audit());
}

TEST_F(Enforce, SendmmsgIsJudgedPerMessage)
{
	std::string a1 = env().marker("mm-a1"), d1 = env().marker("mm-d1"), a2 = env().marker("mm-a2"),
		    d2 = env().marker("mm-d2"), a3 = env().marker("mm-a3");
	rr_name_ = sandbox("mmsg");
	auto rr = sandboxed(rr_name_, env().py("sendmmsg.py", {dest4(kAllowed4, 9004), a1, dest4(kDenied4, 9005), d1,
							       dest4(kAllowed4, 9006), a2, dest4(kDenied4, 9007), d2,
							       dest4(kAllowed4, 9008), a3}));
	expect_allowed(rr, a1, kAllowed4, 9004);
	expect_allowed(rr, a2, kAllowed4, 9006);
	expect_allowed(rr, a3, kAllowed4, 9008);
	expect_denied(rr, d1, Violation("sendmsg4", "no-rule", kDenied4, 9005));
	expect_denied(rr, d2, Violation("sendmsg4", "no-rule", kDenied4, 9007));
}

TEST_F(Enforce, TcpFastOpen)
{
	// The topology makes Fast Open put the data in the SYN (test_oracle
	// checks that), so a connect hook skipped by MSG_FASTOPEN would leak.
	std::string a = env().marker("tfo-a"), d = env().marker("tfo-d");
	rr_name_ = sandbox("tfo");
	auto rr = sandboxed(rr_name_, env().py("tcp_send.py",
					       {"--fastopen", dest4(kAllowed4, 9009), a, dest4(kDenied4, 9010), d}));
	expect_allowed(rr, a, kAllowed4, 9009);
	Match m = Violation("connect4", "no-rule", kDenied4, 9010);
	m.protocol = "tcp";
	expect_denied(rr, d, m);
}

TEST_F(Enforce, ConnectedUdp)
{
	std::string a = env().marker("cudp-a"), d = env().marker("cudp-d");
	rr_name_ = sandbox("cudp");
	auto rr = sandboxed(rr_name_, env().py("udp_send.py", {"--mode", "connect", dest4(kAllowed4, 9011), a,
							       dest4(kDenied4, 9012), d}));
	expect_allowed(rr, a, kAllowed4, 9011);
	Match m = Violation("connect4", "no-rule", kDenied4, 9012);
	m.protocol = "udp";
	expect_denied(rr, d, m);
	EXPECT_EQ(ResultFor(rr, d).value("stage", ""), "connect") << "the denial must come at connect()";
}

TEST_F(Enforce, ConnectedUdpWithTosCmsgPasses)
{
	// sendmsg4/6 see 0.0.0.0:0 / :: for a connected socket that sends with
	// ancillary data: legitimate, must pass, and no violation may be logged.
	std::string a4 = env().marker("tos-a4"), a6 = env().marker("tos-a6");
	rr_name_ = sandbox("tos");
	auto rr = sandboxed(rr_name_, env().py("udp_send.py", {"--mode", "cmsg", dest4(kAllowed4, 9013), a4,
							       dest6(kAllowed6, 9014), a6}));
	expect_allowed(rr, a4, kAllowed4, 9013);
	expect_allowed(rr, a6, kAllowed6, 9014);
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
	// And the same with a denied peer: connect() itself is refused.
	std::string d = env().marker("tos-d");
	rr_name_ = sandbox("tos2");
	auto rr2 = sandboxed(rr_name_, env().py("udp_send.py", {"--mode", "cmsg", dest4(kDenied4, 9015), d}));
	expect_denied(rr2, d, Violation("connect4", "no-rule", kDenied4, 9015));
}

TEST_F(Enforce, V4MappedTcpIsJudgedAsIpv4)
{
	// An AF_INET6 TCP socket to ::ffff:a.b.c.d runs only connect6.
	std::string a = env().marker("map-tcp-a"), d = env().marker("map-tcp-d");
	rr_name_ = sandbox("maptcp");
	auto rr = sandboxed(rr_name_, env().py("tcp_send.py", {dest6("::ffff:10.77.0.2", 9016), a,
							       dest6("::ffff:10.77.0.3", 9017), d}));
	expect_allowed(rr, a, kAllowed4, 9016);
	expect_denied(rr, d, Violation("connect6", "no-rule", kDenied4, 9017));
}

TEST_F(Enforce, V4MappedUdpIsJudgedAsIpv4)
{
	// The UDP equivalent goes through udp_sendmsg: sendmsg4 with the IPv4 address.
	std::string a = env().marker("map-udp-a"), d = env().marker("map-udp-d");
	rr_name_ = sandbox("mapudp");
	auto rr = sandboxed(rr_name_, env().py("udp_send.py", {dest6("::ffff:10.77.0.2", 9018), a,
							       dest6("::ffff:10.77.0.3", 9019), d}));
	expect_allowed(rr, a, kAllowed4, 9018);
	expect_denied(rr, d, Violation("sendmsg4", "no-rule", kDenied4, 9019));
}

TEST_F(Enforce, Ipv6TcpAndUdp)
{
	std::string ta = env().marker("v6-tcp-a"), td = env().marker("v6-tcp-d");
	std::string ua = env().marker("v6-udp-a"), ud = env().marker("v6-udp-d");
	rr_name_ = sandbox("v6");
	auto rr = sandboxed(
		rr_name_, Sequence({env().py("tcp_send.py", {dest6(kAllowed6, 9020), ta, dest6(kDenied6, 9021), td}),
				    env().py("udp_send.py", {dest6(kAllowed6, 9022), ua, dest6(kDenied6, 9023), ud})}));
	expect_allowed(rr, ta, kAllowed6, 9020);
	expect_allowed(rr, ua, kAllowed6, 9022);
	Match mt = Violation("connect6", "no-rule", kDenied6, 9021);
	mt.family = "ipv6";
	expect_denied(rr, td, mt);
	Match mu = Violation("sendmsg6", "no-rule", kDenied6, 9023);
	mu.family = "ipv6";
	expect_denied(rr, ud, mu);
}

TEST_F(Enforce, Ipv4SourceRouteIsCaughtAtEgress)
{
	// sendto names 10.77.0.2 (allowed); the packet goes to 10.77.0.3 with an
	// LSRR option. Only cgroup_skb/egress sees the real destination.
	std::string s = env().marker("lsrr"), ss = env().marker("ssrr"), a = env().marker("lsrr-a");
	rr_name_ = sandbox("lsrr");
	auto rr = sandboxed(rr_name_,
			    Sequence({env().py("srcroute.py", {"--via", kDenied4, dest4(kAllowed4, 9024), s}),
				      env().py("srcroute.py",
					       {"--strict", "--via", kDenied4, dest4(kAllowed4, 9025), ss}),
				      env().py("udp_send.py", {dest4(kAllowed4, 9026), a})}),
			    Opts().caps());  // setting IP_OPTIONS source routes needs CAP_NET_RAW
	expect_allowed(rr, a, kAllowed4, 9026);
	// Not vacuous: the option was set and the datagram handed to the kernel.
	EXPECT_EQ(ResultFor(rr, s).value("stage", ""), "sendto") << rr.describe();
	EXPECT_EQ(ResultFor(rr, ss).value("stage", ""), "sendto") << rr.describe();
	// The send may or may not report the drop: the oracles are what counts.
	expect_denied(rr, s, Violation("egress", "source-route", kDenied4), false);
	expect_denied(rr, ss, Violation("egress", "source-route", kDenied4), false);
	EXPECT_EQ(decisions(env().audit(), Violation("egress", "source-route", std::nullopt)).size(), 2u)
		<< dump_lines(env().audit());
}

TEST_F(Enforce, Ipv6RoutingHeaderIsCaughtAtEgress)
{
	// sendto names fd77::2 (allowed); a type 4 routing header sends the
	// packet to fd77::3 first.
	std::string r = env().marker("rh4"), a = env().marker("rh4-a");
	rr_name_ = sandbox("rh4");
	auto rr = sandboxed(rr_name_, Sequence({env().py("rthdr.py", {"--via", kDenied6, dest6(kAllowed6, 9027), r}),
						env().py("udp_send.py", {dest6(kAllowed6, 9028), a})}));
	expect_allowed(rr, a, kAllowed6, 9028);
	EXPECT_EQ(ResultFor(rr, r).value("stage", ""), "sendto") << rr.describe();
	expect_denied(rr, r, Violation("egress", "routing-header", kDenied6), false);
}

TEST_F(Enforce, RawSocketsAreRefused)
{
	// --keep-caps: the process has CAP_NET_RAW, so only airlock can refuse.
	std::string m = env().marker("raw");
	rr_name_ = sandbox("raw");
	auto rr = sandboxed(rr_name_, env().py("raw_socket.py", {dest4(kDenied4, 9029), dest6(kDenied6, 9029), m}),
			    Opts().caps());
	json out = rr.last();
	ASSERT_TRUE(out.contains("results")) << rr.describe();
	ASSERT_EQ(out["results"].size(), 4u) << rr.describe();
	for (const auto& r : out["results"]) {
		EXPECT_FALSE(r.value("created", true)) << "raw socket created: " << r.dump();
		EXPECT_EQ(Errno(r), "EPERM") << r.dump();
	}
	EXPECT_TRUE(NothingArrived(env(), m));
	Match m4 = Violation("sock_create", "raw-socket", std::nullopt);
	m4.family = "ipv4";
	Match m6 = Violation("sock_create", "raw-socket", std::nullopt);
	m6.family = "ipv6";
	EXPECT_TRUE(Logged(env().audit(), m4, rr_name_));
	EXPECT_TRUE(Logged(env().audit(), m6, rr_name_));
	auto raw = decisions(env().audit(), Violation("sock_create", "raw-socket", std::nullopt));
	EXPECT_EQ(raw.size(), 4u) << dump_lines(env().audit());
	for (const auto& j : raw)
		EXPECT_TRUE(j.contains("dst") && j["dst"].is_null()) << "a new socket has no destination: " << j.dump();
}

TEST_F(Enforce, PingSocketWithoutIcmpRuleIsRefused)
{
	std::string m4 = env().marker("ping4"), m6 = env().marker("ping6");
	rr_name_ = sandbox("ping");
	auto rr = sandboxed(rr_name_,
			    Sequence({env().py("ping.py", {kAllowed4, m4}),
				      env().py("ping.py", {"--family", "6", kAllowed6, m6})}),
			    Opts().caps());
	ASSERT_EQ(rr.out_json.size(), 2u) << rr.describe();
	for (const auto& j : rr.out_json) {
		EXPECT_FALSE(j.value("created", true)) << "ping socket created without an ICMP rule: " << j.dump();
		EXPECT_EQ(Errno(j), "EPERM") << j.dump();
	}
	// Had the socket been created, the echo to the allowed address would have arrived.
	EXPECT_TRUE(NothingArrived(env(), m4));
	EXPECT_TRUE(NothingArrived(env(), m6));
	Match v4 = Violation("sock_create", "icmp-socket", std::nullopt);
	v4.family = "ipv4";
	Match v6 = Violation("sock_create", "icmp-socket", std::nullopt);
	v6.family = "ipv6";
	EXPECT_TRUE(Logged(env().audit(), v4, rr_name_));
	EXPECT_TRUE(Logged(env().audit(), v6, rr_name_));
}

TEST_F(Enforce, PingWithIcmpRuleReachesOnlyTheAllowedHost)
{
	json p = base_policy("it-icmp");
	p["rules"].push_back({{"action", "allow"}, {"cidr", "10.77.0.2/32"}, {"protocol", "icmp"}});
	std::string pf = env().write_policy("icmp.json", p);
	std::string a = env().marker("echo-a"), d = env().marker("echo-d");
	rr_name_ = sandbox("icmp");
	auto rr = sandboxed(rr_name_, env().py("ping.py", {kAllowed4, a, kDenied4, d}), Opts().caps().with(pf));
	json out = rr.last();
	ASSERT_TRUE(out.value("created", false)) << "ping socket refused despite the ICMP rule\n" << rr.describe();
	json ra = ResultFor(rr, a), rd = ResultFor(rr, d);
	EXPECT_TRUE(Ok(ra)) << ra.dump();
	EXPECT_TRUE(ra.value("reply", false)) << "no echo reply from the allowed host: " << ra.dump();
	EXPECT_TRUE(env().sink->wait_frames(a, 1, 3s)) << "the allowed echo request never reached the sink";
	EXPECT_FALSE(rd.value("reply", true)) << rd.dump();
	EXPECT_TRUE(NothingArrived(env(), d));
	// Ping datagrams run no sendmsg hook: the egress backstop denies them.
	Match m = Violation("egress", "no-rule", kDenied4);
	m.protocol = "icmp";
	EXPECT_TRUE(Logged(env().audit(), m, rr_name_));
	EXPECT_TRUE(NoViolationFor(env().audit(), kAllowed4, 0));
}

TEST_F(Enforce, IoUringConnectAndSendmsg)
{
	std::string ta = env().marker("uring-a"), td = env().marker("uring-d");
	std::string ua = env().marker("uring-ua"), ud = env().marker("uring-ud");
	rr_name_ = sandbox("uring");
	std::string u = uring_connect_bin();
	json p = base_policy("it-enforce");
	p["io_uring"] = true;  // refused by default (IORING_OP_SOCKET bypasses the family filter)
	auto rr = sandboxed(rr_name_,
			    Sequence({{u, "tcp", kAllowed4, "9030", ta},
				      {u, "tcp", kDenied4, "9031", td},
				      {u, "udp", kAllowed4, "9032", ua},
				      {u, "udp", kDenied4, "9033", ud}}),
			    Opts().with(env().write_policy("uring.json", p)));
	ASSERT_EQ(rr.out_json.size(), 4u) << rr.describe();
	EXPECT_TRUE(rr.out_json[0].value("ok", false)) << rr.out_json[0].dump();
	EXPECT_TRUE(ArrivedIntact(env(), ta));
	EXPECT_FALSE(rr.out_json[1].value("ok", true)) << rr.out_json[1].dump();
	EXPECT_EQ(Errno(rr.out_json[1]), "EPERM") << rr.out_json[1].dump();
	EXPECT_TRUE(rr.out_json[2].value("ok", false)) << rr.out_json[2].dump();
	EXPECT_TRUE(ArrivedIntact(env(), ua));
	EXPECT_FALSE(rr.out_json[3].value("ok", true)) << rr.out_json[3].dump();
	EXPECT_EQ(Errno(rr.out_json[3]), "EPERM") << rr.out_json[3].dump();
	EXPECT_TRUE(NothingArrived(env(), td));
	EXPECT_TRUE(NothingArrived(env(), ud));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kDenied4, 9031), rr_name_));
	EXPECT_TRUE(Logged(env().audit(), Violation("sendmsg4", "no-rule", kDenied4, 9033), rr_name_));
}

TEST_F(Enforce, ChildCgroupInheritsEnforcement)
{
	std::string a = env().marker("child-a"), d = env().marker("child-d");
	rr_name_ = sandbox("child");
	auto rr = sandboxed(rr_name_,
			    env().py("child_cgroup.py", {dest4(kAllowed4, 9034), a, dest4(kDenied4, 9035), d}));
	json out = rr.last();
	ASSERT_TRUE(out.value("moved", false)) << "the client did not get into a child cgroup\n" << rr.describe();
	// The only cgroup2 it sees is mounted from inside its cgroup namespace:
	// rooted at its sandbox.
	EXPECT_EQ(out.value("own_dir", ""), cgroup2_mount()) << out.dump();
	EXPECT_EQ(out.value("child", "").rfind(cgroup2_mount() + "/escape-", 0), 0u) << out.dump();
	expect_allowed(rr, a, kAllowed4, 9034);
	expect_denied(rr, d, Violation("connect4", "no-rule", kDenied4, 9035));
}

TEST_F(Enforce, ForkedDaemonIsEnforcedAndKilledAtExit)
{
	std::string a = env().marker("daemon-a"), d = env().marker("daemon-d");
	rr_name_ = sandbox("daemon");
	auto rr = sandboxed(rr_name_, env().py("daemon.py", {"--report", env().path("daemon.json"), "--linger", "60",
							     dest4(kDenied4, 9036), d, dest4(kAllowed4, 9037), a}));
	json out = rr.last();
	ASSERT_TRUE(out.contains("daemon_pid")) << rr.describe();
	pid_t dpid = out["daemon_pid"].get<pid_t>();
	json report = out["report"];
	json ra, rd;
	for (const auto& r : report["results"]) {
		if (r.value("marker", "") == a)
			ra = r;
		if (r.value("marker", "") == d)
			rd = r;
	}
	EXPECT_TRUE(Ok(ra)) << report.dump();
	EXPECT_EQ(Errno(rd), "EPERM") << report.dump();
	EXPECT_TRUE(ArrivedIntact(env(), a));
	EXPECT_TRUE(NothingArrived(env(), d));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kDenied4, 9036), rr_name_));
	// The daemon lingered 60 s; `airlock run` returned, so it must be gone.
	// (Its pid is one of the sandbox's PID namespace: found by its marker.)
	EXPECT_GT(dpid, 0);
	auto with_marker = [&] {
		std::vector<pid_t> found;
		for (const auto& e : std::filesystem::directory_iterator("/proc")) {
			std::string n = e.path().filename();
			if (n.find_first_not_of("0123456789") == std::string::npos && pid_alive(std::stoi(n)) &&
			    read_file(e.path().string() + "/cmdline").find(d) != std::string::npos)
				found.push_back(std::stoi(n));
		}
		return found;
	};
	EXPECT_TRUE(wait_until([&] { return with_marker().empty(); }, 3s))
		<< "the daemon (pid " << with_marker().front() << ") survived its sandbox";
	for (pid_t p : with_marker())
		::kill(p, SIGKILL);  // the test's own process, escaped: do not leave it behind
}

TEST_F(Enforce, MoreSpecificDenyRuleWins)
{
	json p = {{"version", 1},
		  {"name", "it-lpm"},
		  {"rules", json::array({json{{"action", "allow"}, {"cidr", "10.77.0.0/24"}, {"ports", {"9000-9039"}}},
					 json{{"action", "deny"}, {"cidr", "10.77.0.3/32"}}})}};
	std::string pf = env().write_policy("lpm.json", p);
	std::string a = env().marker("lpm-a"), d = env().marker("lpm-d");
	rr_name_ = sandbox("lpm");
	auto rr = sandboxed(rr_name_, env().py("tcp_send.py", {dest4(kAllowed4, 9038), a, dest4(kDenied4, 9039), d}),
			    Opts().with(pf));
	expect_allowed(rr, a, kAllowed4, 9038);
	expect_denied(rr, d, Violation("connect4", "rule-deny", kDenied4, 9039));
	for (const auto& j : decisions(env().audit(), Violation("connect4", "rule-deny", kDenied4, 9039)))
		EXPECT_EQ(j.value("rule", json()), json(1)) << j.dump();
}

// A port range holds both its ends and nothing past them, over TCP and UDP;
// a single port is a range of one.
TEST_F(Enforce, PortRangesIncludeBothEndsAndNothingPast)
{
	json p = {{"version", 1},
		  {"name", "it-ports"},
		  {"rules",
		   json::array({json{{"action", "allow"}, {"cidr", "10.77.0.2/32"}, {"ports", {"9010-9012", 9020}}}})}};
	std::string pf = env().write_policy("ports.json", p);
	for (const std::string proto : {"tcp", "udp"}) {
		SCOPED_TRACE(proto);
		std::vector<std::string> args;
		std::map<int, std::string> marker;
		for (int port : {9009, 9010, 9012, 9013, 9019, 9020, 9021}) {
			marker[port] = env().marker(proto + "-" + std::to_string(port));
			args.push_back(dest4(kAllowed4, port));
			args.push_back(marker[port]);
		}
		rr_name_ = sandbox("ports-" + proto);
		auto rr = sandboxed(rr_name_, env().py(proto + "_send.py", args), Opts().with(pf));
		for (int port : {9010, 9012, 9020})
			expect_allowed(rr, marker[port], kAllowed4, port);
		for (int port : {9009, 9013, 9019, 9021})
			expect_denied(rr, marker[port],
				      Violation(proto == "tcp" ? "connect4" : "sendmsg4", "no-rule", kAllowed4, port));
	}
}

TEST_F(Enforce, SetnsIntoAnotherNamespaceStaysEnforced)
{
	// The hooks key on the cgroup, not on the network namespace: a sandboxed
	// process that joins the sink's namespace (it keeps CAP_SYS_ADMIN here
	// on purpose) reaches 10.77.0.3 over that namespace's loopback only if
	// airlock fails; the sink's sockets would receive it.
	std::string sink_ns = "--net=" + env().topo->sink_ns_path();
	std::string a = env().marker("setns-a"), dt = env().marker("setns-tcp"), du = env().marker("setns-udp");
	rr_name_ = sandbox("setns");
	auto rr = sandboxed(rr_name_,
			    Sequence({{"nsenter", sink_ns, "--", python(), "-u", client_script("tcp_send.py"),
				       dest4(kDenied4, 9000), dt, dest4(kAllowed4, 9001), a},
				      {"nsenter", sink_ns, "--", python(), "-u", client_script("udp_send.py"),
				       dest4(kDenied4, 9002), du}}),
			    Opts().caps());
	ASSERT_EQ(rr.out_json.size(), 2u) << "nsenter inside the sandbox failed\n" << rr.describe();
	expect_allowed(rr, a, kAllowed4, 9001);
	expect_denied(rr, dt, Violation("connect4", "no-rule", kDenied4, 9000));
	expect_denied(rr, du, Violation("sendmsg4", "no-rule", kDenied4, 9002));
}

TEST_F(Enforce, LoopbackIsADestinationLikeAnyOther)
{
	// A listener on 127.0.0.1 inside the client namespace (a host service
	// several sandboxes could reach): denied unless a rule allows it.
	std::string ports = fmt::format("{},{}", 9000, kFencePort);
	Sink lo(env().tmp, "lo", SinkOptions{env().topo->client_ns, "lo", {"127.0.0.1"}, ports, ports, false});
	ASSERT_NO_THROW(lo.start());
	std::string d = env().marker("loop-d"), du = env().marker("loop-du");
	rr_name_ = sandbox("lo");
	auto rr = sandboxed(rr_name_, Sequence({env().py("tcp_send.py", {dest4("127.0.0.1", 9000), d}),
						env().py("udp_send.py", {dest4("127.0.0.1", 9000), du})}));
	EXPECT_EQ(Errno(ResultFor(rr, d)), "EPERM") << rr.describe();
	EXPECT_EQ(Errno(ResultFor(rr, du)), "EPERM") << rr.describe();
	ASSERT_TRUE(env().fence_to(AF_INET, "127.0.0.1", kFencePort, lo, 5s));
	EXPECT_TRUE(NothingArrived(env(), d, &lo));
	EXPECT_TRUE(NothingArrived(env(), du, &lo));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", "127.0.0.1", 9000), rr_name_));
	EXPECT_TRUE(Logged(env().audit(), Violation("sendmsg4", "no-rule", "127.0.0.1", 9000), rr_name_));
}

}  // namespace
}  // namespace it
