// The world's recorder with real clients: curl (a GET with a header, a
// POST, a chunked upload, a body past max_body_bytes, a canned response,
// IPv6), Python's http.client over one keep-alive connection, and raw
// sockets (bytes that are not HTTP, a TLS ClientHello from OpenSSL, invalid
// UTF-8, pipelined requests). Its bounds: a connection with no origin, the
// records file's cap, the idle timeout, the bytes of one connection, the
// number of connections; and a silent client that holds up no other.
// Records are awaited by polling the file against a deadline.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../common/openssl_hello.h"
#include "gate/never_send.h"
#include "proxy/http_gate.h"
#include "proxy/records.h"
#include "proxy/tls.h"
#include "proxy/world.h"
#include "util/fd.h"

namespace airlock::proxy {
namespace {

using namespace std::chrono_literals;
using ojson = nlohmann::ordered_json;

constexpr auto kDeadline = 10s;

// Polls cond every 5 ms until it holds or the deadline passes.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds deadline = kDeadline)
{
	auto end = std::chrono::steady_clock::now() + deadline;
	while (!cond()) {
		if (std::chrono::steady_clock::now() > end)
			return false;
		std::this_thread::sleep_for(5ms);
	}
	return true;
}

std::vector<std::string> keys(const ojson& j)
{
	std::vector<std::string> k;
	for (auto it = j.begin(); it != j.end(); ++it)
		k.push_back(it.key());
	return k;
}

std::string hex_of(std::string_view s)
{
	std::string out;
	for (unsigned char c : s) {
		static constexpr char d[] = "0123456789abcdef";
		out += d[c >> 4];
		out += d[c & 15];
	}
	return out;
}

struct Ran {
	int status = -1;  // exit status, or 128+signal
	std::string out;
};

// argv as a subprocess, stdin from a file, stdout captured, stderr passed on.
Ran run(const std::vector<std::string>& argv, const std::string& stdin_path = "/dev/null")
{
	std::vector<char*> args;
	for (const auto& a : argv)
		args.push_back(const_cast<char*>(a.c_str()));
	args.push_back(nullptr);
	int in = ::open(stdin_path.c_str(), O_RDONLY | O_CLOEXEC);
	int p[2];
	if (in < 0 || ::pipe2(p, O_CLOEXEC) != 0)
		return {};
	pid_t pid = ::fork();
	if (pid == 0) {
		::dup2(in, 0);
		::dup2(p[1], 1);
		::execvp(args[0], args.data());
		::_exit(127);
	}
	::close(in);
	::close(p[1]);
	Ran r;
	char buf[4096];
	ssize_t n;
	while ((n = ::read(p[0], buf, sizeof(buf))) > 0)
		r.out.append(buf, static_cast<size_t>(n));
	::close(p[0]);
	int st = 0;
	::waitpid(pid, &st, 0);
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r;
}

// A listening TCP socket on addr:0 (nullopt: the address cannot be bound).
std::optional<std::pair<int, uint16_t>> listen_on(const char* addr)
{
	bool v6 = std::string_view(addr).find(':') != std::string_view::npos;
	int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_storage ss{};
	socklen_t len;
	if (v6) {
		auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
		a->sin6_family = AF_INET6;
		::inet_pton(AF_INET6, addr, &a->sin6_addr);
		len = sizeof(*a);
	} else {
		auto* a = reinterpret_cast<sockaddr_in*>(&ss);
		a->sin_family = AF_INET;
		::inet_pton(AF_INET, addr, &a->sin_addr);
		len = sizeof(*a);
	}
	if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 64) != 0) {
		if (fd >= 0)
			::close(fd);
		return std::nullopt;
	}
	::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
	uint16_t port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
				 : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
	return std::make_pair(fd, port);
}

// A UDP socket bound to 127.0.0.1:0 and its port.
std::optional<std::pair<int, uint16_t>> udp_on_loopback()
{
	int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (u < 0 || ::bind(u, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
	    ::getsockname(u, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
		if (u >= 0)
			::close(u);
		return std::nullopt;
	}
	return std::make_pair(u, ntohs(a.sin_port));
}

// A raw client of 127.0.0.1:port.
Fd connect_to(uint16_t port)
{
	Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
		return Fd();
	return fd;
}

void send_all(int fd, std::string_view b)
{
	while (!b.empty()) {
		ssize_t n = ::send(fd, b.data(), b.size(), MSG_NOSIGNAL);
		if (n <= 0)
			return;  // the recorder closed: what it read is what counts
		b.remove_prefix(static_cast<size_t>(n));
	}
}

// Everything until the recorder closes (or the deadline: nullopt).
std::optional<std::string> read_to_eof(int fd, std::chrono::milliseconds deadline = kDeadline)
{
	std::string out;
	auto end = std::chrono::steady_clock::now() + deadline;
	for (;;) {
		auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end -
										  std::chrono::steady_clock::now());
		pollfd p{fd, POLLIN, 0};
		if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
			return std::nullopt;
		char buf[4096];
		ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == ECONNRESET)
			return out;
		if (n <= 0)
			return out;
		out.append(buf, static_cast<size_t>(n));
	}
}

