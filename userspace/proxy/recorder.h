#pragma once
// The recorder itself, behind WorldRecorder (proxy/world.h): its listeners
// and UDP sockets, the origin of what they take, the records file and the
// limits. Each accepted connection goes to the SNI gate when its rule is
// gated (proxy/sni_gate.h), else to a stream (proxy/stream.h); a datagram
// is a record, or a DNS query the world answers.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "proxy/dns.h"
#include "proxy/records.h"
#include "proxy/sni_gate.h"
#include "proxy/stream.h"
#include "proxy/world.h"

namespace airlock::proxy {

// Descriptors kept free beyond what max_connections may hold: a gated
// connection has pipes only while its four fit.
inline constexpr size_t kSpareFds = 64;
inline constexpr uint16_t kDnsPort = 53;

class WorldImpl : public std::enable_shared_from_this<WorldImpl>, public GateHost, public HttpGateHost {
public:
	WorldImpl(boost::asio::io_context& io, WorldOptions o, OriginLookup lookup);

	void start();
	void stop();
	WorldStats stats() const;

	// For streams.
	const WorldOptions& options() const { return o_; }
	boost::asio::io_context& io() { return io_; }
	void record(const std::string& line);
	void count_bytes(uint64_t n) { bytes_in_ += n; }
	void count_http() { http_requests_++; }
	void count_tcp() { tcp_streams_++; }
	void forget(StreamConnection* c) { live_.erase(c); }
	TlsTerminator* tls() const { return o_.tls.get(); }
	// A query to port 53 when the world synthesizes DNS.
	bool answers_dns(const Origin& o) const { return o_.world.synthesize_dns && o.port == kDnsPort; }
	// Answers one query (recorded); "" when there is nothing to send back.
	std::string answer_dns(const Origin&, std::string_view query);
	// The name bound to the origin's address, if the world's DNS gave it.
	void name_origin(Origin& o) const
	{
		if (o.name.empty())
			o.name = names_.name_of(o.addr);
	}

	// For gated connections.
	void count_sni(bool passed) override { (passed ? sni_passed_ : sni_denied_)++; }
	// Four descriptors for each gated connection, besides two for each of
	// the connections max_connections allows and kSpareFds, within the
	// descriptor limit read at start.
	bool may_pipe() const override
	{
		return o_.max_connections * 2 + (gates_.size() + http_.size()) * 4 + kSpareFds <= nofile_;
	}
	void record_sni(const Origin& o, const SniRecord& r) override { record(sni_record_line(o_.sandbox, o, r)); }
	void forget_gate(GateConnection* c) override { gates_.erase(c); }

	// For connections of inspected rules.
	std::shared_ptr<const HttpGateSetup> setup() const override { return gate_setup_; }
	const HttpGateRule* http_rule(uint16_t index) const { return gate_setup_ ? gate_setup_->rule(index) : nullptr; }
	// A reload's: the next request of every connection is judged under it.
	void update_http(std::shared_ptr<const HttpGateSetup> s);
	gate::RateTable& rates() override { return rates_; }
	const gate::NeverSend& never_send() const { return gate_setup_ ? gate_setup_->never_send : kNoSecrets; }
	// text as a record may show it (gate::scrubbed): never a secret's value.
	std::string scrub(std::string text) const { return gate::scrubbed(never_send(), std::move(text)); }
	void record_request(const Origin& o, const GateRequestRecord& r) override;
	// The world refused a request for the secret it carried.
	void count_secret() { secrets_refused_++; }
	void forget_http(HttpGateConnection* c) override { http_.erase(c); }

private:
	static inline const gate::NeverSend kNoSecrets;
	void accept(size_t i);
	void on_accept(size_t i, const boost::system::error_code& ec, boost::asio::ip::tcp::socket s);
	void receive(size_t i);
	void on_datagram(size_t i, size_t n);

	// A UDP socket, its buffer and the sender of what is in it.
	struct Datagrams {
		explicit Datagrams(boost::asio::io_context& io) : socket(io) {}
		boost::asio::ip::udp::socket socket;
		boost::asio::ip::udp::endpoint from;
		std::array<char, 65536> buf{};
	};

	boost::asio::io_context& io_;
	WorldOptions o_;
	OriginLookup lookup_;
	RecordsWriter records_;
	std::shared_ptr<const HttpGateSetup>
		gate_setup_;  // the gate's, as the policy in force has it (o_.http at start)
	std::vector<boost::asio::ip::tcp::acceptor> acceptors_;
	std::vector<std::unique_ptr<boost::asio::steady_timer>> retry_;  // an acceptor's pause after a failed accept
	std::vector<std::unique_ptr<Datagrams>> udp_;
	std::unordered_map<StreamConnection*, std::shared_ptr<StreamConnection>> live_;
	std::unordered_map<GateConnection*, std::shared_ptr<GateConnection>> gates_;
	std::unordered_map<HttpGateConnection*, std::shared_ptr<HttpGateConnection>> http_;
	gate::RateTable rates_;
	NameTable names_;
	size_t nofile_ = 0;  // RLIMIT_NOFILE's soft limit at start
	bool started_ = false;
	bool stopped_ = false;
	boost::system::error_code last_accept_error_;
	// Read by stats() from any thread.
	std::atomic<uint64_t> connections_{0}, unknown_{0}, refused_busy_{0}, http_requests_{0}, tcp_streams_{0},
		datagrams_{0}, records_written_{0}, records_dropped_{0}, bytes_in_{0}, dns_queries_{0}, sni_passed_{0},
		sni_denied_{0}, http_passed_{0}, http_denied_{0}, secrets_refused_{0}, gate_reloads_{0};
};

}  // namespace airlock::proxy
