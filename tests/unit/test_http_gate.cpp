// The HTTP gate on plain HTTP, without the kernel (proxy/http_gate.h): a
// gated connection over loopback with stubs of the agent (Gate) and the
// proxy (HttpGateHost), to an origin that writes down every request it
// gets. Allowed requests reach it written anew, the injected credential in
// place of the sandbox's, two on one kept-alive connection; each refusal
// (entry, path, secret, Host, smuggling, size) is answered by the gate with
// its status and reason, reported, recorded, and the origin gets nothing.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "gate/http1.h"
#include "policy/policy.h"
#include "policy_text.h"
#include "proxy/http_gate.h"
#include "gate_stubs.h"
#include "loopback.h"
#include "util/fd.h"

namespace airlock::proxy {
namespace {

using namespace std::chrono_literals;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using loopback::read_n;
using loopback::read_to_eof;
using loopback::send_all;
using namespace gate_stubs;

class HttpGateTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		auto [fd, port] = loopback::listen();
		listener_ = std::move(fd);
		port_ = port;
		gate_ = std::make_shared<StubGate>(io_, origin_.port());
		host_ = std::make_shared<StubHost>(wiki_rule());
		thread_ = std::thread([this] { io_.run(); });
	}
	void TearDown() override
	{
		work_.reset();
		net::post(io_, [this] {
			for (auto& c : conns_)
				c->stop();
		});
		thread_.join();
	}

	// The sandbox's side of one gated connection.
	Fd open()
	{
		Fd client = loopback::connect(port_);
		int accepted = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
		net::post(io_, [this, accepted] {
			proxy::Origin o;
			o.addr = *parse_address("127.0.0.1");
			o.port = origin_.port();
			o.rule = 0;
			auto c = make_http_gate_connection(io_, tcp::socket(io_, tcp::v4(), accepted), o, gate_, host_,
							   nullptr, HttpGateLimits{5s, 1 << 20});
			conns_.push_back(c);
			c->start();
		});
		return client;
	}

	// The whole answer to `requests` sent on one connection, the client's
	// side shut after them.
	std::string exchange(const std::string& requests)
	{
		Fd c = open();
		send_all(c.get(), requests);
		::shutdown(c.get(), SHUT_WR);
		return read_to_eof(c.get()).value_or("(no end within the deadline)");
	}

	std::vector<GateRequestRecord> records()
	{
		std::lock_guard lock(host_->mu);
		return host_->records;
	}
	std::vector<std::string> violations()
	{
		std::lock_guard lock(gate_->mu);
		return gate_->violations;
	}

	OriginServer origin_;
	net::io_context io_;
	std::optional<net::executor_work_guard<net::io_context::executor_type>> work_{net::make_work_guard(io_)};
	Fd listener_;
	uint16_t port_ = 0;
	std::shared_ptr<StubGate> gate_;
	std::shared_ptr<StubHost> host_;
	std::vector<std::shared_ptr<HttpGateConnection>> conns_;
	std::thread thread_;
};

const std::string kHost = "Host: wiki.example.org\r\n";