// Whether the recorder still holds the connection open (nothing to read, no EOF).
bool still_open(int fd)
{
	char c;
	ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

class WorldRecorderTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/airlock-world-XXXXXX";
		dir_ = ::mkdtemp(tmpl);
		records_ = dir_ + "/agent-1.jsonl";
		options_.sandbox = "agent-1";
		origin_.addr = *parse_address("203.0.113.10");
		origin_.port = 80;
		origin_.rule = 0;
	}

	void TearDown() override
	{
		stop();
		std::filesystem::remove_all(dir_);
	}

	// Listeners on 127.0.0.1:0 and (when it can be bound) [::1]:0, the
	// records file, the recorder on its own thread.
	void start()
	{
		auto v4 = listen_on("127.0.0.1");
		ASSERT_TRUE(v4);
		port_ = v4->second;
		options_.listen_fds = {v4->first};
		if (auto v6 = listen_on("::1")) {
			port6_ = v6->second;
			options_.listen_fds.push_back(v6->first);
		}
		options_.records_fd = ::open(records_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		ASSERT_GE(options_.records_fd, 0);
		auto lookup = lookup_ ? lookup_ : [this](int) -> std::optional<Origin> { return origin_; };
		recorder_ = std::make_unique<WorldRecorder>(io_, options_, lookup);
		recorder_->start();
		thread_ = std::thread([this] { io_.run(); });
	}

	void stop()
	{
		if (!thread_.joinable())
			return;
		boost::asio::post(io_, [this] { recorder_->stop(); });
		thread_.join();
	}

	std::vector<ojson> lines() const
	{
		std::vector<ojson> out;
		std::ifstream in(records_);
		std::string line;
		while (std::getline(in, line))
			out.push_back(ojson::parse(line));
		return out;
	}

	// At least n records, the deadline failing the test.
	std::vector<ojson> await(size_t n)
	{
		std::vector<ojson> got;
		bool ok = eventually([&] {
			got = lines();
			return got.size() >= n;
		});
		EXPECT_TRUE(ok) << "waited for " << n << " records, have " << got.size();
		return got;
	}

	std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

	// curl, never through a proxy of the environment; -w appends "|STATUS".
	Ran curl(std::vector<std::string> args, const std::string& stdin_path = "/dev/null")
	{
		std::vector<std::string> argv = {"curl",       "-sS", "--noproxy", "*",
						 "--max-time", "10",  "-w",        "|%{http_code}"};
		argv.insert(argv.end(), args.begin(), args.end());
		return run(argv, stdin_path);
	}

	std::string file(const std::string& name, const std::string& content)
	{
		std::string p = dir_ + "/" + name;
		std::ofstream(p, std::ios::binary) << content;
		return p;
	}

	std::string dir_, records_;
	WorldOptions options_;
	Origin origin_;
	OriginLookup lookup_;
	boost::asio::io_context io_;
	std::unique_ptr<WorldRecorder> recorder_;
	std::thread thread_;
	uint16_t port_ = 0, port6_ = 0;
};

TEST_F(WorldRecorderTest, AGetWithAHeaderIsRecordedAndAnswered)
{
	start();
	Ran c = curl({"-H", "X-Agent: probe-1", url("/v1/items?q=1")});
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(c.out, "airlock world: recorded\n|200");
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	const ojson& r = rs[0];
	EXPECT_EQ(keys(r), (std::vector<std::string>{"time", "sandbox", "kind", "dst", "port", "protocol", "rule",
						     "method", "host", "path", "headers", "body_bytes",
						     "body_truncated", "status", "duration_ms"}));
	EXPECT_TRUE(std::regex_match(r["time"].get<std::string>(),
				     std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
	EXPECT_EQ(r["sandbox"], "agent-1");
	EXPECT_EQ(r["kind"], "http");
	EXPECT_EQ(r["dst"], "203.0.113.10");
	EXPECT_EQ(r["port"], 80);
	EXPECT_EQ(r["protocol"], "tcp");
	EXPECT_EQ(r["rule"], 0);
	EXPECT_EQ(r["method"], "GET");
	EXPECT_EQ(r["host"], "127.0.0.1:" + std::to_string(port_));
	EXPECT_EQ(r["path"], "/v1/items?q=1");
	EXPECT_EQ(keys(r["headers"]), (std::vector<std::string>{"Host", "User-Agent", "Accept", "X-Agent"}));
	EXPECT_EQ(r["headers"]["X-Agent"], "probe-1");
	EXPECT_EQ(r["headers"]["Accept"], "*/*");
	EXPECT_EQ(r["body_bytes"], 0);
	EXPECT_EQ(r["body_truncated"], false);
	EXPECT_EQ(r["status"], 200);
	WorldStats s = recorder_->stats();
	EXPECT_EQ(s.connections, 1u);
	EXPECT_EQ(s.http_requests, 1u);
	EXPECT_EQ(s.tcp_streams, 0u);
	EXPECT_EQ(s.records_written, 1u);
	EXPECT_EQ(s.unknown, 0u);
}

TEST_F(WorldRecorderTest, APostBodyIsRecorded)
{
	origin_.name = "api.example.com";
	origin_.rule = 4;
	start();
	Ran c = curl({"-d", "user=agent&token=s3cr3t", url("/login")});
	EXPECT_EQ(c.out, "airlock world: recorded\n|200");
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(rs[0]["name"], "api.example.com");
	EXPECT_EQ(rs[0]["rule"], 4);
	EXPECT_EQ(rs[0]["method"], "POST");
	EXPECT_EQ(rs[0]["path"], "/login");
	EXPECT_EQ(rs[0]["headers"]["Content-Type"], "application/x-www-form-urlencoded");
	EXPECT_EQ(rs[0]["headers"]["Content-Length"], "23");
	EXPECT_EQ(rs[0]["body"], "user=agent&token=s3cr3t");
	EXPECT_EQ(rs[0]["body_bytes"], 23);
	EXPECT_EQ(rs[0]["body_truncated"], false);
}

TEST_F(WorldRecorderTest, AChunkedUploadIsRecordedDecoded)
{
	start();
	std::string body = "line one\nline two\n";
	Ran c = curl({"-T", "-", url("/upload")}, file("body", body));
	EXPECT_EQ(c.out, "airlock world: recorded\n|200");
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(rs[0]["method"], "PUT");
	EXPECT_EQ(rs[0]["headers"]["Transfer-Encoding"], "chunked");
	EXPECT_EQ(rs[0]["body"], body);
	EXPECT_EQ(rs[0]["body_bytes"], body.size());
	EXPECT_EQ(rs[0]["body_truncated"], false);
	// curl waits a second for "100 Continue" before it sends the body: it got one.
	if (rs[0]["headers"].contains("Expect")) {
		EXPECT_LT(rs[0]["duration_ms"].get<int>(), 900);
	}
}

TEST_F(WorldRecorderTest, ABodyPastMaxBodyBytesIsReadAndRecordedTruncated)
{
	options_.world.max_body_bytes = 1000;
	start();
	std::string body;
	for (int i = 0; body.size() < 5000; i++)
		body += std::to_string(i % 10);
	Ran c = curl({"--data-binary", "@" + file("big", body), url("/big")});
	EXPECT_EQ(c.out, "airlock world: recorded\n|200");
	// And chunked: the same, decoded.
	Ran chunked = curl({"-T", "-", url("/big-chunked")}, file("big", body));
	EXPECT_EQ(chunked.out, "airlock world: recorded\n|200");
	auto rs = await(2);
	ASSERT_EQ(rs.size(), 2u);
	for (const auto& r : rs) {
		EXPECT_EQ(r["body"], body.substr(0, 1000));
		EXPECT_EQ(r["body_bytes"], 5000);
		EXPECT_EQ(r["body_truncated"], true);
		EXPECT_EQ(r["status"], 200);
	}
}

TEST_F(WorldRecorderTest, KeepAliveRequestsAreOneRecordEach)
{
	start();
	std::string script = R"(
import http.client, sys
c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]), timeout=10)
c.request('GET', '/first', headers={'X-Seq': '1'})
r1 = c.getresponse(); b1 = r1.read()
c.putrequest('POST', '/second')
c.putheader('X-Dup', 'a')
c.putheader('x-dup', 'b')
c.putheader('Content-Length', '5')
c.endheaders()
c.send(b'hello')
r2 = c.getresponse(); b2 = r2.read()
print(r1.status, r2.status, r1.getheader('Connection'), b1 == b2 == b'airlock world: recorded\n', end='')
)";
	Ran py = run({"python3", "-c", script, std::to_string(port_)});
	EXPECT_EQ(py.status, 0);
	EXPECT_EQ(py.out, "200 200 None True");
	auto rs = await(2);
	ASSERT_EQ(rs.size(), 2u);
	EXPECT_EQ(rs[0]["path"], "/first");
	EXPECT_EQ(rs[0]["headers"]["X-Seq"], "1");
	EXPECT_EQ(rs[1]["method"], "POST");
	EXPECT_EQ(rs[1]["path"], "/second");
	EXPECT_EQ(rs[1]["headers"]["X-Dup"], "a, b");
	EXPECT_FALSE(rs[1]["headers"].contains("x-dup"));
	EXPECT_EQ(rs[1]["body"], "hello");
	EXPECT_EQ(recorder_->stats().connections, 1u);
	EXPECT_EQ(recorder_->stats().http_requests, 2u);
}

