#include "proxy/world.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/optional.hpp>
#include <openssl/err.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "policy/dnsname.h"
#include "proxy/client_hello.h"
#include "proxy/dns.h"
#include "proxy/tls.h"
#include "util/error.h"

namespace airlock::proxy {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using udp = net::ip::udp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kMaxMethod = 24;
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
constexpr std::string_view kDefaultBody = "airlock world: recorded\n";
constexpr uint16_t kDnsPort = 53;
constexpr size_t kMaxTlsPending = 64 * 1024;  // bytes a TLS session may hold to send
// A gated connection's pipes (one a way) are the kernel's default size,
// 64 KiB: the pages of every pipe of the proxy's user count against one
// limit (pipe-user-pages-soft), which every proxy shares; past it, a new
// pipe is smaller, and the connection goes through the proxy's buffers.
constexpr size_t kPipeBytes = 64 * 1024;
// Splices a way makes before it lets the proxy's other connections run.
constexpr int kSpliceTurns = 16;
// Descriptors kept free beyond what max_connections may hold: a gated
// connection has pipes only while its four fit.
constexpr size_t kSpareFds = 64;

std::string lower(std::string_view s)
{
	std::string out(s);
	for (char& c : out)
		c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
	return out;
}

bool iequal(std::string_view a, std::string_view b)
{
	return a.size() == b.size() && lower(a) == lower(b);
}

// The name a Host header names: without port, brackets, trailing dot; lowercase.
std::string host_name(std::string_view h)
{
	while (!h.empty() && (h.front() == ' ' || h.front() == '\t'))
		h.remove_prefix(1);
	while (!h.empty() && (h.back() == ' ' || h.back() == '\t'))
		h.remove_suffix(1);
	if (!h.empty() && h.front() == '[') {
		size_t end = h.find(']');
		h = h.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1);
	} else if (size_t colon = h.find(':'); colon != std::string_view::npos && colon == h.rfind(':')) {
		h = h.substr(0, colon);
	}
	if (!h.empty() && h.back() == '.')
		h.remove_suffix(1);
	return lower(h);
}

// The path of a request target, without its query or fragment.
std::string_view target_path(std::string_view t)
{
	if (!t.empty() && t.front() != '/' && t != "*") {
		size_t scheme = t.find("://");
		if (scheme == std::string_view::npos)
			return t;  // authority-form (CONNECT host:port)
		size_t slash = t.find('/', scheme + 3);
		if (slash == std::string_view::npos)
			return "/";
		t = t.substr(slash);
	}
	return t.substr(0, t.find_first_of("?#"));
}

bool host_matches(std::string_view pattern, const std::string& host)
{
	std::string p = lower(pattern);
	if (p == "*")
		return true;
	if (p.size() > 2 && p.compare(0, 2, "*.") == 0) {
		std::string_view suffix = std::string_view(p).substr(1);  // ".name"
		return host.size() > suffix.size() && host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0;
	}
	return host == p;
}

bool path_matches(std::string_view pattern, std::string_view path)
{
	if (pattern.empty())
		return true;
	if (pattern.back() == '*')
		return path.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
	return path == pattern;
}

// Whether the first bytes of a request can be an HTTP/1.x request line: a
// method token (A-Z, '-', '_') and a space. The parser only judges a whole
// header, which a banner or a ClientHello never completes.
enum class Sniff { Http, NotHttp, NeedMore };

Sniff sniff_http(std::string_view b)
{
	for (size_t i = 0; i < b.size() && i <= kMaxMethod; i++) {
		char c = b[i];
		if (c == ' ')
			return i > 0 ? Sniff::Http : Sniff::NotHttp;
		bool token = (c >= 'A' && c <= 'Z') || (i > 0 && (c == '-' || c == '_'));
		if (!token)
			return Sniff::NotHttp;
	}
	return b.size() > kMaxMethod ? Sniff::NotHttp : Sniff::NeedMore;
}

// A request body as the recorder reads it: every byte counted, the first
// `limit` kept. Beast's own bodies stop at their limit with an error; the
// recorder reads a large body to its end, to answer it.
struct RecordedBody {
	struct value_type {
		std::string kept;
		uint64_t limit = 0;
		uint64_t size = 0;
	};

	class reader {
	public:
		template <bool isRequest, class Fields>
		reader(http::header<isRequest, Fields>&, value_type& b) : body_(b)
		{
		}
		void init(const boost::optional<std::uint64_t>&, error_code& ec) { ec = {}; }
		template <class ConstBufferSequence>
		size_t put(const ConstBufferSequence& buffers, error_code& ec)
		{
			ec = {};
			size_t n = 0;
			for (auto b : boost::beast::buffers_range_ref(buffers)) {
				const char* p = static_cast<const char*>(b.data());
				uint64_t room = body_.limit > body_.kept.size() ? body_.limit - body_.kept.size() : 0;
				body_.kept.append(p, static_cast<size_t>(std::min<uint64_t>(room, b.size())));
				n += b.size();
			}
			body_.size += n;
			return n;
		}
		void finish(error_code& ec) { ec = {}; }

	private:
		value_type& body_;
	};
};

using Parser = http::request_parser<RecordedBody>;

uint64_t ms_since(Clock::time_point t)
{
	return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

std::string reason_of(unsigned status)
{
	http::status s = http::int_to_status(status);
	return s == http::status::unknown ? std::string("Unknown") : std::string(http::obsolete_reason(s));
}

}  // namespace

const WorldResponse* find_response(const std::vector<WorldResponse>& responses, std::string_view host,
				   std::string_view method, std::string_view target)
{
	std::string name = host_name(host);
	std::string_view path = target_path(target);
	for (const auto& r : responses)
		if (host_matches(r.host, name) && (r.method.empty() || r.method == method) && path_matches(r.path, path))
			return &r;
	return nullptr;
}

class Connection;
class GateConnection;

class WorldImpl : public std::enable_shared_from_this<WorldImpl> {
public:
	WorldImpl(net::io_context& io, WorldOptions o, OriginLookup lookup);

	void start();
	void stop();
	WorldStats stats() const;

