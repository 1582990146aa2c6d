// A reload the running proxy can take without a restart: what the HTTP
// gate reads (its rules' entries, inject, upstream roots, the secrets)
// handed over on the channel (proxy/agent_channel.h), its connections
// kept; anything else it reads changed starts it again (proxy.cpp).
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "gate/inputs.h"
#include "ops/proxy.h"
#include "ops/proxy_sockets.h"
#include "proxy/agent_channel.h"
#include "util/files.h"

namespace airlock::ops {

namespace {

// The SNI gate's rules: the proxy's agent channel judges by them.
std::vector<std::tuple<unsigned, std::string, bool>> sni_rules(const Policy& p)
{
	std::vector<std::tuple<unsigned, std::string, bool>> out;
	for (const auto& r : p.rules)
		if (r.tls_sni_require)
			out.emplace_back(r.index, r.domain.value_or(""), r.wildcard);
	return out;
}

bool any_gated(const Policy& p)
{
	return std::any_of(p.rules.begin(), p.rules.end(), [](const Rule& r) { return r.gated(); });
}

bool any_inspected(const Policy& p)
{
	return std::any_of(p.rules.begin(), p.rules.end(), [](const Rule& r) { return r.http.has_value(); });
}

}  // namespace

// Only a proxy that has the channel's reader (a gated rule when it
// started, and now) takes inputs; the world and the SNI gate's rules stay.
// The first inspected rule needs TLS to origins, whose roots the proxy
// reads only as it starts.
bool proxy_takes_reload(const Policy& before, const Policy& after)
{
	return before.world == after.world && sni_rules(before) == sni_rules(after) && any_gated(before) &&
	       any_gated(after) && (any_inspected(before) || !any_inspected(after));
}

bool SandboxProxy::hand_over(const Policy& p, unsigned bank)
{
	if (!ctl_.valid())
		return false;
	auto text = read_file(paths_.policy_copy(rec_.name, bank));
	if (!text) {
		spdlog::warn("{}: the reloaded policy's copy cannot be read for the proxy", rec_.name);
		return false;
	}
	auto in = gate::read_inputs(p, std::move(*text));
	if (!in) {
		spdlog::warn("{}: {}", rec_.name, in.rejection().first());
		return false;
	}
	std::string blob = gate::encode_inputs(*in);
	for (auto& s : in->secrets.never_send)
		OPENSSL_cleanse(s.value.data(), s.value.size());
	for (auto& s : in->secrets.injectable)
		OPENSSL_cleanse(s.value.data(), s.value.size());
	Fd m = sealed_memfd("airlock-gate-inputs", blob);
	proxy::GateInputs msg;
	msg.bytes = blob.size();
	OPENSSL_cleanse(blob.data(), blob.size());
	if (!m.valid()) {
		spdlog::warn("{}: the gate's inputs for the proxy: {}", rec_.name, std::strerror(errno));
		return false;
	}
	if (send_with_fd(ctl_.get(), &msg, sizeof(msg), m.get()) != static_cast<ssize_t>(sizeof(msg))) {
		spdlog::warn("{}: the gate's inputs for the proxy: {}", rec_.name, std::strerror(errno));
		return false;
	}
	return true;
}

}  // namespace airlock::ops
