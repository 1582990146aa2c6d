#pragma once
// The HTTP gate on a connection of an inspected rule (docs/gate.md): each
// request read whole and strictly (gate/http1.h), its target in canonical
// form (net/url.h), its Host the rule's and the name this sandbox resolved
// to the address, its bytes scanned for every secret (gate/never_send.h),
// judged against the rule's entries as the policy has them when it
// arrives (gate/judge.h). A refused request is answered by the gate (400,
// 403, 413, 429) and nothing of it goes upstream; an allowed one is
// written anew (gate::upstream_head, injected headers in place of the
// client's) to a socket the agent opens to the original address, and the
// origin's answer streams back. Keep-alive: every request on its own.
//
// A connection whose first byte opens a TLS handshake is TLS on both
// sides (gate_tls.h): the server name the client asks for is judged before
// a leaf is minted for it, and every request's Host must be that name.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "gate/judge.h"
#include "gate/never_send.h"
#include "policy/policy.h"
#include "proxy/records.h"   // Origin
#include "proxy/sni_gate.h"  // Gate

namespace airlock::proxy {

// What the gate knows of an inspected rule.
struct HttpGateRule {
	std::string domain;  // lower case, without "*."; "" for a CIDR rule
	bool wildcard = false;
	HttpGate http;
	std::string upstream_ca_pem;  // tls.upstream_ca's certificates, read by the agent ("" none)
};

class HttpGateConnection;
class GateTls;

struct HttpGateLimits {
	std::chrono::milliseconds idle_timeout{30000};
	uint64_t default_max_body = 1 << 20;  // a request body, where no entry says more
};

// What a proxy serves the gate with: the inspected rules by index, the
// policy's secrets (every one a never-send pattern; the file secrets also
// injectable by name) and TLS on both sides (null: plain HTTP only). A
// reload gives the proxy a new one; each request is judged under the one
// in force when its head is read, which its connection holds until the
// request is done.
struct HttpGateSetup {
	std::map<uint16_t, HttpGateRule> rules;
	gate::NeverSend never_send;
	std::map<std::string, std::string> injectable;
	std::shared_ptr<GateTls> tls;
	HttpGateLimits limits;

	// The inspected rule of this index (nullptr: none).
	const HttpGateRule* rule(uint16_t index) const
	{
		auto it = rules.find(index);
		return it == rules.end() ? nullptr : &it->second;
	}
	// An injectable secret's value by name (nullopt: none: the request is
	// refused rather than sent without it).
	std::optional<std::string> secret(const std::string& name) const
	{
		auto it = injectable.find(name);
		return it == injectable.end() ? std::nullopt : std::optional<std::string>(it->second);
	}
};

// What a connection asks of the proxy that accepted it.
class HttpGateHost {
public:
	virtual ~HttpGateHost() = default;
	// The setup in force (nullptr: no inspected rule now: the connection
	// ends).
	virtual std::shared_ptr<const HttpGateSetup> setup() const = 0;
	virtual gate::RateTable& rates() = 0;
	virtual void record_request(const Origin&, const GateRequestRecord&) = 0;
	virtual void forget_http(HttpGateConnection*) = 0;
};

class HttpGateConnection {
public:
	virtual ~HttpGateConnection() = default;
	virtual void start() = 0;
	virtual void stop() = 0;
};

// tls: nullptr serves plain HTTP only (a TLS client is refused).
std::shared_ptr<HttpGateConnection> make_http_gate_connection(boost::asio::io_context&, boost::asio::ip::tcp::socket,
							      Origin, std::shared_ptr<Gate>,
							      std::shared_ptr<HttpGateHost>,
							      std::shared_ptr<GateTls> tls, HttpGateLimits);

// Whether a Host names what the rule allows.
bool host_in_rule(const std::string& host, const HttpGateRule&);

}  // namespace airlock::proxy
