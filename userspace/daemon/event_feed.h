#pragma once
// What `airlock events` reads: every audit line this process writes (of the
// sandboxes it supervises, and its requests' lifecycle lines), the last
// ones kept for a newcomer, each sent to the followers of its sandbox. A
// follower that cannot keep up is dropped, never waited for: the loop
// that sends to it also freezes sandboxes.
#include <cstddef>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "daemon/control_server.h"
#include "util/fd.h"
#include "util/result.h"

namespace airlock {

class EventFeed {
public:
	static constexpr size_t kRecent = 200;
	static constexpr size_t kMaxSubscribers = 64;

	// Tees every audit line of this process to the feed, until destroyed.
	EventFeed();
	~EventFeed();
	EventFeed(const EventFeed&) = delete;
	EventFeed& operator=(const EventFeed&) = delete;

	void publish(const std::string& sandbox, const std::string& line);
	// Followers that hung up are let go at once, not at their next line.
	void prune();
	// The `events` request: the recent lines of a sandbox ("" for every
	// sandbox), then (follow) the connection is a subscriber's.
	// Rejected past kMaxSubscribers followers.
	Result<ControlServer::Answer> events(const std::string& sandbox, bool follow);

private:
	struct Subscriber {
		Fd fd;
		std::string sandbox;  // "" for every sandbox
	};
	std::vector<Subscriber> subs_;
	std::deque<std::pair<std::string, std::string>> recent_;  // (sandbox, line), the last kRecent
};

}  // namespace airlock
