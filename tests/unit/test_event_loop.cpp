// The daemon's event loop: handlers run for their own descriptor only, a
// removal takes effect within the round it happens in, urgent descriptors
// (sandbox rings) run before the rest, and periodic tasks run on time.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "daemon/event_loop.h"
#include "util/clock.h"
#include "util/fd.h"

namespace {

using airlock::EventLoop;
using airlock::Fd;

struct Pipe {
	Fd r, w;
	Pipe()
	{
		int p[2];
		EXPECT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
		r.reset(p[0]);
		w.reset(p[1]);
	}
	void poke() { EXPECT_EQ(::write(w.get(), "x", 1), 1); }
};

TEST(EventLoop, ReadyDescriptorsRunTheirOwnHandlerUrgentFirst)
{
	EventLoop loop;
	Pipe a, b, c;
	std::vector<std::string> ran;
	loop.add(a.r.get(), EPOLLIN, [&](uint32_t) { ran.push_back("a"); });
	loop.add(
		b.r.get(), EPOLLIN, [&](uint32_t) { ran.push_back("b"); }, EventLoop::kUrgent);
	loop.add(c.r.get(), EPOLLIN, [&](uint32_t) { ran.push_back("c"); });
	a.poke();
	b.poke();
	loop.run_once();
	EXPECT_EQ(ran, (std::vector<std::string>{"b", "a"}));
}

TEST(EventLoop, ADescriptorRemovedByAnEarlierHandlerIsNotDelivered)
{
	EventLoop loop;
	Pipe a, b;
	int b_ran = 0;
	loop.add(
		a.r.get(), EPOLLIN, [&](uint32_t) { loop.remove(b.r.get()); }, EventLoop::kUrgent);
	loop.add(b.r.get(), EPOLLIN, [&](uint32_t) { b_ran++; });
	a.poke();
	b.poke();
	loop.run_once();
	EXPECT_EQ(b_ran, 0);
	EXPECT_FALSE(loop.watches(b.r.get()));
	EXPECT_TRUE(loop.watches(a.r.get()));
}

TEST(EventLoop, AHandlerMayRemoveItself)
{
	EventLoop loop;
	Pipe a;
	int ran = 0;
	loop.add(a.r.get(), EPOLLIN, [&](uint32_t) {
		ran++;
		loop.remove(a.r.get());
	});
	a.poke();
	loop.run_once();
	EXPECT_EQ(ran, 1);
	EXPECT_FALSE(loop.watches(a.r.get()));
}

TEST(EventLoop, APeriodicTaskBoundsTheWaitAndRuns)
{
	EventLoop loop;
	int ticks = 0;
	loop.every(20000000ull, [&] { ticks++; });  // 20 ms
	uint64_t t0 = airlock::monotonic_ns();
	loop.run_once();  // nothing is ready: returns when the task is due
	EXPECT_EQ(ticks, 1);
	EXPECT_GE(airlock::monotonic_ns() - t0, 20000000ull);
}

}  // namespace
