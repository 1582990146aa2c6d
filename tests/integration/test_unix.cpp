// Unix sockets are destinations (cgroup/connect_unix, cgroup/sendmsg_unix,
// Linux 6.7+; abstract names also under Landlock's scope, 6.12+). The sink
// is a unix listener the test runs outside every sandbox: a denial means 0
// bytes of the marker there (checked after a fence the test itself sends
// through the same socket) and a decision line in the audit log; every
// denial has a legitimate twin whose payload must arrive intact.
#include <sys/socket.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "fixture.h"

namespace it {
namespace {

// Sends a fence from the test process (outside every sandbox) through addr
// and waits until the listener that logs to log has it.
bool send_fence(const std::string& log, const std::string& kind, const std::string& addr)
{
	std::string m = "AIRLOCK-UNIX-FENCE-" + random_hex(12);
	int fd = ::socket(AF_UNIX, kind == "stream" ? SOCK_STREAM : SOCK_DGRAM, 0);
	struct sockaddr_un sa = {};
	sa.sun_family = AF_UNIX;
	socklen_t len = offsetof(struct sockaddr_un, sun_path);
	if (addr[0] == '@') {
		std::memcpy(sa.sun_path + 1, addr.data() + 1, addr.size() - 1);
		len += addr.size();
	} else {
		std::memcpy(sa.sun_path, addr.data(), addr.size());
		len += addr.size() + 1;
	}
	bool sent = kind == "stream" ? ::connect(fd, reinterpret_cast<sockaddr*>(&sa), len) == 0 &&
					       ::send(fd, m.data(), m.size(), 0) == static_cast<ssize_t>(m.size())
				     : ::sendto(fd, m.data(), m.size(), 0, reinterpret_cast<sockaddr*>(&sa), len) ==
					       static_cast<ssize_t>(m.size());
	::close(fd);
	return sent && wait_until([&] { return count_occurrences(read_file(log), m) == 1; }, 5s);
}

// A unix listener (tests/clients/unix_listener.py), outside the sandbox
// unless started inside one.
class UnixSink {
public:
	UnixSink(Env& env, const std::string& tag, const std::vector<std::string>& pairs)
	    : env_(env), log_(env.path(tag + ".log")), ready_(env.path(tag + ".ready"))
	{
		std::vector<std::string> args = {log_, ready_};
		args.insert(args.end(), pairs.begin(), pairs.end());
		proc_ = &env.start(env.py("unix_listener.py", args), tag);
	}
	bool ready()
	{
		return wait_until([&] { return exists(ready_); }, 10s);
	}
	// Occurrences of marker in what every socket received.
	size_t count(const std::string& marker) const
	{
		size_t n = 0;
		for (const auto& j : read_json_lines(log_))
			n += count_occurrences(j.value("data", ""), marker);
		return n;
	}
	bool arrived_intact(const std::string& payload) const
	{
		for (const auto& j : read_json_lines(log_))
			if (j.value("data", "") == payload)
				return true;
		return false;
	}
	// Sends a fence from outside every sandbox through addr and waits for
	// it: whatever reached the socket before it has been logged.
	bool fence(const std::string& kind, const std::string& addr) { return send_fence(log_, kind, addr); }
	std::string log() const { return read_file(log_); }

private:
	Env& env_;
	std::string log_, ready_;
	Proc* proc_ = nullptr;
};

class Unix : public AirlockTest {
protected:
	void TearDown() override
	{
		AirlockTest::TearDown();  // stops the listeners first
		std::error_code ec;
		std::filesystem::remove_all(dir_, ec);
	}

	bool with_topology() const override { return false; }
	bool with_sink() const override { return false; }

	void SetUp() override
	{
		AirlockTest::SetUp();
		if (HasFatalFailure())
			return;
		// A directory an unprivileged sandbox can walk to and write in
		// (/tmp itself may be closed to others), removed in TearDown.
		dir_ = env().state_dir + "-ux";
		if (::mkdir(dir_.c_str(), 0777) != 0 || ::chmod(dir_.c_str(), 0777) != 0)
			FAIL() << "mkdir " << dir_ << ": " << errno_name(errno);
		host_ = dir_ + "/host.sock";
		abstract_ = "@airlock-it-host-" + env().id;
	}