TEST_F(HttpGateTest, AllowedRequestsGoUpstreamWrittenAnewWithTheCredentialInjected)
{
	std::string answer = exchange(
		"GET /wiki/%4dain_Page?x=a+b HTTP/1.1\r\n" + kHost +
		"Authorization: Bearer agent-made\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\r\n"
		"HEAD /wiki/chunked HTTP/1.1\r\n" +
		kHost +
		"\r\n"
		"GET /wiki/chunked HTTP/1.1\r\n" +
		kHost + "Connection: close\r\n\r\n");
	// A HEAD's answer has no body: its framing headers are the origin's
	// to describe a GET, and hop-by-hop.
	EXPECT_EQ(answer, "HTTP/1.1 200 OK\r\nContent-Length: 31\r\n\r\nsaw GET /wiki/Main_Page?x=a%20b"
			  "HTTP/1.1 200 OK\r\n\r\n"
			  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
			  "15\r\nsaw GET /wiki/chunked\r\n0\r\n\r\n");
	auto seen = origin_.seen();
	ASSERT_EQ(seen.size(), 3u);
	// Host names the port: the origin's is not HTTP's.
	const std::string host = "Host: wiki.example.org:" + std::to_string(origin_.port()) + "\r\n";
	EXPECT_EQ(seen[0],
		  "GET /wiki/Main_Page?x=a%20b HTTP/1.1\r\n" + host + "Authorization: Bearer " + kToken + "\r\n\r\n");
	EXPECT_EQ(seen[1], "HEAD /wiki/chunked HTTP/1.1\r\n" + host + "Authorization: Bearer " + kToken + "\r\n\r\n");
	auto recs = records();
	ASSERT_EQ(recs.size(), 3u);
	EXPECT_EQ(recs[0].status, 200u);
	EXPECT_EQ(recs[0].entry, 0u);
	EXPECT_EQ(recs[0].path, "/wiki/Main_Page");
	EXPECT_EQ(recs[0].replaced, std::vector<std::string>{"authorization"});
	EXPECT_EQ(recs[0].reason, "");
	EXPECT_EQ(violations(), std::vector<std::string>{});
	EXPECT_EQ(answer.find(kToken), std::string::npos) << "the sandbox never reads the credential";
}

TEST_F(HttpGateTest, AJsonBodyInChunksIsJudgedWhole)
{
	std::string body = R"({"to": "ann@example.org", "text": "hi"})";
	std::string answer = exchange(
		"POST /api/mail/send HTTP/1.1\r\n" + kHost +
		"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
		fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body));
	EXPECT_EQ(answer.substr(0, 15), "HTTP/1.1 200 OK");
	auto seen = origin_.seen();
	ASSERT_EQ(seen.size(), 1u);
	EXPECT_EQ(seen[0], "POST /api/mail/send HTTP/1.1\r\nHost: wiki.example.org:" + std::to_string(origin_.port()) +
				   "\r\nContent-Type: application/json\r\n"
				   "Authorization: Bearer " +
				   kToken + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
}

struct Refusal {
	std::string request;
	unsigned status;
	std::string reason;
	std::string detail;
};