TEST_F(WorldRecorderTest, PipelinedRequestsAndConnectionClose)
{
	start();
	Fd c = connect_to(port_);
	send_all(c.get(), "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
			  "HEAD /b HTTP/1.1\r\nHost: h\r\n\r\n"
			  "GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
			  "GET /never HTTP/1.1\r\nHost: h\r\n\r\n");
	auto got = read_to_eof(c.get());
	ASSERT_TRUE(got);
	std::string ok = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 24\r\n";
	EXPECT_EQ(*got, ok + "\r\nairlock world: recorded\n" + ok + "\r\n" + ok +
				"Connection: close\r\n\r\nairlock world: recorded\n");
	auto rs = await(3);
	ASSERT_EQ(rs.size(), 3u);
	EXPECT_EQ(rs[0]["path"], "/a");
	EXPECT_EQ(rs[1]["method"], "HEAD");
	EXPECT_EQ(rs[2]["path"], "/c");
}

TEST_F(WorldRecorderTest, BytesThatAreNotHttpAreOneTcpRecord)
{
	start();
	std::string bytes;
	for (int i = 0; i < 100; i++)
		bytes += static_cast<char>(i);
	Fd c = connect_to(port_);
	send_all(c.get(), bytes);
	::shutdown(c.get(), SHUT_WR);
	EXPECT_EQ(read_to_eof(c.get()), std::string());  // nothing answered, closed at our EOF
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(keys(rs[0]), (std::vector<std::string>{"time", "sandbox", "kind", "dst", "port", "protocol", "rule",
							 "bytes_in", "head_hex", "duration_ms"}));
	EXPECT_EQ(rs[0]["kind"], "tcp");
	EXPECT_EQ(rs[0]["bytes_in"], 100);
	EXPECT_EQ(rs[0]["head_hex"], hex_of(bytes.substr(0, 64)));

	// An SSH banner; and a connection that sends nothing at all.
	Fd ssh = connect_to(port_);
	send_all(ssh.get(), "SSH-2.0-OpenSSH_9.2p1\r\n");
	::shutdown(ssh.get(), SHUT_WR);
	EXPECT_TRUE(read_to_eof(ssh.get()));
	rs = await(2);
	Fd silent = connect_to(port_);
	::shutdown(silent.get(), SHUT_WR);
	EXPECT_TRUE(read_to_eof(silent.get()));
	rs = await(3);
	ASSERT_EQ(rs.size(), 3u);
	EXPECT_EQ(rs[1]["bytes_in"], 23);
	EXPECT_EQ(rs[1]["head_hex"], hex_of("SSH-2.0-OpenSSH_9.2p1\r\n"));
	EXPECT_EQ(rs[2]["bytes_in"], 0);
	EXPECT_EQ(rs[2]["head_hex"], "");
	EXPECT_EQ(recorder_->stats().tcp_streams, 3u);
	EXPECT_EQ(recorder_->stats().bytes_in, 123u);
}