	// For connections.
	const WorldOptions& options() const { return o_; }
	net::io_context& io() { return io_; }
	void record(const std::string& line);
	void count_bytes(uint64_t n) { bytes_in_ += n; }
	void count_http() { http_requests_++; }
	void count_tcp() { tcp_streams_++; }
	void forget(Connection* c) { live_.erase(c); }
	void forget_gate(GateConnection* c) { gates_.erase(c); }
	// Whether a gated connection may have its two pipes: four descriptors
	// for each gated connection, besides two for each of the connections
	// max_connections allows and kSpareFds, within the descriptor limit
	// read at start.
	bool may_pipe() const { return o_.max_connections * 2 + gates_.size() * 4 + kSpareFds <= nofile_; }
	Gate* gate() const { return o_.gate.get(); }
	void count_sni(bool passed) { (passed ? sni_passed_ : sni_denied_)++; }
	// A query to port 53 when the world synthesizes DNS.
	TlsTerminator* tls() const { return o_.tls.get(); }
	bool answers_dns(const Origin& o) const { return o_.world.synthesize_dns && o.port == kDnsPort; }
	// Answers one query (recorded); "" when there is nothing to send back.
	std::string answer_dns(const Origin&, std::string_view query);
	// The name bound to the origin's address, if the world's DNS gave it.
	void name_origin(Origin& o) const
	{
		if (o.name.empty())
			o.name = names_.name_of(o.addr);
	}

private:
	void accept(size_t i);
	void on_accept(size_t i, const error_code& ec, tcp::socket s);
	void receive(size_t i);
	void on_datagram(size_t i, size_t n);

	// A UDP socket, its buffer and the sender of what is in it.
	struct Datagrams {
		explicit Datagrams(net::io_context& io) : socket(io) {}
		udp::socket socket;
		udp::endpoint from;
		std::array<char, 65536> buf{};
	};

	net::io_context& io_;
	WorldOptions o_;
	OriginLookup lookup_;
	RecordsWriter records_;
	std::vector<tcp::acceptor> acceptors_;
	std::vector<std::unique_ptr<net::steady_timer>> retry_;  // an acceptor's pause after a failed accept
	std::vector<std::unique_ptr<Datagrams>> udp_;
	std::unordered_map<Connection*, std::shared_ptr<Connection>> live_;
	std::unordered_map<GateConnection*, std::shared_ptr<GateConnection>> gates_;
	NameTable names_;
	size_t nofile_ = 0;  // RLIMIT_NOFILE's soft limit at start
	bool started_ = false;
	bool stopped_ = false;
	error_code last_accept_error_;
	// Read by stats() from any thread.
	std::atomic<uint64_t> connections_{0}, unknown_{0}, refused_busy_{0}, http_requests_{0}, tcp_streams_{0},
		datagrams_{0}, records_written_{0}, records_dropped_{0}, bytes_in_{0}, dns_queries_{0}, sni_passed_{0},
		sni_denied_{0};
};

// One accepted connection. A request starts with its first byte: if it
// looks like an HTTP request line, Beast's parser reads it and it is
// answered and recorded, and the next request starts; anything else (or
// a header the parser rejects) makes the rest of the connection one "tcp"
// record, written at its end (EOF, idle, the byte limit, or a whole TLS
// ClientHello, after which a client would only wait for our answer).
class Connection : public std::enable_shared_from_this<Connection> {
public:
	enum class End { Eof, Error, Idle, Limit, ClientHello, Answered, Stop };

	Connection(std::shared_ptr<WorldImpl> w, tcp::socket s, Origin origin)
		: w_(std::move(w)), o_(w_->options()), socket_(std::move(s)), timer_(w_->io()), origin_(std::move(origin))
	{
	}

	void start()
	{
		begin_request(std::chrono::system_clock::now());
		if (w_->answers_dns(origin_)) {
			state_ = State::Dns;
			return read();
		}
		process();
	}

	void finish(End why)
	{
		if (state_ == State::Done)
			return;
		State was = state_;
		state_ = State::Done;
		bool header_whole = was == State::Http && parser_ && parser_->is_header_done();
		// Bytes that never made a request line or a whole header, or a
		// connection that sent nothing at all: a stream.
		bool bytes_only = (was == State::Start && (req_bytes_ > 0 || requests_ == 0)) ||
				  (was == State::Http && !header_whole);
		if (header_whole)
			write_http(0, why == End::Limit);  // a request cut short: no answer
		else if (bytes_only || was == State::Tcp)
			write_tcp(why, bytes_only);
		error_code ignored;
		timer_.cancel();
		if (why == End::Answered)
			socket_.shutdown(tcp::socket::shutdown_send, ignored);
		socket_.close(ignored);
		w_->forget(this);  // the handler that called this still holds the connection
	}

private:
	enum class State { Start, Http, Responding, Tcp, Dns, Done };

	void begin_request(std::chrono::system_clock::time_point t)
	{
		state_ = State::Start;
		req_time_ = t;
		req_start_ = Clock::now();
		req_bytes_ = in_.size();
		req_head_ = in_.substr(0, kHeadBytes);
		parser_.reset();
		continue_sent_ = false;
	}

	void process()
	{
		while (state_ == State::Start || state_ == State::Http) {
			if (state_ == State::Start) {
				if (in_.empty())
					return read();
				Sniff s = sniff_http(in_);
				if (s == Sniff::NeedMore)
					return read();
				if (s == Sniff::NotHttp)
					return enter_tcp(true);
				state_ = State::Http;
				parser_.emplace();
				parser_->header_limit(kHeaderLimit);
				parser_->body_limit(boost::none);  // the connection's byte limit bounds it
				parser_->eager(true);
				parser_->get().body().limit = o_.world.max_body_bytes;
				continue;
			}
			error_code ec;
			size_t n = in_.empty() ? 0 : parser_->put(net::buffer(in_), ec);
			in_.erase(0, n);
			if (ec == http::error::need_more || (!ec && n == 0 && !parser_->is_done()))
				return await_body();
			if (ec && !parser_->is_header_done())
				return enter_tcp(true);  // the parser consumed nothing of a header it rejects
			if (parser_->is_header_done() && parser_->get().version() != 10 && parser_->get().version() != 11)
				return enter_tcp(false);
			if (ec)
				return answer(400, "airlock world: bad request\n", false);  // a body it cannot frame
			if (parser_->is_done())
				return complete();
		}
		if (state_ == State::Tcp)
			read();
	}

