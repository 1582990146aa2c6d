// The SNI gate alone, without the kernel: its verdict on a ClientHello (the
// rule's name, another name, a wildcard's own name, a name this sandbox did
// not resolve to the address, none), and a gated connection over loopback
// with stubs of the agent (Gate) and the proxy (GateHost): a passed
// connection spliced both ways untouched (through pipes and through the
// buffers), a ClientHello split across reads, and each way a connection is
// denied or ends (another name, bytes that are not TLS, nothing, a cut
// ClientHello, silence, an unreachable destination, the proxy's stop), each
// with the exact reason recorded and reported.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include "../common/openssl_hello.h"
#include "proxy/client_hello.h"
#include "proxy/sni_gate.h"
#include "loopback.h"
#include "util/fd.h"

namespace airlock::proxy {
namespace {

using namespace std::chrono_literals;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr uint16_t kRuleIndex = 3;

using loopback::accept_within;
using loopback::kDeadline;
using loopback::read_n;
using loopback::read_to_eof;
using loopback::readable_within;
using loopback::send_all;

// The agent, as the gate sees it: the rules, the learned name, and a
// connect that starts one to the test's destination listener (or fails).
class StubGate : public Gate {
public:
	explicit StubGate(net::io_context& io) : io_(io) {}

	const GateRule* rule(uint16_t index) const override
	{
		auto it = rules.find(index);
		return it == rules.end() ? nullptr : &it->second;
	}
	std::string learned_name(const Address&) const override
	{
		std::lock_guard lock(m);
		learned_asked++;
		return learned;
	}
	void connect(int, const Origin& o, std::function<void(int fd, int err)> done) override
	{
		int fd = -1, err = connect_error;
		{
			std::lock_guard lock(m);
			connects.push_back(o);
		}
		if (err == 0) {
			sockaddr_in a = loopback::address(destination_port);
			fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
				err = errno;
				::close(fd);
				fd = -1;
			}
		}
		// Later, on the io_context's thread, as the agent's reply comes.
		net::post(io_, [done = std::move(done), fd, err] { done(fd, err); });
	}
	void violation(const Origin&, const std::string& sni, const std::string& reason) override
	{
		std::lock_guard lock(m);
		violations.emplace_back(sni, reason);
	}

	std::map<uint16_t, GateRule> rules;
	std::string learned;
	uint16_t destination_port = 0;
	int connect_error = 0;  // else connect fails with it
	mutable std::mutex m;
	mutable int learned_asked = 0;
	std::vector<Origin> connects;
	std::vector<std::pair<std::string, std::string>> violations;

private:
	net::io_context& io_;
};

// The proxy, as the gate sees it: counts, the record, the pipes' headroom.
class StubHost : public GateHost {
public:
	void count_sni(bool passed) override
	{
		std::lock_guard lock(m);
		(passed ? passed_count : denied_count)++;
	}
	bool may_pipe() const override { return pipes; }
	void record_sni(const Origin&, const SniRecord& r) override
	{
		std::lock_guard lock(m);
		records.push_back(r);
	}
	void forget_gate(GateConnection* c) override
	{
		std::lock_guard lock(m);
		forgotten.push_back(c);
		ended.notify_all();
	}

	bool await_end()
	{
		std::unique_lock lock(m);
		return ended.wait_for(lock, kDeadline, [&] { return !forgotten.empty(); });
	}

