#include "daemon/event_feed.h"

#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <iterator>

#include <fmt/format.h>

#include "events/audit.h"

namespace airlock {

EventFeed::EventFeed()
{
	AuditLog::tee_all([this](const std::string& sb, const std::string& line) { publish(sb, line); });
}

EventFeed::~EventFeed()
{
	AuditLog::tee_all(nullptr);
}

void EventFeed::publish(const std::string& sandbox, const std::string& line)
{
	recent_.emplace_back(sandbox, line);
	if (recent_.size() > kRecent)
		recent_.pop_front();
	for (auto it = subs_.begin(); it != subs_.end();) {
		bool keep = true;
		if (it->sandbox.empty() || it->sandbox == sandbox)
			keep = ::send(it->fd.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
			       static_cast<ssize_t>(line.size());
		it = keep ? std::next(it) : subs_.erase(it);
	}
}

void EventFeed::prune()
{
	subs_.erase(std::remove_if(subs_.begin(), subs_.end(),
				   [](const Subscriber& s) {
					   char b;
					   ssize_t n = ::recv(s.fd.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
					   return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
				   }),
		    subs_.end());
}

Result<ControlServer::Answer> EventFeed::events(const std::string& sandbox, bool follow)
{
	if (follow && subs_.size() >= kMaxSubscribers)
		prune();
	if (follow && subs_.size() >= kMaxSubscribers)
		return Rejection{{fmt::format("{} followers already; no more", kMaxSubscribers)}};
	ControlServer::Answer a;
	for (const auto& [sb, l] : recent_)
		if (sandbox.empty() || sb == sandbox)
			a.text += l;
	if (follow)
		a.then = [this, sandbox](Fd fd) { subs_.push_back({std::move(fd), sandbox}); };
	return a;
}

}  // namespace airlock