	// The header is whole and the body is still to come: a client that
	// asked waits for 100 Continue before it sends it (curl -T).
	void await_body()
	{
		if (!parser_->is_header_done() || continue_sent_ || !in_.empty() || parser_->get().version() != 11)
			return read();
		auto expect = parser_->get().find(http::field::expect);
		if (expect == parser_->get().end() || !iequal(expect->value(), "100-continue"))
			return read();
		continue_sent_ = true;
		send_then_read("HTTP/1.1 100 Continue\r\n\r\n");
	}

	// Writes what is said, then reads on.
	void send_then_read(std::string what)
	{
		out_ = std::move(what);
		arm();
		net::async_write(socket_, wire_out(), [self = shared_from_this()](const error_code& ec, size_t) {
			if (self->state_ == State::Done)
				return;
			if (ec)
				return self->finish(End::Error);
			self->read();
		});
	}

	void read()
	{
		if (state_ == State::Done)
			return;
		if (conn_bytes_ >= o_.max_connection_bytes)
			return finish(End::Limit);
		size_t want = static_cast<size_t>(std::min<uint64_t>(kReadChunk, o_.max_connection_bytes - conn_bytes_));
		arm();
		socket_.async_read_some(net::buffer(chunk_.data(), want),
					[self = shared_from_this()](const error_code& ec, size_t n) { self->on_read(ec, n); });
	}

	void on_read(const error_code& ec, size_t n)
	{
		if (state_ == State::Done)
			return;
		conn_bytes_ += n;
		w_->count_bytes(n);
		std::string_view got(chunk_.data(), n);
		if (tls_) {
			BIO_write(SSL_get_rbio(tls_.get()), chunk_.data(), static_cast<int>(n));
			if (!tls_up_) {
				tcp_.bytes_in += n;
				return handshake(ec);
			}
			bool closed = false;
			got = decrypt(closed);
			n = got.size();
			// What the session wants to send back (alerts to a renegotiation,
			// say) goes out with the next answer; a client that makes it
			// pile up is closed. A close_notify ends nothing here: what came
			// before it is read as any request, and the socket's EOF ends it.
			if (BIO_ctrl_pending(SSL_get_wbio(tls_.get())) > kMaxTlsPending)
				return finish(End::Error);
		}
		if (state_ == State::Dns) {
			in_.append(got);
			if (ec)
				return finish(ec == net::error::eof ? End::Eof : End::Error);
			return dns_messages();
		}
		if (state_ == State::Tcp) {
			tcp_.bytes_in += n;
			take_head(tcp_.head, got);
			if (hello_pending_) {
				hello_.append(got.substr(0, kMaxClientHello - std::min(hello_.size(), kMaxClientHello)));
				if (check_hello())
					return;
			}
		} else {
			if (requests_ > 0 && req_bytes_ == 0 && n > 0) {
				// A later request on the connection starts with its first byte.
				req_time_ = std::chrono::system_clock::now();
				req_start_ = Clock::now();
			}
			in_.append(got);
			req_bytes_ += n;
			take_head(req_head_, got);
		}
		if (ec)
			return finish(ec == net::error::eof ? End::Eof : End::Error);
		process();
	}

	// DNS over TCP (RFC 7766): each message after its two-byte length;
	// every whole one is answered, in order, then the connection is read on.
	void dns_messages()
	{
		std::string answers;
		size_t at = 0;
		while (in_.size() - at >= 2) {
			size_t len = (static_cast<uint8_t>(in_[at]) << 8) | static_cast<uint8_t>(in_[at + 1]);
			if (in_.size() - at < 2 + len)
				break;
			std::string a = w_->answer_dns(origin_, std::string_view(in_).substr(at + 2, len));
			at += 2 + len;
			if (a.empty())
				continue;
			answers.push_back(static_cast<char>(a.size() >> 8));
			answers.push_back(static_cast<char>(a.size() & 0xff));
			answers += a;
		}
		in_.erase(0, at);
		if (answers.empty())
			return read();
		send_then_read(std::move(answers));
	}

	static void take_head(std::string& head, std::string_view got)
	{
		if (head.size() < kHeadBytes)
			head.append(got.substr(0, kHeadBytes - head.size()));
	}

	// The rest of the connection is one stream; from_start: in_ holds the
	// request's bytes from its first (the parser consumed none).
	void enter_tcp(bool from_start)
	{
		state_ = State::Tcp;
		tcp_ = TcpRecord{};
		tcp_.time = req_time_;
		tcp_start_ = req_start_;
		tcp_.bytes_in = req_bytes_;
		tcp_.head = req_head_;
		tcp_.tls = tls_up_;
		tcp_.decrypted = tls_up_;
		tcp_.sni = sni_;
		hello_pending_ = !tls_up_ && from_start && !in_.empty() && in_.front() == '\x16';
		if (hello_pending_)
			hello_ = in_.substr(0, kMaxClientHello);
		in_.clear();
		parser_.reset();
		if (hello_pending_ && check_hello())
			return;
		read();
	}

	// true: a whole ClientHello, the stream is recorded and closed.
	bool check_hello()
	{
		ClientHello h = parse_client_hello(hello_);
		if (h.status == ClientHello::Status::NeedMore && hello_.size() < kMaxClientHello)
			return false;
		hello_pending_ = false;
		std::string hello;
		hello.swap(hello_);
		if (h.status != ClientHello::Status::Ok)
			return false;
		tcp_.tls = true;
		if (h.has_server_name)
			tcp_.sni = h.server_name;
		if (!w_->tls()) {
			finish(End::ClientHello);
			return true;
		}
		// The recorder ends the TLS connection: the ClientHello (and all the
		// connection sent so far) is the session's first input.
		try {
			tls_ = w_->tls()->session(tcp_.sni, origin_.addr);
		} catch (const std::exception& e) {
			tcp_.tls_error = e.what();
			finish(End::Error);
			return true;
		}
		BIO_write(SSL_get_rbio(tls_.get()), hello.data(), static_cast<int>(hello.size()));
		handshake({});
		return true;
	}