	bool pipes = true;
	std::mutex m;
	std::condition_variable ended;
	int passed_count = 0, denied_count = 0;
	std::vector<SniRecord> records;
	std::vector<GateConnection*> forgotten;
};

ClientHello hello_for(const std::string& name)
{
	ClientHello h = parse_client_hello(test::openssl_client_hello({name, {}}));
	EXPECT_EQ(h.status, ClientHello::Status::Ok);
	return h;
}

class SniGateTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		origin_.addr = *parse_address("203.0.113.7");
		origin_.port = 443;
		origin_.rule = kRuleIndex;
		gate_->rules[kRuleIndex] = GateRule{"api.example.com", false};
		gate_->learned = "api.example.com";
		std::tie(listener_, port_) = loopback::listen();
		std::tie(destination_, gate_->destination_port) = loopback::listen();
		ASSERT_TRUE(listener_.valid());
		ASSERT_TRUE(destination_.valid());
	}

	void TearDown() override
	{
		if (thread_.joinable()) {
			io_.stop();
			thread_.join();
		}
		if (conn_)
			conn_->stop();
	}

	// A client connects; the gate takes the accepted end and runs on its
	// own thread.
	void start(std::chrono::milliseconds idle_timeout = kDeadline)
	{
		client_ = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
		sockaddr_in a = loopback::address(port_);
		ASSERT_EQ(::connect(client_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
		int one = 1;
		(void)::setsockopt(client_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		Fd accepted = accept_within(listener_.get());
		ASSERT_TRUE(accepted.valid());
		tcp::socket s(io_);
		s.assign(tcp::v4(), accepted.release());
		conn_ = make_gate_connection(io_, std::move(s), origin_, *gate_->rule(kRuleIndex), gate_, host_,
					     idle_timeout);
		conn_->start();
		thread_ = std::thread([this] { io_.run(); });
	}

	// The one record, once the connection has ended.
	SniRecord ended()
	{
		EXPECT_TRUE(host_->await_end());
		std::lock_guard lock(host_->m);
		EXPECT_EQ(host_->forgotten, std::vector<GateConnection*>{conn_.get()});
		EXPECT_EQ(host_->records.size(), 1u);
		return host_->records.empty() ? SniRecord{} : host_->records[0];
	}

	std::vector<std::pair<std::string, std::string>> violations()
	{
		std::lock_guard lock(gate_->m);
		return gate_->violations;
	}

	size_t connects()
	{
		std::lock_guard lock(gate_->m);
		return gate_->connects.size();
	}

	// A denied connection: closed with nothing sent back, reported and
	// recorded with the reason, and no socket asked for.
	void expect_denied(const std::string& sni, const std::string& reason)
	{
		SniRecord r = ended();
		EXPECT_FALSE(r.passed);
		EXPECT_EQ(r.sni, sni);
		EXPECT_EQ(r.reason, reason);
		EXPECT_EQ(r.upstream_error, "");
		EXPECT_EQ(r.bytes_out, 0u);
		EXPECT_EQ(r.bytes_back, 0u);
		EXPECT_EQ(read_to_eof(client_.get()), std::string());
		EXPECT_EQ(violations(), (std::vector<std::pair<std::string, std::string>>{{sni, reason}}));
		EXPECT_EQ(connects(), 0u);
		std::lock_guard lock(host_->m);
		EXPECT_EQ(host_->denied_count, 1);
		EXPECT_EQ(host_->passed_count, 0);
	}

	// A passed connection: the destination reads the ClientHello, then
	// each side's bytes reach the other, and each side's end too.
	void expect_spliced(const std::string& hello)
	{
		Fd dst = accept_within(destination_.get());
		ASSERT_TRUE(dst.valid());
		EXPECT_EQ(read_n(dst.get(), hello.size()), hello);
		send_all(dst.get(), "pong");
		EXPECT_EQ(read_n(client_.get(), 4), "pong");
		send_all(client_.get(), "ping");
		EXPECT_EQ(read_n(dst.get(), 4), "ping");
		::shutdown(client_.get(), SHUT_WR);
		EXPECT_EQ(read_to_eof(dst.get()), std::string());
		send_all(dst.get(), "bye");
		dst.reset();
		EXPECT_EQ(read_to_eof(client_.get()), "bye");
		SniRecord r = ended();
		EXPECT_TRUE(r.passed);
		EXPECT_EQ(r.sni, "api.example.com");
		EXPECT_EQ(r.reason, "");
		EXPECT_EQ(r.upstream_error, "");
		EXPECT_EQ(r.bytes_out, hello.size() + 4);
		EXPECT_EQ(r.bytes_back, 7u);
		EXPECT_TRUE(violations().empty());
		ASSERT_EQ(connects(), 1u);
		EXPECT_EQ(gate_->connects[0].addr, origin_.addr);
		EXPECT_EQ(gate_->connects[0].rule, kRuleIndex);
		std::lock_guard lock(host_->m);
		EXPECT_EQ(host_->passed_count, 1);
		EXPECT_EQ(host_->denied_count, 0);
	}

	net::io_context io_;
	std::shared_ptr<StubGate> gate_ = std::make_shared<StubGate>(io_);
	std::shared_ptr<StubHost> host_ = std::make_shared<StubHost>();
	Origin origin_;
	Fd listener_, destination_, client_;
	uint16_t port_ = 0;
	std::shared_ptr<GateConnection> conn_;
	std::thread thread_;
};

// The verdict alone.

TEST_F(SniGateTest, TheRulesNameResolvedForTheAddressPasses)
{
	EXPECT_EQ(judge_client_hello(hello_for("api.example.com"), *gate_->rule(kRuleIndex), origin_, *gate_), "");
	gate_->learned = "API.Example.COM";  // the learned name as the answer spelled it
	EXPECT_EQ(judge_client_hello(hello_for("api.example.com"), *gate_->rule(kRuleIndex), origin_, *gate_), "");
}

TEST_F(SniGateTest, AnotherNameIsNotTheRules)
{
	EXPECT_EQ(judge_client_hello(hello_for("evil.example.net"), *gate_->rule(kRuleIndex), origin_, *gate_),
		  "'evil.example.net' is not api.example.com of rule 3");
	EXPECT_EQ(judge_client_hello(hello_for("www.api.example.com"), *gate_->rule(kRuleIndex), origin_, *gate_),
		  "'www.api.example.com' is not api.example.com of rule 3");
	// The learned name is asked only of a name the rule covers.
	EXPECT_EQ(gate_->learned_asked, 0);
}

TEST_F(SniGateTest, AWildcardCoversTheNamesBelowItNotItsOwn)
{
	GateRule below{"example.com", true};
	EXPECT_EQ(judge_client_hello(hello_for("example.com"), below, origin_, *gate_),
		  "'example.com' is not a name below example.com of rule 3");
	EXPECT_EQ(judge_client_hello(hello_for("api.example.com"), below, origin_, *gate_), "");
}

TEST_F(SniGateTest, ANameThisSandboxDidNotResolveToTheAddressIsDenied)
{
	gate_->learned = "";
	EXPECT_EQ(judge_client_hello(hello_for("api.example.com"), *gate_->rule(kRuleIndex), origin_, *gate_),
		  "'api.example.com' did not resolve to 203.0.113.7 for this sandbox (no name did)");
	gate_->learned = "other.example.com";
	EXPECT_EQ(judge_client_hello(hello_for("api.example.com"), *gate_->rule(kRuleIndex), origin_, *gate_),
		  "'api.example.com' did not resolve to 203.0.113.7 for this sandbox ('other.example.com' did)");
}

TEST_F(SniGateTest, AClientHelloThatNamesNoServerIsDenied)
{
	EXPECT_EQ(judge_client_hello(hello_for(""), *gate_->rule(kRuleIndex), origin_, *gate_),
		  "the ClientHello names no server");
}

// A gated connection.

TEST_F(SniGateTest, APassedConnectionIsSplicedBothWaysThroughPipes)
{
	host_->pipes = true;
	start();
	std::string hello = test::openssl_client_hello({"api.example.com", {"h2", "http/1.1"}});
	send_all(client_.get(), hello);
	expect_spliced(hello);
}

TEST_F(SniGateTest, APassedConnectionIsRelayedBothWaysThroughTheBuffers)
{
	host_->pipes = false;  // past the descriptors' headroom
	start();
	std::string hello = test::openssl_client_hello({"api.example.com", {"h2", "http/1.1"}});
	send_all(client_.get(), hello);
	expect_spliced(hello);
}

TEST_F(SniGateTest, AClientHelloSplitAcrossReadsIsJudgedWholeAndSentOnWhole)
{
	start();
	std::string hello = test::openssl_client_hello({"api.example.com", {}});
	ASSERT_GT(hello.size(), 100u);
	// A record header cut in two, then the record cut: three reads, and no
	// socket is asked for before the last.
	send_all(client_.get(), hello.substr(0, 3));
	std::this_thread::sleep_for(50ms);
	send_all(client_.get(), hello.substr(3, 60));
	std::this_thread::sleep_for(50ms);
	EXPECT_EQ(connects(), 0u);
	send_all(client_.get(), hello.substr(63));
	expect_spliced(hello);
}

TEST_F(SniGateTest, AnotherNameIsDeniedAndNothingGoesOn)
{
	start();
	send_all(client_.get(), test::openssl_client_hello({"evil.example.net", {}}));
	expect_denied("evil.example.net", "'evil.example.net' is not api.example.com of rule 3");
	EXPECT_FALSE(readable_within(destination_.get(), 0ms));
}

TEST_F(SniGateTest, AFirstFlightThatIsNotTlsIsDenied)
{
	start();
	send_all(client_.get(), "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
	expect_denied("", "not-tls: the first byte (47) is not a TLS handshake record's (16)");
}

TEST_F(SniGateTest, AConnectionThatSendsNothingIsDenied)
{
	start();
	::shutdown(client_.get(), SHUT_WR);
	expect_denied("", "the connection sent nothing");
}

TEST_F(SniGateTest, AConnectionThatEndsWithinItsClientHelloIsDenied)
{
	start();
	send_all(client_.get(), test::openssl_client_hello({"api.example.com", {}}).substr(0, 10));
	::shutdown(client_.get(), SHUT_WR);
	expect_denied("", "the connection ended within its first 10 bytes, before a whole ClientHello");
}

TEST_F(SniGateTest, ASilentConnectionIsDeniedAtTheIdleTimeout)
{
	auto begin = std::chrono::steady_clock::now();
	start(200ms);
	expect_denied("", "the ClientHello or the destination took longer than the idle timeout");
	EXPECT_GE(std::chrono::steady_clock::now() - begin, 200ms);
}

TEST_F(SniGateTest, AnUnreachableDestinationIsRecordedButIsNoViolation)
{
	gate_->connect_error = ECONNREFUSED;
	start();
	send_all(client_.get(), test::openssl_client_hello({"api.example.com", {}}));
	SniRecord r = ended();
	EXPECT_FALSE(r.passed);
	EXPECT_EQ(r.sni, "api.example.com");
	EXPECT_EQ(r.reason, "");
	EXPECT_EQ(r.upstream_error, "Connection refused");
	EXPECT_EQ(r.bytes_out, 0u);
	EXPECT_EQ(read_to_eof(client_.get()), std::string());
	EXPECT_TRUE(violations().empty());
	EXPECT_EQ(connects(), 1u);
	std::lock_guard lock(host_->m);
	EXPECT_EQ(host_->passed_count, 0);
	EXPECT_EQ(host_->denied_count, 0);
}

TEST_F(SniGateTest, TheProxysStopRecordsAWaitingConnectionWithoutAViolation)
{
	start();
	std::this_thread::sleep_for(50ms);
	net::post(io_, [c = conn_] { c->stop(); });
	SniRecord r = ended();
	EXPECT_FALSE(r.passed);
	EXPECT_EQ(r.sni, "");
	EXPECT_EQ(r.reason, "");
	EXPECT_EQ(read_to_eof(client_.get()), std::string());
	EXPECT_TRUE(violations().empty());
	std::lock_guard lock(host_->m);
	EXPECT_EQ(host_->denied_count, 0);
}

}  // namespace
}  // namespace airlock::proxy