TEST_F(WorldRecorderTest, ATlsClientHelloIsRecordedWithItsSniAndClosed)
{
	start();
	std::string hello = test::openssl_client_hello({"api.openai.com", {"h2", "http/1.1"}});
	ASSERT_GT(hello.size(), 64u);
	Fd c = connect_to(port_);
	// Split as a network may: the hello is whole only with its last byte.
	send_all(c.get(), hello.substr(0, 10));
	send_all(c.get(), hello.substr(10));
	// The client waits for a ServerHello; the recorder does not make it wait for the idle timeout.
	EXPECT_EQ(read_to_eof(c.get(), 5s), std::string());
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(keys(rs[0]), (std::vector<std::string>{"time", "sandbox", "kind", "dst", "port", "protocol", "rule",
							 "tls", "sni", "bytes_in", "head_hex", "duration_ms"}));
	EXPECT_EQ(rs[0]["kind"], "tcp");
	EXPECT_EQ(rs[0]["tls"], true);
	EXPECT_EQ(rs[0]["sni"], "api.openai.com");
	EXPECT_EQ(rs[0]["bytes_in"], hello.size());
	EXPECT_EQ(rs[0]["head_hex"], hex_of(hello.substr(0, 64)));
}

TEST_F(WorldRecorderTest, AConnectionWithNoOriginIsClosedUnrecorded)
{
	lookup_ = [](int) -> std::optional<Origin> { return std::nullopt; };
	start();
	Ran c = curl({url("/")});
	// curl: empty reply from server, or a reset if its request was there before the close.
	EXPECT_TRUE(c.status == 52 || c.status == 56) << c.status;
	EXPECT_EQ(c.out, "|000");
	ASSERT_TRUE(eventually([&] { return recorder_->stats().unknown == 1; }));
	stop();
	WorldStats s = recorder_->stats();
	EXPECT_EQ(s.connections, 1u);
	EXPECT_EQ(s.unknown, 1u);
	EXPECT_EQ(s.http_requests, 0u);
	EXPECT_EQ(s.records_written, 0u);
	EXPECT_EQ(std::filesystem::file_size(records_), 0u);
}

// Datagrams: each one a record, by the origin of its sender; one whose
// sender has no origin is dropped unrecorded. Python sends them.
TEST_F(WorldRecorderTest, EachDatagramIsARecordByItsSendersOrigin)
{
	auto udp = udp_on_loopback();
	ASSERT_TRUE(udp);
	int port = udp->second;
	options_.udp_fds = {udp->first};
	// Known: datagrams from port 40001; any other sender has no origin.
	options_.datagram_origin = [this](int fd, const sockaddr* from, socklen_t) -> std::optional<Origin> {
		EXPECT_GE(fd, 0);
		const auto* f = reinterpret_cast<const sockaddr_in*>(from);
		if (from->sa_family != AF_INET || ntohs(f->sin_port) != 40001)
			return std::nullopt;
		Origin o;
		o.addr = *parse_address("203.0.113.11");
		o.port = 5353;
		o.protocol = 17;
		o.rule = 2;
		return o;
	};
	start();
	std::string py = fmt::format("import socket\n"
				     "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
				     "s.bind(('127.0.0.1', 40001))\n"
				     "s.sendto(b'first datagram', ('127.0.0.1', {0}))\n"
				     "s.sendto(bytes(range(200)), ('127.0.0.1', {0}))\n"
				     "t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
				     "t.sendto(b'from nobody known', ('127.0.0.1', {0}))\n",
				     port);
	Ran r = run({"python3", "-c", py});
	ASSERT_EQ(r.status, 0) << r.out;
	ASSERT_TRUE(eventually([&] { return recorder_->stats().datagrams == 3; }));
	stop();
	auto got = lines();
	ASSERT_EQ(got.size(), 2u);
	EXPECT_EQ(got[0]["kind"], "udp");
	EXPECT_EQ(got[0]["dst"], "203.0.113.11");
	EXPECT_EQ(got[0]["port"], 5353);
	EXPECT_EQ(got[0]["protocol"], "udp");
	EXPECT_EQ(got[0]["rule"], 2);
	EXPECT_EQ(got[0]["bytes_in"], 14);
	EXPECT_EQ(got[0]["head_hex"], hex("first datagram"));
	std::string all;
	for (int i = 0; i < 200; i++)
		all += static_cast<char>(i);
	EXPECT_EQ(got[1]["bytes_in"], 200);
	EXPECT_EQ(got[1]["head_hex"], hex(all.substr(0, 64)));
	WorldStats st = recorder_->stats();
	EXPECT_EQ(st.datagrams, 3u);
	EXPECT_EQ(st.unknown, 1u);
	EXPECT_EQ(st.records_written, 2u);
	EXPECT_EQ(st.bytes_in, 14u + 200u + 17u);
}