	// Drives the handshake with what came in; ec: how the read that brought
	// it ended.
	void handshake(const error_code& ec)
	{
		int r = SSL_do_handshake(tls_.get());
		if (r == 1) {
			tls_up_ = true;
			sni_ = tcp_.sni;
			return flush_tls([self = shared_from_this()] { self->begin_plaintext(); });
		}
		int err = SSL_get_error(tls_.get(), r);
		if (err == SSL_ERROR_WANT_READ && !ec)
			return flush_tls([self = shared_from_this()] { self->read(); });
		tcp_.tls_error = err == SSL_ERROR_WANT_READ ? "the client closed during the handshake" : openssl_error();
		if (tcp_.tls_error.empty())
			tcp_.tls_error = fmt::format("handshake error {}", err);
		// The alert, if any, then the end.
		flush_tls([self = shared_from_this()] { self->finish(End::Error); });
	}

	// The handshake is done: what follows is read as a new connection's
	// bytes (HTTP, or a stream), decrypted.
	void begin_plaintext()
	{
		if (state_ == State::Done)
			return;
		tcp_ = TcpRecord{};
		in_.clear();
		begin_request(std::chrono::system_clock::now());
		bool closed = false;
		std::string_view got = decrypt(closed);
		if (!got.empty()) {
			in_.append(got);
			req_bytes_ = got.size();
			take_head(req_head_, got);
		}
		(void)closed;  // the socket's EOF ends the connection
		process();
	}

	// Everything the session can decrypt now; closed: the client ended it.
	std::string_view decrypt(bool& closed)
	{
		plain_.clear();
		char buf[16384];
		for (;;) {
			int r = SSL_read(tls_.get(), buf, sizeof(buf));
			if (r > 0) {
				plain_.append(buf, static_cast<size_t>(r));
				continue;
			}
			int err = SSL_get_error(tls_.get(), r);
			closed = err != SSL_ERROR_WANT_READ;
			ERR_clear_error();
			return plain_;
		}
	}

	// Sends what the session has to send (handshake, alert), then `next`.
	void flush_tls(std::function<void()> next)
	{
		tls_out_ = drain_tls();
		if (tls_out_.empty())
			return next();
		arm();
		net::async_write(socket_, net::buffer(tls_out_),
				 [self = shared_from_this(), next = std::move(next)](const error_code& ec, size_t) {
					 if (self->state_ == State::Done)
						 return;
					 if (ec)
						 return self->finish(End::Error);
					 next();
				 });
	}

	std::string drain_tls()
	{
		std::string out;
		BIO* w = SSL_get_wbio(tls_.get());
		char buf[16384];
		int n;
		while ((n = BIO_read(w, buf, sizeof(buf))) > 0)
			out.append(buf, static_cast<size_t>(n));
		return out;
	}

	// out_ on the wire: encrypted inside TLS.
	net::const_buffer wire_out()
	{
		if (!tls_up_)
			return net::buffer(out_);
		if (!out_.empty())
			SSL_write(tls_.get(), out_.data(), static_cast<int>(out_.size()));
		tls_out_ = drain_tls();
		return net::buffer(tls_out_);
	}

	void complete()
	{
		const auto& req = parser_->get();
		const WorldResponse* fixture = nullptr;
		auto host = req.find(http::field::host);
		std::string match_host = host != req.end() ? std::string(host->value()) : origin_.name;
		fixture = find_response(o_.world.responses, match_host, req.method_string(), req.target());
		bool keep = req.keep_alive();
		if (fixture)
			answer(fixture->status, fixture->body, keep, &fixture->headers);
		else
			answer(200, std::string(kDefaultBody), keep);
	}

