#pragma once
// The daemon's loop: epoll, each registered descriptor mapped to its
// handler, and periodic tasks. Nothing here blocks but epoll_wait itself,
// which returns at the next task's time at the latest.
//
// Why not sd-event or Asio: the daemon watches a few kinds of descriptor
// (rings, inotify, signalfd, a listening socket and its connections) and
// runs two periodic tasks; this is all of it, in one file, with no
// dependency to pin. A handler may add or remove any registration,
// including its own, while the loop dispatches.
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "util/fd.h"

namespace airlock {

class EventLoop {
public:
	using Handler = std::function<void(uint32_t events)>;

	EventLoop();

	// Of what is ready at once, the lower priority runs first: a sandbox's
	// ring (a violation to freeze) before a control request.
	enum Priority { kUrgent = 0, kNormal = 1 };

	// Watches fd (which the caller keeps open) for events (EPOLLIN, ...).
	// Throws if epoll refuses it.
	void add(int fd, uint32_t events, Handler handler, Priority priority = kNormal);
	void modify(int fd, uint32_t events);
	// Stops watching fd; a pending event of it is not delivered.
	void remove(int fd);
	bool watches(int fd) const { return by_fd_.count(fd) != 0; }

	// Runs task every interval_ns (CLOCK_MONOTONIC), the first time one
	// interval from now.
	void every(uint64_t interval_ns, std::function<void()> task);

	// Waits for what is ready (at most until the next task is due), runs
	// its handlers, then the tasks that are due.
	void run_once();

private:
	struct Watch {
		int fd;
		Priority priority;
		Handler handler;
	};
	struct Task {
		uint64_t interval, due;
		std::function<void()> run;
	};
	Fd ep_;
	// By a registration's id, never reused: an event for a descriptor that
	// was removed (and perhaps reopened under the same number) finds nothing.
	std::map<uint64_t, Watch> watches_;
	std::map<int, uint64_t> by_fd_;
	uint64_t next_id_ = 1;
	std::vector<Task> tasks_;
};

}  // namespace airlock
