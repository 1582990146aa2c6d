#pragma once
// The simulated world's recorder: what `airlock proxy` runs for a sandbox
// whose policy redirects to the world. It accepts the connections the
// kernel redirected to its listeners, and the datagrams to its UDP
// sockets, writes down what each tried (one record per HTTP request; one
// per other TCP stream; one per datagram; one per DNS query) and answers
// HTTP with the policy's canned responses, or a plain 200, and DNS, when
// it synthesizes, with the world's addresses (proxy/dns.h). Nothing is
// forwarded.
//
// One io_context, one thread, nothing blocks but the append of a record
// line to a local file: a client that is slow, silent or hostile holds up
// no other. Everything a client sends is bounded: the header (16 KiB),
// what is kept of a body (max_body_bytes), what is read of a connection
// (max_connection_bytes), how long it may stay silent (idle_timeout), how
// many are open at once (max_connections), and the records file itself.
// docs/world.md describes the records; tests/unit/
// test_world_recorder.cpp drives it with curl, Python and raw sockets.
//
// Inside: proxy/recorder.h (listeners, datagrams, records, limits),
// proxy/stream.h (a connection's HTTP, raw TCP or DNS over TCP),
// proxy/canned.h (the answers to HTTP), proxy/sni_gate.h (the SNI gate).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/socket.h>

#include <boost/asio/io_context.hpp>

#include "net/address.h"
#include "policy/policy.h"
#include "proxy/records.h"  // Origin
#include "proxy/http_gate.h"
#include "proxy/sni_gate.h"
#include "proxy/world_stats.h"

namespace airlock::proxy {

class TlsTerminator;

// Called once per accepted connection (not for one refused as busy) with
// the accepted socket's fd; nullopt: no origin is known (the connection
// did not come through a redirect): it is closed at once, counted as
// "unknown", and nothing is recorded.
using OriginLookup = std::function<std::optional<Origin>(int accepted_fd)>;
// Called once per datagram with the UDP socket it came to and its sender;
// nullopt: no origin (counted "unknown", nothing recorded).
using DatagramOriginLookup = std::function<std::optional<Origin>(int udp_fd, const sockaddr* from, socklen_t len)>;

struct WorldOptions {
	std::string sandbox;          // the sandbox's name, written in every record
	std::vector<int> listen_fds;  // listening TCP sockets (IPv4 and/or IPv6), bound and listening; owned from here
	std::vector<int> udp_fds;     // bound UDP sockets taking redirected datagrams; owned from here
	DatagramOriginLookup datagram_origin;  // needed with udp_fds
	int records_fd = -1;                   // opened O_WRONLY|O_APPEND by the caller; owned from here
	uint64_t max_records_bytes = 64ull
				     << 20;  // the file never grows past this: records beyond are dropped, never cut
	WorldPolicy world;                   // max_body_bytes, responses (fixtures)
	// Ends TLS connections with the world's CA (what they carry is then
	// recorded as any connection); null: a ClientHello is recorded and the
	// connection closed.
	std::shared_ptr<TlsTerminator> tls;
	// The SNI gate; null: no rule is gated (an origin of a gated rule is
	// then closed as unknown).
	std::shared_ptr<Gate> gate;
	// The HTTP gate's rules, secrets and TLS (with `gate`, which makes its
	// sockets); null: no rule is inspected.
	std::shared_ptr<const HttpGateSetup> http;
	size_t max_connections = 256;  // open at once; more are accepted and closed at once, counted
	std::chrono::milliseconds idle_timeout{
		30000};                               // silent this long (or not reading our answer): closed, recorded
	uint64_t max_connection_bytes = 16ull << 20;  // read of one connection, then it is closed (recorded truncated)
};

class WorldImpl;

class WorldRecorder {
public:
	// Takes the listeners and the records file (closed if this throws: a
	// listen fd that is not a TCP socket).
	WorldRecorder(boost::asio::io_context&, WorldOptions, OriginLookup);
	~WorldRecorder();  // stop()
	WorldRecorder(const WorldRecorder&) = delete;
	WorldRecorder& operator=(const WorldRecorder&) = delete;

	void start();  // begins accepting on every listen fd
	// Closes the listeners and every connection (what an open connection
	// sent so far is recorded), then the records file; io.run() then
	// returns once nothing else is pending. On the io_context's thread.
	void stop();
	WorldStats stats() const;  // from any thread
	// A reload's gate setup: the next request of each connection is judged
	// under it. On the io_context's thread.
	void update_http(std::shared_ptr<const HttpGateSetup>);

private:
	std::shared_ptr<WorldImpl> impl_;
};

}  // namespace airlock::proxy
