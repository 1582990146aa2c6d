#pragma once
// The proxy's counts to the agent: once a second while they change, and
// once more as the proxy stops. A report the channel cannot take now is
// dropped: the next one carries the totals.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "proxy/world.h"
#include "proxy/world_stats.h"

namespace airlock::proxyd {

class StatsReporter {
public:
	StatsReporter(boost::asio::io_context& io, const proxy::WorldRecorder& recorder, int control_fd)
	    : timer_(io), recorder_(recorder), fd_(control_fd)
	{
	}

	void start();
	void stop();

private:
	void tick();
	void send(const proxy::WorldStats& s);

	boost::asio::steady_timer timer_;
	const proxy::WorldRecorder& recorder_;
	int fd_;
	proxy::WorldStats last_;
	bool stopped_ = false;
};

}  // namespace airlock::proxyd