	json policy(const json& rules, const std::string& on_violation = "deny")
	{
		return {{"version", 1}, {"name", "it-unix"}, {"on_violation", on_violation}, {"rules", rules}};
	}

	RunResult run(const std::string& tag, const json& pol, const std::vector<std::string>& cmd,
		      const std::string& user = "")
	{
		RunSpec s;
		s.policy = env().write_policy(tag + ".json", pol);
		s.name = "u" + env().id + "-" + tag;
		s.cmd = cmd;
		s.user = user;
		s.in_client_ns = false;
		return env().run(s);
	}

	std::vector<std::string> client(const std::vector<std::string>& triples)
	{
		return env().py("unix_client.py", triples);
	}

	Match unix_violation(const std::string& hook, const std::string& reason, const std::string& dst)
	{
		Match m;
		m.hook = hook;
		m.verdict = "deny";
		m.reason = reason;
		m.dst = dst;
		m.family = "unix";
		m.violation = true;
		return m;
	}

	std::string dir_, host_, abstract_;
};

// The kernel here must have the hooks: a test of them that finds none fails.
TEST_F(Unix, TheKernelHasTheUnixHooks)
{
	auto rr = run("hooks", policy(json::array()), {"true"});
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(rr.r.err.find("no cgroup unix-socket hooks"), std::string::npos) << rr.r.err;
}

void DeniedNamedStream(Unix* t, Env& env, UnixSink& sink, RunResult& rr, const std::string& marker,
		       const std::string& path)
{
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	json r = ResultFor(rr, marker);
	EXPECT_EQ(r.value("ok", true), false) << rr.describe();
	EXPECT_EQ(r.value("errno", ""), "EPERM") << rr.describe();
	ASSERT_TRUE(sink.fence("stream", path)) << sink.log();
	EXPECT_EQ(sink.count(marker), 0u) << "LEAK through " << path << ": " << sink.log();
	(void)t;
	(void)env;
}

TEST_F(Unix, AHostServiceOnANamedSocketIsDeniedAndRecorded)
{
	UnixSink sink(env(), "host", {"stream", host_});
	ASSERT_TRUE(sink.ready());
	std::string m = env().marker("named");
	auto rr = run("named", policy(json::array()), client({"stream", host_, m}));
	DeniedNamedStream(this, env(), sink, rr, m, host_);
	EXPECT_TRUE(Logged(env().audit(), unix_violation("connect_unix", "no-rule", host_)));
}

TEST_F(Unix, AHostServiceIsDeniedToAnUnprivilegedSandboxToo)
{
	UnixSink sink(env(), "host", {"stream", host_});
	ASSERT_TRUE(sink.ready());
	std::string m = env().marker("nobody");
	auto rr = run("nobody", policy(json::array()), client({"stream", host_, m}), "nobody");
	DeniedNamedStream(this, env(), sink, rr, m, host_);
	auto lines = decisions(env().audit(), unix_violation("connect_unix", "no-rule", host_));
	ASSERT_EQ(lines.size(), 1u) << dump_lines(env().audit());
	EXPECT_EQ(lines[0].value("comm", ""), "python3");
	EXPECT_EQ(lines[0].value("unix", ""), "named");
}

TEST_F(Unix, ADatagramToANamedSocketIsDeniedAndRecorded)
{
	UnixSink sink(env(), "dgram", {"dgram", host_});
	ASSERT_TRUE(sink.ready());
	std::string m = env().marker("dgram");
	auto rr = run("dgram", policy(json::array()), client({"dgram", host_, m}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(ResultFor(rr, m).value("errno", ""), "EPERM") << rr.describe();
	ASSERT_TRUE(sink.fence("dgram", host_));
	EXPECT_EQ(sink.count(m), 0u) << sink.log();
	EXPECT_TRUE(Logged(env().audit(), unix_violation("sendmsg_unix", "no-rule", host_)));
}

TEST_F(Unix, AnAllowedPathDeliversIntactAndOthersStayDenied)
{
	std::string other = env().path("other.sock");
	UnixSink sink(env(), "allowed", {"stream", host_, "dgram", other});
	ASSERT_TRUE(sink.ready());
	std::string ok = env().marker("ok"), bad = env().marker("bad");
	auto rr = run("allowed", policy(json::array({{{"action", "allow"}, {"unix", host_}}})),
		      client({"stream", host_, ok, "dgram", other, bad}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(ResultFor(rr, ok).value("ok", false), true) << rr.describe();
	EXPECT_TRUE(wait_until([&] { return sink.arrived_intact(ok); }, 5s)) << sink.log();
	EXPECT_EQ(ResultFor(rr, bad).value("errno", ""), "EPERM") << rr.describe();
	ASSERT_TRUE(sink.fence("dgram", other));
	EXPECT_EQ(sink.count(bad), 0u) << sink.log();
	EXPECT_TRUE(Logged(env().audit(), unix_violation("sendmsg_unix", "no-rule", other)));
}

// "/dir/*" covers what is below dir, not "/dirx"; an exact deny beats it.
TEST_F(Unix, APrefixRuleCoversItsDirectoryAndAnExactDenyWins)
{
	std::string p = dir_ + "/p";
	::mkdir(p.c_str(), 0777);
	std::string a = p + "/a.sock", b = p + "/b.sock", sibling = p + "x.sock";
	UnixSink sink(env(), "prefix", {"stream", a, "stream", b, "stream", sibling});
	ASSERT_TRUE(sink.ready());
	std::string ma = env().marker("a"), mb = env().marker("b"), ms = env().marker("sib");
	json rules = json::array({{{"action", "allow"}, {"unix", p + "/*"}}, {{"action", "deny"}, {"unix", b}}});
	auto rr = run("prefix", policy(rules), client({"stream", a, ma, "stream", b, mb, "stream", sibling, ms}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_TRUE(wait_until([&] { return sink.arrived_intact(ma); }, 5s)) << sink.log();
	ASSERT_TRUE(sink.fence("stream", b));
	ASSERT_TRUE(sink.fence("stream", sibling));
	EXPECT_EQ(sink.count(mb), 0u);
	EXPECT_EQ(sink.count(ms), 0u);
	auto audit = env().audit();
	auto deny_b = decisions(audit, unix_violation("connect_unix", "rule-deny", b));
	ASSERT_EQ(deny_b.size(), 1u) << dump_lines(audit);
	EXPECT_EQ(deny_b[0].value("rule", -1), 1);
	EXPECT_EQ(deny_b[0].value("rule_text", ""), "deny unix " + b);
	EXPECT_TRUE(Logged(audit, unix_violation("connect_unix", "no-rule", sibling)));
}

// Spellings that reach another file than their characters say are refused
// before any rule: "/allowed/../host.sock" would otherwise pass "/allowed/*".
TEST_F(Unix, PathsThatDoNotNameTheirFileAreRefusedBeforeTheRules)
{
	UnixSink sink(env(), "canon", {"stream", host_});
	ASSERT_TRUE(sink.ready());
	std::string sub = dir_ + "/sub";
	::mkdir(sub.c_str(), 0777);
	std::string dotdot = sub + "/../host.sock";
	std::string dot = sub + "/./../host.sock";
	std::string dbl = dir_ + "//host.sock";
	std::string rel = "host.sock";
	std::string m1 = env().marker("dotdot"), m2 = env().marker("dot"), m3 = env().marker("dbl"),
		    m4 = env().marker("rel");
	json rules = json::array(
		{{{"action", "allow"}, {"unix", sub + "/*"}}, {{"action", "allow"}, {"unix", dir_ + "/x*"}}});
	// The relative path is tried from the directory that holds the socket.
	auto rr = run("canon", policy(rules),
		      {"sh", "-c",
		       "cd " + dir_ + " && exec " +
			       join(client({"stream", dotdot, m1, "stream", dot, m2, "stream", dbl, m3, "stream", rel,
					    m4}))});
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	for (const auto& m : {m1, m2, m3, m4})
		EXPECT_EQ(ResultFor(rr, m).value("errno", ""), "EPERM") << m << rr.describe();
	ASSERT_TRUE(sink.fence("stream", host_));
	for (const auto& m : {m1, m2, m3, m4})
		EXPECT_EQ(sink.count(m), 0u) << m;
	auto audit = env().audit();
	for (const auto& p : {dotdot, dot, dbl, rel})
		EXPECT_TRUE(Logged(audit, unix_violation("connect_unix", "unix-path", p))) << p;
}

// IPC among the sandbox's own processes: a socket it binds in a directory
// the policy allows, and a socketpair (which no hook sees: it has no peer
// outside).
TEST_F(Unix, TheSandboxsOwnSocketsKeepWorking)
{
	// The listener runs as nobody too: its files live in the shared directory.
	std::string own = dir_ + "/own.sock", log = dir_ + "/own.log", ready = dir_ + "/own.ready";
	std::string m = env().marker("own");
	// Waits (5 s at most) until the listener logged the connection.
	std::string logged = python() + " -c \"import sys, time\nfor _ in range(500):\n    if '" + m + "' in open('" +
			     log + "').read(): sys.exit(0)\n    time.sleep(0.01)\nsys.exit(1)\"";
	std::string listener = join(env().py("unix_listener.py", {log, ready, "stream", own}));
	std::string wait = join(env().py("wait_file.py", {ready, "10"}));
	std::string pair = python() + " -c \"import socket; a, b = socket.socketpair(); a.send(b'" + m +
			   "-pair'); print('PAIR', b.recv(100).decode())\"";
	json rules = json::array({{{"action", "allow"}, {"unix", dir_ + "/*"}}});
	auto rr = run("own", policy(rules),
		      {"sh", "-c",
		       listener + " & " + wait + " && " + join(client({"stream", own, m})) + " && " + logged + " && " +
			       pair},
		      "nobody");
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(ResultFor(rr, m).value("ok", false), true) << rr.describe();
	EXPECT_NE(rr.r.out.find("PAIR " + m + "-pair"), std::string::npos) << rr.describe();
	bool intact = false;
	for (const auto& j : read_json_lines(log))
		intact = intact || j.value("data", "") == m;
	EXPECT_TRUE(intact) << read_file(log);
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

// A policy that names an outside abstract socket is judged by its rules
// alone (no Landlock scope): the named one is reached, any other is denied
// and recorded.
TEST_F(Unix, AbstractNamesUnderRulesAloneAreDeniedAndRecorded)
{
	std::string other = "@airlock-it-other-" + env().id;
	UnixSink sink(env(), "abs", {"stream", abstract_, "dgram", other});
	ASSERT_TRUE(sink.ready());
	std::string ok = env().marker("absok"), bad = env().marker("absbad"), badd = env().marker("absdg");
	auto rr = run("abs", policy(json::array({{{"action", "allow"}, {"unix", other}}})),
		      client({"dgram", other, ok, "stream", abstract_, bad, "dgram", abstract_, badd}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_TRUE(wait_until([&] { return sink.arrived_intact(ok); }, 5s)) << sink.log();
	EXPECT_EQ(ResultFor(rr, bad).value("errno", ""), "EPERM");
	ASSERT_TRUE(sink.fence("stream", abstract_));
	EXPECT_EQ(sink.count(bad), 0u);
	EXPECT_EQ(sink.count(badd), 0u);
	auto audit = env().audit();
	EXPECT_TRUE(Logged(audit, unix_violation("connect_unix", "no-rule", abstract_)));
	auto st = env().status_of("u" + env().id + "-abs");
	(void)st;  // the runner is gone; its sandbox with it
}

// An abstract socket outside: stream and datagram, denied and recorded,
// also after the sandbox tried to bind the same name (EADDRINUSE: a name
// someone else holds never becomes the sandbox's).
TEST_F(Unix, AnAbstractSocketOutsideIsDeniedAndRecorded)
{
	std::string dg = abstract_ + "-dg";
	UnixSink sink(env(), "absout", {"stream", abstract_, "dgram", dg});
	ASSERT_TRUE(sink.ready());
	std::string m1 = env().marker("abss"), m2 = env().marker("absd");
	std::string squat = python() + " -c \"import socket; s = socket.socket(socket.AF_UNIX)\ntry: s.bind(b'\\0" +
			    abstract_.substr(1) +
			    "'); print('SQUAT bound')\nexcept OSError as e: print('SQUAT', e.errno)\"";
	auto rr = run("absout", policy(json::array()),
		      {"sh", "-c", squat + "; " + join(client({"stream", abstract_, m1, "dgram", dg, m2}))}, "nobody");
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_NE(rr.r.out.find("SQUAT 98"), std::string::npos) << rr.describe();  // EADDRINUSE
	EXPECT_EQ(ResultFor(rr, m1).value("errno", ""), "EPERM") << rr.describe();
	EXPECT_EQ(ResultFor(rr, m2).value("errno", ""), "EPERM") << rr.describe();
	ASSERT_TRUE(sink.fence("stream", abstract_));
	ASSERT_TRUE(sink.fence("dgram", dg));
	EXPECT_EQ(sink.count(m1), 0u) << sink.log();
	EXPECT_EQ(sink.count(m2), 0u) << sink.log();
	auto audit = env().audit();
	EXPECT_TRUE(Logged(audit, unix_violation("connect_unix", "no-rule", abstract_)));
	EXPECT_TRUE(Logged(audit, unix_violation("sendmsg_unix", "no-rule", dg)));
}

// An abstract socket a process of the sandbox bound is its own IPC.
TEST_F(Unix, AnAbstractSocketBoundInsideTheSandboxWorks)
{
	std::string name = "@airlock-it-own-" + env().id, log = dir_ + "/abs.log", ready = dir_ + "/abs.ready";
	std::string m = env().marker("absown");
	std::string listener = join(env().py("unix_listener.py", {log, ready, "stream", name}));
	std::string wait = join(env().py("wait_file.py", {ready, "10"}));
	std::string logged = python() + " -c \"import sys, time\nfor _ in range(500):\n    if '" + m + "' in open('" +
			     log + "').read(): sys.exit(0)\n    time.sleep(0.01)\nsys.exit(1)\"";
	RunSpec s;
	s.policy = env().write_policy("absown.json", policy(json::array()));
	s.name = "u" + env().id + "-absown";
	s.cmd = {"sh", "-c", listener + " & " + wait + " && " + join(client({"stream", name, m})) + " && " + logged};
	s.user = "nobody";
	s.in_client_ns = false;
	s.log_allowed = true;
	auto rr = env().run(s);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(ResultFor(rr, m).value("ok", false), true) << rr.describe();
	auto audit = env().audit();
	EXPECT_EQ(CountViolations(audit), 0u) << dump_lines(audit);
	Match own;
	own.hook = "connect_unix";
	own.verdict = "allow";
	own.reason = "unix-own";
	own.dst = name;
	EXPECT_TRUE(Logged(audit, own));
}

// Two sandboxes never reach each other: B's connect to the name A bound is
// denied in B and recorded; A's listener gets nothing.
TEST_F(Unix, TwoSandboxesCannotReachEachOthersAbstractSockets)
{
	std::string name = "@airlock-it-a-" + env().id, log = dir_ + "/a.log", ready = dir_ + "/a.ready";
	RunSpec a;
	a.policy = env().write_policy("a.json", policy(json::array()));
	a.name = "u" + env().id + "-a";
	a.cmd = env().py("unix_listener.py", {log, ready, "stream", name});
	a.user = "nobody";
	a.in_client_ns = false;
	Proc& pa = env().start_run(a);
	ASSERT_TRUE(wait_until([&] { return exists(ready); }, 10s)) << pa.err();
	std::string m = env().marker("cross");
	auto rr = run("b", policy(json::array()), client({"stream", name, m}), "nobody");
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(ResultFor(rr, m).value("errno", ""), "EPERM") << rr.describe();
	auto audit = env().audit();
	EXPECT_TRUE(Logged(audit, unix_violation("connect_unix", "no-rule", name), "u" + env().id + "-b"));
	// The test's own fence through A's socket: A's listener is alive and
	// has seen everything sent before.
	ASSERT_TRUE(send_fence(log, "stream", name)) << read_file(log);
	EXPECT_EQ(count_occurrences(read_file(log), m), 0u) << read_file(log);
	pa.signal(SIGTERM);
	pa.wait(10s);
}

// The hook sees a name; the kernel follows symbolic links after it. A
// directory a prefix rule allows is mounted nosymfollow for the processes
// airlock starts: a link the sandbox plants there leads nowhere.
TEST_F(Unix, ASymlinkInAnAllowedDirectoryLeadsNowhere)
{
	std::string p = dir_ + "/p", link = p + "/link.sock";
	::mkdir(p.c_str(), 0777);
	::chmod(p.c_str(), 0777);
	UnixSink sink(env(), "symlink", {"stream", host_});
	ASSERT_TRUE(sink.ready());
	std::string m = env().marker("symlink");
	json rules = json::array({{{"action", "allow"}, {"unix", p + "/*"}}});
	auto rr = run("symlink", policy(rules),
		      {"sh", "-c", "ln -s " + host_ + " " + link + " && " + join(client({"stream", link, m}))},
		      "nobody");
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(ResultFor(rr, m).value("errno", ""), "ELOOP") << rr.describe();
	ASSERT_TRUE(sink.fence("stream", host_));
	EXPECT_EQ(sink.count(m), 0u) << "LEAK through a symlink: " << sink.log();
	auto start = events(env().audit(), "sandbox-start");
	ASSERT_EQ(start.size(), 1u);
	EXPECT_EQ(start[0]["confinement"]["nosymfollow"], json::array({p})) << start[0].dump();
}

TEST_F(Unix, AViolationOnAUnixSocketLatchesTheQuarantine)
{
	UnixSink sink(env(), "latch", {"stream", host_});
	ASSERT_TRUE(sink.ready());
	std::string m = env().marker("latch");
	auto rr = run("latch", policy(json::array(), "kill"), client({"stream", host_, m}));
	EXPECT_EQ(rr.r.status, 120) << rr.describe();
	ASSERT_TRUE(sink.fence("stream", host_));
	EXPECT_EQ(sink.count(m), 0u);
	Match v = unix_violation("connect_unix", "no-rule", host_);
	v.latched = true;
	EXPECT_TRUE(Logged(env().audit(), v));
}

// Socket families the policy does not list: refused by the seccomp filter of
// the processes airlock starts, and recorded (seen as the call returns).
class SocketFamilies : public Unix {};

TEST_F(SocketFamilies, UnlistedFamiliesAreRefusedAndRecorded)
{
	std::string probe =
		python() +
		" -c \"import socket\nfor f, t, p in ((40, 2, 0), (16, 3, 2), (17, 3, 0), (1, 1, 0), (2, 2, 0), (16, 3, 0)):\n"
		"    try: socket.socket(f, t, p).close(); print('FAM', f, p, 'ok')\n"
		"    except OSError as e: print('FAM', f, p, e.errno)\"";
	auto rr = run("fam", policy(json::array()), {"sh", "-c", probe}, "nobody");
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	// vsock, netlink's process-to-process protocol, packet: refused; unix,
	// inet and rtnetlink (getaddrinfo's address check): created.
	for (const char* want : {"FAM 40 0 1", "FAM 16 2 1", "FAM 17 0 1", "FAM 1 0 ok", "FAM 2 0 ok", "FAM 16 0 ok"})
		EXPECT_NE(rr.r.out.find(want), std::string::npos) << want << "\n" << rr.describe();
	std::vector<std::string> seen;
	for (const auto& j : env().audit())
		if (j.value("event", "") == "decision" && j.value("hook", "") == "socket") {
			EXPECT_EQ(j.value("reason", ""), "family") << j.dump();
			EXPECT_EQ(j.value("violation", false), true) << j.dump();
			EXPECT_EQ(j.value("comm", ""), "python3") << j.dump();
			seen.push_back(j.value("socket_family", ""));
		}
	EXPECT_EQ(seen, (std::vector<std::string>{"vsock", "netlink", "packet"})) << dump_lines(env().audit());
}

TEST_F(SocketFamilies, AnUnlistedFamilyLatchesTheQuarantine)
{
	std::string probe = python() + " -c \"import socket\ntry: socket.socket(40, 2)\nexcept OSError: pass\n"
				       "import time; time.sleep(10)\"";
	auto rr = run("famkill", policy(json::array(), "kill"), {"sh", "-c", probe});
	EXPECT_EQ(rr.r.status, 120) << rr.describe();
	Match m;
	m.hook = "socket";
	m.reason = "family";
	m.latched = true;
	EXPECT_TRUE(Logged(env().audit(), m));
}

// mode audit, `airlock policy suggest` on its log, then that suggestion in
// enforce mode: the unix sockets outside and the family the run used become
// rules, and the same run is clean.
TEST_F(SocketFamilies, AnAuditRunSuggestsTheUnixRulesAndFamiliesItUsed)
{
	std::string dg = abstract_ + "-dg";
	UnixSink sink(env(), "sug", {"stream", host_, "dgram", dg});
	ASSERT_TRUE(sink.ready());
	auto workload = [&](const std::string& tag) {
		std::string named = env().marker(tag + "-named"), abs = env().marker(tag + "-abs");
		std::string vsock = python() +
				    " -c \"import socket\ntry: socket.socket(40, 1).close(); print('VSOCK ok')\n"
				    "except OSError as e: print('VSOCK', e.errno)\"";
		return std::make_tuple(std::vector<std::string>{"sh", "-c",
								vsock + "; " +
									join(client({"stream", host_, named, "dgram",
										     dg, abs}))},
				       named, abs);
	};
	json audit_policy = policy(json::array(), "freeze");
	audit_policy["mode"] = "audit";
	auto [cmd1, named1, abs1] = workload("aud");
	auto rr = run("sug-audit", audit_policy, cmd1, "nobody");
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	// The named socket passes in audit mode; the abstract one outside and
	// the vsock socket are still refused by the launch's confinement
	// (Landlock's scope, seccomp), and all three are recorded.
	EXPECT_EQ(ResultFor(rr, named1).value("ok", false), true) << rr.describe();
	EXPECT_TRUE(wait_until([&, named1 = named1] { return sink.arrived_intact(named1); }, 5s)) << sink.log();
	EXPECT_NE(rr.r.out.find("VSOCK 1"), std::string::npos) << rr.describe();
	std::string name1 = "u" + env().id + "-sug-audit";
	EXPECT_EQ(ResultFor(rr, abs1).value("errno", ""), "EPERM") << rr.describe();
	for (const auto& [hook, dst] :
	     {std::pair<std::string, std::string>{"connect_unix", host_}, {"sendmsg_unix", dg}}) {
		Match audited = unix_violation(hook, "no-rule", dst);
		audited.verdict = "audit";
		audited.violation.reset();
		EXPECT_TRUE(Logged(env().audit(), audited)) << dump_lines(env().audit());
	}

	Result s = env().airlock({"policy", "suggest", env().audit_path(), "--sandbox", name1});
	ASSERT_EQ(s.status, 0) << s.describe();
	json sug = json::parse(s.out, nullptr, false);
	ASSERT_TRUE(sug.is_object()) << s.describe();
	EXPECT_EQ(sug["rules"],
		  json::array({{{"action", "allow"}, {"unix", host_}}, {{"action", "allow"}, {"unix", dg}}}))
		<< sug.dump(2);
	EXPECT_EQ(sug["families"], json({"unix", "inet", "inet6", "vsock", "netlink-route"})) << sug.dump(2);

	auto [cmd2, named2, abs2] = workload("enf");
	auto before = env().audit().size();
	auto rr2 = run("sug-enforce", sug, cmd2, "nobody");
	ASSERT_EQ(rr2.r.status, 0) << rr2.describe();
	EXPECT_EQ(ResultFor(rr2, named2).value("ok", false), true) << rr2.describe();
	EXPECT_EQ(ResultFor(rr2, abs2).value("ok", false), true) << rr2.describe();
	EXPECT_NE(rr2.r.out.find("VSOCK ok"), std::string::npos) << rr2.describe();
	EXPECT_TRUE(wait_until([&, named2 = named2,
				abs2 = abs2] { return sink.arrived_intact(named2) && sink.arrived_intact(abs2); },
			       5s))
		<< sink.log();
	auto lines = env().audit();
	for (size_t i = before; i < lines.size(); i++)
		EXPECT_FALSE(lines[i].value("violation", false)) << lines[i].dump();
}

}  // namespace
}  // namespace it