TEST_F(HttpGateTest, EachRefusalIsAnsweredByTheGateAndNothingGoesUpstream)
{
	const std::vector<Refusal> cases = {
		{"POST /wiki/x HTTP/1.1\r\n" + kHost + "Content-Length: 0\r\n\r\n", 403, "http-deny",
		 "no entry allows POST /wiki/x"},
		{"GET /wiki/%2e%2e/admin HTTP/1.1\r\n" + kHost + "\r\n", 403, "http-path", "a '..' segment"},
		{"GET /wiki/..%2fadmin HTTP/1.1\r\n" + kHost + "\r\n", 403, "http-path", "an encoded '/' (%2F)"},
		{"GET /wiki/x?t=" + kToken + " HTTP/1.1\r\n" + kHost + "\r\n", 403, "secret",
		 "the request carries secret 'wiki-token'"},
		{"GET /wiki/x HTTP/1.1\r\n" + kHost + "X-Note: czNjcjN0LWRhdGFiYXNlLXBhc3N3b3Jk\r\n\r\n", 403, "secret",
		 "the request carries secret 'env/DB'"},
		{"POST /api/mail/send HTTP/1.1\r\n" + kHost +
			 "Content-Type: application/json\r\nContent-Length: 37\r\n\r\n"
			 R"({"to": "eve@evil.test", "x": "....."})",
		 403, "http-deny", "entry 1: body field /to is \"eve@evil.test\", which is not '*@example.org'"},
		{"GET /wiki/x HTTP/1.1\r\nHost: other.example.org\r\n\r\n", 400, "http-host",
		 "Host 'other.example.org' is not the rule's name"},
		{"GET /wiki/x HTTP/1.1\r\nHost: wiki.example.org:1\r\n\r\n", 400, "http-host",
		 "Host names port 1, the connection went to " + std::to_string(origin_.port())},
		{"POST /api/mail/send HTTP/1.1\r\n" + kHost +
			 "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		 400, "http-malformed", "both Content-Length and Transfer-Encoding"},
		{"POST /api/mail/send HTTP/1.1\r\n" + kHost + "Content-Length: 9999999\r\n\r\n", 413, "http-body-size",
		 "the body's 9999999 bytes are more than 1048576"},
	};
	for (const Refusal& r : cases) {
		std::string answer = exchange(r.request);
		std::string status_line = answer.substr(0, answer.find("\r\n"));
		EXPECT_EQ(status_line.substr(0, 12), "HTTP/1.1 " + std::to_string(r.status)) << r.request;
		EXPECT_NE(answer.find("\"reason\":\"" + r.reason + "\""), std::string::npos) << answer;
		EXPECT_EQ(answer.find(kToken), std::string::npos) << "a refusal never shows a secret";
		auto recs = records();
		ASSERT_FALSE(recs.empty());
		EXPECT_EQ(recs.back().reason, r.reason) << r.request;
		EXPECT_EQ(recs.back().detail, r.detail) << r.request;
		EXPECT_EQ(recs.back().status, r.status);
		auto v = violations();
		ASSERT_FALSE(v.empty());
		EXPECT_EQ(v.back(), r.reason + ": " + r.detail);
	}
	EXPECT_EQ(origin_.seen().size(), 0u) << "nothing of a refused request goes upstream";
}

// A refusal of a request read whole leaves a kept-alive connection open:
// the next request on it is judged on its own and may pass. A refusal of
// one not read whole (a body too large to read) ends it: what follows is
// not told apart from the rest of that body.
TEST_F(HttpGateTest, ARefusedRequestReadWholeLeavesTheConnectionOpen)
{
	std::string answer = exchange("POST /wiki/x HTTP/1.1\r\n" + kHost + "Content-Length: 3\r\n\r\nabc" +
				      "GET /wiki/y HTTP/1.1\r\n" + kHost + "\r\n");
	EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 403") << answer;
	EXPECT_EQ(answer.find("Connection: close"), std::string::npos) << answer;
	EXPECT_NE(answer.find("HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nsaw GET /wiki/y"), std::string::npos)
		<< answer;
	EXPECT_EQ(origin_.seen().size(), 1u);

	answer = exchange("POST /api/mail/send HTTP/1.1\r\n" + kHost + "Content-Length: 9999999\r\n\r\n" +
			  "GET /wiki/z HTTP/1.1\r\n" + kHost + "\r\n");
	EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer;
	EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
	EXPECT_EQ(answer.find("saw GET /wiki/z"), std::string::npos) << answer;
	EXPECT_EQ(origin_.seen().size(), 1u);
}

// A reload between two requests of one kept-alive connection: the first
// is judged under the entries it arrived under, the second under the new
// ones, on the same connection.
TEST_F(HttpGateTest, AReloadAppliesToTheNextRequestOfAConnection)
{
	Fd c = open();
	send_all(c.get(), "GET /wiki/x HTTP/1.1\r\n" + kHost + "\r\n");
	const std::string first = "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nsaw GET /wiki/x";
	EXPECT_EQ(read_n(c.get(), first.size()), first);

	Policy p = policy_test::parse_ok(R"({"version": 1, "name": "t", "rules": [{"action": "allow",
	  "domain": "wiki.example.org", "protocol": "tcp", "http": [{"methods": ["GET"], "path": "/talk/*"}]}]})");
	auto next = std::make_shared<HttpGateSetup>();
	next->rules.emplace(0, HttpGateRule{"wiki.example.org", false, *p.rules.at(0).http, ""});
	host_->set_setup(next);

	send_all(c.get(), "GET /wiki/y HTTP/1.1\r\n" + kHost + "\r\n" + "GET /talk/z HTTP/1.1\r\n" + kHost +
				  "Connection: close\r\n\r\n");
	::shutdown(c.get(), SHUT_WR);
	std::string rest = read_to_eof(c.get()).value_or("(no end)");
	EXPECT_EQ(rest.substr(0, 12), "HTTP/1.1 403") << rest;
	EXPECT_NE(rest.find("no entry allows GET /wiki/y"), std::string::npos) << rest;
	EXPECT_NE(rest.find("saw GET /talk/z"), std::string::npos) << rest;
	EXPECT_EQ(origin_.seen().size(), 2u);
}

}  // namespace
}  // namespace airlock::proxy
