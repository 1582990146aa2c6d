// The HTTP gate on TLS, without the kernel (proxy/http_gate.h,
// proxy/gate_tls.h): the sandbox's client verifies a leaf of the sandbox's
// CA for the name it asked for; the gate verifies the origin against the
// rule's upstream_ca and the same name. A server name outside the rule gets
// no certificate at all; a Host other than the server name is refused; an
// origin whose certificate does not verify, for its issuer or its name,
// gets no request and the sandbox a 502 that says why.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include "gate_stubs.h"
#include "loopback.h"
#include "proxy/gate_tls.h"
#include "proxy/http_gate.h"
#include "proxy/tls.h"
#include "util/fd.h"

namespace airlock::proxy {
namespace {

using namespace std::chrono_literals;
using namespace gate_stubs;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;

const WorldCa& origin_ca()
{
	static const WorldCa ca = make_world_ca("test origins");
	return ca;
}
const WorldCa& sandbox_ca()
{
	static const WorldCa ca = make_world_ca("sandbox");
	return ca;
}

void receive_timeout(int fd, std::chrono::seconds s)
{
	timeval tv{static_cast<time_t>(s.count()), 0};
	::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

// A TLS origin on loopback whose certificate names `name`, issued by the
// test origins' CA: it counts handshakes and writes down each request; each
// is answered 200 with "saw METHOD TARGET".
class TlsOrigin {
public:
	explicit TlsOrigin(std::string name)
	    : name_(std::move(name)), terminator_(origin_ca().cert_pem, origin_ca().key_pem),
	      ctx_(SSL_CTX_up_ref(terminator_.context()) == 1 ? terminator_.context() : nullptr)
	{
		auto [fd, port] = loopback::listen();
		listener_ = std::move(fd);
		port_ = port;
		thread_ = std::thread([this] { serve(); });
	}
	~TlsOrigin()
	{
		stop_ = true;
		::shutdown(listener_.get(), SHUT_RDWR);
		thread_.join();
	}
	uint16_t port() const { return port_; }
	int handshakes() const { return handshakes_; }
	std::vector<std::string> seen()
	{
		std::lock_guard lock(mu_);
		return seen_;
	}

private:
	void serve()
	{
		net::io_context io;
		while (!stop_) {
			if (!loopback::readable_within(listener_.get(), 100ms))
				continue;
			int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
			if (c < 0)
				continue;
			receive_timeout(c, 2s);
			ssl::stream<tcp::socket> s(tcp::socket(io, tcp::v4(), c), ctx_);
			terminator_.use_leaf(s.native_handle(), name_, *parse_address("127.0.0.1"));
			error_code ec;
			s.handshake(ssl::stream_base::server, ec);
			if (ec)
				continue;
			++handshakes_;
			std::string in;
			char buf[4096];
			while (in.find("\r\n\r\n") == std::string::npos) {
				size_t n = s.read_some(net::buffer(buf), ec);
				if (ec)
					break;
				in.append(buf, n);
			}
			if (in.find("\r\n\r\n") == std::string::npos)
				continue;
			{
				std::lock_guard lock(mu_);
				seen_.push_back(in);
			}
			std::string line = in.substr(0, in.find("\r\n"));
			std::string body = "saw " + line.substr(0, line.rfind(' '));
			net::write(s,
				   net::buffer(fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}",
							   body.size(), body)),
				   ec);
		}
	}

