// No sandbox can make airlock use unbounded disk or CPU. Repeated decisions
// of a sandbox reach its ring at AL_EVENTS_PER_SEC per hook and reason after
// a burst of AL_EVENTS_BURST; the rest are counted exactly in the kernel and
// written as one "suppressed" line per second with the count, so that lines
// plus counts add up to every decision. The decision that sets the latch is
// always reported. The audit log rotates by size and keeps a bounded number
// of files; a log renamed by someone else is reopened.
#include <signal.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <chrono>

#include "fixture.h"

namespace it {
namespace {

constexpr int kBurst = 20;     // AL_EVENTS_BURST
constexpr int kPerSecond = 5;  // AL_EVENTS_PER_SEC

class Flood : public AirlockTest {
protected:
	// The clients run as nobody and wait for files the test writes: not in
	// env().tmp, which holds the audit log (mode 0750).
	void SetUp() override
	{
		AirlockTest::SetUp();
		if (env_) {
			shared_ = "/run/airlock-flood-" + env().id;
			::mkdir(shared_.c_str(), 0755);
		}
	}
	void TearDown() override
	{
		if (!shared_.empty())
			run({"rm", "-rf", shared_});
		AirlockTest::TearDown();
	}
	std::string shared(const std::string& name) const { return shared_ + "/" + name; }
	std::string shared_;

	// `airlock run` argv with extra options before the command.
	std::vector<std::string> run_with(const RunSpec& s, const std::vector<std::string>& extra)
	{
		auto argv = env().run_argv(s);
		auto dashdash = std::find(argv.begin(), argv.end(), "--");
		argv.insert(dashdash, extra.begin(), extra.end());
		return argv;
	}

	static std::vector<json> of(const std::vector<json>& lines, const std::string& sandbox,
				    const std::string& event)
	{
		std::vector<json> out;
		for (const auto& j : lines)
			if (j.value("sandbox", "") == sandbox && j.value("event", "") == event)
				out.push_back(j);
		return out;
	}

	static uint64_t file_size(const std::string& path)
	{
		struct stat st;
		return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
	}
};

TEST_F(Flood, DeniedConnectFloodIsAggregatedAndCountedExactly)
{
	constexpr int kN = 5000;
	std::string name = "fl" + env().id;
	std::string policy = env().write_policy("deny.json", base_policy("it-flood", "deny"));
	std::string marker = env().marker("flood");
	std::string go = shared("flood.go");
	RunSpec s;
	s.policy = policy;
	s.name = name;
	s.user = "nobody";
	s.cmd = env().py("connect_flood.py", {dest4(kDenied4, kPortLo), marker, std::to_string(kN), "--go", go});
	auto started = std::chrono::steady_clock::now();
	Proc& run = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return run.out().find("\"connect_flood\"") != std::string::npos; }, 60s))
		<< run.describe();
	double flood_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
	json counts = json_objects_in(run.out()).front();
	ASSERT_EQ(counts["eperm"].get<int>(), kN) << counts.dump();

	// The kernel's counters are exact, whatever reached the ring.
	auto st = env().status_of(name);
	ASSERT_TRUE(st) << "status does not list the sandbox";
	const json& c = (*st)["counters"];
	EXPECT_EQ(c["decisions"]["connect4"]["deny"].get<uint64_t>(), uint64_t(kN)) << c.dump();
	EXPECT_EQ(c["reasons"]["no-rule"].get<uint64_t>(), uint64_t(kN)) << c.dump();
	EXPECT_EQ(c["violations"].get<uint64_t>(), uint64_t(kN)) << c.dump();
	EXPECT_EQ(c["events_lost"].get<uint64_t>(), 0u) << c.dump();
	uint64_t suppressed_counter = c["events_suppressed"].get<uint64_t>();

	write_file(go, "");
	ASSERT_TRUE(run.wait(20s).has_value()) << run.describe();
	auto lines = env().audit();
	auto reported = decisions(lines, Violation("connect4", "no-rule", kDenied4, kPortLo));
	uint64_t summed = 0;
	size_t summaries = 0;
	for (const auto& j : of(lines, name, "suppressed")) {
		EXPECT_EQ(j.value("hook", ""), "connect4") << j.dump();
		EXPECT_EQ(j.value("reason", ""), "no-rule") << j.dump();
		EXPECT_EQ(j.value("verdict", ""), "deny") << j.dump();
		summed += j["count"].get<uint64_t>();
		summaries++;
	}
	// At most the burst, then the rate, while the flood lasted (and one
	// summary a second, the last at the sandbox's end).
	EXPECT_LE(reported.size(), size_t(kBurst + kPerSecond * (flood_s + 1))) << "flood took " << flood_s << " s";
	EXPECT_GE(reported.size(), size_t(kBurst)) << "the burst was not reported";
	EXPECT_LE(summaries, size_t(flood_s + 2)) << "more than one summary a second";
	EXPECT_EQ(reported.size() + summed, uint64_t(kN)) << reported.size() << " decision lines and " << summed
							  << " suppressed in " << summaries << " summaries";
	EXPECT_EQ(suppressed_counter, summed) << "status and the summaries disagree";
	std::cerr << "[ flood ] " << kN << " denied connects in " << flood_s << " s: " << reported.size()
		  << " decision lines, " << summed << " counted in " << summaries << " summary lines\n";
	EXPECT_TRUE(NothingArrived(env(), marker));
}

