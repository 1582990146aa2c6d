// The node agent under an operator's mistakes and restarts: a request that
// fails leaves nothing made; a restarted daemon takes a frozen sandbox as it
// is; `airlock events` carries every line the audit log has for the daemon's
// sandboxes; removing a sandbox the configuration declares says that it
// comes back; the daemon's log lines carry their time, or are JSON.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>

#include <regex>

#include <fmt/format.h>

#include "daemon_fixture.h"
#include "util/fd.h"

namespace it {
namespace {

class Operator : public DaemonTest {
protected:
	// The audit log's lines for one sandbox, as text.
	std::vector<std::string> audit_lines_of(const std::string& sandbox)
	{
		std::vector<std::string> out;
		for (const auto& j : env().audit())
			if (j.value("sandbox", "") == sandbox)
				out.push_back(j.dump());
		return out;
	}
	// Whether the sandbox's links directory (its programs' pins) exists.
	bool has_links(const std::string& name) { return exists(env().bpf_dir + "/links/" + name); }
};

// An attach that cannot write its audit log fails with one line naming the
// file, exit 1, and leaves nothing: no record, no pins, nothing enforced on
// the cgroup. A retry with a good log then works. Through the daemon and
// without one alike.
TEST_F(Operator, AnAttachThatFailsLeavesNothingAttached)
{
	std::string policy = env().write_policy("p.json", base_policy("it-op-attach", "freeze"));
	for (bool with_daemon : {false, true}) {
		SCOPED_TRACE(with_daemon ? "through the daemon" : "without a daemon");
		Proc* daemon = with_daemon ? &start_daemon() : nullptr;
		std::string cg = make_cgroup(with_daemon ? "viad" : "alone");
		std::string name = (with_daemon ? "d" : "a") + env().id;
		std::string bad_log = "/proc/nope/" + name + ".jsonl";
		Result a = env().airlock(
			{"attach", "--cgroup", cg, "--policy", policy, "--name", name, "--audit-log", bad_log});
		EXPECT_EQ(a.status, 1) << a.describe();
		EXPECT_NE(a.err.find("audit log " + bad_log + ": create /proc/nope: No such file or directory"),
			  std::string::npos)
			<< a.describe();
		EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << a.describe();
		EXPECT_FALSE(env().status_of(name)) << env().status().dump();
		EXPECT_FALSE(has_links(name));
		// Nothing enforced: a denied destination is not refused by airlock.
		std::string probe = env().marker("probe");
		Result c = run(inside(cg, env().py("udp_send.py", {dest4(kDenied4, 9040), probe})), 10s);
		EXPECT_EQ(c.out.find("EPERM"), std::string::npos) << c.describe();

		Result again = env().airlock({"attach", "--cgroup", cg, "--policy", policy, "--name", name,
					      "--audit-log", env().audit_path()});
		EXPECT_EQ(again.status, 0) << again.describe();
		EXPECT_TRUE(env().status_of(name));
		Result d = env().airlock({"detach", name});
		EXPECT_EQ(d.status, 0) << d.describe();
		EXPECT_EQ(d.err.find("error"), std::string::npos) << d.describe();
		EXPECT_FALSE(env().status_of(name));
		if (daemon) {
			EXPECT_TRUE(daemon->running()) << daemon->describe();
			EXPECT_EQ(daemon->err().find(name + ": cannot supervise"), std::string::npos)
				<< daemon->describe();
			daemon->signal(SIGTERM);
			EXPECT_TRUE(daemon->wait(10s)) << daemon->describe();
		}
	}
}

// A daemon restarted while a sandbox it froze stays frozen takes it as
// frozen: no second freeze, no second `frozen` line, no latency sample.
TEST_F(Operator, ARestartedDaemonAdoptsAFrozenSandboxAsItIs)
{
	Proc& first = start_daemon();
	std::string cg = make_cgroup("adopt");
	std::string name = "f" + env().id, bad = env().marker("bad");
	Result a = env().airlock({"attach", "--cgroup", cg, "--policy",
				  env().write_policy("frz.json", base_policy("it-op-adopt", "freeze")), "--name", name,
				  "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	Proc& client = env().start(inside(cg, Sequence({env().py("udp_send.py", {dest4(kDenied4, 9041), bad}),
							env().py("wait_file.py", {env().path("go"), "30"})})),
				   "client");
	ASSERT_TRUE(wait_until([&] { return events(env().audit(), "frozen").size() == 1; }, 10s))
		<< first.describe() << dump_lines(env().audit());
	first.signal(SIGTERM);
	ASSERT_TRUE(first.wait(10s)) << first.describe();