// world.dns "synthesize": dig's queries, over UDP and TCP, to a resolver's
// address are answered with one address of 198.18.0.0/15 per name (the
// same for the same name in another case), AAAA with no data, PTR of a
// bound address with its name; each query is a record; a datagram that is
// not a query is recorded, not answered; a later connection to a bound
// address carries the name.
TEST_F(WorldRecorderTest, TheWorldAnswersDnsAndLaterRecordsCarryTheName)
{
	auto udp = udp_on_loopback();
	ASSERT_TRUE(udp);
	std::string uport = std::to_string(udp->second);
	options_.udp_fds = {udp->first};
	Origin resolver;
	resolver.addr = *parse_address("10.0.0.53");
	resolver.port = 53;
	resolver.protocol = 17;
	resolver.rule = AL_RULE_NONE;
	options_.datagram_origin = [&](int, const sockaddr*, socklen_t) -> std::optional<Origin> { return resolver; };
	Origin tcp_origin = resolver;
	tcp_origin.protocol = 6;
	lookup_ = [&](int) -> std::optional<Origin> { return tcp_origin; };
	start();

	auto dig = [&](std::vector<std::string> args) {
		std::vector<std::string> argv = {"dig", "@127.0.0.1", "-p", uport, "+short", "+tries=1", "+time=5"};
		argv.insert(argv.end(), args.begin(), args.end());
		return run(argv);
	};
	EXPECT_EQ(dig({"api.example.com", "A"}).out, "198.18.0.1\n");
	EXPECT_EQ(dig({"other.example", "A"}).out, "198.18.0.2\n");
	EXPECT_EQ(dig({"API.Example.COM", "A"}).out, "198.18.0.1\n");
	EXPECT_EQ(dig({"api.example.com", "AAAA"}).out, "");
	EXPECT_EQ(dig({"-x", "198.18.0.2"}).out, "other.example.\n");
	Ran full = run({"dig", "@127.0.0.1", "-p", uport, "+tries=1", "+time=5", "-x", "198.18.9.9"});
	EXPECT_NE(full.out.find("status: NXDOMAIN"), std::string::npos) << full.out;
	// Over TCP, to the listener, as a redirected TCP query reaches it.
	Ran t = run({"dig", "@127.0.0.1", "-p", std::to_string(port_), "+tcp", "+short", "+tries=1", "+time=5",
		     "tcp.example", "A"});
	EXPECT_EQ(t.out, "198.18.0.3\n");
	// A datagram that is not a query (a response, QR set): recorded only.
	std::string py = fmt::format(
		"import socket\n"
		"s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
		"s.sendto(bytes([0x12, 0x34, 0x81, 0x80]) + bytes(8) + b'hidden', ('127.0.0.1', {}))\n",
		uport);
	ASSERT_EQ(run({"python3", "-c", py}).status, 0);
	ASSERT_TRUE(eventually([&] { return lines().size() == 8; })) << lines().size();
	// A connection to a bound address: its record has the name.
	tcp_origin.addr = *parse_address("198.18.0.1");
	tcp_origin.port = 80;
	tcp_origin.rule = 0;
	Ran c = curl({url("/v1")});
	EXPECT_EQ(c.out, "airlock world: recorded\n|200");
	stop();

	auto got = lines();
	ASSERT_EQ(got.size(), 9u);
	EXPECT_EQ(keys(got[0]), (std::vector<std::string>{"time", "sandbox", "kind", "dst", "port", "protocol",
							  "bytes_in", "query", "qtype", "rcode", "answer"}));
	EXPECT_EQ(got[0]["kind"], "dns");
	EXPECT_EQ(got[0]["dst"], "10.0.0.53");
	EXPECT_EQ(got[0]["port"], 53);
	EXPECT_EQ(got[0]["protocol"], "udp");
	EXPECT_EQ(got[0]["query"], "api.example.com");
	EXPECT_EQ(got[0]["qtype"], "A");
	EXPECT_EQ(got[0]["rcode"], "NOERROR");
	EXPECT_EQ(got[0]["answer"], "198.18.0.1");
	EXPECT_EQ(got[2]["query"], "API.Example.COM");
	EXPECT_EQ(got[2]["answer"], "198.18.0.1");
	EXPECT_EQ(got[3]["qtype"], "AAAA");
	EXPECT_EQ(got[3]["rcode"], "NOERROR");
	EXPECT_FALSE(got[3].contains("answer"));
	EXPECT_EQ(got[4]["query"], "2.0.18.198.in-addr.arpa");
	EXPECT_EQ(got[4]["qtype"], "PTR");
	EXPECT_EQ(got[4]["answer"], "other.example");
	EXPECT_EQ(got[5]["rcode"], "NXDOMAIN");
	EXPECT_EQ(got[6]["protocol"], "tcp");
	EXPECT_EQ(got[6]["query"], "tcp.example");
	EXPECT_EQ(got[6]["answer"], "198.18.0.3");
	EXPECT_EQ(got[7]["kind"], "dns");
	EXPECT_FALSE(got[7].contains("rcode"));
	EXPECT_EQ(got[7]["bytes_in"], 18);
	EXPECT_EQ(got[7]["head_hex"], "123481800000000000000000" + hex("hidden"));
	EXPECT_EQ(got[8]["kind"], "http");
	EXPECT_EQ(got[8]["dst"], "198.18.0.1");
	EXPECT_EQ(got[8]["name"], "api.example.com");
	EXPECT_EQ(recorder_->stats().dns_queries, 7u);

	std::istringstream in([&] {
		std::string all;
		for (const auto& j : got)
			all += j.dump() + "\n";
		return all;
	}());
	ShowResult table = show_records(in, "records", ShowOptions{});
	EXPECT_TRUE(std::regex_search(table.out,
				      std::regex(R"(dns +10\.0\.0\.53:53 +A api\.example\.com -> 198\.18\.0\.1 )")))
		<< table.out;
	EXPECT_NE(table.out.find("AAAA api.example.com (no data)"), std::string::npos) << table.out;
	EXPECT_NE(table.out.find("not a query, 18 bytes"), std::string::npos) << table.out;
	EXPECT_TRUE(std::regex_search(table.out, std::regex(R"(http +api\.example\.com:80 +GET )"))) << table.out;
}