	// Records the request with the status it gets, then answers it.
	void answer(unsigned status, const std::string& body, bool keep_alive,
		    const std::vector<std::pair<std::string, std::string>>* headers = nullptr)
	{
		write_http(status, false);
		const auto& req = parser_->get();
		bool no_body = status < 200 || status == 204 || status == 304;
		if (status < 200)
			keep_alive = false;  // an interim answer and nothing after it: the client must not wait
		out_ = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_of(status));
		if (headers) {
			for (const auto& [name, value] : *headers)
				if (!iequal(name, "content-length") && !iequal(name, "transfer-encoding") &&
				    !iequal(name, "connection"))
					out_ += fmt::format("{}: {}\r\n", name, value);
		} else {
			out_ += "Content-Type: text/plain\r\n";
		}
		if (!no_body)
			out_ += fmt::format("Content-Length: {}\r\n", body.size());
		if (!keep_alive)
			out_ += "Connection: close\r\n";
		else if (req.version() == 10)
			out_ += "Connection: keep-alive\r\n";
		out_ += "\r\n";
		if (!no_body && req.method() != http::verb::head)
			out_ += body;
		state_ = State::Responding;
		arm();
		net::async_write(socket_, wire_out(),
				 [self = shared_from_this(), keep_alive](const error_code& ec, size_t) {
					 if (self->state_ == State::Done)
						 return;
					 if (ec)
						 return self->finish(End::Error);
					 if (!keep_alive)
						 return self->finish(End::Answered);
					 self->begin_request(std::chrono::system_clock::now());
					 self->process();
				 });
	}

	void write_http(unsigned status, bool cut)
	{
		const auto& req = parser_->get();
		HttpRecord r;
		r.tls = tls_up_;
		r.sni = sni_;
		r.time = req_time_;
		r.method = std::string(req.method_string());
		if (auto h = req.find(http::field::host); h != req.end())
			r.host = std::string(h->value());
		r.path = std::string(req.target());
		for (const auto& f : req) {
			auto same = std::find_if(r.headers.begin(), r.headers.end(),
						 [&](const auto& kv) { return iequal(kv.first, f.name_string()); });
			if (same != r.headers.end())
				same->second += ", " + std::string(f.value());
			else
				r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
		}
		const auto& body = req.body();
		r.body = body.kept;
		r.body_bytes = body.size;
		r.body_truncated = cut || body.size > body.kept.size();
		r.status = status;
		r.duration_ms = ms_since(req_start_);
		requests_++;
		w_->count_http();
		w_->record(http_record_line(o_.sandbox, origin_, r));
	}

	// from_request: the stream is the current request's bytes, which never
	// became a request.
	void write_tcp(End why, bool from_request)
	{
		if (from_request) {
			tcp_ = TcpRecord{};
			tcp_.tls = tls_up_;
			tcp_.decrypted = tls_up_;
			tcp_.sni = sni_;
			tcp_.time = req_time_;
			tcp_start_ = req_start_;
			tcp_.bytes_in = req_bytes_;
			tcp_.head = req_head_;
		}
		tcp_.truncated = why == End::Limit;
		tcp_.duration_ms = ms_since(tcp_start_);
		w_->count_tcp();
		w_->record(tcp_record_line(o_.sandbox, origin_, tcp_));
	}

	// The idle deadline of the operation about to start.
	void arm()
	{
		uint64_t gen = ++timer_gen_;
		timer_.expires_after(o_.idle_timeout);
		timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
			if (!ec && gen == self->timer_gen_)
				self->finish(End::Idle);
		});
	}

	std::shared_ptr<WorldImpl> w_;
	const WorldOptions& o_;
	tcp::socket socket_;
	net::steady_timer timer_;
	uint64_t timer_gen_ = 0;
	Origin origin_;
	State state_ = State::Start;
	std::array<char, kReadChunk> chunk_{};
	uint64_t conn_bytes_ = 0;
	std::string in_;   // read, not yet parsed
	std::string out_;  // being written
	unsigned requests_ = 0;
	// The current request: when and how it started.
	std::chrono::system_clock::time_point req_time_;
	Clock::time_point req_start_;
	uint64_t req_bytes_ = 0;
	std::string req_head_;
	std::optional<Parser> parser_;
	bool continue_sent_ = false;
	// A stream recorded as tcp.
	TcpRecord tcp_;
	Clock::time_point tcp_start_{};
	bool hello_pending_ = false;
	// TLS the recorder ends (WorldOptions::tls): the session, whether its
	// handshake is done, the name the client asked for, and buffers.
	SslPtr tls_;
	bool tls_up_ = false;
	std::string sni_;
	std::string plain_, tls_out_;
	std::string hello_;
};

// A connection of a gated allow rule. Its ClientHello is read first (no
// byte goes anywhere before), its name judged; passed, the agent hands over
// a socket to the destination and every byte read so far, then everything
// either side sends, goes to the other untouched. One record at the end.
class GateConnection : public std::enable_shared_from_this<GateConnection> {
public:
	GateConnection(std::shared_ptr<WorldImpl> w, tcp::socket s, Origin origin, GateRule rule)
		: w_(std::move(w)), o_(w_->options()), client_(std::move(s)), upstream_(w_->io()), timer_(w_->io()),
		  origin_(std::move(origin)), rule_(std::move(rule))
	{
	}

	void start()
	{
		rec_.time = std::chrono::system_clock::now();
		started_ = Clock::now();
		// The ClientHello, then the destination's socket and its connect,
		// come within the idle timeout or the connection is closed.
		timer_.expires_after(o_.idle_timeout);
		timer_.async_wait([self = shared_from_this()](const error_code& ec) {
			if (!ec && !self->passed_)
				self->end_before_splice("the ClientHello or the destination took longer than the idle timeout");
		});
		read_hello();
	}

	// The recorder stops.
	void stop() { finish(); }

private:
	// What a ClientHello may take in records: the message's bound, and a
	// header for every 256 bytes of it.
	static constexpr size_t kMaxHelloBytes = kMaxClientHello + kMaxClientHello / 256 * 5 + 5;

	void read_hello()
	{
		size_t have = hello_.size();
		if (have >= kMaxHelloBytes)
			return deny("", fmt::format("the ClientHello is spread over more than {} bytes", kMaxHelloBytes));
		hello_.resize(std::min(have + kReadChunk, kMaxHelloBytes));
		client_.async_read_some(net::buffer(hello_.data() + have, hello_.size() - have),
					[self = shared_from_this(), have](const error_code& ec, size_t n) {
						self->hello_.resize(have + n);
						self->on_hello(ec);
					});
	}

	void on_hello(const error_code& ec)
	{
		if (done_)
			return;
		ClientHello h = parse_client_hello(hello_);
		if (h.status == ClientHello::Status::NeedMore) {
			if (ec)
				return deny("", hello_.empty() ? "the connection sent nothing"
							       : fmt::format("the connection ended within its first {} bytes, "
									     "before a whole ClientHello",
									     hello_.size()));
			return read_hello();
		}
		if (h.status != ClientHello::Status::Ok)
			return deny("", fmt::format("{}: {}", to_string(h.status), h.error));
		rec_.sni = h.server_name;
		if (std::string why = judge(h); !why.empty())
			return deny(h.server_name, why);
		asked_ = true;
		w_->gate()->connect(client_.native_handle(), origin_, [self = shared_from_this()](int fd, int err) {
			self->on_upstream(fd, err);
		});
	}

	// "" passes; else why not.
	std::string judge(const ClientHello& h) const
	{
		if (!h.has_server_name)
			return "the ClientHello names no server";
		if (h.encrypted_client_hello)
			return fmt::format("an encrypted ClientHello: the name it is for is hidden behind '{}'", h.server_name);
		if (std::string p = host_name_problem(h.server_name); !p.empty())
			return "server_name: " + p;
		if (!domain_covers(rule_.domain, rule_.wildcard, h.server_name))
			return fmt::format("'{}' is not {} of rule {}", h.server_name,
					   rule_.wildcard ? "a name below " + rule_.domain : rule_.domain, origin_.rule);
		std::string learned = w_->gate()->learned_name(origin_.addr);
		if (!iequal(learned, h.server_name))
			return fmt::format("'{}' did not resolve to {} for this sandbox ({})", h.server_name,
					   format_address(origin_.addr),
					   learned.empty() ? std::string("no name did") : "'" + learned + "' did");
		return "";
	}

