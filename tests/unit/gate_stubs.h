#pragma once
// The stubs the HTTP gate's tests share (test_http_gate.cpp on plain HTTP,
// test_http_gate_tls.cpp on TLS): the agent's side (Gate: the learned name,
// a socket to the origin) and the proxy's (HttpGateHost: the rule, rates,
// never-send patterns, secrets, records), and an origin on loopback that
// writes down every request it gets.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "gate/http1.h"
#include "loopback.h"
#include "policy/policy.h"
#include "policy_text.h"
#include "proxy/http_gate.h"
#include "util/fd.h"

namespace airlock::proxy::gate_stubs {

using namespace std::chrono_literals;
namespace net = boost::asio;

using loopback::readable_within;
using loopback::send_all;

inline const std::string kToken = "wk_live_7Hq2Zp9RtX4m";
inline const std::string kEnvSecret = "s3cr3t-database-password";

// An origin on loopback: every request's head and body, in order; each
// answered 200 with "saw METHOD TARGET" (chunked when the target says so).
class OriginServer {
public:
	OriginServer()
	{
		auto [fd, port] = loopback::listen();
		listener_ = std::move(fd);
		port_ = port;
		thread_ = std::thread([this] { serve(); });
	}
	~OriginServer()
	{
		stop_ = true;
		::shutdown(listener_.get(), SHUT_RDWR);
		thread_.join();
	}
	uint16_t port() const { return port_; }
	std::vector<std::string> seen()
	{
		std::lock_guard lock(mu_);
		return seen_;
	}

private:
	void serve()
	{
		while (!stop_) {
			if (!readable_within(listener_.get(), 100ms))
				continue;
			Fd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
			if (!c.valid())
				continue;
			std::string in;
			for (;;) {
				size_t end = in.find("\r\n\r\n");
				if (end == std::string::npos) {
					if (!readable_within(c.get(), 2000ms))
						break;
					char buf[4096];
					ssize_t n = ::recv(c.get(), buf, sizeof(buf), 0);
					if (n <= 0)
						break;
					in.append(buf, static_cast<size_t>(n));
					continue;
				}
				std::string head = in.substr(0, end + 4);
				auto r = gate::read_request_head(head);
				size_t len = r && r->body == gate::RequestHead::Body::Length ? r->length : 0;
				while (in.size() < end + 4 + len && readable_within(c.get(), 2000ms)) {
					char buf[4096];
					ssize_t n = ::recv(c.get(), buf, sizeof(buf), 0);
					if (n <= 0)
						break;
					in.append(buf, static_cast<size_t>(n));
				}
				{
					std::lock_guard lock(mu_);
					seen_.push_back(in.substr(0, end + 4 + len));
				}
				in.erase(0, end + 4 + len);
				std::string line = head.substr(0, head.find("\r\n"));
				std::string body = "saw " + line.substr(0, line.rfind(' '));
				if (line.rfind("HEAD ", 0) == 0)
					send_all(c.get(), "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
				else if (line.find("/chunked") != std::string::npos)
					send_all(c.get(),
						 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
							 fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body));
				else
					send_all(c.get(), fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}",
								      body.size(), body));
			}
		}
	}

	Fd listener_;
	uint16_t port_ = 0;
	std::atomic<bool> stop_{false};
	std::thread thread_;
	std::mutex mu_;
	std::vector<std::string> seen_;
};

class StubGate : public Gate {
public:
	StubGate(net::io_context& io, uint16_t origin_port) : io_(io), port_(origin_port) {}
	const GateRule* rule(uint16_t) const override { return nullptr; }
	std::string learned_name(const Address&) const override { return "wiki.example.org"; }
	void connect(int, const proxy::Origin&, std::function<void(int, int)> done) override
	{
		Fd fd = loopback::connect(port_, true);
		int raw = fd.release();
		net::post(io_, [raw, done] { done(raw, raw < 0 ? ECONNREFUSED : 0); });
	}
	void violation(const proxy::Origin&, const std::string&, const std::string& reason) override
	{
		std::lock_guard lock(mu);
		violations.push_back(reason);
	}
	std::mutex mu;
	std::vector<std::string> violations;

private:
	net::io_context& io_;
	uint16_t port_;
};

class StubHost : public HttpGateHost {
public:
	explicit StubHost(HttpGateRule r) : setup_(std::make_shared<HttpGateSetup>())
	{
		setup_->rules.emplace(0, std::move(r));
		setup_->never_send = gate::NeverSend({{"wiki-token", kToken}, {"env/DB", kEnvSecret}});
		setup_->injectable["wiki-token"] = kToken;
	}
	std::shared_ptr<const HttpGateSetup> setup() const override
	{
		std::lock_guard lock(mu);
		return setup_;
	}
	// A reload: the next request is judged under s.
	void set_setup(std::shared_ptr<HttpGateSetup> s)
	{
		std::lock_guard lock(mu);
		setup_ = std::move(s);
	}
	gate::RateTable& rates() override { return rates_; }
	void record_request(const proxy::Origin&, const GateRequestRecord& r) override
	{
		std::lock_guard lock(mu);
		records.push_back(r);
		recorded.notify_all();
	}
	// Whether n records are in within the deadline (a connection the
	// client saw end, say in its handshake, may be recorded just after).
	bool wait_for_records(size_t n, std::chrono::milliseconds deadline = loopback::kDeadline)
	{
		std::unique_lock lock(mu);
		return recorded.wait_for(lock, deadline, [&] { return records.size() >= n; });
	}
	void forget_http(HttpGateConnection*) override {}
	mutable std::mutex mu;
	std::condition_variable recorded;
	std::vector<GateRequestRecord> records;

private:
	std::shared_ptr<HttpGateSetup> setup_;
	gate::RateTable rates_;
};

inline HttpGateRule wiki_rule()
{
	Policy p = policy_test::parse_ok(R"({"version": 1, "name": "t",
	  "secrets": {"wiki-token": {"file": "/etc/airlock/wiki-token"}},
	  "rules": [{"action": "allow", "domain": "wiki.example.org", "protocol": "tcp", "http": [
	    {"methods": ["GET", "HEAD"], "path": "/wiki/*"},
	    {"methods": ["POST"], "path": "/api/mail/send", "json": {"/to": "*@example.org"}, "max_body_bytes": 4096}
	  ], "inject": {"Authorization": "Bearer ${secret:wiki-token}"}}]})");
	return HttpGateRule{"wiki.example.org", false, *p.rules.at(0).http, ""};
}

}  // namespace airlock::proxy::gate_stubs
