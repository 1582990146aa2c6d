#pragma once
// The /metrics endpoint: a small HTTP/1.1 server on its own thread (Boost
// Beast over Asio), so that a scrape never runs in the daemon's loop and a
// slow scraper never delays a freeze. It answers GET (and HEAD) /metrics
// with what `render` returns, 404 elsewhere, 405 for other methods; one
// request per connection, 5 s to send it, 8 KiB of header at most, and at
// most kMaxConnections open at once (more are closed at once). It exposes
// nothing of its own: every series is one of airlock's.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace airlock {

class MetricsServer {
public:
	using Render = std::function<std::string()>;
	static constexpr int kMaxConnections = 16;

	// Listens on addr ("127.0.0.1:9464", "[::1]:9464"); throws a one-line
	// Error naming the address and the reason (in use, not an address).
	MetricsServer(const std::string& addr, Render render);
	~MetricsServer();
	MetricsServer(const MetricsServer&) = delete;
	MetricsServer& operator=(const MetricsServer&) = delete;

private:
	void accept();

	boost::asio::io_context ioc_{1};
	boost::asio::ip::tcp::acceptor acceptor_{ioc_};
	Render render_;
	std::shared_ptr<std::atomic<int>> open_ = std::make_shared<std::atomic<int>>(0);
	std::thread thread_;
};

}  // namespace airlock
