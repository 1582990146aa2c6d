// The agent dying fails closed: the pinned links keep enforcing, a new agent
// adopts the same pinned programs (same program ids) without a gap, status
// still shows the orphaned sandbox, and `airlock kill` cleans it up.
#include <signal.h>

#include <fmt/format.h>

#include "fixture.h"

namespace it {
namespace {

class FailClosed : public AirlockTest {
protected:
	json progress(const std::string& file) { return read_json_object(env().path(file)); }
	int iterations(const std::string& file) { return progress(file).value("iterations", 0); }
};

TEST_F(FailClosed, AgentKilledEnforcementStaysNewAgentAdoptsKillCleansUp)
{
	std::string policy = env().write_policy("policy.json", base_policy("it-failclosed"));
	std::string orphan = "o" + env().id, second = "n" + env().id;
	std::string prefix = "AIRLOCK-MARK-fc-" + env().id + "-" + random_hex(8);

	RunSpec s;
	s.policy = policy;
	s.name = orphan;
	s.cmd = env().py("loop.py",
			 {"--proto", "udp", "--allowed", dest4(kAllowed4, 9000), "--denied", dest4(kDenied4, 9001),
			  "--prefix", prefix, "--progress", env().path("loop.json"), "--stop", env().path("stop"),
			  "--max", "100000", "--seconds", "25", "--interval", "0.005"});
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return iterations("loop.json") >= 5 || !runner.running(); }, 10s))
		<< runner.describe();
	ASSERT_TRUE(runner.running()) << runner.describe();

	auto ids_before = pinned_prog_ids(env().bpf_dir);
	// Twelve per sandbox, the two unix hooks this kernel has, and
	// al_original_dst (attached to targets' cgroups).
	ASSERT_EQ(ids_before.size(), 15u) << "expected fifteen pinned programs under " << env().bpf_dir << "/progs";
	EXPECT_EQ(ids_before.count("al_original_dst"), 1u) << env().bpf_dir;
	auto st = env().status_of(orphan);
	ASSERT_TRUE(st) << "status does not list the sandbox";
	EXPECT_EQ(st->value("runner_pid", -1), runner.pid()) << st->dump();
	EXPECT_TRUE(st->value("runner_alive", false)) << st->dump();
	// Violations before the kill are in the audit log.
	ASSERT_TRUE(wait_until(
		[&] { return !decisions(env().audit(), Violation("sendmsg4", "no-rule", kDenied4, 9001)).empty(); },
		5s))
		<< dump_lines(env().audit());

	// kill -9 the agent, by its PID.
	runner.signal(SIGKILL);
	auto rs = runner.reap_now(5s);
	ASSERT_TRUE(rs);
	EXPECT_EQ(*rs, 128 + SIGKILL);
	int at_kill = iterations("loop.json");
	ASSERT_TRUE(wait_until([&] { return iterations("loop.json") >= at_kill + 30; }, 10s))
		<< "the sandboxed client stopped when its agent died";
	uint64_t deny0 = 0;
	{
		auto o = env().status_of(orphan);
		ASSERT_TRUE(o) << "status no longer lists the orphaned sandbox";
		EXPECT_FALSE(o->value("runner_alive", true)) << o->dump();
		EXPECT_EQ(o->value("state", ""), "running") << o->dump();
		deny0 = (*o)["counters"]["decisions"]["sendmsg4"].value("deny", 0ull);
	}
	// Denied still denied, allowed still flows, after the agent died.
	ASSERT_TRUE(env().fence());
	EXPECT_TRUE(NothingArrived(env(), prefix + "-DENY-"));
	int probe = at_kill + 20;
	EXPECT_TRUE(env().sink->wait_data(fmt::format("{}-ALLOW-{}-", prefix, probe), 1, 3s))
		<< "allowed traffic after the agent's death did not arrive";
	// With nobody reading events, the kernel still counts every denial.
	ASSERT_TRUE(wait_until(
		[&] {
			auto o = env().status_of(orphan);
			return o && (*o)["counters"]["decisions"]["sendmsg4"].value("deny", 0ull) >= deny0 + 10;
		},
		5s))
		<< "kernel deny counters did not move while the agent was dead";

	// A new agent with the same pins adopts them: same programs, and it works.
	std::string a = env().marker("fc-new-a"), d = env().marker("fc-new-d");
	RunSpec s2;
	s2.policy = policy;
	s2.name = second;
	s2.cmd = env().py("tcp_send.py", {dest4(kAllowed4, 9002), a, dest4(kDenied4, 9003), d});
	RunResult rr = env().run(s2, 20s);
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(pinned_prog_ids(env().bpf_dir), ids_before) << "the second agent replaced the pinned programs";
	EXPECT_TRUE(Ok(ResultFor(rr, a))) << rr.describe();
	EXPECT_EQ(Errno(ResultFor(rr, d)), "EPERM") << rr.describe();
	EXPECT_TRUE(ArrivedIntact(env(), a));
	EXPECT_TRUE(NothingArrived(env(), d));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kDenied4, 9003), second));
	EXPECT_FALSE(exists(env().sandbox_cgroup(second)));

	// The second sandbox's teardown left the orphan enforced.
	int after_second = iterations("loop.json");
	ASSERT_TRUE(wait_until([&] { return iterations("loop.json") >= after_second + 20; }, 10s));
	EXPECT_TRUE(NothingArrived(env(), prefix + "-DENY-"));
	EXPECT_TRUE(env().sink->wait_data(fmt::format("{}-ALLOW-{}-", prefix, after_second + 10), 1, 3s));

	// airlock kill of an orphan kills its processes and removes it.
	std::string cg = env().sandbox_cgroup(orphan);
	auto pids = cgroup_pids(cg);
	EXPECT_FALSE(pids.empty());
	Result k = env().airlock({"kill", orphan});
	ASSERT_EQ(k.status, 0) << k.describe();
	EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 5s)) << "orphan's cgroup left behind";
	for (pid_t p : pids)
		EXPECT_TRUE(wait_until([&] { return !pid_alive(p); }, 3s)) << "pid " << p << " survived airlock kill";
	EXPECT_FALSE(env().status_of(orphan)) << "status still lists the killed orphan";
	// The pins outlive the sandboxes, so the next agent adopts again.
	EXPECT_EQ(pinned_prog_ids(env().bpf_dir), ids_before);
}

}  // namespace
}  // namespace it
