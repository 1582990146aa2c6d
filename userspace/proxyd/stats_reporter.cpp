#include "proxyd/stats_reporter.h"

#include <sys/socket.h>

#include <chrono>

#include "proxy/agent_channel.h"

namespace airlock::proxyd {

void StatsReporter::start()
{
	send(recorder_.stats());
	tick();
}

void StatsReporter::stop()
{
	if (stopped_)
		return;
	stopped_ = true;
	timer_.cancel();
	send(recorder_.stats());
}

void StatsReporter::tick()
{
	timer_.expires_after(std::chrono::seconds(1));
	timer_.async_wait([this](const boost::system::error_code& ec) {
		if (ec || stopped_)
			return;
		auto s = recorder_.stats();
		if (!(s == last_))
			send(s);
		tick();
	});
}

void StatsReporter::send(const proxy::WorldStats& s)
{
	proxy::StatsReport r;
	r.stats = s;
	if (::send(fd_, &r, sizeof(r), MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof(r))
		last_ = s;
}

}  // namespace airlock::proxyd