// A sandbox that takes the slot of one that spent its burst gets the whole
// burst: the rate limit belongs to the sandbox, not to the slot.
TEST_F(Flood, ANewSandboxInAFloodedSlotStartsWithTheFullBurst)
{
	std::string policy = env().write_policy("deny.json", base_policy("it-flood", "deny"));
	auto flood = [&](const std::string& name, int n) {
		std::string go = shared(name + ".go");
		RunSpec s;
		s.policy = policy;
		s.name = name;
		s.user = "nobody";
		s.cmd = env().py("connect_flood.py",
				 {dest4(kDenied4, kPortLo), env().marker(name), std::to_string(n), "--go", go});
		Proc& run = env().start_run(s);
		EXPECT_TRUE(wait_until([&] { return run.out().find("\"connect_flood\"") != std::string::npos; }, 60s))
			<< run.describe();
		json rec = json::parse(read_file(env().state_dir + "/sandboxes/" + name + ".json"), nullptr, false);
		write_file(go, "");
		EXPECT_TRUE(run.wait(20s).has_value()) << run.describe();
		return rec.is_object() ? rec.value("slot", -1) : -1;
	};
	std::string first = "fa" + env().id, second = "fb" + env().id;
	int slot_a = flood(first, 200);
	int slot_b = flood(second, kBurst);
	ASSERT_EQ(slot_a, slot_b) << "the second sandbox must take the first one's slot";
	auto lines = env().audit();
	ASSERT_FALSE(of(lines, first, "suppressed").empty()) << "the first sandbox did not spend its burst";
	size_t reported = 0;
	for (const auto& j : decisions(lines, Violation("connect4", "no-rule", kDenied4, kPortLo)))
		reported += j.value("sandbox", "") == second;
	EXPECT_EQ(reported, size_t(kBurst)) << dump_lines(lines);
	EXPECT_TRUE(of(lines, second, "suppressed").empty()) << dump_lines(lines);
}