// TLS with the world's CA: curl trusting the CA's certificate gets its
// answer over HTTPS (HTTP/1.1 chosen by ALPN though curl offers h2), and the
// requests are recorded as any other, with "tls" and the SNI; a POST on the
// same connection too. A client that does not trust the CA ends the
// handshake: one tcp record with the SNI and why.
TEST_F(WorldRecorderTest, TlsEndsInTheRecorderWithTheWorldsCa)
{
	WorldCa ca = make_world_ca("agent-1");
	std::string bundle = file("ca.pem", ca.cert_pem);
	options_.tls = std::make_shared<TlsTerminator>(ca.cert_pem, ca.key_pem);
	origin_.port = 443;
	start();
	std::string base = "https://api.example.com:" + std::to_string(port_);
	std::string resolve = "api.example.com:" + std::to_string(port_) + ":127.0.0.1";
	Ran c = curl({"--cacert", bundle, "--resolve", resolve, "-H", "X-Agent: tls-1", base + "/v1/items", "--next",
		      "--cacert", bundle, "--resolve", resolve, "-d", "secret=42", base + "/v1/submit"});
	EXPECT_EQ(c.status, 0) << c.out;
	// (--next resets -w: the second transfer prints its body alone.)
	EXPECT_EQ(c.out, "airlock world: recorded\n|200airlock world: recorded\n");
	Ran bad = run({"curl", "-sS", "--noproxy", "*", "--max-time", "10", "--resolve", resolve, base + "/no"});
	EXPECT_EQ(bad.status, 60);  // the peer's certificate cannot be verified
	auto rs = await(3);
	ASSERT_EQ(rs.size(), 3u);
	EXPECT_EQ(keys(rs[0]), (std::vector<std::string>{"time", "sandbox", "kind", "dst", "port", "protocol", "rule",
							 "tls", "sni", "method", "host", "path", "headers",
							 "body_bytes", "body_truncated", "status", "duration_ms"}));
	EXPECT_EQ(rs[0]["kind"], "http");
	EXPECT_EQ(rs[0]["port"], 443);
	EXPECT_EQ(rs[0]["tls"], true);
	EXPECT_EQ(rs[0]["sni"], "api.example.com");
	EXPECT_EQ(rs[0]["path"], "/v1/items");
	EXPECT_EQ(rs[0]["headers"]["X-Agent"], "tls-1");
	EXPECT_EQ(rs[1]["method"], "POST");
	EXPECT_EQ(rs[1]["body"], "secret=42");
	EXPECT_EQ(rs[1]["tls"], true);
	EXPECT_EQ(rs[2]["kind"], "tcp");
	EXPECT_EQ(rs[2]["tls"], true);
	EXPECT_EQ(rs[2]["sni"], "api.example.com");
	EXPECT_NE(rs[2].value("tls_error", "").find("alert"), std::string::npos) << rs[2].dump();
	EXPECT_FALSE(rs[2].contains("decrypted"));
	std::istringstream in(rs[0].dump() + "\n" + rs[2].dump() + "\n");
	ShowResult table = show_records(in, "records", ShowOptions{});
	EXPECT_TRUE(
		std::regex_search(table.out,
				  std::regex(R"(https +203\.0\.113\.10:443 +GET api\.example\.com:[0-9]+/v1/items )")))
		<< table.out;
	EXPECT_TRUE(std::regex_search(
		table.out, std::regex(R"(tcp +203\.0\.113\.10:443 +[0-9]+ bytes tls sni=api\.example\.com \(.*alert)")))
		<< table.out;
}

// A name past the 64 bytes a certificate's CN may hold, from a CA of a
// sandbox whose name is 63 characters: the certificate names it in its
// subjectAltName and curl verifies it. A request that Python sends with a
// close_notify right after it is read, answered and recorded as a request.
TEST_F(WorldRecorderTest, LongNamesAndARequestFollowedByCloseNotify)
{
	WorldCa ca = make_world_ca(std::string(63, 's'));
	std::string bundle = file("ca.pem", ca.cert_pem);
	options_.tls = std::make_shared<TlsTerminator>(ca.cert_pem, ca.key_pem);
	origin_.port = 443;
	start();
	std::string name = std::string(60, 'a') + ".example.com";
	std::string base = "https://" + name + ":" + std::to_string(port_);
	Ran c = curl(
		{"--cacert", bundle, "--resolve", name + ":" + std::to_string(port_) + ":127.0.0.1", base + "/long"});
	EXPECT_EQ(c.out, "airlock world: recorded\n|200") << c.status;
	std::string py = fmt::format(
		"import socket, ssl\n"
		"ctx = ssl.create_default_context(cafile='{}')\n"
		"s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', {})), server_hostname='api.example.com')\n"
		"s.settimeout(5)\n"
		"s.sendall(b'POST /closing HTTP/1.1\\r\\nHost: api.example.com\\r\\nContent-Length: 6\\r\\n\\r\\nsecret')\n"
		"try:\n"
		"    s.unwrap()\n"
		"except (OSError, ssl.SSLError):\n"
		"    pass\n",
		bundle, port_);
	Ran r = run({"python3", "-c", py});
	EXPECT_EQ(r.status, 0);
	auto rs = await(2);
	ASSERT_EQ(rs.size(), 2u);
	EXPECT_EQ(rs[0]["sni"], name);
	EXPECT_EQ(rs[0]["path"], "/long");
	EXPECT_EQ(rs[1]["kind"], "http");
	EXPECT_EQ(rs[1]["path"], "/closing");
	EXPECT_EQ(rs[1]["body"], "secret");
	EXPECT_EQ(rs[1]["status"], 200);
}

TEST_F(WorldRecorderTest, ACannedResponseAnswersWhatItMatches)
{
	WorldResponse r;
	r.host = "*.example.com";
	r.method = "GET";
	r.path = "/api/*";
	r.status = 403;
	r.headers = {{"X-World", "fixture"}, {"Content-Length", "9999"}};  // the recorder frames the body itself
	r.body = "short and stout\n";
	options_.world.responses = {r};
	start();
	Ran tea = curl({"-H", "Host: API.example.com", "-D", "-", url("/api/v1/tea?x=1")});
	EXPECT_EQ(tea.out,
		  "HTTP/1.1 403 Forbidden\r\nX-World: fixture\r\nContent-Length: 16\r\n\r\nshort and stout\n|403");
	// Not strictly below example.com; another method: the plain answer.
	EXPECT_EQ(curl({"-H", "Host: example.com", url("/api/v1/tea")}).out, "airlock world: recorded\n|200");
	EXPECT_EQ(curl({"-X", "DELETE", "-H", "Host: a.example.com", url("/api/x")}).out,
		  "airlock world: recorded\n|200");
	auto rs = await(3);
	ASSERT_EQ(rs.size(), 3u);
	EXPECT_EQ(rs[0]["host"], "API.example.com");
	EXPECT_EQ(rs[0]["status"], 403);
	EXPECT_EQ(rs[1]["status"], 200);
	EXPECT_EQ(rs[2]["status"], 200);
}

TEST_F(WorldRecorderTest, OverIpv6)
{
	start();
	if (!port6_)
		GTEST_SKIP() << "::1 cannot be bound here";
	Ran c = curl({"-g", "http://[::1]:" + std::to_string(port6_) + "/six"});
	EXPECT_EQ(c.out, "airlock world: recorded\n|200");
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(rs[0]["path"], "/six");
	EXPECT_EQ(rs[0]["host"], "[::1]:" + std::to_string(port6_));
}