	std::string name_;
	TlsTerminator terminator_;
	ssl::context ctx_;
	Fd listener_;
	uint16_t port_ = 0;
	std::atomic<bool> stop_{false};
	std::atomic<int> handshakes_{0};
	std::thread thread_;
	std::mutex mu_;
	std::vector<std::string> seen_;
};

// What the sandbox's client got: whether its handshake verified, and the
// bytes of the answer until the gate closed.
struct Answer {
	bool handshake = false;
	std::string error;
	std::string bytes;
};

class HttpGateTlsTest : public ::testing::Test {
protected:
	// roots: the system's roots file ("" OpenSSL's default).
	void start(const std::string& origin_name, bool trust_origin_ca, const std::string& roots = "")
	{
		origin_ = std::make_unique<TlsOrigin>(origin_name);
		auto [fd, port] = loopback::listen();
		listener_ = std::move(fd);
		port_ = port;
		gate_ = std::make_shared<StubGate>(io_, origin_->port());
		HttpGateRule rule = wiki_rule();
		if (trust_origin_ca)
			rule.upstream_ca_pem = origin_ca().cert_pem;
		host_ = std::make_shared<StubHost>(rule);
		tls_ = std::make_shared<GateTls>(std::make_shared<TlsTerminator>(sandbox_ca().cert_pem,
										 sandbox_ca().key_pem),
						 roots);
		thread_ = std::thread([this] { io_.run(); });
	}
	void TearDown() override
	{
		work_.reset();
		net::post(io_, [this] {
			for (auto& c : conns_)
				c->stop();
		});
		if (thread_.joinable())
			thread_.join();
	}

