#include "proxy/http_gate.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <type_traits>
#include <variant>

#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gate/http1.h"
#include "net/url.h"
#include "proxy/client_hello.h"  // host_name_problem
#include "proxy/conn_common.h"
#include "proxy/gate_tls.h"
#include "proxy/upstream_socket.h"

namespace airlock::proxy {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using TlsStream = net::ssl::stream<tcp::socket>;

bool host_in_rule(const std::string& host, const HttpGateRule& r)
{
	if (r.domain.empty())
		return true;  // a CIDR rule: the name is checked against the address
	if (!r.wildcard)
		return host == r.domain;
	return host.size() > r.domain.size() + 1 &&
	       host.compare(host.size() - r.domain.size(), r.domain.size(), r.domain) == 0 &&
	       host[host.size() - r.domain.size() - 1] == '.';
}

namespace {

constexpr size_t kPiece = 16 * 1024;
constexpr size_t kBodyPiece = 64 * 1024;  // of an answer's body, as it streams back

const char* status_text(unsigned s)
{
	switch (s) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 413:
		return "Content Too Large";
	case 417:
		return "Expectation Failed";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 502:
		return "Bad Gateway";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Error";
	}
}

// The media type of a Content-Type, lower case, without parameters.
std::string media_type(std::optional<std::string_view> v)
{
	if (!v)
		return "";
	std::string_view t = v->substr(0, v->find(';'));
	while (!t.empty() && (t.back() == ' ' || t.back() == '\t'))
		t.remove_suffix(1);
	return lower(t);
}

class Conn : public HttpGateConnection, public std::enable_shared_from_this<Conn> {
public:
	Conn(net::io_context& io, tcp::socket s, Origin origin, std::shared_ptr<Gate> gate,
	     std::shared_ptr<HttpGateHost> host, std::shared_ptr<GateTls> tls, HttpGateLimits limits)
	    : io_(io), gate_(std::move(gate)), host_(std::move(host)), tls_(std::move(tls)), limits_(limits),
	      client_(std::move(s)), timer_(io), origin_(std::move(origin))
	{
	}

	void start() override
	{
		no_delay(client_socket());
		arm();
		sniff();
	}

	void stop() override { finish(); }

private:
	// A head and its body, a TLS record and the next, are separate writes:
	// none is held back waiting for the ACK of the one before (Nagle's
	// algorithm against a peer's delayed ACK: 40 ms a request).
	static void no_delay(tcp::socket& s)
	{
		error_code ignored;
		s.set_option(tcp::no_delay(true), ignored);
	}

	void arm()
	{
		timer_.expires_after(limits_.idle_timeout);
		timer_.async_wait([self = shared_from_this()](const error_code& ec) {
			if (!ec)
				self->finish();
		});
	}

	// f(stream) with the sandbox's side as it is: plain or TLS.
	template <class F>
	void with_client(F&& f)
	{
		std::visit(f, client_);
	}
	// f(stream) with the origin's side, once there is one.
	template <class F>
	void with_upstream(F&& f)
	{
		std::visit(
			[&](auto& s) {
				if constexpr (!std::is_same_v<std::decay_t<decltype(s)>, std::monostate>)
					f(s);
			},
			upstream_);
	}
	tcp::socket& client_socket()
	{
		return std::visit([](auto& s) -> tcp::socket& { return boost::beast::get_lowest_layer(s); }, client_);
	}
	tcp::socket* upstream_socket()
	{
		tcp::socket* out = nullptr;
		with_upstream([&](auto& s) { out = &boost::beast::get_lowest_layer(s); });
		return out;
	}

	// TLS or plain HTTP, by the first byte (a TLS record of the handshake
	// is 0x16; no request method begins with it). Nothing is read.
	void sniff()
	{
		client_socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
			if (self->done_)
				return;
			if (ec)
				return self->finish();
			unsigned char b = 0;
			ssize_t n = ::recv(self->client_socket().native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
				return self->sniff();
			if (n <= 0)
				return self->finish();
			if (b != 0x16)
				return self->next_request();
			self->accept_tls();
		});
	}

	void accept_tls()
	{
		if (!tls_)
			return handshake_failed("tls", "TLS is not served on this connection", false);
		tcp::socket s = std::move(std::get<tcp::socket>(client_));
		TlsStream& t = client_.emplace<TlsStream>(std::move(s), tls_->server());
		SSL_set_cert_cb(t.native_handle(), &Conn::on_client_hello, this);
		t.async_handshake(net::ssl::stream_base::server, [self = shared_from_this()](const error_code& ec) {
			if (self->done_)
				return;
			if (ec) {
				if (!self->tls_refusal_.empty())
					return self->handshake_failed("tls-name", self->tls_refusal_, true);
				return self->handshake_failed("tls", "the client's handshake: " + ec.message(), false);
			}
			self->arm();
			self->next_request();
		});
	}

