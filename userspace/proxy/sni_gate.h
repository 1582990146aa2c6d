#pragma once
// The SNI gate: the connections of allow rules with "tls": {"sni":
// "require"} reach the proxy as redirects. Each one's first bytes must be a
// ClientHello whose server_name the rule covers and that this sandbox
// resolved to the destination's address; then the proxy asks the agent for
// a socket to the destination (it makes none itself) and splices the bytes
// both ways, untouched. Anything else is denied, recorded and reported.
//
// The gate enforces policy, so it knows nothing of the world's recorder:
// the agent's side is a Gate (agent_channel.h carries it), the proxy's a
// GateHost (counts, the record, the descriptor headroom).
// tests/unit/test_sni_gate.cpp drives it over loopback with stubs of both.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "net/address.h"
#include "proxy/client_hello.h"
#include "proxy/records.h"  // Origin, SniRecord

namespace airlock::proxy {

struct GateRule {
	std::string domain;  // as the rule has it: lowercased, without "*."
	bool wildcard = false;
};

class Gate {
public:
	virtual ~Gate() = default;
	// The gated rule of this index, or nullptr (not a gated rule).
	virtual const GateRule* rule(uint16_t index) const = 0;
	// The name this sandbox's last answer for addr was for ("" none).
	virtual std::string learned_name(const Address&) const = 0;
	// A socket to the origin of the accepted connection, its connect under
	// way: done(fd, 0) or done(-1, errno), later, on the io_context's
	// thread. done is not called once the io_context has stopped.
	virtual void connect(int accepted_fd, const Origin&, std::function<void(int fd, int err)> done) = 0;
	// A denied connection: the sandbox's on_violation is taken.
	virtual void violation(const Origin&, const std::string& sni, const std::string& reason) = 0;
};

class GateConnection;

// What a gated connection asks of the proxy that accepted it.
class GateHost {
public:
	virtual ~GateHost() = default;
	// The verdict, once a connection has one: denied, or passed with the
	// destination connected (the splice begins).
	virtual void count_sni(bool passed) = 0;
	// Whether a passed connection may have its two pipes (four descriptors).
	virtual bool may_pipe() const = 0;
	// The connection's one record, as it ends (before its sockets close).
	virtual void record_sni(const Origin&, const SniRecord&) = 0;
	// The connection has ended: the host lets go of it.
	virtual void forget_gate(GateConnection*) = 0;
};

// Whether a whole ClientHello may pass for the origin's rule: "" passes,
// else why not (the reason recorded and reported). The gate's learned name
// is asked only of a name the rule covers.
std::string judge_client_hello(const ClientHello&, const GateRule&, const Origin&, const Gate&);

// A connection of a gated allow rule. Its ClientHello is read first (no
// byte goes anywhere before), its name judged; passed, the agent hands over
// a socket to the destination and every byte read so far, then everything
// either side sends, goes to the other untouched. One record at the end.
class GateConnection {
public:
	virtual ~GateConnection() = default;
	// Reads the ClientHello; the host holds the connection from before
	// this until forget_gate.
	virtual void start() = 0;
	// The proxy stops: the connection is recorded and closed.
	virtual void stop() = 0;
};

// The gate on an accepted connection whose origin's rule is gated, not yet
// started. idle_timeout bounds the ClientHello and the destination's
// connect together.
std::shared_ptr<GateConnection> make_gate_connection(boost::asio::io_context&, boost::asio::ip::tcp::socket, Origin,
						     GateRule, std::shared_ptr<Gate>, std::shared_ptr<GateHost>,
						     std::chrono::milliseconds idle_timeout);

}  // namespace airlock::proxy
