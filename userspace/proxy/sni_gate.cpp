#include "proxy/sni_gate.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "policy/dnsname.h"
#include "proxy/conn_common.h"
#include "proxy/upstream_socket.h"

namespace airlock::proxy {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// A gated connection's pipes (one a way) are the kernel's default size,
// 64 KiB: the pages of every pipe of the proxy's user count against one
// limit (pipe-user-pages-soft), which every proxy shares; past it, a new
// pipe is smaller, and the connection goes through the proxy's buffers.
constexpr size_t kPipeBytes = 64 * 1024;
// Splices a way makes before it lets the proxy's other connections run.
constexpr int kSpliceTurns = 16;

// The ClientHello, the verdict, then the relay of both ways: through a
// pipe a way (splice) where the proxy can have them, else its buffers.
class SniGate : public GateConnection, public std::enable_shared_from_this<SniGate> {
public:
	SniGate(net::io_context& io, tcp::socket s, Origin origin, GateRule rule, std::shared_ptr<Gate> gate,
		std::shared_ptr<GateHost> host, std::chrono::milliseconds idle_timeout)
	    : io_(io), gate_(std::move(gate)), host_(std::move(host)), idle_timeout_(idle_timeout),
	      client_(std::move(s)), upstream_(io), timer_(io), origin_(std::move(origin)), rule_(std::move(rule))
	{
	}

	void start() override
	{
		rec_.time = std::chrono::system_clock::now();
		started_ = Clock::now();
		// The ClientHello, then the destination's socket and its connect,
		// come within the idle timeout or the connection is closed.
		timer_.expires_after(idle_timeout_);
		timer_.async_wait([self = shared_from_this()](const error_code& ec) {
			if (!ec && !self->passed_)
				self->end_before_splice(
					"the ClientHello or the destination took longer than the idle timeout");
		});
		read_hello();
	}

	void stop() override { finish(); }

private:
	// What a ClientHello may take in records: the message's bound, and a
	// header for every 256 bytes of it.
	static constexpr size_t kMaxHelloBytes = kMaxClientHello + kMaxClientHello / 256 * 5 + 5;

	void read_hello()
	{
		size_t have = hello_.size();
		if (have >= kMaxHelloBytes)
			return deny("",
				    fmt::format("the ClientHello is spread over more than {} bytes", kMaxHelloBytes));
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
				return deny("", hello_.empty()
							? "the connection sent nothing"
							: fmt::format("the connection ended within its first {} bytes, "
								      "before a whole ClientHello",
								      hello_.size()));
			return read_hello();
		}
		if (h.status != ClientHello::Status::Ok)
			return deny("", fmt::format("{}: {}", to_string(h.status), h.error));
		rec_.sni = h.server_name;
		if (std::string why = judge_client_hello(h, rule_, origin_, *gate_); !why.empty())
			return deny(h.server_name, why);
		asked_ = true;
		gate_->connect(client_.native_handle(), origin_,
			       [self = shared_from_this()](int fd, int err) { self->on_upstream(fd, err); });
	}

	void deny(const std::string& sni, const std::string& why)
	{
		if (done_)
			return;
		rec_.sni = sni;
		rec_.reason = why;
		host_->count_sni(false);
		gate_->violation(origin_, sni, why);
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
		await_upstream(upstream_, fd, origin_.addr.family,
			       [self = shared_from_this()](const std::optional<std::string>& why) {
				       if (!self->done_)
					       self->on_connected(why);
			       });
	}

	void on_connected(const std::optional<std::string>& why)
	{
		if (why)
			return end_before_splice(*why);
		passed_ = true;
		timer_.cancel();
		host_->count_sni(true);
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
		if (nb1 || nb2 || !host_->may_pipe() || !up_.open_pipe() || !down_.open_pipe()) {
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
		net::post(io_, [self = shared_from_this(), &w, &from, &to, &count] {
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
		from.async_read_some(net::buffer(w.buf.data(), kReadChunk), [self = shared_from_this(), &w, &from, &to,
									     &count](const error_code& ec, size_t n) {
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
		host_->record_sni(origin_, rec_);
		error_code ignored;
		timer_.cancel();
		client_.close(ignored);
		upstream_.close(ignored);
		up_.close_pipe();
		down_.close_pipe();
		host_->forget_gate(this);
	}

	net::io_context& io_;
	std::shared_ptr<Gate> gate_;
	std::shared_ptr<GateHost> host_;
	std::chrono::milliseconds idle_timeout_;
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

}  // namespace

std::string judge_client_hello(const ClientHello& h, const GateRule& rule, const Origin& origin, const Gate& gate)
{
	if (!h.has_server_name)
		return "the ClientHello names no server";
	if (h.encrypted_client_hello)
		return fmt::format("an encrypted ClientHello: the name it is for is hidden behind '{}'", h.server_name);
	if (std::string p = host_name_problem(h.server_name); !p.empty())
		return "server_name: " + p;
	if (!domain_covers(rule.domain, rule.wildcard, h.server_name))
		return fmt::format("'{}' is not {} of rule {}", h.server_name,
				   rule.wildcard ? "a name below " + rule.domain : rule.domain, origin.rule);
	std::string learned = gate.learned_name(origin.addr);
	if (!iequal(learned, h.server_name))
		return fmt::format("'{}' did not resolve to {} for this sandbox ({})", h.server_name,
				   format_address(origin.addr),
				   learned.empty() ? std::string("no name did") : "'" + learned + "' did");
	return "";
}

std::shared_ptr<GateConnection> make_gate_connection(net::io_context& io, tcp::socket s, Origin origin, GateRule rule,
						     std::shared_ptr<Gate> gate, std::shared_ptr<GateHost> host,
						     std::chrono::milliseconds idle_timeout)
{
	return std::make_shared<SniGate>(io, std::move(s), std::move(origin), std::move(rule), std::move(gate),
					 std::move(host), idle_timeout);
}

}  // namespace airlock::proxy
