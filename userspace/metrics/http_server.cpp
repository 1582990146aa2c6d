#include "metrics/http_server.h"

#include <chrono>
#include <utility>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include "util/error.h"

namespace airlock {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// One connection: read one request, write one answer, close.
class Session : public std::enable_shared_from_this<Session> {
public:
	Session(tcp::socket s, const MetricsServer::Render& render, std::shared_ptr<std::atomic<int>> open)
	    : stream_(std::move(s)), render_(render), open_(std::move(open))
	{
	}
	~Session() { --*open_; }

	void start()
	{
		parser_.header_limit(8192);
		parser_.body_limit(0);
		stream_.expires_after(std::chrono::seconds(5));
		http::async_read(stream_, buf_, parser_,
				 [self = shared_from_this()](beast::error_code ec, size_t) { self->answer(ec); });
	}

private:
	void answer(beast::error_code ec)
	{
		if (ec)
			return;  // timed out, closed, or not HTTP: nothing to answer
		const auto& req = parser_.get();
		std::string_view target(req.target().data(), req.target().size());
		target = target.substr(0, target.find('?'));
		res_.version(req.version());
		res_.keep_alive(false);
		res_.set(http::field::server, "airlock");
		if (target != "/metrics") {
			res_.result(http::status::not_found);
			res_.set(http::field::content_type, "text/plain; charset=utf-8");
			res_.body() = "not found: airlock serves /metrics\n";
		} else if (req.method() != http::verb::get && req.method() != http::verb::head) {
			res_.result(http::status::method_not_allowed);
			res_.set(http::field::allow, "GET, HEAD");
			res_.set(http::field::content_type, "text/plain; charset=utf-8");
			res_.body() = "method not allowed\n";
		} else {
			res_.result(http::status::ok);
			res_.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
			try {
				res_.body() = render_();
			} catch (const std::exception& e) {
				spdlog::warn("metrics: {}", e.what());
				res_.result(http::status::internal_server_error);
				res_.body() = "cannot collect the metrics\n";
			}
			if (req.method() == http::verb::head) {
				res_.content_length(res_.body().size());
				res_.body().clear();
			}
		}
		if (req.method() != http::verb::head || res_.result() != http::status::ok)
			res_.prepare_payload();
		stream_.expires_after(std::chrono::seconds(5));
		http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code, size_t) {
			beast::error_code ignored;
			self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
		});
	}

	beast::tcp_stream stream_;
	beast::flat_buffer buf_;
	http::request_parser<http::empty_body> parser_;
	http::response<http::string_body> res_;
	const MetricsServer::Render& render_;
	std::shared_ptr<std::atomic<int>> open_;
};

tcp::endpoint endpoint_of(const std::string& addr)
{
	auto colon = addr.rfind(':');
	if (colon == std::string::npos || colon + 1 == addr.size())
		fail("metrics address '{}': give HOST:PORT (127.0.0.1:9464, [::1]:9464)", addr);
	std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
	if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
		host = host.substr(1, host.size() - 2);
	unsigned long p = 0;
	size_t used = 0;
	try {
		p = std::stoul(port, &used);
	} catch (const std::exception&) {
		used = 0;
	}
	if (used != port.size() || p == 0 || p > 65535)
		fail("metrics address '{}': '{}' is not a port (1-65535)", addr, port);
	beast::error_code ec;
	auto ip = asio::ip::make_address(host, ec);
	if (ec)
		fail("metrics address '{}': '{}' is not an IP address", addr, host);
	return {ip, static_cast<unsigned short>(p)};
}

}  // namespace

MetricsServer::MetricsServer(const std::string& addr, Render render) : render_(std::move(render))
{
	tcp::endpoint ep = endpoint_of(addr);
	beast::error_code ec;
	acceptor_.open(ep.protocol(), ec);
	if (!ec)
		acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
	if (!ec)
		acceptor_.bind(ep, ec);
	if (ec)
		fail("cannot listen on {}: {}", addr, ec.message());
	acceptor_.listen(asio::socket_base::max_listen_connections, ec);
	if (ec)
		fail("cannot listen on {}: {}", addr, ec.message());
	accept();
	thread_ = std::thread([this] { ioc_.run(); });
}

MetricsServer::~MetricsServer()
{
	ioc_.stop();
	if (thread_.joinable())
		thread_.join();
}

void MetricsServer::accept()
{
	acceptor_.async_accept(ioc_, [this](beast::error_code ec, tcp::socket s) {
		if (!ec) {
			if (++*open_ > kMaxConnections) {
				--*open_;
				beast::error_code ignored;
				s.close(ignored);
			} else {
				std::make_shared<Session>(std::move(s), render_, open_)->start();
			}
		}
		accept();
	});
}

}  // namespace airlock