TEST_F(WorldRecorderTest, InvalidUtf8IsRecordedValid)
{
	start();
	Fd c = connect_to(port_);
	send_all(c.get(), "POST /caf\xc3\x28 HTTP/1.1\r\nHost: h\r\nX-Bad: \xff\xfe\r\nContent-Length: 4\r\n"
			  "Connection: close\r\n\r\n" +
				  std::string("\xff\xfe\x00\x01", 4));
	auto got = read_to_eof(c.get());
	ASSERT_TRUE(got);
	EXPECT_EQ(got->substr(0, 15), "HTTP/1.1 200 OK");
	auto rs = await(1);  // each parses
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(rs[0]["path"], "/caf\xef\xbf\xbd(");
	EXPECT_EQ(rs[0]["headers"]["X-Bad"], "\xef\xbf\xbd\xef\xbf\xbd");
	EXPECT_EQ(rs[0]["body_base64"], "//4AAQ==");
	EXPECT_FALSE(rs[0].contains("body"));
	EXPECT_EQ(rs[0]["body_bytes"], 4);
}

TEST_F(WorldRecorderTest, WhatTheHttpParserRejectsIsRecordedAsAStreamOrAnswered400)
{
	start();
	// A header past 16 KiB; HTTP/2's preface: streams, from their first byte.
	const std::string huge = "GET / HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n";
	const std::string h2 = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	// A chunked body that is not: answered 400, the connection closed.
	const std::string bad_chunk = "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
	size_t n = 0;
	for (const std::string* req : {&huge, &h2}) {
		Fd c = connect_to(port_);
		send_all(c.get(), *req);
		::shutdown(c.get(), SHUT_WR);
		EXPECT_EQ(read_to_eof(c.get()), std::string());
		auto rs = await(++n);
		ASSERT_EQ(rs.size(), n);
		EXPECT_EQ(rs.back()["kind"], "tcp");
		EXPECT_EQ(rs.back()["bytes_in"], req->size());
		EXPECT_EQ(rs.back()["head_hex"], hex_of(req->substr(0, 64)));
	}
	Fd c = connect_to(port_);
	send_all(c.get(), bad_chunk);
	auto got = read_to_eof(c.get());
	ASSERT_TRUE(got);
	EXPECT_EQ(
		*got,
		"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 27\r\nConnection: close\r\n\r\n"
		"airlock world: bad request\n");
	auto rs = await(3);
	ASSERT_EQ(rs.size(), 3u);
	EXPECT_EQ(rs[2]["kind"], "http");
	EXPECT_EQ(rs[2]["path"], "/c");
	EXPECT_EQ(rs[2]["status"], 400);
}

TEST_F(WorldRecorderTest, TheRecordsFileStopsAtItsCap)
{
	options_.max_records_bytes = 300;
	start();
	for (int i = 0; i < 3; i++) {
		Fd c = connect_to(port_);
		send_all(c.get(), "hello");
		::shutdown(c.get(), SHUT_WR);
		ASSERT_TRUE(read_to_eof(c.get()));
		ASSERT_TRUE(eventually([&] {
			WorldStats s = recorder_->stats();
			return s.records_written + s.records_dropped == static_cast<uint64_t>(i + 1);
		}));
	}
	WorldStats s = recorder_->stats();
	EXPECT_EQ(s.records_written, 1u);
	EXPECT_EQ(s.records_dropped, 2u);
	auto rs = lines();
	ASSERT_EQ(rs.size(), 2u);
	EXPECT_EQ(rs[0]["kind"], "tcp");
	EXPECT_EQ(keys(rs[1]), (std::vector<std::string>{"time", "sandbox", "kind", "max_records_bytes"}));
	EXPECT_EQ(rs[1]["kind"], "records-full");
	EXPECT_EQ(rs[1]["sandbox"], "agent-1");
	EXPECT_EQ(rs[1]["max_records_bytes"], 300);
	EXPECT_LE(std::filesystem::file_size(records_), 300u);
}

TEST_F(WorldRecorderTest, ASilentClientHoldsUpNoOther)
{
	start();
	Fd silent = connect_to(port_);
	Fd half = connect_to(port_);
	const std::string partial = "GET /slow HTTP/1.1\r\nHost: slow\r\n";
	send_all(half.get(), partial);
	Ran c = curl({url("/fast")});
	EXPECT_EQ(c.out, "airlock world: recorded\n|200");
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(rs[0]["path"], "/fast");
	// The others are still open and waited for, unrecorded so far.
	EXPECT_TRUE(still_open(silent.get()));
	EXPECT_TRUE(still_open(half.get()));
	// A header never whole is what was sent, as a stream; silence, zero bytes.
	half.reset();
	rs = await(2);
	silent.reset();
	rs = await(3);
	ASSERT_EQ(rs.size(), 3u);
	EXPECT_EQ(rs[1]["kind"], "tcp");
	EXPECT_EQ(rs[1]["bytes_in"], partial.size());
	EXPECT_EQ(rs[1]["head_hex"], hex_of(partial.substr(0, 64)));
	EXPECT_EQ(rs[2]["kind"], "tcp");
	EXPECT_EQ(rs[2]["bytes_in"], 0);
}

