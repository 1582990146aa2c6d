// Cgroups that airlock did not create: `airlock attach` enforces a policy on
// a cgroup made outside it, with processes already inside (found by path or
// by a process's PID, as a container is), and `airlock detach` stops doing so
// without touching the processes or the cgroup. `airlock daemon` supervises
// such sandboxes: their violations reach the audit log and freeze them.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <fmt/format.h>

#include "daemon_fixture.h"

namespace it {
namespace {

class Attach : public DaemonTest {
protected:
	json progress(const std::string& file) { return read_json_object(env().path(file)); }
	long count(const std::string& file, const char* dest, const char* what)
	{
		json p = progress(file);
		return p.contains(dest) ? p[dest].value(what, 0L) : 0L;
	}

	// A client that keeps sending to the allowed and the denied destination,
	// writing its totals to loop.json, until the file "stop" appears.
	std::vector<std::string> udp_loop(const std::string& prefix)
	{
		return env().py("loop.py", {"--proto", "udp", "--allowed", dest4(kAllowed4, 9000), "--denied",
					    dest4(kDenied4, 9001), "--prefix", prefix, "--progress",
					    env().path("loop.json"), "--stop", env().path("stop"), "--max", "100000",
					    "--seconds", "25", "--interval", "0.005"});
	}
};

TEST_F(Attach, ARunningProcessIsEnforcedFromAttachUntilDetach)
{
	Proc& daemon = start_daemon();
	std::string cg = make_cgroup("ext");
	std::string prefix = "AIRLOCK-MARK-at-" + env().id + "-" + random_hex(8);
	Proc& client = env().start(inside(cg, udp_loop(prefix)), "client");
	// Unenforced: the denied destination is reached (the oracle can fail).
	ASSERT_TRUE(wait_until([&] { return count("loop.json", "denied", "ok") >= 3; }, 10s)) << client.describe();

	std::string name = "x" + env().id;
	std::string policy = env().write_policy("policy.json", base_policy("it-attach"));
	Result a = env().airlock({"attach", "--pid", std::to_string(client.pid()), "--policy", policy, "--name", name,
				  "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	EXPECT_NE(a.out.find(cg), std::string::npos) << "attach names the cgroup it found for the PID: " << a.out;

	// From now on every denied send fails; allowed ones go on.
	ASSERT_TRUE(wait_until([&] { return count("loop.json", "denied", "fail") >= 5; }, 10s)) << client.describe();
	long denied_ok = count("loop.json", "denied", "ok");
	long allowed_ok = count("loop.json", "allowed", "ok");
	ASSERT_TRUE(wait_until([&] { return count("loop.json", "allowed", "ok") >= allowed_ok + 30; }, 10s));
	EXPECT_EQ(count("loop.json", "denied", "ok"), denied_ok) << "a denied send succeeded after attach";
	// Two oracles: what the sink got of the denied destination is exactly what
	// was sent before attach; the audit log has the violations.
	ASSERT_TRUE(env().fence());
	EXPECT_EQ(static_cast<long>(env().sink->count_data(prefix + "-DENY-")), denied_ok);
	EXPECT_TRUE(LoggedSoon(Violation("sendmsg4", "no-rule", kDenied4, 9001), name)) << daemon.describe();
	EXPECT_FALSE(events(env().audit(), "attached").empty()) << dump_lines(env().audit());
	auto st = env().status_of(name);
	ASSERT_TRUE(st) << "status does not list the attached sandbox";
	EXPECT_TRUE(st->value("attached", false)) << st->dump();
	EXPECT_EQ(st->value("cgroup", ""), cg) << st->dump();
	EXPECT_GT((*st)["counters"]["decisions"]["sendmsg4"].value("deny", 0), 0) << st->dump();

	// `kill` is not how an attached sandbox ends: detach is, and the
	// process and the cgroup stay.
	// One daemon per state directory.
	Result second = env().airlock({"daemon", "--metrics", "off"}, 5s);
	EXPECT_NE(second.status, 0) << second.describe();
	EXPECT_NE(second.err.find("another airlock daemon"), std::string::npos) << second.describe();
	EXPECT_TRUE(daemon.running());

	Result d = env().airlock({"detach", name});
	ASSERT_EQ(d.status, 0) << d.describe();
	EXPECT_TRUE(pid_alive(client.pid()));
	EXPECT_TRUE(exists(cg + "/cgroup.procs"));
	EXPECT_FALSE(env().status_of(name));
	long after = count("loop.json", "denied", "ok");
	EXPECT_TRUE(wait_until([&] { return count("loop.json", "denied", "ok") >= after + 3; }, 10s))
		<< "after detach the cgroup is not enforced any more";
	write_file(env().path("stop"), "");
	EXPECT_TRUE(client.wait(10s)) << client.describe();
}

TEST_F(Attach, TwoCgroupsSideBySideEachUnderItsOwnPolicy)
{
	Proc& daemon = start_daemon();
	std::string a = make_cgroup("a"), b = make_cgroup("b");
	json pa = base_policy("it-attach-a");  // allows 10.77.0.2
	json pb = {{"version", 1},
		   {"name", "it-attach-b"},
		   {"rules", json::array({json{{"action", "allow"},
					       {"cidr", std::string(kDenied4) + "/32"},
					       {"ports", {"9000-9039"}}}})}};
	std::string na = "a" + env().id, nb = "b" + env().id;
	Result ra = env().airlock({"attach", "--cgroup", a, "--policy", env().write_policy("a.json", pa), "--name", na,
				   "--audit-log", env().audit_path()});
	ASSERT_EQ(ra.status, 0) << ra.describe();
	// Relative to the cgroup2 mount, as an operator would type it.
	Result rb = env().airlock({"attach", "--cgroup", env().cgroup_parent + "/b", "--policy",
				   env().write_policy("b.json", pb), "--name", nb, "--audit-log", env().audit_path()});
	ASSERT_EQ(rb.status, 0) << rb.describe();
	// One sandbox per cgroup.
	Result again = env().airlock(
		{"attach", "--cgroup", a, "--policy", env().write_policy("a2.json", pa), "--name", "z" + env().id});
	EXPECT_NE(again.status, 0);
	EXPECT_NE(again.err.find("already"), std::string::npos) << again.describe();

	std::string m1 = env().marker("a-ok"), m2 = env().marker("a-no"), m3 = env().marker("b-ok"),
		    m4 = env().marker("b-no");
	auto run_in = [&](const std::string& cg, const std::vector<std::string>& args) {
		RunResult rr;
		rr.r = run(inside(cg, env().py("udp_send.py", args)), 10s);
		rr.out_json = json_objects_in(rr.r.out);
		return rr;
	};
	RunResult ua = run_in(a, {dest4(kAllowed4, 9002), m1, dest4(kDenied4, 9003), m2});
	RunResult ub = run_in(b, {dest4(kDenied4, 9004), m3, dest4(kAllowed4, 9005), m4});
	EXPECT_TRUE(Ok(ResultFor(ua, m1))) << ua.describe();
	EXPECT_EQ(Errno(ResultFor(ua, m2)), "EPERM") << ua.describe();
	EXPECT_TRUE(Ok(ResultFor(ub, m3))) << ub.describe();
	EXPECT_EQ(Errno(ResultFor(ub, m4)), "EPERM") << ub.describe();
	EXPECT_TRUE(ArrivedIntact(env(), m1));
	EXPECT_TRUE(ArrivedIntact(env(), m3));
	EXPECT_TRUE(NothingArrived(env(), m2));
	EXPECT_TRUE(NothingArrived(env(), m4));
	EXPECT_TRUE(LoggedSoon(Violation("sendmsg4", "no-rule", kDenied4, 9003), na)) << daemon.describe();
	EXPECT_TRUE(LoggedSoon(Violation("sendmsg4", "no-rule", kAllowed4, 9005), nb)) << daemon.describe();

	// Detach leaves both cgroups where they were.
	Result d = env().airlock({"detach", na});
	EXPECT_EQ(d.status, 0) << d.describe();
	Result d2 = env().airlock({"detach", nb});
	EXPECT_EQ(d2.status, 0) << d2.describe();
	EXPECT_TRUE(exists(a + "/cgroup.procs"));
	EXPECT_TRUE(exists(b + "/cgroup.procs"));
}

TEST_F(Attach, TheDaemonFreezesAnAttachedSandboxOnItsViolation)
{
	Proc& daemon = start_daemon();
	std::string cg = make_cgroup("frz");
	std::string name = "f" + env().id;
	Result a = env().airlock({"attach", "--cgroup", cg, "--policy",
				  env().write_policy("frz.json", base_policy("it-attach-frz", "freeze")), "--name",
				  name, "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	std::string ok = env().marker("ok"), bad = env().marker("bad");
	// A process that joins the cgroup, sends one allowed and one denied
	// datagram, then waits to be released.
	Proc& client = env().start(
		inside(cg, Sequence({env().py("udp_send.py", {dest4(kAllowed4, 9006), ok, dest4(kDenied4, 9007), bad}),
				     env().py("wait_file.py", {env().path("go"), "20"})})),
		"client");
	ASSERT_TRUE(wait_until([&] { return !events(env().audit(), "frozen").empty(); }, 10s))
		<< daemon.describe() << dump_lines(env().audit());
	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_EQ(st->value("state", ""), "frozen") << st->dump();
	EXPECT_TRUE(ArrivedIntact(env(), ok));
	EXPECT_TRUE(NothingArrived(env(), bad));
	EXPECT_TRUE(LoggedSoon(Violation("sendmsg4", "no-rule", kDenied4, 9007), name));
	// kill ends the processes, not the enforcement: the cgroup is not
	// airlock's, the next process put in it is still judged (and quarantined
	// until a thaw); detach lets go of it, and the cgroup stays.
	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
	EXPECT_TRUE(client.wait(10s)) << client.describe();
	st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_TRUE(st->value("latched", false)) << st->dump();
	Result d = env().airlock({"detach", name});
	EXPECT_EQ(d.status, 0) << d.describe();
	EXPECT_FALSE(env().status_of(name));
	EXPECT_TRUE(exists(cg + "/cgroup.procs"));
	EXPECT_TRUE(daemon.running()) << daemon.describe();
}

// Clients of the control socket that connect and send nothing, or half a
// request, cost the daemon a descriptor until their deadline: a violation in
// a sandbox meanwhile is frozen at once, other requests are answered, and the
// stalled connections are closed.
TEST_F(Attach, AStalledControlClientNeverDelaysAFreeze)
{
	Proc& daemon = start_daemon();
	std::string cg = make_cgroup("stall");
	std::string name = "s" + env().id;
	Result a = env().airlock({"attach", "--cgroup", cg, "--policy",
				  env().write_policy("stall.json", base_policy("it-attach-stall", "freeze")), "--name",
				  name, "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	std::string sock = env().state_dir + "/control.sock";
	std::vector<int> stalled;
	for (int i = 0; i < 8; i++) {
		int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un sa = {};
		sa.sun_family = AF_UNIX;
		std::snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock.c_str());
		ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0) << errno_name(errno);
		if (i % 2) {
			ASSERT_EQ(::send(fd, "{\"cmd\":\"sta", 11, MSG_NOSIGNAL), 11);  // half a request
		}
		stalled.push_back(fd);
	}
	std::string bad = env().marker("stall");
	Proc& client = env().start(inside(cg, Sequence({env().py("udp_send.py", {dest4(kDenied4, 9008), bad}),
							env().py("wait_file.py", {env().path("go"), "20"})})),
				   "client");
	ASSERT_TRUE(wait_until([&] { return !events(env().audit(), "frozen").empty(); }, 10s))
		<< daemon.describe() << dump_lines(env().audit());
	json frozen = events(env().audit(), "frozen").front();
	// Each stalled client may hold a request for 1 s: a loop that waited on
	// them would freeze after 1 s at the least (8 s in all).
	EXPECT_LT(frozen["latency_us"].get<int64_t>(), 1000000) << frozen.dump();
	Result st = env().airlock({"status", "--json"});
	EXPECT_EQ(st.status, 0) << st.describe();
	EXPECT_TRUE(NothingArrived(env(), bad));
	// The daemon closes every stalled connection (EOF) at its deadline.
	for (int fd : stalled) {
		struct timeval tv = {10, 0};
		::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		char b[256];
		ssize_t n = ::recv(fd, b, sizeof(b), 0);
		EXPECT_EQ(n, 0) << "a stalled connection was not closed: "
				<< (n < 0 ? errno_name(errno) : std::string(b, n));
		::close(fd);
	}
	EXPECT_NE(daemon.err().find("did not send a whole request in time; closed"), std::string::npos)
		<< daemon.describe();
	write_file(env().path("go"), "");
	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
	EXPECT_TRUE(client.wait(10s)) << client.describe();
	Result d = env().airlock({"detach", name});
	EXPECT_EQ(d.status, 0) << d.describe();
	EXPECT_TRUE(daemon.running()) << daemon.describe();
}

// Programs attached to a cgroup whose sandbox entry is gone (removed from
// the map behind airlock's back) fail closed: no socket of the cgroup is
// created, nothing leaves, and the denials are counted as unattributed.
TEST_F(Attach, ACgroupWithProgramsButNoSandboxEntryIsDenied)
{
	std::string cg = make_cgroup("noentry");
	std::string name = "n" + env().id;
	Result a = env().airlock({"attach", "--cgroup", cg, "--policy",
				  env().write_policy("ne.json", base_policy("it-attach-noentry")), "--name", name,
				  "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	std::string ok = env().marker("ne-ok"), lost = env().marker("ne-lost");
	Result before = run(inside(cg, env().py("udp_send.py", {dest4(kAllowed4, 9012), ok})), 10s);
	EXPECT_EQ(before.status, 0) << before.describe();
	EXPECT_TRUE(ArrivedIntact(env(), ok));

	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	uint64_t id = (*st)["cgroup_id"].get<uint64_t>();
	std::vector<std::string> del = {"bpftool", "map", "delete", "pinned", env().bpf_dir + "/maps/al_sandboxes",
					"key"};
	for (int i = 0; i < 8; i++)
		del.push_back(std::to_string((id >> (8 * i)) & 0xff));
	auto unattributed = [&](const char* hook) {
		Result r = env().airlock({"status", "--json"});
		json j = json::parse(r.out, nullptr, false);
		return j.is_object() ? j["unattributed"]["decisions"][hook]["deny"].get<uint64_t>() : ~0ull;
	};
	uint64_t denied0 = unattributed("sock_create");
	Result d = run(del, 10s);
	ASSERT_EQ(d.status, 0) << d.describe();

	// The allowed destination, over UDP: the socket itself is refused.
	Result after = run(inside(cg, env().py("udp_send.py", {dest4(kAllowed4, 9012), lost})), 10s);
	EXPECT_EQ(after.status, 0) << after.describe();
	json r;
	for (const auto& line : json_objects_in(after.out))
		if (line.contains("results"))
			for (const auto& x : line["results"])
				if (x.value("marker", "") == lost)
					r = x;
	EXPECT_FALSE(Ok(r)) << after.describe();
	EXPECT_EQ(Errno(r), "EPERM") << after.describe();
	EXPECT_TRUE(NothingArrived(env(), lost));
	EXPECT_EQ(unattributed("sock_create"), denied0 + 1);
	Result det = env().airlock({"detach", name});
	EXPECT_EQ(det.status, 0) << det.describe();
}

TEST_F(Attach, DaemonKilledAndRestartedUnderTrafficLeaksNothing)
{
	Proc& first = start_daemon();
	std::string cg = make_cgroup("rs");
	std::string name = "r" + env().id;
	Result a = env().airlock({"attach", "--cgroup", cg, "--policy",
				  env().write_policy("rs.json", base_policy("it-attach-restart")), "--name", name,
				  "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	std::string prefix = "AIRLOCK-MARK-rs-" + env().id + "-" + random_hex(8);
	Proc& client = env().start(inside(cg, udp_loop(prefix)), "client");
	ASSERT_TRUE(wait_until([&] { return count("loop.json", "denied", "fail") >= 5; }, 10s)) << client.describe();
	ASSERT_TRUE(LoggedSoon(Violation("sendmsg4", "no-rule", kDenied4, 9001), name)) << first.describe();

	// kill -9 the daemon, by its PID, while the client keeps trying.
	first.signal(SIGKILL);
	ASSERT_TRUE(first.reap_now(5s));
	// Both totals from one snapshot of the file: the client writes it once
	// an iteration, after one allowed and one denied send.
	json p0 = progress("loop.json");
	long fails = p0["denied"].value("fail", 0L), allowed = p0["allowed"].value("ok", 0L);
	ASSERT_TRUE(wait_until([&] { return count("loop.json", "denied", "fail") >= fails + 20; }, 10s));
	json p1 = progress("loop.json");
	EXPECT_GE(p1["allowed"].value("ok", 0L), allowed + 20) << "allowed traffic stopped with the daemon";
	EXPECT_TRUE(env().status_of(name)) << "the sandbox is no longer listed";

	// A new daemon takes the sandbox up again and logs what it finds.
	size_t logged = decisions(env().audit(), Violation("sendmsg4", "no-rule", kDenied4, 9001)).size();
	Proc& second = start_daemon();
	EXPECT_TRUE(wait_until([&] { return second.err().find("supervising") != std::string::npos; }, 10s))
		<< second.describe();
	EXPECT_TRUE(wait_until(
		[&] {
			return decisions(env().audit(), Violation("sendmsg4", "no-rule", kDenied4, 9001)).size() >
			       logged;
		},
		10s))
		<< second.describe();
	write_file(env().path("stop"), "");
	EXPECT_TRUE(client.wait(10s)) << client.describe();
	// Not one denied datagram got out, before, during or after the restart.
	EXPECT_EQ(count("loop.json", "denied", "ok"), 0) << progress("loop.json").dump();
	EXPECT_TRUE(NothingArrived(env(), prefix + "-DENY-"));
	EXPECT_TRUE(env().sink->wait_data(prefix + "-ALLOW-", 1, 3s));
}

TEST_F(Attach, EventsStreamFromTheDaemonWhoseControlSocketIsRootsAlone)
{
	Proc& daemon = start_daemon();
	Proc& follower = env().start(env().airlock_argv({"events", "--follow"}), "events");
	std::string cg = make_cgroup("ev");
	std::string name = "e" + env().id;
	Result a = env().airlock({"attach", "--cgroup", cg, "--policy",
				  env().write_policy("ev.json", base_policy("it-attach-events")), "--name", name,
				  "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	Result c = run(inside(cg, env().py("udp_send.py", {dest4(kDenied4, 9011), env().marker("ev")})), 10s);
	EXPECT_EQ(c.status, 0) << c.describe();
	// The violation reaches the follower as the audit log has it.
	ASSERT_TRUE(wait_until(
		[&] {
			for (const auto& j : json_objects_in(follower.out()))
				if (j.value("sandbox", "") == name && j.value("reason", "") == "no-rule" &&
				    j.value("port", 0) == 9011)
					return true;
			return false;
		},
		10s))
		<< follower.describe() << daemon.describe();
	// Without --follow: the recent lines, then the end.
	Result once = env().airlock({"events", "--sandbox", name}, 10s);
	EXPECT_EQ(once.status, 0) << once.describe();
	EXPECT_NE(once.out.find("\"port\":9011"), std::string::npos) << once.describe();

	// Root's alone: the socket's mode keeps others out, and so does the daemon.
	std::vector<std::string> as_nobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
	auto events_argv = env().airlock_argv({"events"});
	as_nobody.insert(as_nobody.end(), events_argv.begin(), events_argv.end());
	Result denied = run(as_nobody, 10s);
	EXPECT_NE(denied.status, 0) << denied.describe();
	EXPECT_NE(denied.err.find("ermission denied"), std::string::npos) << denied.describe();
	ASSERT_EQ(::chmod(env().state_dir.c_str(), 0711), 0);
	ASSERT_EQ(::chmod((env().state_dir + "/control.sock").c_str(), 0666), 0);
	Result refused = run(as_nobody, 10s);
	EXPECT_NE(refused.status, 0) << refused.describe();
	EXPECT_NE(refused.err.find("root's"), std::string::npos) << refused.describe();
	EXPECT_TRUE(daemon.running()) << daemon.describe();
}

TEST_F(Attach, TheDaemonReloadsAChangedPolicyFileAndKeepsTheOldOneForABadFile)
{
	Proc& daemon = start_daemon();
	std::string cg = make_cgroup("pf");
	std::string name = "p" + env().id;
	std::string policy = env().write_policy("pf.json", base_policy("it-attach-pf"));  // allows .2 only
	Result a = env().airlock(
		{"attach", "--cgroup", cg, "--policy", policy, "--name", name, "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	ASSERT_TRUE(wait_until([&] { return daemon.err().find("supervising") != std::string::npos; }, 10s));
	auto send_to_denied = [&](const std::string& tag) {
		std::string m = env().marker(tag);
		RunResult rr;
		rr.r = run(inside(cg, env().py("udp_send.py", {dest4(kDenied4, 9020), m})), 10s);
		rr.out_json = json_objects_in(rr.r.out);
		return std::make_pair(m, ResultFor(rr, m));
	};
	auto before = send_to_denied("before");
	EXPECT_EQ(Errno(before.second), "EPERM") << before.second.dump();
	auto reloads = [&](const std::string& result) {
		size_t n = 0;
		for (const auto& j : events(env().audit(), "reload"))
			n += j.value("result", "") == result && j.value("sandbox", "") == name;
		return n;
	};

	// The file is replaced (as an editor or a config tool does): reloaded.
	json wider = base_policy("it-attach-pf-wider");
	wider["rules"].push_back({{"action", "allow"}, {"cidr", std::string(kDenied4) + "/32"}, {"ports", {9020}}});
	write_file(env().path("pf.json.new"), wider.dump());
	ASSERT_EQ(::rename(env().path("pf.json.new").c_str(), policy.c_str()), 0);
	ASSERT_TRUE(wait_until([&] { return reloads("ok") == 1; }, 10s))
		<< daemon.describe() << dump_lines(env().audit());
	auto after = send_to_denied("after");
	EXPECT_TRUE(Ok(after.second)) << after.second.dump();
	EXPECT_TRUE(ArrivedIntact(env(), after.first));
	EXPECT_EQ(env().status_of(name)->value("policy", ""), "it-attach-pf-wider");

	// A bad file is rejected with its errors; the policy in force stays.
	write_file(
		policy,
		"{\"version\": 1, \"name\": \"broken\", \"rules\": [{\"action\": \"allow\", \"cidr\": \"10.77.0.0/33\"}]}");
	ASSERT_TRUE(wait_until([&] { return reloads("error") == 1; }, 10s))
		<< daemon.describe() << dump_lines(env().audit());
	for (const auto& j : events(env().audit(), "reload")) {
		if (j.value("result", "") == "error") {
			EXPECT_NE(j.dump().find("rules/0/cidr"), std::string::npos) << j.dump();
		}
	}
	auto still = send_to_denied("still");
	EXPECT_TRUE(Ok(still.second)) << still.second.dump();
	EXPECT_TRUE(ArrivedIntact(env(), still.first));
	EXPECT_EQ(env().status_of(name)->value("policy", ""), "it-attach-pf-wider");
}

TEST_F(Attach, BadTargetsAreRefusedWithOneLine)
{
	std::string policy = env().write_policy("policy.json", base_policy("it-attach"));
	Result none = env().airlock({"attach", "--cgroup", env().cgroup_parent + "/no-such", "--policy", policy});
	EXPECT_NE(none.status, 0);
	EXPECT_NE(none.err.find("is not a cgroup"), std::string::npos) << none.describe();
	Result root = env().airlock({"attach", "--cgroup", "/", "--policy", policy, "--name", "r" + env().id});
	EXPECT_NE(root.status, 0);
	EXPECT_NE(root.err.find("root cgroup"), std::string::npos) << root.describe();
	Result nopid = env().airlock({"attach", "--pid", "999999999", "--policy", policy});
	EXPECT_NE(nopid.status, 0);
	EXPECT_NE(nopid.err.find("no such process"), std::string::npos) << nopid.describe();
	Result neither = env().airlock({"attach", "--policy", policy});
	EXPECT_NE(neither.status, 0);
	EXPECT_NE(neither.err.find("--cgroup PATH or --pid PID"), std::string::npos) << neither.describe();
	// A sandbox of `airlock run` cannot be detached (kill ends it).
	RunSpec s;
	s.policy = policy;
	s.name = "r" + env().id;
	s.cmd = env().py("wait_file.py", {env().path("go"), "20"});
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return env().status_of(s.name).has_value(); }, 10s)) << runner.describe();
	Result d = env().airlock({"detach", s.name});
	EXPECT_NE(d.status, 0);
	EXPECT_NE(d.err.find("airlock kill"), std::string::npos) << d.describe();
	write_file(env().path("go"), "");
	EXPECT_EQ(runner.wait(10s), std::optional<int>(0)) << runner.describe();
}

}  // namespace
}  // namespace it

namespace it {
namespace {

// Sandboxes the daemon makes: `sandbox create` with a policy from the
// daemon's policy directory, commands in it with `airlock exec`, `sandbox
// delete`. Allowed traffic arrives, denied never does, and the sandbox
// outlives each command.
TEST_F(Attach, SandboxCreateExecAndDeleteWithAPolicyFromTheDirectory)
{
	std::string dir = env().path("policies");
	ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
	write_file(dir + "/web.json", base_policy("it-dir-web").dump());
	std::string name = "c" + env().id;

	// Without a daemon there is nobody to supervise it: refused, nothing made.
	Result early = env().airlock({"sandbox", "create", name, "--policy", dir + "/web.json"});
	EXPECT_NE(early.status, 0) << early.describe();
	EXPECT_NE(early.err.find("no airlock daemon runs"), std::string::npos) << early.describe();
	EXPECT_FALSE(env().status_of(name));

	Proc& daemon = start_daemon({"--policy-dir", dir, "--audit-log", env().audit_path()});
	Result unknown = env().airlock({"sandbox", "create", name, "--policy", "nope"});
	EXPECT_NE(unknown.status, 0) << unknown.describe();
	EXPECT_NE(unknown.err.find("no policy named 'nope' in " + dir), std::string::npos) << unknown.describe();
	Result made = env().airlock({"sandbox", "create", name, "--policy", "web"});
	ASSERT_EQ(made.status, 0) << made.describe() << daemon.describe();
	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_TRUE(st->value("managed", false)) << st->dump();
	EXPECT_TRUE(st->value("supervised_by_daemon", false)) << st->dump();
	EXPECT_EQ(st->value("policy_file", ""), dir + "/web.json");
	EXPECT_EQ(st->value("populated", true), false);

	// Two commands, one after the other, in the same sandbox.
	for (const char* round : {"one", "two"}) {
		std::string ok = env().marker(std::string("ok-") + round),
			    bad = env().marker(std::string("bad-") + round);
		RunResult rr = exec(name,
				    env().py("udp_send.py", {dest4(kAllowed4, 9030), ok, dest4(kDenied4, 9031), bad}));
		EXPECT_EQ(rr.r.status, 0) << rr.describe();
		EXPECT_TRUE(Ok(ResultFor(rr, ok))) << rr.describe();
		EXPECT_EQ(Errno(ResultFor(rr, bad)), "EPERM") << rr.describe();
		EXPECT_TRUE(ArrivedIntact(env(), ok));
		EXPECT_TRUE(NothingArrived(env(), bad));
	}
	// A root command inside cannot use the daemon to get out (kill, thaw,
	// reload, delete): its connect to the control socket is a unix
	// destination no rule names, refused in the kernel and recorded (the
	// daemon would refuse a request from inside a sandbox too).
	RunResult escape = exec(name, env().airlock_argv({"sandbox", "delete", name}));
	EXPECT_NE(escape.r.status, 0) << escape.describe();
	EXPECT_NE(escape.r.err.find("control socket " + env().state_dir + "/control.sock: Operation not permitted"),
		  std::string::npos)
		<< escape.describe();
	EXPECT_TRUE(env().status_of(name)) << escape.describe();
	Match control;
	control.hook = "connect_unix";
	control.reason = "no-rule";
	control.dst = env().state_dir + "/control.sock";
	control.violation = true;
	EXPECT_TRUE(LoggedSoon(control, name));
	// The command's own status passes through.
	RunResult three = exec(name, {"sh", "-c", "exit 3"});
	EXPECT_EQ(three.r.status, 3) << three.describe();
	EXPECT_TRUE(LoggedSoon(Violation("sendmsg4", "no-rule", kDenied4, 9031), name));

	// detach is for attached cgroups; delete removes airlock's own.
	Result wrong = env().airlock({"detach", name});
	EXPECT_NE(wrong.status, 0) << wrong.describe();
	EXPECT_NE(wrong.err.find("sandbox delete"), std::string::npos) << wrong.describe();
	std::string cg = st->value("cgroup", "");
	Result del = env().airlock({"sandbox", "delete", name});
	EXPECT_EQ(del.status, 0) << del.describe();
	EXPECT_FALSE(env().status_of(name));
	EXPECT_FALSE(exists(cg)) << cg;
	EXPECT_TRUE(daemon.running()) << daemon.describe();
	EXPECT_EQ(events(env().audit(), "sandbox-created").size(), 1u) << dump_lines(env().audit());
	EXPECT_EQ(events(env().audit(), "sandbox-deleted").size(), 1u) << dump_lines(env().audit());
}

// A kill-on-violation sandbox made by the daemon: the violating command ends
// with 120; the sandbox stays quarantined (exec refused) until a thaw, after
// which commands run again with working egress. `airlock kill` gives 121.
TEST_F(Attach, ExecIntoAKilledSandboxIsRefusedUntilThawedAndReportsWhoKilled)
{
	start_daemon({"--audit-log", env().audit_path()});
	std::string name = "k" + env().id;
	Result made = env().airlock({"sandbox", "create", name, "--policy",
				     env().write_policy("kill.json", base_policy("it-exec-kill", "kill"))});
	ASSERT_EQ(made.status, 0) << made.describe();
	std::string bad = env().marker("bad");
	RunResult v = exec(name, Sequence({env().py("udp_send.py", {dest4(kDenied4, 9032), bad}), {"sleep", "20"}}),
			   25s);
	EXPECT_EQ(v.r.status, 120) << v.describe();
	EXPECT_TRUE(NothingArrived(env(), bad));
	RunResult refused = exec(name, {"true"});
	EXPECT_EQ(refused.r.status, 125) << refused.describe();
	EXPECT_NE(refused.r.err.find("airlock thaw " + name), std::string::npos) << refused.describe();

	Result t = env().airlock({"thaw", name});
	ASSERT_EQ(t.status, 0) << t.describe();
	std::string ok = env().marker("ok");
	RunResult again = exec(name, env().py("udp_send.py", {dest4(kAllowed4, 9033), ok}));
	EXPECT_EQ(again.r.status, 0) << again.describe();
	EXPECT_TRUE(ArrivedIntact(env(), ok));

	// Killed by the operator, not by the policy: 121.
	std::vector<std::string> a = env().airlock_argv({"exec", name, "--", "sleep", "30"});
	Proc& sleeper = env().start(env().topo->in_client(a), "sleeper");
	ASSERT_TRUE(wait_until([&] { return env().status_of(name)->value("populated", false); }, 10s));
	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
	ASSERT_TRUE(sleeper.wait(10s)) << sleeper.describe();
	EXPECT_EQ(sleeper.status(), 121) << sleeper.describe();
	EXPECT_TRUE(env().status_of(name)) << "kill keeps a sandbox made by the daemon";
}

// `airlock run` while a daemon runs: the daemon makes and supervises the
// sandbox (freeze on violation by the daemon), `kill` reaches it through the
// control socket, run ends with 121 and the sandbox is gone.
TEST_F(Attach, RunUsesTheRunningDaemon)
{
	Proc& daemon = start_daemon();
	std::string name = "r" + env().id, bad = env().marker("bad");
	RunSpec spec;
	spec.policy = env().write_policy("run.json", base_policy("it-run-daemon", "freeze"));
	spec.name = name;
	spec.cmd = Sequence({env().py("udp_send.py", {dest4(kDenied4, 9034), bad}), {"sleep", "30"}});
	Proc& r = env().start_run(spec);
	ASSERT_TRUE(wait_until([&] { return !events(env().audit(), "frozen").empty(); }, 10s))
		<< r.describe() << daemon.describe() << dump_lines(env().audit());
	EXPECT_NE(daemon.err().find(name + ": supervising"), std::string::npos) << daemon.describe();
	EXPECT_NE(daemon.err().find("made through the daemon"), std::string::npos) << daemon.describe();
	EXPECT_NE(r.err().find("supervised by the airlock daemon"), std::string::npos) << r.describe();
	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_EQ(st->value("state", ""), "frozen") << st->dump();
	EXPECT_TRUE(NothingArrived(env(), bad));
	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
	ASSERT_TRUE(r.wait(10s)) << r.describe();
	EXPECT_EQ(r.status(), 121) << r.describe();
	EXPECT_FALSE(env().status_of(name));
	EXPECT_TRUE(daemon.running()) << daemon.describe();
}

// The configuration file: policy directory, audit log and declared
// sandboxes (one made, one an existing cgroup attached). A bad file stops
// the daemon with one line per error. A restart of the daemon takes the
// sandboxes up again, with no duplicate and no gap.
TEST_F(Attach, ConfigDeclaresSandboxesThatSurviveARestart)
{
	std::string dir = env().path("policies");
	ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
	write_file(dir + "/agent.json", base_policy("it-cfg-agent").dump());
	std::string cg = make_cgroup("cfg");
	std::string made = "m" + env().id, attached = "a" + env().id;
	json cfg = {{"metrics", "off"},
		    {"policy_dir", dir},
		    {"audit_log", env().audit_path()},
		    {"sandboxes",
		     {{{"name", made}, {"policy", "agent"}},
		      {{"name", attached}, {"policy", "agent"}, {"cgroup", cg}}}}};
	std::string cfg_file = env().write_text("airlock.json", cfg.dump());

	std::string bad_file = env().write_text("bad.json", R"({"metrics": "off", "audit_log": "rel/audit.jsonl",
		   "sandboxes": [{"name": "x", "polcy": "agent"}, {"name": 7, "policy": "/p.json", "log_allowed": "yes"}]})");
	Result bad = env().airlock({"daemon", "--config", bad_file}, 10s);
	EXPECT_NE(bad.status, 0) << bad.describe();
	EXPECT_NE(bad.err.find(bad_file + ": sandboxes/0: unknown key \"polcy\""), std::string::npos) << bad.describe();
	EXPECT_NE(bad.err.find(bad_file + ": sandboxes/0: missing key 'policy'"), std::string::npos) << bad.describe();
	EXPECT_NE(bad.err.find(bad_file + ": sandboxes/1/name: expected a string, got an integer"), std::string::npos)
		<< bad.describe();
	EXPECT_NE(bad.err.find(bad_file + ": sandboxes/1/log_allowed: expected a boolean, got a string"),
		  std::string::npos)
		<< bad.describe();
	EXPECT_NE(bad.err.find(bad_file + ": audit_log: must be an absolute path"), std::string::npos)
		<< bad.describe();

	auto start = [&]() -> Proc& {
		Proc& d = env().start(env().airlock_argv({"daemon", "--config", cfg_file}), "daemon");
		if (!wait_until([&] { return env().status_of(made) && env().status_of(attached); }, 10s))
			ADD_FAILURE() << d.describe();
		return d;
	};
	Proc& first = start();
	EXPECT_EQ(env().status_of(attached)->value("cgroup", ""), cg);
	EXPECT_TRUE(env().status_of(attached)->value("attached", false));
	EXPECT_TRUE(env().status_of(made)->value("managed", false));
	// Enforced in the attached cgroup right away.
	std::string bad1 = env().marker("bad1");
	Result c1 = run(inside(cg, env().py("udp_send.py", {dest4(kDenied4, 9035), bad1})), 10s);
	EXPECT_NE(c1.out.find("EPERM"), std::string::npos) << c1.describe();

	ASSERT_EQ(::kill(first.pid(), SIGKILL), 0);
	ASSERT_TRUE(first.wait(5s));
	// While no daemon runs, the kernel still enforces.
	std::string bad2 = env().marker("bad2");
	Result c2 = run(inside(cg, env().py("udp_send.py", {dest4(kDenied4, 9036), bad2})), 10s);
	EXPECT_NE(c2.out.find("EPERM"), std::string::npos) << c2.describe();
	Proc& second = start();
	ASSERT_TRUE(wait_until([&] { return second.err().find(attached + ": supervising") != std::string::npos; }, 10s))
		<< second.describe();
	auto st = env().status();
	size_t n = 0;
	for (const auto& s : st["sandboxes"])
		n += s.value("name", "") == made || s.value("name", "") == attached;
	EXPECT_EQ(n, 2u) << st.dump();
	EXPECT_EQ(events(env().audit(), "sandbox-created").size(), 1u) << dump_lines(env().audit());
	EXPECT_EQ(events(env().audit(), "attached").size(), 1u) << dump_lines(env().audit());
	EXPECT_TRUE(NothingArrived(env(), bad1));
	EXPECT_TRUE(NothingArrived(env(), bad2));
	EXPECT_TRUE(second.running()) << second.describe();
}

// Policies by directory: one file shared by two sandboxes; changing it
// reloads both, a bad version is rejected for both with the old policy kept,
// and a bad file no sandbox uses is reported when it is written.
TEST_F(Attach, APolicyDirectoryFileChangeReloadsEverySandboxUsingIt)
{
	std::string dir = env().path("policies");
	ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
	write_file(dir + "/shared.json", base_policy("it-dir-shared").dump());
	Proc& daemon = start_daemon({"--policy-dir", dir, "--audit-log", env().audit_path()});
	std::vector<std::string> names = {"x" + env().id, "y" + env().id};
	for (const auto& n : names) {
		Result m = env().airlock({"sandbox", "create", n, "--policy", "shared"});
		ASSERT_EQ(m.status, 0) << m.describe();
	}
	auto reloads = [&](const std::string& result) {
		size_t n = 0;
		for (const auto& j : events(env().audit(), "reload"))
			n += j.value("result", "") == result;
		return n;
	};
	json wider = base_policy("it-dir-shared-wider");
	wider["rules"].push_back({{"action", "allow"}, {"cidr", std::string(kDenied4) + "/32"}, {"ports", {9037}}});
	write_file(dir + "/.shared.tmp", wider.dump());
	ASSERT_EQ(::rename((dir + "/.shared.tmp").c_str(), (dir + "/shared.json").c_str()), 0);
	ASSERT_TRUE(wait_until([&] { return reloads("ok") == 2; }, 10s))
		<< daemon.describe() << dump_lines(env().audit());
	for (const auto& n : names) {
		std::string m = env().marker("wider-" + n);
		RunResult rr = exec(n, env().py("udp_send.py", {dest4(kDenied4, 9037), m}));
		EXPECT_TRUE(Ok(ResultFor(rr, m))) << rr.describe();
		EXPECT_TRUE(ArrivedIntact(env(), m));
		EXPECT_EQ(env().status_of(n)->value("policy", ""), "it-dir-shared-wider");
	}
	write_file(dir + "/shared.json",
		   R"({"version": 1, "name": "broken", "rules": [{"action": "allow", "cidr": "10.77.0.0/33"}]})");
	ASSERT_TRUE(wait_until([&] { return reloads("error") == 2; }, 10s))
		<< daemon.describe() << dump_lines(env().audit());
	for (const auto& n : names)
		EXPECT_EQ(env().status_of(n)->value("policy", ""), "it-dir-shared-wider");
	write_file(dir + "/unused.json", R"({"version": 1, "name": "unused", "mode": "sometimes"})");
	EXPECT_TRUE(
		wait_until([&] { return daemon.err().find(dir + "/unused.json: mode:") != std::string::npos; }, 10s))
		<< daemon.describe();
	EXPECT_TRUE(daemon.running()) << daemon.describe();
}

// A container's runtime removes its cgroup when it ends: the daemon lets go
// of the sandbox (slot, pins, record) and says why. A cgroup made again at
// the same path is another cgroup, not the one that was attached.
TEST_F(Attach, ACgroupRemovedIsLetGoEvenWhenMadeAgainAtItsPath)
{
	Proc& daemon = start_daemon({"--audit-log", env().audit_path()});
	std::string policy = env().write_policy("policy.json", base_policy("it-gone"));
	for (const char* leaf : {"gone", "again"}) {
		std::string cg = make_cgroup(leaf);
		std::string name = std::string(leaf) + env().id;
		Result a = env().airlock({"attach", "--cgroup", cg, "--policy", policy, "--name", name});
		ASSERT_EQ(a.status, 0) << a.describe();
		ASSERT_TRUE(env().status_of(name));
		ASSERT_EQ(::rmdir(cg.c_str()), 0) << errno_name(errno);
		if (std::string(leaf) == "again")
			ASSERT_EQ(::mkdir(cg.c_str(), 0755), 0) << errno_name(errno);
		ASSERT_TRUE(wait_until([&] { return !env().status_of(name); }, 5s)) << daemon.describe();
		bool said = false;
		for (const auto& j : events(env().audit(), "detached"))
			said |= j.value("sandbox", "") == name && j.value("reason", "") == "its cgroup was removed" &&
				j.value("by", "") == "airlock";
		EXPECT_TRUE(said) << dump_lines(env().audit());
		EXPECT_FALSE(exists(env().bpf_dir + "/links/" + name)) << "its links stay pinned";
		// Its name is free again: the new cgroup can be attached under it.
		if (std::string(leaf) == "again") {
			a = env().airlock({"attach", "--cgroup", cg, "--policy", policy, "--name", name});
			EXPECT_EQ(a.status, 0) << a.describe();
		}
	}
}

}  // namespace
}  // namespace it
