#include "proxy/recorder.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <spdlog/spdlog.h>

#include "util/error.h"

namespace airlock::proxy {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using udp = net::ip::udp;
using boost::system::error_code;

namespace {

constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

}  // namespace

WorldImpl::WorldImpl(net::io_context& io, WorldOptions o, OriginLookup lookup)
    : io_(io), o_(std::move(o)), lookup_(std::move(lookup)), records_(o_.records_fd, o_.max_records_bytes, o_.sandbox),
      gate_setup_(o_.http)
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
		origin = o_.datagram_origin(d.socket.native_handle(), d.from.data(),
					    static_cast<socklen_t>(d.from.size()));
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
	r.head = scrub(std::string(d.buf.data(), std::min(n, kHeadBytes)));
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
	if (live_.size() + gates_.size() + http_.size() >= o_.max_connections) {
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
	if (o_.gate && http_rule(origin->rule)) {
		auto h = make_http_gate_connection(io_, std::move(s), std::move(*origin), o_.gate, shared_from_this(),
						   gate_setup_->tls, gate_setup_->limits);
		http_.emplace(h.get(), h);
		h->start();
		return accept(i);
	}
	if (const GateRule* rule = o_.gate ? o_.gate->rule(origin->rule) : nullptr) {
		auto g = make_gate_connection(io_, std::move(s), std::move(*origin), *rule, o_.gate, shared_from_this(),
					      o_.idle_timeout);
		gates_.emplace(g.get(), g);
		g->start();
		return accept(i);
	}
	name_origin(*origin);
	auto c = make_stream_connection(shared_from_this(), std::move(s), std::move(*origin));
	live_.emplace(c.get(), c);
	c->start();
	accept(i);
}

void WorldImpl::update_http(std::shared_ptr<const HttpGateSetup> s)
{
	// The entries' indexes may mean others now: every bucket starts full.
	rates_.forget();
	gate_setup_ = std::move(s);
	gate_reloads_++;
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
		r.head = scrub(std::string(query.substr(0, kHeadBytes)));
	if (q.ignore) {
		note(r);  // written down, not answered
		return {};
	}
	dns_queries_++;
	DnsAnswer a = answer_dns_query(q, names_);
	if (q.problem == DnsRcode::NoError) {
		r.query = scrub(q.name);
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

namespace {

// Stops every connection of a table (each stop() may erase its own entry:
// they are taken out first), then empties it.
template <class Table>
void stop_all(Table& table)
{
	std::vector<typename Table::mapped_type> open;
	open.reserve(table.size());
	for (auto& [ptr, c] : table)
		open.push_back(c);
	for (auto& c : open)
		c->stop();
	table.clear();
}

}  // namespace

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
	stop_all(live_);
	stop_all(gates_);
	stop_all(http_);
	records_.close();
}

void WorldImpl::record_request(const Origin& o, const GateRequestRecord& r)
{
	// Passed: sent, and answered by the origin. Denied: a reason the gate
	// gave (a failed handshake, "tls", is the client's, not a verdict). A
	// 502 (the origin could not be reached or verified) is neither.
	if (r.reason.empty() && r.detail.empty())
		http_passed_++;
	else if (!r.reason.empty() && r.reason != "tls")
		http_denied_++;
	if (r.reason == "secret")
		secrets_refused_++;
	record(gate_request_line(o_.sandbox, o, r));
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
	s.http_passed = http_passed_;
	s.http_denied = http_denied_;
	s.secrets_refused = secrets_refused_;
	s.gate_reloads = gate_reloads_;
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

void WorldRecorder::update_http(std::shared_ptr<const HttpGateSetup> s)
{
	impl_->update_http(std::move(s));
}

WorldStats WorldRecorder::stats() const
{
	return impl_->stats();
}

}  // namespace airlock::proxy