	int port = free_port();
	Proc& second = start_daemon({"--metrics", fmt::format("127.0.0.1:{}", port)});
	const std::string adopted = name + ": frozen on its violation before; adopted frozen";
	// Either it says it adopted the sandbox, or it froze it a second time.
	ASSERT_TRUE(wait_until(
		[&] {
			return second.err().find(adopted) != std::string::npos ||
			       events(env().audit(), "frozen").size() > 1;
		},
		10s))
		<< second.describe();
	EXPECT_NE(second.err().find(adopted), std::string::npos) << second.describe();
	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_EQ(st->value("state", ""), "frozen") << st->dump();
	EXPECT_EQ((*st)["supervisor"].value("state", ""), "frozen") << st->dump();
	Result m = run({"curl", "-sf", fmt::format("http://127.0.0.1:{}/metrics", port)}, 10s);
	ASSERT_EQ(m.status, 0) << m.describe();
	EXPECT_NE(m.out.find("\nairlock_freeze_latency_seconds_count 0\n"), std::string::npos) << m.out;
	EXPECT_EQ(events(env().audit(), "frozen").size(), 1u) << dump_lines(env().audit());
	EXPECT_EQ(second.err().find("after the violation"), std::string::npos) << second.describe();
	EXPECT_EQ(cgroup_events(cg).value_or(std::map<std::string, std::string>{})["frozen"], "1");
	EXPECT_TRUE(NothingArrived(env(), bad));

	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
	EXPECT_TRUE(client.wait(10s)) << client.describe();
	Result d = env().airlock({"detach", name});
	EXPECT_EQ(d.status, 0) << d.describe();
}

// `airlock events` shows the very lines the audit log has for a sandbox of
// the daemon, its lifecycle included: created, thawed, killed, deleted.
TEST_F(Operator, EventsCarryEveryAuditLineOfTheDaemonsSandboxes)
{
	start_daemon({"--audit-log", env().audit_path()});
	std::string name = "e" + env().id;
	std::string policy = env().write_policy("p.json", base_policy("it-op-events"));
	for (const auto& args : std::vector<std::vector<std::string>>{{"sandbox", "create", name, "--policy", policy},
								      {"thaw", name},
								      {"kill", name},
								      {"sandbox", "delete", name}}) {
		Result r = env().airlock(args);
		ASSERT_EQ(r.status, 0) << r.describe();
	}
	std::vector<std::string> lifecycle;
	for (const auto& j : env().audit())
		lifecycle.push_back(j.value("event", ""));
	EXPECT_EQ(lifecycle, (std::vector<std::string>{"sandbox-created", "thawed", "killed", "sandbox-deleted"}))
		<< dump_lines(env().audit());
	Result ev = env().airlock({"events", "--sandbox", name});
	ASSERT_EQ(ev.status, 0) << ev.describe();
	std::vector<std::string> streamed;
	for (const auto& j : json_objects_in(ev.out))
		streamed.push_back(j.dump());
	EXPECT_EQ(streamed, audit_lines_of(name)) << ev.out;
}

// A sandbox the configuration declares comes back after `sandbox delete` or
// `detach`: the answer says so, and where it is declared.
TEST_F(Operator, RemovingADeclaredSandboxSaysItComesBack)
{
	std::string made = "m" + env().id, attached = "a" + env().id;
	std::string policy = env().write_policy("p.json", base_policy("it-op-declared"));
	std::string cg = make_cgroup("decl");
	json cfg = {{"metrics", "off"},
		    {"audit_log", env().audit_path()},
		    {"sandboxes",
		     {{{"name", made}, {"policy", policy}}, {{"name", attached}, {"policy", policy}, {"cgroup", cg}}}}};
	std::string cfg_file = env().write_text("airlock.json", cfg.dump());
	Proc& d = env().start(env().airlock_argv({"daemon", "--config", cfg_file}), "daemon");
	ASSERT_TRUE(wait_until([&] { return env().status_of(made) && env().status_of(attached); }, 10s))
		<< d.describe();
	Result del = env().airlock({"sandbox", "delete", made});
	EXPECT_EQ(del.status, 0) << del.describe();
	EXPECT_NE(del.out.find(fmt::format("it is declared in {}, so the daemon makes it again within a second: remove "
					   "it there and send the daemon SIGHUP to keep it gone",
					   cfg_file)),
		  std::string::npos)
		<< del.describe();
	Result det = env().airlock({"detach", attached});
	EXPECT_EQ(det.status, 0) << det.describe();
	EXPECT_NE(det.out.find(fmt::format("it is declared in {}, so the daemon attaches it again", cfg_file)),
		  std::string::npos)
		<< det.describe();
	EXPECT_TRUE(wait_until([&] { return env().status_of(made) && env().status_of(attached); }, 10s))
		<< d.describe();
}

