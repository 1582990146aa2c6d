#pragma once
// TLS on both sides of the HTTP gate (docs/gate.md). Towards the sandbox
// the gate is the server: a session of the sandbox's CA (tls.h), its leaf
// minted for the server name the client asked for once the gate has
// judged that name. Towards the origin it is a client that verifies: the
// system's roots plus the rule's tls.upstream_ca, the certificate checked
// against the name the sandbox asked for (the address, when it named
// none), TLS 1.2 at least, ALPN http/1.1. A certificate that does not
// verify ends the request with a 502 that says why; nothing is sent over
// an unverified connection.
#include <map>
#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "net/address.h"
#include "proxy/tls.h"

namespace airlock::proxy {

class GateTls {
public:
	// The system's roots are read here, before the proxy confines itself:
	// from roots_file, or OpenSSL's default file when ""; none where that
	// file does not exist (an origin then verifies by tls.upstream_ca
	// alone, or fails: never an unverified connection).
	GateTls(std::shared_ptr<TlsTerminator> terminator, const std::string& roots_file = "");

	// The context of the sandbox's side (sessions get their leaf through
	// use_leaf once the name is judged).
	boost::asio::ssl::context& server() { return server_; }
	bool use_leaf(SSL* s, const std::string& sni, const Address& addr)
	{
		return terminator_->use_leaf(s, sni, addr);
	}

	// The context that verifies an origin by the system's roots and, when
	// not empty, the certificates of extra_roots_pem (PEM). Made once per
	// distinct extra_roots_pem; throws std::runtime_error naming what of
	// it OpenSSL refused.
	boost::asio::ssl::context& upstream(const std::string& extra_roots_pem);

	// Prepares a client session for the origin: its SNI (a name only) and
	// the name or address its certificate must carry.
	static bool expect_peer(SSL*, const std::string& name, const Address& addr);

	// Why a finished or failed client handshake does not verify ("" it
	// does), in one line.
	static std::string verify_problem(SSL*);

private:
	std::shared_ptr<TlsTerminator> terminator_;
	boost::asio::ssl::context server_;
	std::string roots_pem_;  // the system's, as read at construction
	std::map<std::string, std::unique_ptr<boost::asio::ssl::context>> upstream_;
};

}  // namespace airlock::proxy