	// Called by OpenSSL once the ClientHello is read, before a certificate
	// is chosen: the server name is judged here, and its leaf is minted only
	// for a name that passes. The connection outlives its handshake.
	static int on_client_hello(SSL* s, void* arg) { return static_cast<Conn*>(arg)->choose_leaf(s) ? 1 : 0; }

	bool choose_leaf(SSL* s)
	{
		take_setup();
		if (!rule_) {
			tls_refusal_ = "the rule is no longer inspected";
			return false;
		}
		if (const char* name = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name)) {
			std::string sni = lower(name);
			if (std::string p = host_name_problem(sni); !p.empty()) {
				tls_refusal_ = "server_name: " + p;
				return false;
			}
			rec_.host = sni;
			if (!host_in_rule(sni, *rule_)) {
				tls_refusal_ = fmt::format("server name '{}' is not the rule's name", sni);
				return false;
			}
			std::string learned = gate_->learned_name(origin_.addr);
			if (learned != sni) {
				tls_refusal_ = fmt::format(
					"server name '{}' is not the name this sandbox resolved to {}{}", sni,
					format_address(origin_.addr), learned.empty() ? "" : " ('" + learned + "')");
				return false;
			}
			sni_ = sni;
		}
		client_tls_ = true;
		return tls_->use_leaf(s, sni_, origin_.addr);
	}

	// The setup in force, for the request about to be read: held until
	// it is done, whatever a reload brings meanwhile.
	void take_setup()
	{
		setup_ = host_->setup();
		rule_ = setup_ ? setup_->rule(origin_.rule) : nullptr;
	}

	const gate::NeverSend& secrets()
	{
		static const gate::NeverSend kNone;
		if (!setup_)
			setup_ = host_->setup();
		return setup_ ? setup_->never_send : kNone;
	}

	// A connection that ended in its TLS handshake: recorded; a violation
	// when the gate refused the name.
	void handshake_failed(const std::string& reason, const std::string& detail, bool violation)
	{
		rec_.time = std::chrono::system_clock::now();
		rec_.reason = reason;
		rec_.detail = detail;
		scrub();
		if (violation)
			gate_->violation(origin_, rec_.host, fmt::format("{}: {}", reason, rec_.detail));
		host_->record_request(origin_, rec_);
		finish();
	}

	// What the record and the audit line show of the request never
	// carries a secret's value: a name, a path or a refusal's detail that
	// quotes one is withheld.
	void scrub()
	{
		const gate::NeverSend& n = secrets();
		rec_.method = gate::scrubbed(n, std::move(rec_.method));
		rec_.host = gate::scrubbed(n, std::move(rec_.host));
		rec_.path = gate::scrubbed(n, std::move(rec_.path));
		rec_.detail = gate::scrubbed(n, std::move(rec_.detail));
	}

	void read_more(void (Conn::*then)())
	{
		size_t have = in_.size();
		in_.resize(have + kPiece);
		with_client([&](auto& c) {
			c.async_read_some(net::buffer(in_.data() + have, kPiece),
					  [self = shared_from_this(), have, then](const error_code& ec, size_t n) {
						  self->in_.resize(have + n);
						  if (self->done_)
							  return;
						  if (ec)
							  return self->finish();
						  self->arm();
						  ((*self).*then)();
					  });
		});
	}

	void next_request()
	{
		rec_ = GateRequestRecord{};
		rec_.time = std::chrono::system_clock::now();
		rec_.tls = client_tls_;
		rec_.host = sni_;
		body_.clear();
		chunks_ = gate::ChunkedReader{};
		read_head();
	}

	void read_head()
	{
		auto end = gate::head_end(in_);
		if (!end)
			return refuse(end.rejection().status, "http-malformed", end.rejection().message);
		if (*end == 0)
			return read_more(&Conn::read_head);
		head_bytes_ = in_.substr(0, *end);
		in_.erase(0, *end);
		on_head();
	}

	void on_head()
	{
		auto h = gate::read_request_head(head_bytes_);
		if (!h)
			return refuse(h.rejection().status, "http-malformed", h.rejection().message);
		head_ = std::move(*h);
		rec_.time = std::chrono::system_clock::now();
		rec_.method = head_.method;
		rec_.host = head_.host;
		take_setup();
		if (!rule_)
			return finish();
		// A secret in the head is refused before anything else is said of
		// it (its Host or target quoted in another refusal's detail).
		if (auto found = secrets().find(head_bytes_)) {
			rec_.secret = *found;
			rec_.host = sni_.empty() ? rule_->domain : sni_;  // what the connection was for, not the Host
			return refuse(403, "secret", fmt::format("the request carries secret '{}'", *found));
		}
		if (auto why = host_problem())
			return refuse(400, "http-host", *why);
		auto t = url::canonical_target(head_.target);
		if (!t) {
			bool path = t.rejection().kind == url::TargetProblem::Path;
			return refuse(path ? 403 : 400, path ? "http-path" : "http-malformed", t.rejection().message);
		}
		target_ = std::move(*t);
		rec_.path = target_.path;
		limit_ = limits_.default_max_body;
		for (const HttpEntry& e : rule_->http.entries)
			if (e.max_body_bytes)
				limit_ = std::max(limit_, *e.max_body_bytes);
		if (head_.body == gate::RequestHead::Body::Length && head_.length > limit_)
			return refuse(413, "http-body-size",
				      fmt::format("the body's {} bytes are more than {}", head_.length, limit_));
		if (head_.expect_continue && head_.body != gate::RequestHead::Body::None) {
			static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
			return with_client([&](auto& c) {
				net::async_write(c, net::buffer(kContinue),
						 [self = shared_from_this()](const error_code& ec, size_t) {
							 if (ec || self->done_)
								 return self->finish();
							 self->read_body();
						 });
			});
		}
		read_body();
	}

	// The name a request may carry: the rule's, and the one this sandbox
	// resolved to the address (or, for an address rule, the address).
	std::optional<std::string> host_problem() const
	{
		if (!sni_.empty() && head_.host != sni_)
			return fmt::format("Host '{}' is not the TLS server name '{}'", head_.host, sni_);
		if (head_.port && *head_.port != origin_.port)
			return fmt::format("Host names port {}, the connection went to {}", *head_.port, origin_.port);
		if (!host_in_rule(head_.host, *rule_))
			return fmt::format("Host '{}' is not the rule's name", head_.host);
		if (head_.host == format_address(origin_.addr) && rule_->domain.empty())
			return std::nullopt;
		std::string learned = gate_->learned_name(origin_.addr);
		if (learned != head_.host)
			return fmt::format("Host '{}' is not the name this sandbox resolved to {}{}", head_.host,
					   format_address(origin_.addr), learned.empty() ? "" : " ('" + learned + "')");
		return std::nullopt;
	}

	void read_body()
	{
		if (head_.body == gate::RequestHead::Body::Length) {
			size_t take = static_cast<size_t>(std::min<uint64_t>(head_.length - body_.size(), in_.size()));
			body_.append(in_, 0, take);
			in_.erase(0, take);
			if (body_.size() < head_.length)
				return read_more(&Conn::read_body);
		} else if (head_.body == gate::RequestHead::Body::Chunked) {
			auto used = chunks_.feed(in_, body_);
			if (!used)
				return refuse(400, "http-malformed", used.rejection().message);
			in_.erase(0, *used);
			if (body_.size() > limit_)
				return refuse(413, "http-body-size",
					      fmt::format("the body is more than {} bytes", limit_));
			if (!chunks_.done())
				return read_more(&Conn::read_body);
		}
		on_request();
	}

	void on_request()
	{
		rec_.body_bytes = body_.size();
		gate::NeverSend::Scan scan(secrets());
		scan.feed(head_bytes_);
		scan.feed(body_);
		if (auto found = scan.found()) {
			rec_.secret = *found;
			return refuse(403, "secret", fmt::format("the request carries secret '{}'", *found),
				      Read::Whole);
		}
		gate::Request req{head_.method, head_.host, target_, media_type(head_.header("content-type")), body_};
		gate::Verdict v = gate::judge(rule_->http, origin_.rule, req, host_->rates(),
					      gate::RateTable::Clock::now());
		rec_.entry = v.entry;
		if (v.kind == gate::Verdict::Deny)
			return refuse(403, v.reason, v.detail, Read::Whole);
		if (v.kind == gate::Verdict::Limited)
			return refuse(429, v.reason, v.detail, Read::Whole);
		std::vector<gate::Header> added;
		for (const InjectHeader& h : rule_->http.inject) {
			std::string value;
			for (const InjectPart& part : h.value) {
				if (!part.secret) {
					value += part.text;
					continue;
				}
				auto s = setup_->secret(part.text);
				if (!s)
					return refuse(502, "secret-missing",
						      fmt::format("secret '{}' to inject is not loaded", part.text));
				value += *s;
			}
			added.push_back({h.name, std::move(value)});
		}
		rec_.replaced = gate::replaced_headers(head_, added);
		out_ = gate::upstream_head(head_, target_.serialized(), head_.host, origin_.port, client_tls_, added,
					   body_.size());
		out_ += body_;
		if (tcp::socket* up = upstream_socket(); up && up->is_open())
			return send_upstream();
		gate_->connect(client_socket().native_handle(), origin_,
			       [self = shared_from_this()](int fd, int err) { self->on_upstream(fd, err); });
	}

	void on_upstream(int fd, int err)
	{
		if (done_) {
			if (fd >= 0)
				::close(fd);
			return;
		}
		if (fd < 0)
			return upstream_failed(std::strerror(err));
		try {
			if (client_tls_)
				upstream_.emplace<TlsStream>(io_, tls_->upstream(rule_->upstream_ca_pem));
			else
				upstream_.emplace<tcp::socket>(io_);
		} catch (const std::exception& e) {
			::close(fd);
			return upstream_failed(e.what());
		}
		await_upstream(*upstream_socket(), fd, origin_.addr.family,
			       [self = shared_from_this()](const std::optional<std::string>& why) {
				       if (self->done_)
					       return;
				       if (why)
					       return self->upstream_failed(*why);
				       no_delay(*self->upstream_socket());
				       if (self->client_tls_)
					       return self->upstream_handshake();
				       self->send_upstream();
			       });
	}

	// TLS to the origin, verified against the name the sandbox asked for
	// (its address when it named none): never a request over a connection
	// that does not verify.
	void upstream_handshake()
	{
		TlsStream& t = std::get<TlsStream>(upstream_);
		if (!GateTls::expect_peer(t.native_handle(), sni_, origin_.addr))
			return upstream_failed("TLS: " + openssl_error());
		t.async_handshake(net::ssl::stream_base::client, [self = shared_from_this()](const error_code& ec) {
			if (self->done_)
				return;
			TlsStream& up = std::get<TlsStream>(self->upstream_);
			std::string why = GateTls::verify_problem(up.native_handle());
			if (ec || !why.empty())
				return self->upstream_failed(why.empty() ? "TLS: " + ec.message() : why);
			self->send_upstream();
		});
	}

	void send_upstream()
	{
		with_upstream([&](auto& up) {
			net::async_write(up, net::buffer(out_),
					 [self = shared_from_this()](const error_code& ec, size_t) {
						 if (self->done_)
							 return;
						 if (ec)
							 return self->upstream_failed(ec.message());
						 self->read_response();
					 });
		});
	}

	void read_response()
	{
		resp_.emplace();
		resp_->body_limit(boost::none);
		if (head_.method == "HEAD")
			resp_->skip(true);
		with_upstream([&](auto& up) {
			http::async_read_header(up, up_buf_, *resp_,
						[self = shared_from_this()](const error_code& ec, size_t) {
							if (self->done_)
								return;
							if (ec)
								return self->upstream_failed(ec.message());
							self->arm();
							self->write_response_head();
						});
		});
	}

	void write_response_head()
	{
		const auto& m = resp_->get();
		rec_.status = m.result_int();
		if (m.result_int() == 101)
			return head_.websocket ? upgraded() : upstream_failed("it switched protocols unasked");
		bool no_body = resp_->is_done();
		length_ = resp_->content_length();
		chunked_out_ = !no_body && !length_;
		std::string h = fmt::format("HTTP/1.1 {} {}\r\n", m.result_int(), std::string(m.reason()));
		for (const auto& f : m) {
			std::string n = lower(std::string(f.name_string()));
			if (n == "connection" || n == "keep-alive" || n == "transfer-encoding" || n == "te" ||
			    n == "trailer" || n == "upgrade" || n == "proxy-connection")
				continue;
			if (n == "content-length" && chunked_out_)
				continue;
			h += fmt::format("{}: {}\r\n", std::string(f.name_string()), std::string(f.value()));
		}
		if (chunked_out_)
			h += "Transfer-Encoding: chunked\r\n";
		keep_ = resp_->keep_alive() && !head_.close && !head_.http10;
		if (!keep_)
			h += "Connection: close\r\n";
		h += "\r\n";
		back_ = std::move(h);
		with_client([&](auto& c) {
			net::async_write(c, net::buffer(back_),
					 [self = shared_from_this()](const error_code& ec, size_t) {
						 if (ec || self->done_)
							 return self->finish();
						 self->relay_body();
					 });
		});
	}

	void relay_body()
	{
		if (resp_->is_done())
			return response_done();
		auto& b = resp_->get().body();
		b.data = piece_;
		b.size = sizeof(piece_);
		with_upstream([&](auto& up) {
			http::async_read(up, up_buf_, *resp_,
					 [self = shared_from_this()](error_code ec, size_t) { self->relay_piece(ec); });
		});
	}

	void relay_piece(error_code ec)
	{
		if (done_)
			return;
		if (ec == http::error::need_buffer)
			ec = {};
		if (ec)
			return finish();  // the origin broke off: so does the sandbox's answer
		arm();
		size_t n = sizeof(piece_) - resp_->get().body().size;
		// The piece as it came, framed when the answer goes out chunked.
		back_.clear();
		if (chunked_out_ && n > 0)
			back_ = fmt::format("{:x}\r\n", n);
		static const std::string kCrlf = "\r\n";
		std::array<net::const_buffer, 3> out{net::buffer(back_), net::buffer(piece_, n),
						     net::buffer(kCrlf.data(), chunked_out_ && n > 0 ? 2 : 0)};
		with_client([&](auto& c) {
			net::async_write(c, out, [self = shared_from_this()](const error_code& e, size_t) {
				if (e || self->done_)
					return self->finish();
				self->relay_body();
			});
		});
	}

	void response_done()
	{
		auto after = [self = shared_from_this()] {
			self->host_->record_request(self->origin_, self->rec_);
			if (!self->keep_)
				return self->finish();
			self->next_request();
		};
		if (!chunked_out_)
			return after();
		back_ = "0\r\n\r\n";
		with_client([&](auto& c) {
			net::async_write(c, net::buffer(back_),
					 [self = shared_from_this(), after](const error_code& ec, size_t) {
						 if (ec || self->done_)
							 return self->finish();
						 after();
					 });
		});
	}

	// A WebSocket the origin accepted (101): its answer's head goes back
	// as the origin wrote it, but for what says how the connection goes
	// on; then the connection is a tunnel, bytes passed both ways as they
	// come (the frames are not read), until either side ends it or it is
	// idle for the idle timeout. The request, judged, is its record.
	void upgraded()
	{
		const auto& m = resp_->get();
		std::string h = fmt::format("HTTP/1.1 101 {}\r\n", std::string(m.reason()));
		for (const auto& f : m) {
			std::string n = lower(std::string(f.name_string()));
			if (n == "connection" || n == "upgrade" || n == "keep-alive" || n == "transfer-encoding" ||
			    n == "content-length" || n == "proxy-connection")
				continue;
			h += fmt::format("{}: {}\r\n", std::string(f.name_string()), std::string(f.value()));
		}
		back_ = h + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
		host_->record_request(origin_, rec_);
		// What either side sent after its head is the tunnel's first bytes.
		auto left = up_buf_.data();
		back_.append(static_cast<const char*>(left.data()), left.size());
		up_buf_.consume(left.size());
		with_client([&](auto& c) {
			net::async_write(c, net::buffer(back_),
					 [self = shared_from_this()](const error_code& ec, size_t) {
						 if (ec || self->done_)
							 return self->finish();
						 self->pump_up();
						 self->pump_back();
					 });
		});
	}

	// The sandbox's bytes to the origin: what was read already, then
	// piece after piece.
	void pump_up()
	{
		if (in_.empty()) {
			in_.resize(kPiece);
			return with_client([&](auto& c) {
				c.async_read_some(net::buffer(in_),
						  [self = shared_from_this()](const error_code& ec, size_t n) {
							  if (ec || self->done_)
								  return self->finish();
							  self->in_.resize(n);
							  self->arm();
							  self->pump_up();
						  });
			});
		}
		with_upstream([&](auto& up) {
			net::async_write(up, net::buffer(in_),
					 [self = shared_from_this()](const error_code& ec, size_t) {
						 if (ec || self->done_)
							 return self->finish();
						 self->in_.clear();
						 self->pump_up();
					 });
		});
	}

	// The origin's bytes to the sandbox.
	void pump_back()
	{
		with_upstream([&](auto& up) {
			up.async_read_some(net::buffer(piece_),
					   [self = shared_from_this()](const error_code& ec, size_t n) {
						   if (ec || self->done_)
							   return self->finish();
						   self->arm();
						   self->with_client([&](auto& c) {
							   net::async_write(c, net::buffer(self->piece_, n),
									    [self](const error_code& e, size_t) {
										    if (e || self->done_)
											    return self->finish();
										    self->pump_back();
									    });
						   });
					   });
		});
	}

	void upstream_failed(const std::string& why)
	{
		rec_.detail = "the origin: " + why;
		answer(502, nlohmann::json{{"airlock", "upstream"}, {"detail", rec_.detail}});
	}

	// How much of a refused request was read: all of it (the connection
	// may go on to the next, as the client asked), or not (it ends: what
	// follows cannot be told apart from the rest of this one).
	enum class Read { Part, Whole };

	// A request the gate answers itself: recorded, reported, and the
	// connection closed unless the request was read whole and kept alive.
	void refuse(unsigned status, const std::string& reason, const std::string& detail, Read read = Read::Part)
	{
		rec_.reason = reason;
		rec_.detail = detail;
		if (rec_.host.empty())
			rec_.host = head_.host;
		scrub();
		gate_->violation(origin_, rec_.host, fmt::format("{}: {}", reason, rec_.detail));
		nlohmann::json body{{"airlock", "denied"},
				    {"rule", origin_.rule},
				    {"reason", reason},
				    {"detail", rec_.detail}};
		body["entry"] = rec_.entry ? nlohmann::json(*rec_.entry) : nlohmann::json(nullptr);
		answer(status, body, read == Read::Whole && !head_.close && !head_.http10);
	}

	void answer(unsigned status, const nlohmann::json& body, bool keep = false)
	{
		if (done_)
			return;
		rec_.status = status;
		host_->record_request(origin_, rec_);
		std::string text = body.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
		back_ = fmt::format(
			"HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n{}", status,
			status_text(status), text.size(), keep ? "" : "Connection: close\r\n", text);
		with_client([&](auto& c) {
			net::async_write(c, net::buffer(back_),
					 [self = shared_from_this(), keep](const error_code& ec, size_t) {
						 if (ec || !keep || self->done_)
							 return self->finish();
						 self->next_request();
					 });
		});
	}

	void finish()
	{
		if (done_)
			return;
		done_ = true;
		timer_.cancel();
		error_code ec;
		client_socket().shutdown(tcp::socket::shutdown_both, ec);
		client_socket().close(ec);
		if (tcp::socket* up = upstream_socket())
			up->close(ec);
		host_->forget_http(this);
	}

	net::io_context& io_;
	std::shared_ptr<Gate> gate_;
	std::shared_ptr<HttpGateHost> host_;
	std::shared_ptr<GateTls> tls_;
	HttpGateLimits limits_;
	std::variant<tcp::socket, TlsStream> client_;
	std::variant<std::monostate, tcp::socket, TlsStream> upstream_;
	net::steady_timer timer_;
	Origin origin_;
	bool done_ = false, keep_ = false, chunked_out_ = false;
	bool client_tls_ = false;  // the sandbox's side is TLS: so is the origin's
	std::string sni_;          // the server name the client asked for and the gate passed ("" none)
	std::string tls_refusal_;  // why the gate refused the server name
	std::string in_, head_bytes_, body_, out_, back_;
	gate::RequestHead head_;
	gate::ChunkedReader chunks_;
	url::Target target_;
	std::shared_ptr<const HttpGateSetup> setup_;  // the request's: rule_ points into it
	const HttpGateRule* rule_ = nullptr;
	uint64_t limit_ = 0;
	boost::optional<uint64_t> length_;
	GateRequestRecord rec_;
	boost::beast::flat_buffer up_buf_;
	std::optional<http::response_parser<http::buffer_body>> resp_;
	char piece_[kBodyPiece];
};

}  // namespace

std::shared_ptr<HttpGateConnection> make_http_gate_connection(net::io_context& io, tcp::socket s, Origin origin,
							      std::shared_ptr<Gate> gate,
							      std::shared_ptr<HttpGateHost> host,
							      std::shared_ptr<GateTls> tls, HttpGateLimits limits)
{
	return std::make_shared<Conn>(io, std::move(s), std::move(origin), std::move(gate), std::move(host),
				      std::move(tls), limits);
}

}  // namespace airlock::proxy
