#include "daemon/event_loop.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>

#include "util/clock.h"
#include "util/error.h"

namespace airlock {

EventLoop::EventLoop() : ep_(::epoll_create1(EPOLL_CLOEXEC))
{
	if (!ep_.valid())
		fail_errno("epoll_create1");
}

void EventLoop::add(int fd, uint32_t events, Handler handler, Priority priority)
{
	uint64_t id = next_id_++;
	struct epoll_event ev = {};
	ev.events = events;
	ev.data.u64 = id;
	if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
		fail_errno("epoll_ctl add");
	watches_[id] = Watch{fd, priority, std::move(handler)};
	by_fd_[fd] = id;
}

void EventLoop::modify(int fd, uint32_t events)
{
	auto it = by_fd_.find(fd);
	if (it == by_fd_.end())
		return;
	struct epoll_event ev = {};
	ev.events = events;
	ev.data.u64 = it->second;
	if (::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, fd, &ev) != 0)
		fail_errno("epoll_ctl modify");
}

void EventLoop::remove(int fd)
{
	auto it = by_fd_.find(fd);
	if (it == by_fd_.end())
		return;
	::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd, nullptr);
	watches_.erase(it->second);
	by_fd_.erase(it);
}

void EventLoop::every(uint64_t interval_ns, std::function<void()> task)
{
	tasks_.push_back({interval_ns, monotonic_ns() + interval_ns, std::move(task)});
}

void EventLoop::run_once()
{
	uint64_t now = monotonic_ns();
	int timeout = -1;
	for (const auto& t : tasks_) {
		uint64_t ms = t.due > now ? (t.due - now + 999999) / 1000000 : 0;
		timeout = timeout < 0 ? static_cast<int>(ms) : std::min(timeout, static_cast<int>(ms));
	}
	struct epoll_event evs[64];
	int n = ::epoll_wait(ep_.get(), evs, 64, timeout);
	if (n < 0 && errno != EINTR)
		fail_errno("epoll_wait");
	for (int pass : {kUrgent, kNormal})
		for (int i = 0; i < n; i++) {
			// struct epoll_event is packed on x86-64: copy the key out rather than
			// bind find()'s reference to a misaligned member.
			const uint64_t key = evs[i].data.u64;
			const uint32_t events = evs[i].events;
			auto it = watches_.find(key);
			if (it == watches_.end() || it->second.priority != pass)
				continue;                // removed by an earlier handler of this round, or not yet
			Handler h = it->second.handler;  // a copy: the handler may remove itself
			h(events);
		}
	now = monotonic_ns();
	for (size_t i = 0; i < tasks_.size(); i++) {
		if (tasks_[i].due > now)
			continue;
		tasks_[i].due = now + tasks_[i].interval;
		tasks_[i].run();
	}
}

}  // namespace airlock
