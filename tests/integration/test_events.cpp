// Events are telemetry, counters are the truth: when a sandbox floods its own
// ring buffer, the kernel counters still count every decision, every event
// held back by the rate limit or that could not be reserved is counted too
// (delivered + suppressed + lost == decisions, exactly), and another sandbox's violation still reaches the audit log,
// because each sandbox has its own ring.
#include "fixture.h"

namespace it {
namespace {

class Events : public AirlockTest {};

constexpr int kFlood = 40000;

TEST_F(Events, FloodLosesOnlyItsOwnEventsAndCountersStayExact)
{
	std::string policy = env().write_policy("flood.json", base_policy("it-flood", "deny"));
	std::string flooder = "f" + env().id, other = "o" + env().id;
	std::string go = env().path("flood.go");

	RunSpec f;
	f.policy = policy;
	f.name = flooder;
	f.cmd = env().py("flood.py", {kDenied4, std::to_string(kPortLo), std::to_string(kFlood), go});
	Proc& run = env().start_run(f);

	// While the flood is on, a second sandbox's one violation must be logged.
	ASSERT_TRUE(wait_until(
		[&] {
			auto s = env().status_of(flooder);
			return s && (*s)["counters"]["violations"].get<uint64_t>() > 1000;
		},
		20s))
		<< "the flood never got going\n"
		<< run.describe();
	std::string m = env().marker("beside-flood");
	RunSpec o;
	o.policy = policy;
	o.name = other;
	o.cmd = env().py("tcp_send.py", {dest4(kDenied4, kPortLo + 1), m});
	RunResult rr = env().run(o, 20s);
	EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kDenied4, kPortLo + 1), other))
		<< "a flood in one sandbox hid another sandbox's violation";

	// The flood is over once the client has printed its counts.
	ASSERT_TRUE(wait_until([&] { return run.out().find("\"flood\"") != std::string::npos; }, 60s))
		<< run.describe();
	json counts = json::parse(run.out().substr(0, run.out().find('\n')));
	EXPECT_EQ(counts["eperm"].get<int>(), kFlood) << counts.dump();
	EXPECT_EQ(counts["sent"].get<int>(), 0) << counts.dump();

	auto s = env().status_of(flooder);
	ASSERT_TRUE(s.has_value());
	uint64_t denied = (*s)["counters"]["decisions"]["sendmsg4"]["deny"].get<uint64_t>();
	uint64_t lost = (*s)["counters"]["events_lost"].get<uint64_t>();
	EXPECT_EQ(denied, static_cast<uint64_t>(kFlood)) << "the kernel counter missed decisions";

	write_file(go, "");
	ASSERT_TRUE(run.wait(20s).has_value()) << run.describe();
	size_t delivered = 0;
	uint64_t suppressed = 0;
	for (const auto& j : env().audit()) {
		if (j.value("sandbox", "") != flooder || j.value("hook", "") != "sendmsg4")
			continue;
		if (j.value("event", "") == "decision")
			delivered++;
		else if (j.value("event", "") == "suppressed")
			suppressed += j["count"].get<uint64_t>();
	}
	EXPECT_EQ(delivered + lost + suppressed, static_cast<uint64_t>(kFlood))
		<< delivered << " events delivered, " << suppressed << " held back by the rate limit and " << lost
		<< " counted as lost";
	std::cerr << "[ flood ] " << kFlood << " denials: " << delivered << " events delivered, " << suppressed
		  << " held back and summarised, " << lost << " lost and counted\n";
	EXPECT_TRUE(NothingArrived(env(), "AIRLOCK-FLOOD"));
}

}  // namespace
}  // namespace it