TEST_F(WorldRecorderTest, AnIdleConnectionIsClosedAndRecorded)
{
	options_.idle_timeout = 300ms;
	start();
	Fd c = connect_to(port_);
	auto t0 = std::chrono::steady_clock::now();
	send_all(c.get(), "hello");
	EXPECT_EQ(read_to_eof(c.get(), 5s), std::string());
	EXPECT_GE(std::chrono::steady_clock::now() - t0, 290ms);
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(rs[0]["bytes_in"], 5);
	EXPECT_GE(rs[0]["duration_ms"].get<int>(), 290);
	// A request cut off in its body is recorded as far as it came, unanswered.
	Fd post = connect_to(port_);
	send_all(post.get(), "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
	EXPECT_EQ(read_to_eof(post.get(), 5s), std::string());
	rs = await(2);
	ASSERT_EQ(rs.size(), 2u);
	EXPECT_EQ(rs[1]["kind"], "http");
	EXPECT_EQ(rs[1]["body"], "abc");
	EXPECT_EQ(rs[1]["body_bytes"], 3);
	EXPECT_FALSE(rs[1].contains("status"));
}

TEST_F(WorldRecorderTest, AConnectionIsReadUpToMaxConnectionBytes)
{
	options_.max_connection_bytes = 1000;
	start();
	Fd raw = connect_to(port_);
	send_all(raw.get(), std::string(4000, 'z'));
	EXPECT_TRUE(read_to_eof(raw.get()));
	auto rs = await(1);
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(rs[0]["bytes_in"], 1000);
	EXPECT_EQ(rs[0]["truncated"], true);
	const std::string head = "POST /big HTTP/1.1\r\nHost: h\r\nContent-Length: 4000\r\n\r\n";
	Fd post = connect_to(port_);
	send_all(post.get(), head + std::string(4000, 'a'));
	EXPECT_TRUE(read_to_eof(post.get()));
	rs = await(2);
	ASSERT_EQ(rs.size(), 2u);
	EXPECT_EQ(rs[1]["kind"], "http");
	EXPECT_EQ(rs[1]["body_bytes"], 1000 - head.size());
	EXPECT_EQ(rs[1]["body_truncated"], true);
	EXPECT_FALSE(rs[1].contains("status"));
	EXPECT_EQ(recorder_->stats().bytes_in, 2000u);
}

TEST_F(WorldRecorderTest, ConnectionsPastTheLimitAreClosedAtOnce)
{
	options_.max_connections = 1;
	start();
	Fd first = connect_to(port_);
	ASSERT_TRUE(eventually([&] { return recorder_->stats().connections == 1; }));
	Fd second = connect_to(port_);
	EXPECT_EQ(read_to_eof(second.get(), 5s), std::string());
	EXPECT_EQ(recorder_->stats().refused_busy, 1u);
	EXPECT_TRUE(still_open(first.get()));
	first.reset();
	ASSERT_EQ(await(1).size(), 1u);  // the first's record: it sent nothing
	EXPECT_EQ(curl({url("/after")}).out, "airlock world: recorded\n|200");
	EXPECT_EQ(await(2).size(), 2u);
}

TEST_F(WorldRecorderTest, StopRecordsWhatOpenConnectionsSent)
{
	start();
	Fd c = connect_to(port_);
	send_all(c.get(), "abc");
	ASSERT_TRUE(eventually([&] { return recorder_->stats().bytes_in == 3; }));
	stop();
	auto rs = lines();
	ASSERT_EQ(rs.size(), 1u);
	EXPECT_EQ(rs[0]["bytes_in"], 3);
	EXPECT_EQ(rs[0]["head_hex"], "616263");
	EXPECT_EQ(read_to_eof(c.get(), 5s), std::string());
}

// The policy's secrets are never-send patterns in the world too: a request
// that carries one (its query, a header, its body as base64) is answered
// 403 as the gate would, and recorded with the secret's name, its path
// without the query, and no headers or body; a raw stream that carries
// one is recorded with its head withheld. The value is in no record.
// Other requests are recorded whole, as before.
TEST_F(WorldRecorderTest, ARequestCarryingASecretIsRefusedAndRecordedWithoutIt)
{
	const std::string secret = "sk-world-secret-0123456789";
	auto setup = std::make_shared<HttpGateSetup>();
	setup->never_send = gate::NeverSend({{"env/KEY", secret}});
	options_.http = setup;
	start();
	Ran q = curl({url("/search?k=" + secret)});
	EXPECT_EQ(q.out.substr(q.out.size() - 4), "|403") << q.out;
	EXPECT_NE(q.out.find("\"reason\":\"secret\""), std::string::npos) << q.out;
	Ran h = curl({"-H", "X-Key: " + secret, url("/h")});
	EXPECT_EQ(h.out.substr(h.out.size() - 4), "|403") << h.out;
	Ran b = curl({"-d", "x=" + gate::base64_inside(secret, 1, false) + "AA", url("/upload")});
	EXPECT_EQ(b.out.substr(b.out.size() - 4), "|403") << b.out;
	Ran clean = curl({"-H", "X-Agent: probe", url("/clean?q=1")});
	EXPECT_EQ(clean.out, "airlock world: recorded\n|200");
	Fd raw = connect_to(port_);
	send_all(raw.get(), "\x01\x02" + secret);
	::shutdown(raw.get(), SHUT_WR);
	EXPECT_TRUE(read_to_eof(raw.get()));

	auto rs = await(5);
	ASSERT_EQ(rs.size(), 5u);
	std::vector<std::string> got;
	for (size_t i = 0; i < 3; i++) {
		got.push_back(rs[i]["path"].get<std::string>() + " " + rs[i].value("secret", "") + " " +
			      std::to_string(rs[i]["status"].get<unsigned>()));
		EXPECT_FALSE(rs[i].contains("headers")) << rs[i].dump();
		EXPECT_FALSE(rs[i].contains("body")) << rs[i].dump();
	}
	EXPECT_EQ(got, (std::vector<std::string>{"/search env/KEY 403", "/h env/KEY 403", "/upload env/KEY 403"}));
	EXPECT_EQ(rs[3]["path"], "/clean?q=1");
	EXPECT_EQ(rs[3]["headers"]["X-Agent"], "probe");
	EXPECT_FALSE(rs[3].contains("secret"));
	EXPECT_EQ(rs[4]["kind"], "tcp");
	std::ifstream in(records_);
	std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
	EXPECT_EQ(all.find(secret), std::string::npos) << all;
	EXPECT_EQ(all.find(hex_of(secret.substr(0, 8))), std::string::npos) << all;
	EXPECT_EQ(recorder_->stats().http_requests, 4u);
	EXPECT_EQ(recorder_->stats().secrets_refused, 3u);
}

}  // namespace
}  // namespace airlock::proxy
