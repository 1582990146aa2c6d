#pragma once
// The proxy of a sandbox whose policy redirects: `airlock proxy`, a process
// of its own that the agent starts, watches and restarts. The agent makes
// its listeners (loopback, in the agent's network namespace, which the
// sandbox's command inherits), hands them over and keeps no copy: when the
// proxy dies, its port closes and the kernel entry is cleared, so that a
// redirected connect fails (EPERM, reason no-proxy) and never goes
// elsewhere.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "kernel/kernel.h"
#include "policy/policy.h"
#include "proxy/tls.h"
#include "sandbox/state.h"
#include "util/fd.h"

namespace airlock::ops {

// Does the policy need a proxy (some rule redirects or is gated by SNI)?
bool needs_proxy(const Policy&);

// The world's CA certificate, for the sandbox's command to trust:
// STATE_DIR/world/SANDBOX.ca.pem (0644), removed with the proxy.
std::string ca_bundle_file(const Paths&, const std::string& sandbox);

// The records of a sandbox's world: DIR/SANDBOX.jsonl.
std::string records_file(const Policy&, const std::string& sandbox);

struct ProxyOptions {
	std::string program = "/proc/self/exe";  // the airlock binary
	// The user the proxy runs as: this name if it exists, else nobody.
	std::string user = "airlock-proxy";
	// Restarts allowed within `window`; past them the proxy stays down
	// (redirects fail closed) and the agent says so.
	unsigned max_restarts = 5;
	std::chrono::seconds window{10};
};

class SandboxProxy {
public:
	SandboxProxy(kernel::Kernel&, const Paths&, const SandboxRecord&, const Policy&, ProxyOptions = {});
	~SandboxProxy();
	SandboxProxy(const SandboxProxy&) = delete;
	SandboxProxy& operator=(const SandboxProxy&) = delete;

	// Readable when the proxy exits: then call reap().
	int pidfd() const { return pidfd_.get(); }
	pid_t pid() const { return pid_; }
	uint16_t port() const { return port_; }
	// The world's CA bundle ("" without a world): what the command's
	// SSL_CERT_FILE and the like name.
	const std::string& ca_file() const { return ca_file_; }
	// The proxy exited: clears the kernel entry, and starts it again unless
	// it died too often.
	void reap();

private:
	void start();
	void stop();
	void forget_ca();

	kernel::Kernel& k_;
	Paths paths_;
	SandboxRecord rec_;
	Policy policy_;
	ProxyOptions o_;
	std::string records_;
	proxy::WorldCa ca_;
	std::string ca_file_;
	uint16_t port_ = 0;
	pid_t pid_ = -1;
	Fd pidfd_;
	std::vector<std::chrono::steady_clock::time_point> starts_;
};

}  // namespace airlock::ops