	void deny(const std::string& sni, const std::string& why)
	{
		if (done_)
			return;
		rec_.sni = sni;
		rec_.reason = why;
		w_->count_sni(false);
		w_->gate()->violation(origin_, sni, why);
		finish();
	}

	// Passed the gate, but no way on: recorded, not a violation.
	void end_before_splice(const std::string& why)
	{
		if (done_)
			return;
		if (!asked_)
			return deny(rec_.sni, why);
		rec_.upstream_error = why;
		finish();
	}

	void on_upstream(int fd, int err)
	{
		if (done_) {
			if (fd >= 0)
				::close(fd);
			return;
		}
		if (fd < 0)
			return end_before_splice(std::strerror(err));
		error_code ec;
		upstream_.assign(origin_.addr.family == AL_FAMILY_IPV4 ? tcp::v4() : tcp::v6(), fd, ec);
		if (ec) {
			::close(fd);
			return end_before_splice(ec.message());
		}
		upstream_.async_wait(tcp::socket::wait_write, [self = shared_from_this()](const error_code& e) {
			self->on_connected(e);
		});
	}

	void on_connected(const error_code& ec)
	{
		if (done_)
			return;
		int err = 0;
		socklen_t len = sizeof(err);
		if (ec)
			return end_before_splice(ec.message());
		if (::getsockopt(upstream_.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err)
			return end_before_splice(std::strerror(err));
		passed_ = true;
		timer_.cancel();
		w_->count_sni(true);
		// In the kernel from socket to socket through a pipe a way, when
		// the proxy can have them (else through its buffers).
		error_code nb1, nb2;
		client_.native_non_blocking(true, nb1);
		upstream_.native_non_blocking(true, nb2);
		// TCP urgent data stays in the stream (it goes on as a byte like
		// the others, without its urgency): never passed over.
		int inline_urgent = 1;
		for (tcp::socket* sock : {&client_, &upstream_})
			(void)::setsockopt(sock->native_handle(), SOL_SOCKET, SO_OOBINLINE, &inline_urgent,
					   sizeof(inline_urgent));
		if (nb1 || nb2 || !w_->may_pipe() || !up_.open_pipe() || !down_.open_pipe()) {
			up_.close_pipe();
			down_.close_pipe();
		}
		// What was read so far goes first, then both ways as it comes.
		up_.buf = std::move(hello_);
		up_.len = up_.buf.size();
		send(up_, client_, upstream_, rec_.bytes_out);
		next(down_, upstream_, client_, rec_.bytes_back);
	}

	struct Way {
		std::string buf;
		size_t len = 0;
		bool closed = false;
		// The pipe spliced through, and how much of it is to be sent.
		std::array<int, 2> pipe{-1, -1};
		size_t queued = 0;

		Way() = default;
		Way(const Way&) = delete;
		Way& operator=(const Way&) = delete;
		~Way() { close_pipe(); }

		// A pipe of the default size, or none (a smaller one, past the
		// user's pipe pages, would be slower than the buffers).
		bool open_pipe()
		{
			if (::pipe2(pipe.data(), O_NONBLOCK | O_CLOEXEC) != 0)
				return false;
			int size = ::fcntl(pipe[1], F_GETPIPE_SZ);
			if (size < 0 || static_cast<size_t>(size) < kPipeBytes) {
				close_pipe();
				return false;
			}
			return true;
		}
		void close_pipe()
		{
			for (int& fd : pipe) {
				if (fd >= 0)
					::close(fd);
				fd = -1;
			}
		}
		bool spliced() const { return pipe[0] >= 0; }
	};

	// The way's next step: read (through the proxy's buffers), or splice.
	void next(Way& w, tcp::socket& from, tcp::socket& to, uint64_t& count)
	{
		if (w.spliced())
			splice(w, from, to, count);
		else
			read(w, from, to, count);
	}

	// Moves what `from` sends to `to` in the kernel: socket to pipe, pipe
	// to socket, the pages themselves and no copy where the kernel can.
	// Each side not ready is waited for; after kSpliceTurns the other
	// connections run first. The end of what `from` sends (or a failed
	// read) is a half close, as in read(); a failed send ends the
	// connection, as in send() (SIGPIPE is ignored: splice has no
	// MSG_NOSIGNAL). TCP urgent data stops a splice at its mark
	// (SIOCATMARK): that way goes through the buffers from then on, the
	// urgent byte inline with the rest.
	void splice(Way& w, tcp::socket& from, tcp::socket& to, uint64_t& count)
	{
		for (int turn = 0; turn < kSpliceTurns; turn++) {
			if (w.queued > 0) {
				ssize_t n = ::splice(w.pipe[0], nullptr, to.native_handle(), nullptr, w.queued,
						     SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
				if (n > 0) {
					w.queued -= static_cast<size_t>(n);
					count += static_cast<uint64_t>(n);
					continue;
				}
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0 && errno == EAGAIN)
					return wait(w, from, to, count, to, tcp::socket::wait_write);
				return finish();
			}
			ssize_t n = ::splice(from.native_handle(), nullptr, w.pipe[1], nullptr, kPipeBytes,
					     SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				w.queued = static_cast<size_t>(n);
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0 || (n < 0 && errno == EAGAIN)) {
				// Nothing spliced at an urgent mark: the splice stops there
				// (and says 0 once the end came too), recv goes on.
				int at_mark = 0;
				if (::ioctl(from.native_handle(), SIOCATMARK, &at_mark) == 0 && at_mark) {
					w.close_pipe();
					return read(w, from, to, count);
				}
				if (n < 0)
					return wait(w, from, to, count, from, tcp::socket::wait_read);
			}
			if (n < 0 && (errno == EINVAL || errno == ENOSYS || errno == EPERM)) {
				// A kernel or filter without splice for these: the buffers.
				w.close_pipe();
				return read(w, from, to, count);
			}
			return half_close(w, to);
		}
		net::post(w_->io(), [self = shared_from_this(), &w, &from, &to, &count] {
			if (!self->done_)
				self->splice(w, from, to, count);
		});
	}

	void wait(Way& w, tcp::socket& from, tcp::socket& to, uint64_t& count, tcp::socket& on,
		  tcp::socket::wait_type what)
	{
		on.async_wait(what, [self = shared_from_this(), &w, &from, &to, &count](const error_code& ec) {
			if (self->done_)
				return;
			if (ec)
				return self->finish();
			self->splice(w, from, to, count);
		});
	}

	void read(Way& w, tcp::socket& from, tcp::socket& to, uint64_t& count)
	{
		if (w.buf.size() < kReadChunk)
			w.buf.resize(kReadChunk);
		from.async_read_some(net::buffer(w.buf.data(), kReadChunk),
				     [self = shared_from_this(), &w, &from, &to, &count](const error_code& ec, size_t n) {
					     if (self->done_)
						     return;
					     if (ec) {
						     self->half_close(w, to);
						     return;
					     }
					     w.len = n;
					     self->send(w, from, to, count);
				     });
	}

	void send(Way& w, tcp::socket& from, tcp::socket& to, uint64_t& count)
	{
		net::async_write(to, net::buffer(w.buf.data(), w.len),
				 [self = shared_from_this(), &w, &from, &to, &count](const error_code& ec, size_t n) {
					 if (self->done_)
						 return;
					 count += n;
					 if (ec)
						 return self->finish();
					 self->next(w, from, to, count);
				 });
	}

	// One side ended what it sends: the other is told, and what it still
	// sends goes on.
	void half_close(Way& w, tcp::socket& to)
	{
		error_code ignored;
		w.closed = true;
		to.shutdown(tcp::socket::shutdown_send, ignored);
		if (up_.closed && down_.closed)
			finish();
	}

	void finish()
	{
		if (done_)
			return;
		done_ = true;
		rec_.passed = passed_;
		rec_.duration_ms = ms_since(started_);
		w_->record(sni_record_line(o_.sandbox, origin_, rec_));
		error_code ignored;
		timer_.cancel();
		client_.close(ignored);
		upstream_.close(ignored);
		up_.close_pipe();
		down_.close_pipe();
		w_->forget_gate(this);
	}

	std::shared_ptr<WorldImpl> w_;
	const WorldOptions& o_;
	tcp::socket client_, upstream_;
	net::steady_timer timer_;
	Origin origin_;
	GateRule rule_;
	SniRecord rec_;
	Clock::time_point started_;
	std::string hello_;
	Way up_, down_;
	bool asked_ = false, passed_ = false, done_ = false;
};

WorldImpl::WorldImpl(net::io_context& io, WorldOptions o, OriginLookup lookup)
	: io_(io), o_(std::move(o)), lookup_(std::move(lookup)), records_(o_.records_fd, o_.max_records_bytes, o_.sandbox)
{
	o_.records_fd = -1;  // the writer's
	if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0)
		nofile_ = rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX / 2 : static_cast<size_t>(rl.rlim_cur);
	std::vector<int> fds = std::move(o_.listen_fds);
	o_.listen_fds.clear();
	for (size_t i = 0; i < fds.size(); i++) {
		sockaddr_storage ss{};
		socklen_t len = sizeof(ss);
		error_code ec;
		if (::getsockname(fds[i], reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
			ec = error_code(errno, boost::system::system_category());
		} else if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
			ec = error_code(EAFNOSUPPORT, boost::system::system_category());
		} else {
			acceptors_.emplace_back(io_);
			acceptors_.back().assign(ss.ss_family == AF_INET ? tcp::v4() : tcp::v6(), fds[i], ec);
		}
		if (ec) {
			for (size_t j = i; j < fds.size(); j++)
				::close(fds[j]);
			fail("world recorder: listen fd {}: {}", fds[i], ec.message());
		}
		retry_.push_back(std::make_unique<net::steady_timer>(io_));
	}
	std::vector<int> ufds = std::move(o_.udp_fds);
	o_.udp_fds.clear();
	for (size_t i = 0; i < ufds.size(); i++) {
		sockaddr_storage ss{};
		socklen_t len = sizeof(ss);
		int type = 0;
		socklen_t tlen = sizeof(type);
		error_code ec;
		if (::getsockname(ufds[i], reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
		    ::getsockopt(ufds[i], SOL_SOCKET, SO_TYPE, &type, &tlen) != 0) {
			ec = error_code(errno, boost::system::system_category());
		} else if ((ss.ss_family != AF_INET && ss.ss_family != AF_INET6) || type != SOCK_DGRAM) {
			ec = error_code(EPROTOTYPE, boost::system::system_category());
		} else if (!o_.datagram_origin) {
			ec = error_code(EINVAL, boost::system::system_category());
		} else {
			udp_.push_back(std::make_unique<Datagrams>(io_));
			udp_.back()->socket.assign(ss.ss_family == AF_INET ? udp::v4() : udp::v6(), ufds[i], ec);
			if (!ec)
				udp_.back()->socket.non_blocking(true, ec);  // an answer never waits
		}
		if (ec) {
			for (size_t j = i; j < ufds.size(); j++)
				::close(ufds[j]);
			fail("world recorder: udp fd {}: {}", ufds[i], ec.message());
		}
	}
}

void WorldImpl::start()
{
	if (started_ || stopped_)
		return;
	started_ = true;
	for (size_t i = 0; i < acceptors_.size(); i++)
		accept(i);
	for (size_t i = 0; i < udp_.size(); i++)
		receive(i);
}

void WorldImpl::receive(size_t i)
{
	Datagrams& d = *udp_[i];
	d.socket.async_receive_from(net::buffer(d.buf), d.from,
				    [self = shared_from_this(), i](const error_code& ec, size_t n) {
					    if (self->stopped_ || ec == net::error::operation_aborted)
						    return;
					    if (!ec)
						    self->on_datagram(i, n);
					    // An error (a queued ICMP report, say) loses no datagram.
					    self->receive(i);
				    });
}

// Each datagram is one record; nothing is answered.
void WorldImpl::on_datagram(size_t i, size_t n)
{
	Datagrams& d = *udp_[i];
	datagrams_++;
	bytes_in_ += n;
	std::optional<Origin> origin;
	try {
		origin = o_.datagram_origin(d.socket.native_handle(), d.from.data(), static_cast<socklen_t>(d.from.size()));
	} catch (const std::exception& e) {
		spdlog::warn("world recorder of {}: origin lookup: {}", o_.sandbox, e.what());
	}
	if (!origin) {
		unknown_++;
		return;
	}
	if (answers_dns(*origin)) {
		std::string a = answer_dns(*origin, std::string_view(d.buf.data(), n));
		if (!a.empty()) {
			// Never waits: an answer the socket has no room for is lost,
			// as a datagram may be, and the client asks again.
			error_code ec;
			d.socket.send_to(net::buffer(a), d.from, 0, ec);
		}
		return;
	}
	name_origin(*origin);
	UdpRecord r;
	r.time = std::chrono::system_clock::now();
	r.bytes_in = n;
	r.head.assign(d.buf.data(), std::min(n, kHeadBytes));
	record(udp_record_line(o_.sandbox, *origin, r));
}

void WorldImpl::accept(size_t i)
{
	acceptors_[i].async_accept([self = shared_from_this(), i](const error_code& ec, tcp::socket s) {
		self->on_accept(i, ec, std::move(s));
	});
}

void WorldImpl::on_accept(size_t i, const error_code& ec, tcp::socket s)
{
	if (stopped_)
		return;
	if (ec) {
		if (ec == net::error::operation_aborted)
			return;
		if (ec != last_accept_error_)
			spdlog::warn("world recorder of {}: accept: {}", o_.sandbox, ec.message());
		last_accept_error_ = ec;
		// Out of descriptors, say: the connection waits in the backlog, we
		// try again in a moment rather than spin.
		retry_[i]->expires_after(kAcceptRetry);
		retry_[i]->async_wait([self = shared_from_this(), i](const error_code& e) {
			if (!e && !self->stopped_)
				self->accept(i);
		});
		return;
	}
	last_accept_error_ = {};
	connections_++;
	error_code ignored;
	if (live_.size() + gates_.size() >= o_.max_connections) {
		refused_busy_++;
		s.close(ignored);
		return accept(i);
	}
	std::optional<Origin> origin;
	try {
		origin = lookup_(s.native_handle());
	} catch (const std::exception& e) {
		spdlog::warn("world recorder of {}: origin lookup: {}", o_.sandbox, e.what());
	}
	if (!origin) {
		unknown_++;
		s.close(ignored);
		return accept(i);
	}
	if (const GateRule* rule = o_.gate ? o_.gate->rule(origin->rule) : nullptr) {
		auto g = std::make_shared<GateConnection>(shared_from_this(), std::move(s), std::move(*origin), *rule);
		gates_.emplace(g.get(), g);
		g->start();
		return accept(i);
	}
	name_origin(*origin);
	auto c = std::make_shared<Connection>(shared_from_this(), std::move(s), std::move(*origin));
	live_.emplace(c.get(), c);
	c->start();
	accept(i);
}

std::string WorldImpl::answer_dns(const Origin& o, std::string_view query)
{
	DnsQuery q = parse_dns_query(query);
	// Once the records file is full, a record is not even formatted.
	auto note = [&](const DnsRecord& r) {
		if (records_.full())
			records_dropped_++;
		else
			record(dns_record_line(o_.sandbox, o, r));
	};
	DnsRecord r;
	r.time = std::chrono::system_clock::now();
	r.bytes_in = query.size();
	if (q.ignore || q.problem != DnsRcode::NoError)
		r.head = std::string(query.substr(0, kHeadBytes));
	if (q.ignore) {
		note(r);  // written down, not answered
		return {};
	}
	dns_queries_++;
	DnsAnswer a = answer_dns_query(q, names_);
	if (q.problem == DnsRcode::NoError) {
		r.query = q.name;
		r.qtype = dns_type_name(q.qtype);
	}
	r.rcode = dns_rcode_name(a.rcode);
	r.answer = a.answer;
	note(r);
	return std::move(a.wire);
}

void WorldImpl::record(const std::string& line)
{
	if (records_.write(line))
		records_written_++;
	else
		records_dropped_++;
}

void WorldImpl::stop()
{
	if (stopped_)
		return;
	stopped_ = true;
	error_code ignored;
	for (auto& a : acceptors_)
		a.close(ignored);
	for (auto& t : retry_)
		t->cancel();
	for (auto& u : udp_)
		u->socket.close(ignored);
	std::vector<std::shared_ptr<Connection>> open;
	open.reserve(live_.size());
	for (auto& [ptr, c] : live_)
		open.push_back(c);
	for (auto& c : open)
		c->finish(Connection::End::Stop);
	live_.clear();
	std::vector<std::shared_ptr<GateConnection>> gated;
	gated.reserve(gates_.size());
	for (auto& [ptr, g] : gates_)
		gated.push_back(g);
	for (auto& g : gated)
		g->stop();
	gates_.clear();
	records_.close();
}

WorldStats WorldImpl::stats() const
{
	WorldStats s;
	s.connections = connections_;
	s.unknown = unknown_;
	s.refused_busy = refused_busy_;
	s.http_requests = http_requests_;
	s.tcp_streams = tcp_streams_;
	s.datagrams = datagrams_;
	s.dns_queries = dns_queries_;
	s.records_written = records_written_;
	s.records_dropped = records_dropped_;
	s.bytes_in = bytes_in_;
	s.sni_passed = sni_passed_;
	s.sni_denied = sni_denied_;
	return s;
}

WorldRecorder::WorldRecorder(net::io_context& io, WorldOptions o, OriginLookup lookup)
	: impl_(std::make_shared<WorldImpl>(io, std::move(o), std::move(lookup)))
{
}

WorldRecorder::~WorldRecorder()
{
	impl_->stop();
}

void WorldRecorder::start()
{
	impl_->start();
}

void WorldRecorder::stop()
{
	impl_->stop();
}

WorldStats WorldRecorder::stats() const
{
	return impl_->stats();
}

}  // namespace airlock::proxy