	// One request over TLS naming `sni`, the client trusting the sandbox's
	// CA alone and checking the leaf names `sni`.
	Answer request(const std::string& sni, const std::string& request)
	{
		Fd client = loopback::connect(port_);
		int accepted = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
		net::post(io_, [this, accepted] {
			proxy::Origin o;
			o.addr = *parse_address("127.0.0.1");
			o.port = origin_->port();
			auto c = make_http_gate_connection(io_, tcp::socket(io_, tcp::v4(), accepted), o, gate_, host_,
							   tls_, HttpGateLimits{5s, 1 << 20});
			conns_.push_back(c);
			c->start();
		});
		receive_timeout(client.get(), 10s);
		net::io_context io;
		ssl::context ctx(ssl::context::tls_client);
		ctx.add_certificate_authority(net::buffer(sandbox_ca().cert_pem));
		ctx.set_verify_mode(ssl::verify_peer);
		ssl::stream<tcp::socket> s(tcp::socket(io, tcp::v4(), client.release()), ctx);
		SSL_set_tlsext_host_name(s.native_handle(), sni.c_str());
		s.set_verify_callback(ssl::host_name_verification(sni));
		Answer a;
		error_code ec;
		s.handshake(ssl::stream_base::client, ec);
		if (ec) {
			a.error = ec.message();
			return a;
		}
		a.handshake = true;
		net::write(s, net::buffer(request), ec);
		char buf[4096];
		while (!ec) {
			size_t n = s.read_some(net::buffer(buf), ec);
			a.bytes.append(buf, n);
		}
		return a;
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

	std::unique_ptr<TlsOrigin> origin_;
	net::io_context io_;
	std::optional<net::executor_work_guard<net::io_context::executor_type>> work_{net::make_work_guard(io_)};
	Fd listener_;
	uint16_t port_ = 0;
	std::shared_ptr<StubGate> gate_;
	std::shared_ptr<StubHost> host_;
	std::shared_ptr<GateTls> tls_;
	std::vector<std::shared_ptr<HttpGateConnection>> conns_;
	std::thread thread_;
};

const std::string kGet = "GET /wiki/Main HTTP/1.1\r\nHost: wiki.example.org\r\nConnection: close\r\n\r\n";

TEST_F(HttpGateTlsTest, AllowedRequestReachesTheVerifiedOriginWithTheCredentialInjected)
{
	start("wiki.example.org", true);
	Answer a = request("wiki.example.org", kGet);
	ASSERT_TRUE(a.handshake) << a.error;
	EXPECT_EQ(a.bytes.substr(0, a.bytes.find("\r\n")), "HTTP/1.1 200 OK");
	EXPECT_NE(a.bytes.find("\r\n\r\nsaw GET /wiki/Main"), std::string::npos) << a.bytes;
	EXPECT_EQ(a.bytes.find(kToken), std::string::npos);
	auto seen = origin_->seen();
	ASSERT_EQ(seen.size(), 1u);
	// Written anew: the origin's port named (it is not 443), the credential
	// added, the sandbox's Connection not passed on (hop-by-hop).
	EXPECT_EQ(seen[0],
		  fmt::format("GET /wiki/Main HTTP/1.1\r\nHost: wiki.example.org:{}\r\nAuthorization: Bearer {}"
			      "\r\n\r\n",
			      origin_->port(), kToken));
	auto r = records();
	ASSERT_EQ(r.size(), 1u);
	EXPECT_EQ(r[0].status, 200u);
	EXPECT_EQ(r[0].reason, "");
	EXPECT_TRUE(violations().empty());
}

TEST_F(HttpGateTlsTest, AServerNameOutsideTheRuleGetsNoCertificateAndNothingIsSent)
{
	start("wiki.example.org", true);
	Answer a = request("mail.example.com", kGet);
	EXPECT_FALSE(a.handshake);
	EXPECT_EQ(origin_->handshakes(), 0);
	// The client sees the handshake fail before the gate has recorded it.
	ASSERT_TRUE(host_->wait_for_records(1));
	auto r = records();
	ASSERT_EQ(r.size(), 1u);
	EXPECT_EQ(r[0].reason, "tls-name");
	EXPECT_EQ(r[0].detail, "server name 'mail.example.com' is not the rule's name");
	EXPECT_EQ(violations(),
		  std::vector<std::string>{"tls-name: server name 'mail.example.com' is not the rule's name"});
}

TEST_F(HttpGateTlsTest, AHostOtherThanTheServerNameIsRefused)
{
	start("wiki.example.org", true);
	Answer a = request("wiki.example.org",
			   "GET /wiki/Main HTTP/1.1\r\nHost: mail.example.org\r\nConnection: close\r\n\r\n");
	ASSERT_TRUE(a.handshake) << a.error;
	EXPECT_EQ(a.bytes.substr(0, a.bytes.find("\r\n")), "HTTP/1.1 400 Bad Request");
	EXPECT_NE(a.bytes.find("Host 'mail.example.org' is not the TLS server name 'wiki.example.org'"),
		  std::string::npos)
		<< a.bytes;
	EXPECT_EQ(origin_->handshakes(), 0);
	auto r = records();
	ASSERT_EQ(r.size(), 1u);
	EXPECT_EQ(r[0].reason, "http-host");
}

TEST_F(HttpGateTlsTest, AnOriginOutsideTheRootsGetsNoRequestAndTheSandboxA502)
{
	start("wiki.example.org", false);
	Answer a = request("wiki.example.org", kGet);
	ASSERT_TRUE(a.handshake) << a.error;
	EXPECT_EQ(a.bytes.substr(0, a.bytes.find("\r\n")), "HTTP/1.1 502 Bad Gateway");
	EXPECT_NE(a.bytes.find("the origin: certificate not verified (self-signed certificate in certificate chain)"),
		  std::string::npos)
		<< a.bytes;
	EXPECT_TRUE(origin_->seen().empty());
}

TEST_F(HttpGateTlsTest, AnOriginCertificateForAnotherNameGetsNoRequest)
{
	start("other.example.org", true);
	Answer a = request("wiki.example.org", kGet);
	ASSERT_TRUE(a.handshake) << a.error;
	EXPECT_EQ(a.bytes.substr(0, a.bytes.find("\r\n")), "HTTP/1.1 502 Bad Gateway");
	EXPECT_NE(a.bytes.find("the origin: certificate not verified (hostname mismatch)"), std::string::npos)
		<< a.bytes;
	EXPECT_TRUE(origin_->seen().empty());
}

// A system without roots (no such file): the gate still serves, its
// origins verified by the rule's tls.upstream_ca alone; one outside it is
// still refused.
TEST_F(HttpGateTlsTest, WithoutSystemRootsTheRulesRootsStillVerify)
{
	start("wiki.example.org", true, "/nonexistent/airlock-test-roots.pem");
	Answer a = request("wiki.example.org", kGet);
	ASSERT_TRUE(a.handshake) << a.error;
	EXPECT_EQ(a.bytes.substr(0, a.bytes.find("\r\n")), "HTTP/1.1 200 OK") << a.bytes;
	EXPECT_EQ(origin_->seen().size(), 1u);
}

}  // namespace
}  // namespace airlock::proxy