// The sandbox floods denials of one kind under on_violation deny until its
// rate budget for that kind is spent; a reload makes it on_violation freeze,
// and the flood's next denial, of the very kind whose events are being held
// back, sets the latch: that one is reported.
TEST_F(Flood, LatchingViolationIsReportedDuringAFloodOfTheSameKind)
{
	std::string name = "lf" + env().id;
	std::string deny = env().write_policy("deny.json", base_policy("it-flood", "deny"));
	std::string freeze = env().write_policy("freeze.json", base_policy("it-flood", "freeze"));
	std::string marker = env().marker("latchflood");
	RunSpec s;
	s.policy = deny;
	s.name = name;
	s.user = "nobody";
	s.cmd = env().py("connect_flood.py", {dest4(kDenied4, kPortLo + 2), marker, "1", "--until", shared("never")});
	Proc& run = env().start_run(s);
	ASSERT_TRUE(wait_until(
		[&] {
			auto st = env().status_of(name);
			return st && (*st)["counters"]["events_suppressed"].get<uint64_t>() > 200;
		},
		20s))
		<< "the flood's events were never held back\n"
		<< run.describe();
	Result r = env().airlock({"reload", name, freeze});
	ASSERT_EQ(r.status, 0) << r.describe();
	std::string cg = env().sandbox_cgroup(name);
	ASSERT_TRUE(wait_until(
		[&] {
			auto ev = cgroup_events(cg);
			return ev && (*ev)["frozen"] == "1";
		},
		10s))
		<< "the flood's next denial did not freeze the sandbox\n"
		<< run.describe();
	Match v = Violation("connect4", "no-rule", kDenied4, kPortLo + 2);
	v.latched = true;
	EXPECT_TRUE(wait_until([&] { return !decisions(env().audit(), v).empty(); }, 5s));
	EXPECT_TRUE(Logged(env().audit(), v, name)) << "the violation that set the latch was held back";
	EXPECT_TRUE(NothingArrived(env(), marker));
	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
	auto rs = run.wait(10s);
	ASSERT_TRUE(rs) << run.describe();
	EXPECT_EQ(*rs, 121);
}

TEST_F(Flood, AuditLogNeverExceedsItsBound)
{
	// Three kinds of denial at once, each at its full rate, into a log of
	// 8 KiB with 2 old files kept: it rotates many times.
	constexpr uint64_t kMax = 8192;
	std::string name = "rb" + env().id;
	std::string policy = env().write_policy("deny.json", base_policy("it-flood", "deny"));
	std::string log = env().path("bounded.jsonl");
	std::string marker = env().marker("rot");
	std::string script;
	for (const auto& d : {dest4(kDenied4, kPortLo + 3), dest6(kDenied6, kPortLo + 3)})
		script += join(env().py("connect_flood.py", {d, marker, "1", "--seconds", "4"})) + " & ";
	script += join(env().py("flood.py", {kDenied4, std::to_string(kPortLo + 4), "20000", "/"})) + " & wait";
	RunSpec s;
	s.policy = policy;
	s.name = name;
	s.user = "nobody";
	s.audit_log = log;
	s.cmd = {"/bin/sh", "-c", script};
	Proc& run = env().start(run_with(s, {"--audit-log-max-bytes", std::to_string(kMax), "--audit-log-keep", "2"}),
				"run-" + name);
	uint64_t worst = 0;
	bool over = false;
	while (!run.wait(5ms).has_value()) {
		for (const std::string& f : {log, log + ".1", log + ".2"}) {
			uint64_t n = file_size(f);
			worst = std::max(worst, n);
			over |= n > kMax;
		}
		ASSERT_FALSE(exists(log + ".3")) << "a third old file was kept";
	}
	EXPECT_EQ(*run.status(), 0) << run.describe();
	EXPECT_FALSE(over) << "a file of the log grew to " << worst << " bytes, over " << kMax;
	EXPECT_TRUE(exists(log + ".2")) << "the log never rotated twice: the test wrote too little";
	EXPECT_FALSE(exists(log + ".3"));
	uint64_t total = 0;
	for (const std::string& f : {log, log + ".1", log + ".2"}) {
		EXPECT_LE(file_size(f), kMax) << f;
		total += file_size(f);
		// Whole lines only: rotation happens between lines.
		std::string text = read_file(f);
		EXPECT_EQ(read_json_lines(f).size(), size_t(std::count(text.begin(), text.end(), '\n'))) << f;
	}
	EXPECT_LE(total, 3 * kMax);
	EXPECT_EQ(of(read_json_lines(log), name, "sandbox-exit").size(), 1u) << "the last line is in the current file";
	std::cerr << "[ rotation ] largest file " << worst << " bytes, " << total << " bytes kept in 3 files\n";
	EXPECT_TRUE(NothingArrived(env(), marker));
}