// The daemon's log lines start with their time (RFC 3339, UTC); with
// --log-format json each is one object with ts, level and msg.
TEST_F(Operator, DaemonLogLinesCarryTheirTimeOrAreJson)
{
	const std::regex text(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z airlock (info|warning|error): .+$)");
	Proc& d = start_daemon();
	d.signal(SIGTERM);
	ASSERT_TRUE(d.wait(10s)) << d.describe();
	std::istringstream lines(d.err());
	size_t n = 0;
	for (std::string l; std::getline(lines, l); n++)
		EXPECT_TRUE(std::regex_match(l, text)) << l;
	EXPECT_GE(n, 2u) << d.describe();  // "watching ..." and "signal 15, exiting"

	Proc& j = env().start(env().airlock_argv({"--log-format", "json", "daemon", "--metrics", "off"}),
			      "daemon-json");
	ASSERT_TRUE(wait_until([&] { return j.err().find("watching") != std::string::npos || !j.running(); }, 10s));
	j.signal(SIGTERM);
	ASSERT_TRUE(j.wait(10s)) << j.describe();
	std::istringstream jl(j.err());
	n = 0;
	for (std::string l; std::getline(jl, l); n++) {
		json o = json::parse(l, nullptr, false);
		ASSERT_TRUE(o.is_object()) << l;
		EXPECT_EQ(o.size(), 3u) << l;
		EXPECT_TRUE(
			std::regex_match(o.value("ts", ""), std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$)")))
			<< l;
		EXPECT_EQ(o.value("level", ""), "info") << l;
		EXPECT_FALSE(o.value("msg", "").empty()) << l;
	}
	EXPECT_GE(n, 2u) << j.describe();
}

// `airlock uninstall` removes everything airlock made: refused while a
// daemon runs, and while sandboxes have processes unless --force; with it,
// airlock's own sandbox is killed, the attached cgroup detached (its process
// runs on), and the pins and the state directory are gone; the cgroup parent
// goes once nothing else is in it.
TEST_F(Operator, UninstallRemovesEverythingAirlockMade)
{
	std::string run_name = "r" + env().id, att = "a" + env().id;
	RunSpec spec;
	spec.policy = env().write_policy("p.json", base_policy("it-op-uninstall"));
	spec.name = run_name;
	spec.cmd = env().py("wait_file.py", {env().path("never"), "60"});
	Proc& runner = env().start_run(spec);
	ASSERT_TRUE(wait_until([&] { return env().status_of(run_name).has_value(); }, 10s)) << runner.describe();
	std::string cg = make_cgroup("uninst");
	Proc& outside = env().start(inside(cg, env().py("wait_file.py", {env().path("never"), "60"})), "attached");
	ASSERT_TRUE(wait_until(
		[&] { return cgroup_events(cg).value_or(std::map<std::string, std::string>{})["populated"] == "1"; },
		10s));
	Result a = env().airlock({"attach", "--cgroup", cg, "--policy", spec.policy, "--name", att});
	ASSERT_EQ(a.status, 0) << a.describe();

	Proc& daemon = start_daemon();
	Result with_daemon = env().airlock({"uninstall"});
	EXPECT_EQ(with_daemon.status, 1) << with_daemon.describe();
	EXPECT_NE(with_daemon.err.find("airlock uninstall: a daemon runs for " + env().state_dir), std::string::npos)
		<< with_daemon.describe();
	daemon.signal(SIGTERM);
	ASSERT_TRUE(daemon.wait(10s)) << daemon.describe();

	Result refused = env().airlock({"uninstall"});
	EXPECT_EQ(refused.status, 1) << refused.describe();
	EXPECT_NE(refused.err.find(fmt::format("sandbox '{}' runs under airlock run (pid {})", run_name, runner.pid())),
		  std::string::npos)
		<< refused.describe();
	EXPECT_NE(refused.err.find(fmt::format("sandbox '{}' has processes in {}", att, cg)), std::string::npos)
		<< refused.describe();
	EXPECT_TRUE(env().status_of(run_name));
	EXPECT_TRUE(env().status_of(att));

	Result forced = env().airlock({"uninstall", "--force"});
	EXPECT_EQ(forced.status, 0) << forced.describe();
	EXPECT_NE(forced.out.find(att + ": detached from " + cg), std::string::npos) << forced.describe();
	EXPECT_NE(forced.out.find(run_name + ": killed and removed "), std::string::npos) << forced.describe();
	EXPECT_NE(forced.out.find("removed the pins in " + env().bpf_dir), std::string::npos) << forced.describe();
	EXPECT_NE(forced.out.find("removed the state directory " + env().state_dir), std::string::npos)
		<< forced.describe();
	std::string parent = cgroup2_mount() + "/" + env().cgroup_parent;
	EXPECT_NE(forced.out.find("left the cgroup " + parent), std::string::npos) << forced.describe();
	EXPECT_TRUE(runner.wait(10s)) << runner.describe();
	EXPECT_TRUE(outside.running()) << "a detached cgroup's processes run on";
	EXPECT_FALSE(exists(env().bpf_dir));
	EXPECT_FALSE(exists(env().state_dir));

	outside.signal(SIGKILL);
	ASSERT_TRUE(outside.wait(10s));
	ASSERT_TRUE(wait_until([&] { return ::rmdir(cg.c_str()) == 0; }, 5s)) << errno_name(errno);
	Result rest = env().airlock({"uninstall"});
	EXPECT_EQ(rest.status, 0) << rest.describe();
	EXPECT_EQ(rest.out, "removed the cgroup " + parent + "\n") << rest.describe();
	Result none = env().airlock({"uninstall"});
	EXPECT_EQ(none.out, "nothing of airlock's is on this node\n") << none.describe();
}

// systemd's readiness: READY=1 only once every declared sandbox is made or
// attached and supervised (an agent's unit ordered after airlock starts
// enforced); until then the status says what is missing and why. A cgroup to
// attach that does not exist yet does not hold it back (what makes it starts
// after the daemon). SIGHUP reloads, SIGTERM stops.
TEST_F(Operator, ReadinessWaitsForTheDeclaredSandboxes)
{
	std::string sock_path = env().path("notify.sock");
	airlock::Fd sock(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
	struct sockaddr_un sa = {};
	sa.sun_family = AF_UNIX;
	sock_path.copy(sa.sun_path, sizeof(sa.sun_path) - 1);
	ASSERT_EQ(::bind(sock.get(), reinterpret_cast<struct sockaddr*>(&sa), sizeof(sa)), 0) << errno_name(errno);
	// The next datagram, or "" after the timeout.
	auto next = [&](Ms timeout) {
		struct pollfd p = {sock.get(), POLLIN, 0};
		if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1)
			return std::string();
		char buf[4096];
		ssize_t n = ::recv(sock.get(), buf, sizeof(buf), 0);
		return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
	};
	std::string name = "n" + env().id;
	std::string later = "l" + env().id;
	std::string cg = cgroup2_mount() + "/" + env().cgroup_parent + "/later";
	std::string policy = env().path("p.json");  // written below
	json cfg = {{"metrics", "off"},
		    {"audit_log", env().audit_path()},
		    {"sandboxes",
		     {{{"name", name}, {"policy", policy}}, {{"name", later}, {"policy", policy}, {"cgroup", cg}}}}};
	std::vector<std::string> argv = {"env", "NOTIFY_SOCKET=" + sock_path};
	for (const auto& a : env().airlock_argv({"daemon", "--config", env().write_text("airlock.json", cfg.dump())}))
		argv.push_back(a);
	Proc& d = env().start(argv, "daemon");
	std::string first = next(10s);
	EXPECT_EQ(first.rfind("STATUS=waiting for declared sandboxes: " + name + ": " + policy, 0), 0u)
		<< first << d.describe();
	// Nothing more while the policy is missing (the status is sent when it changes).
	EXPECT_EQ(next(2s), "");
	env().write_policy("p.json", base_policy("it-op-ready"));
	std::string ready;
	ASSERT_TRUE(wait_until([&] { return (ready = next(1s)).find("READY=1") != std::string::npos; }, 10s))
		<< d.describe();
	EXPECT_EQ(ready, "READY=1\nSTATUS=enforcing 1 sandboxes");
	auto st = env().status_of(name);
	ASSERT_TRUE(st);
	EXPECT_TRUE(st->value("supervised_by_daemon", false)) << st->dump();
	EXPECT_FALSE(env().status_of(later));

	d.signal(SIGHUP);
	EXPECT_EQ(next(5s), "RELOADING=1");
	EXPECT_EQ(next(5s), "READY=1");
	d.signal(SIGTERM);
	EXPECT_EQ(next(5s), "STOPPING=1");
	EXPECT_TRUE(d.wait(10s)) << d.describe();
}

}  // namespace
}  // namespace it
