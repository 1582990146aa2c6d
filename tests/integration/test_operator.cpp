// The node agent under an operator's mistakes and restarts: a request that
// fails leaves nothing made; a restarted daemon takes a frozen sandbox as it
// is; `airlock events` carries every line the audit log has for the daemon's
// sandboxes; removing a sandbox the configuration declares says that it
// comes back; the daemon's log lines carry their time, or are JSON.
#include <signal.h>
#include <sys/stat.h>

#include <regex>

#include <fmt/format.h>

#include "daemon_fixture.h"

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
			EXPECT_EQ(daemon->err().find(name + ": cannot supervise"), std::string::npos) << daemon->describe();
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
			return second.err().find(adopted) != std::string::npos || events(env().audit(), "frozen").size() > 1;
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
		    {"sandboxes", {{{"name", made}, {"policy", policy}}, {{"name", attached}, {"policy", policy}, {"cgroup", cg}}}}};
	std::string cfg_file = env().write_text("airlock.json", cfg.dump());
	Proc& d = env().start(env().airlock_argv({"daemon", "--config", cfg_file}), "daemon");
	ASSERT_TRUE(wait_until([&] { return env().status_of(made) && env().status_of(attached); }, 10s)) << d.describe();
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

	Proc& j = env().start(env().airlock_argv({"--log-format", "json", "daemon", "--metrics", "off"}), "daemon-json");
	ASSERT_TRUE(wait_until([&] { return j.err().find("watching") != std::string::npos || !j.running(); }, 10s));
	j.signal(SIGTERM);
	ASSERT_TRUE(j.wait(10s)) << j.describe();
	std::istringstream jl(j.err());
	n = 0;
	for (std::string l; std::getline(jl, l); n++) {
		json o = json::parse(l, nullptr, false);
		ASSERT_TRUE(o.is_object()) << l;
		EXPECT_EQ(o.size(), 3u) << l;
		EXPECT_TRUE(std::regex_match(o.value("ts", ""), std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$)")))
			<< l;
		EXPECT_EQ(o.value("level", ""), "info") << l;
		EXPECT_FALSE(o.value("msg", "").empty()) << l;
	}
	EXPECT_GE(n, 2u) << j.describe();
}

}  // namespace
}  // namespace it
