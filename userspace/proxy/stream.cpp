#include "proxy/stream.h"

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <openssl/err.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "proxy/canned.h"
#include "proxy/client_hello.h"
#include "proxy/conn_common.h"
#include "proxy/http_request.h"
#include "proxy/recorder.h"
#include "proxy/tls.h"

namespace airlock::proxy {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

constexpr size_t kMaxTlsPending = 64 * 1024;  // bytes a TLS session may hold to send

const std::vector<std::pair<std::string, std::string>> kJsonHeaders = {{"Content-Type", "application/json"}};

// A "tcp" record is written at the stream's end: EOF, idle, the byte
// limit, or a whole TLS ClientHello, after which a client would only wait
// for our answer.
class Connection : public StreamConnection, public std::enable_shared_from_this<Connection> {
public:
	enum class End { Eof, Error, Idle, Limit, ClientHello, Answered, Stop };

	Connection(std::shared_ptr<WorldImpl> w, tcp::socket s, Origin origin)
	    : w_(std::move(w)), o_(w_->options()), socket_(std::move(s)), timer_(w_->io()), origin_(std::move(origin))
	{
	}

	void start() override
	{
		begin_request(std::chrono::system_clock::now());
		if (w_->answers_dns(origin_)) {
			state_ = State::Dns;
			return read();
		}
		process();
	}

	void stop() override { finish(End::Stop); }

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
		body_scan_.reset();
		secret_.clear();
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
				secrets_ = w_->setup();
				if (secrets_ && !secrets_->never_send.empty()) {
					body_scan_.emplace(secrets_->never_send);
					parser_->get().body().scan = &*body_scan_;
				}
				continue;
			}
			error_code ec;
			size_t n = in_.empty() ? 0 : parser_->put(net::buffer(in_), ec);
			in_.erase(0, n);
			if (ec == http::error::need_more || (!ec && n == 0 && !parser_->is_done()))
				return await_body();
			if (ec && !parser_->is_header_done())
				return enter_tcp(true);  // the parser consumed nothing of a header it rejects
			if (parser_->is_header_done() && parser_->get().version() != 10 &&
			    parser_->get().version() != 11)
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
		size_t want = static_cast<size_t>(
			std::min<uint64_t>(kReadChunk, o_.max_connection_bytes - conn_bytes_));
		arm();
		socket_.async_read_some(net::buffer(chunk_.data(), want),
					[self = shared_from_this()](const error_code& ec, size_t n) {
						self->on_read(ec, n);
					});
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
				hello_.append(
					got.substr(0, kMaxClientHello - std::min(hello_.size(), kMaxClientHello)));
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
		tcp_.tls_error = err == SSL_ERROR_WANT_READ ? "the client closed during the handshake"
							    : openssl_error();
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

	// The policy's secret this request carries (its request line, headers
	// or body, as docs/gate.md says the gate looks), or nullopt.
	std::optional<std::string> carried_secret() const
	{
		if (!body_scan_)
			return std::nullopt;
		const auto& req = parser_->get();
		gate::NeverSend::Scan head(secrets_->never_send);
		head.feed(req.method_string());
		head.feed(" ");
		head.feed(req.target());
		head.feed("\r\n");
		for (const auto& f : req) {
			head.feed(f.name_string());
			head.feed(": ");
			head.feed(f.value());
			head.feed("\r\n");
		}
		if (auto found = head.found())
			return found;
		return body_scan_->found();
	}

	void complete()
	{
		const auto& req = parser_->get();
		const WorldResponse* fixture = nullptr;
		auto host = req.find(http::field::host);
		std::string match_host = host != req.end() ? std::string(host->value()) : origin_.name;
		// A secret is refused as the gate would refuse it: the world
		// answers 403 and the record names the secret, never its value.
		// Not a violation: nothing the world receives leaves it.
		if (auto found = carried_secret()) {
			secret_ = *found;
			w_->count_secret();
			std::string detail = fmt::format("the request carries secret '{}'", secret_);
			nlohmann::json body{{"airlock", "denied"},
					    {"rule", origin_.rule},
					    {"reason", "secret"},
					    {"detail", detail}};
			return answer(403, body.dump() + "\n", req.keep_alive(), &kJsonHeaders);
		}
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
		if (status < 200)
			keep_alive = false;  // an interim answer and nothing after it: the client must not wait
		out_ = format_response(status, body, keep_alive, req.version(), req.method() == http::verb::head,
				       headers);
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
		if (secret_.empty())
			secret_ = carried_secret().value_or("");  // a request cut short is scanned as far as it came
		if (!secret_.empty()) {
			r.secret = secret_;
			r.method = w_->scrub(std::move(r.method));
			r.host = w_->scrub(std::move(r.host));
			r.path = w_->scrub(r.path.substr(0, r.path.find('?')));
		}
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
		tcp_.head = w_->scrub(std::move(tcp_.head));
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
	std::shared_ptr<const HttpGateSetup> secrets_;    // the request's: body_scan_ reads its patterns
	std::optional<gate::NeverSend::Scan> body_scan_;  // the request's body, scanned as it is read
	std::string secret_;                              // the secret the request carries ("" none)
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

}  // namespace

std::shared_ptr<StreamConnection> make_stream_connection(std::shared_ptr<WorldImpl> w, tcp::socket s, Origin origin)
{
	return std::make_shared<Connection>(std::move(w), std::move(s), std::move(origin));
}

}  // namespace airlock::proxy
