#pragma once
// One connection the recorder accepted, of a rule that is not gated: the
// stream the world answers and writes down. A request starts with its
// first byte: if it looks like an HTTP request line, it is read as HTTP,
// answered (proxy/canned.h) and recorded, and the next request starts;
// anything else (or a header the parser rejects) makes the rest of the
// connection one "tcp" record, written at its end. A TLS ClientHello is
// recorded, or, with the world's CA, the recorder ends TLS and reads what
// it carries the same way. A connection to port 53, when the world
// synthesizes DNS, is DNS over TCP.
#include <memory>

#include <boost/asio/ip/tcp.hpp>

#include "proxy/records.h"  // Origin

namespace airlock::proxy {

class WorldImpl;

class StreamConnection {
public:
	virtual ~StreamConnection() = default;
	// Reads the first bytes; the recorder holds the connection from before
	// this until WorldImpl::forget.
	virtual void start() = 0;
	// The recorder stops: what the connection sent so far is recorded, and
	// it is closed.
	virtual void stop() = 0;
};

// A connection the recorder accepted, its origin named, not yet started.
std::shared_ptr<StreamConnection> make_stream_connection(std::shared_ptr<WorldImpl>, boost::asio::ip::tcp::socket,
							 Origin);

}  // namespace airlock::proxy