TEST_F(Flood, SighupReopensAnAuditLogRenamedOutside)
{
	std::string name = "hup" + env().id;
	std::string policy = env().write_policy("deny.json", base_policy("it-flood", "deny"));
	std::string log = env().path("hup.jsonl");
	std::string m1 = env().marker("before"), m2 = env().marker("after");
	std::string renamed = shared("renamed");
	RunSpec s;
	s.policy = policy;
	s.name = name;
	s.user = "nobody";
	s.audit_log = log;
	s.cmd = Sequence({env().py("connect_flood.py", {dest4(kDenied4, kPortLo + 5), m1, "1"}),
			  env().py("wait_file.py", {renamed, "20"}),
			  env().py("connect_flood.py", {dest4(kDenied4, kPortLo + 6), m2, "1"})});
	Proc& run = env().start_run(s);
	Match first = Violation("connect4", "no-rule", kDenied4, kPortLo + 5);
	ASSERT_TRUE(wait_until([&] { return !decisions(read_json_lines(log), first).empty(); }, 20s)) << run.describe();
	// What logrotate does without copytruncate: rename, then SIGHUP.
	ASSERT_EQ(::rename(log.c_str(), (log + ".old").c_str()), 0);
	ASSERT_EQ(::kill(run.pid(), SIGHUP), 0);
	write_file(renamed, "");
	auto rs = run.wait(20s);
	ASSERT_TRUE(rs) << run.describe();
	EXPECT_EQ(*rs, 0) << run.describe();
	Match second = Violation("connect4", "no-rule", kDenied4, kPortLo + 6);
	EXPECT_TRUE(Logged(read_json_lines(log), second, name)) << "the line after the rename is not in the new file";
	EXPECT_TRUE(decisions(read_json_lines(log + ".old"), second).empty()) << "written to the renamed file";
	EXPECT_TRUE(Logged(read_json_lines(log + ".old"), first, name));
	EXPECT_EQ(of(read_json_lines(log), name, "sandbox-exit").size(), 1u);
	EXPECT_TRUE(NothingArrived(env(), m1));
	EXPECT_TRUE(NothingArrived(env(), m2));
}

TEST_F(Flood, CopytruncateKeepsTheLogWholeLines)
{
	// logrotate's copytruncate: the file is copied, then truncated in place;
	// the next line starts at the new beginning, not at the old offset.
	std::string name = "ct" + env().id;
	std::string policy = env().write_policy("deny.json", base_policy("it-flood", "deny"));
	std::string log = env().path("ct.jsonl");
	std::string m1 = env().marker("before"), m2 = env().marker("after");
	std::string truncated = shared("truncated");
	RunSpec s;
	s.policy = policy;
	s.name = name;
	s.user = "nobody";
	s.audit_log = log;
	s.cmd = Sequence({env().py("connect_flood.py", {dest4(kDenied4, kPortLo + 7), m1, "1"}),
			  env().py("wait_file.py", {truncated, "20"}),
			  env().py("connect_flood.py", {dest4(kDenied4, kPortLo + 8), m2, "1"})});
	Proc& run = env().start_run(s);
	Match first = Violation("connect4", "no-rule", kDenied4, kPortLo + 7);
	ASSERT_TRUE(wait_until([&] { return !decisions(read_json_lines(log), first).empty(); }, 20s)) << run.describe();
	write_file(log + ".1", read_file(log));
	ASSERT_EQ(::truncate(log.c_str(), 0), 0);
	write_file(truncated, "");
	ASSERT_TRUE(run.wait(20s)) << run.describe();
	std::string text = read_file(log);
	ASSERT_FALSE(text.empty());
	EXPECT_EQ(text.front(), '{') << "the file starts with a hole or a partial line";
	EXPECT_TRUE(Logged(read_json_lines(log), Violation("connect4", "no-rule", kDenied4, kPortLo + 8), name));
	EXPECT_TRUE(decisions(read_json_lines(log), first).empty());
	EXPECT_TRUE(NothingArrived(env(), m2));
}

}  // namespace
}  // namespace it
