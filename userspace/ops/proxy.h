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
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernel/kernel.h"
#include "policy/policy.h"
#include "proxy/agent_channel.h"
#include "proxy/world_stats.h"
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
	// Starts allowed within `window`: past them, a proxy that died is down
	// (redirects fail closed) for `window` before it is started again, and
	// the agent says so. A crash loop costs at most this many forks a window.
	unsigned max_restarts = 5;
	std::chrono::seconds window{10};
	// A start that failed (no port, no fork, no records file), or a proxy
	// halted for what went wrong with it: down this long, then started again.
	std::chrono::seconds retry_after{10};
	// The network namespace its listeners are made in: the one of the
	// sandbox's processes, whose connects are rewritten to a loopback
	// address of their own namespace. Not valid: this process's. (The SNI
	// gate's sockets to origins are always this process's.)
	Fd netns;
	// Set: a proxy being stopped is sent SIGTERM and handed over (its pid
	// and pidfd) to be waited for by the caller's loop, which must SIGKILL
	// it if it lingers; the stop never blocks. Unset: the stop waits for it
	// (SIGKILL after 2 s).
	std::function<void(pid_t, Fd)> on_stopping;
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
	// The inode of the network namespace its listeners are in.
	uint64_t netns_inode() const { return netns_inode_; }
	// The world's CA bundle ("" without a world): what the command's
	// SSL_CERT_FILE and the like name.
	const std::string& ca_file() const { return ca_file_; }
	// Running (else down: redirected connects fail closed, reason no-proxy).
	bool running() const { return pid_ > 0; }
	// The proxy exited: clears the kernel entry, and starts it again, at
	// once unless it died too often (then tend() does, later).
	void reap();
	// Starts a proxy that is down again once its time came: to be called by
	// the caller's loop at least once a second.
	void tend();
	// None of reap(), tend(), serve() and set_policy() throws: what fails
	// halts the proxy (kernel entry cleared, process stopped, its counts
	// kept) for `retry_after`, and says why once. The CA, the port and the
	// counts stay the sandbox's over every start.

	// The SNI gate's channel (proxy/agent_channel.h), -1 without gated
	// rules or while the proxy is down: readable when the proxy asks.
	int control_fd() const { return ctl_.get(); }
	// Answers what the proxy asked (a bounded number of messages a call):
	// a socket to a gated origin, or a denied connection, which goes to
	// on_violation (an audit record).
	void serve();
	std::function<void(const nlohmann::json&)> on_violation;
	// The policy now enforced (a reload), compiled into `bank`: a gated
	// origin is checked against its rules. When what the proxy reads of it
	// changed: only what the HTTP gate reads (entries, inject, roots,
	// secrets), the proxy takes it on its channel and judges its next
	// requests by it (proxy_reload.cpp); anything else (the SNI gate's
	// rules, the world), the proxy is started again on it, its port cleared
	// in the kernel first (connects meanwhile fail closed). A proxy that
	// is down starts on it when its time comes.
	// generation() changes with each start: its descriptors are new.
	void set_policy(const Policy& p, unsigned bank);
	uint64_t generation() const { return starts_total_; }
	// The sandbox is gone and its slot may be another's already: the
	// destructor stops the process and removes the files, and leaves the
	// kernel's entries (the sandbox's removal cleared them) alone.
	void keep_kernel_entries() { kernel_entries_ = false; }
	// The proxy's counts from the sandbox's start, over every restart
	// (what STATE_DIR/world/SANDBOX.stats.json holds).
	proxy::ProxyCounts counts() const;

private:
	struct Listeners;
	struct Handover;
	void start();
	void bind_port(Listeners&);
	Handover make_handover(const Listeners&);
	std::pair<pid_t, Fd> spawn(const Handover&);
	void stop();
	void serve_channel();
	void halt(const std::string& why, std::chrono::seconds down_for);
	template <typename F>
	void guarded(const char* doing, F f);
	void forget_ca();
	bool gated() const;
	// The gate's inputs of p (compiled into bank) on the channel; false
	// when they could not be read or sent (the proxy is then restarted).
	bool hand_over(const Policy& p, unsigned bank);
	void answer(const proxy::GateRequest&);
	void report(const proxy::GateRequest&);
	void take_stats(const proxy::StatsReport&);
	void retire();
	void write_stats();

	kernel::Kernel& k_;
	Paths paths_;
	SandboxRecord rec_;
	Policy policy_;
	ProxyOptions o_;
	std::string records_;
	proxy::WorldCa ca_;
	std::string ca_file_;
	uint64_t netns_inode_ = 0;
	uint16_t port_ = 0;
	pid_t pid_ = -1;
	Fd pidfd_;
	Fd ctl_;        // the SNI gate's channel, the agent's end
	Fd origin_ro_;  // the origin table, for the gate's lookups
	std::vector<std::chrono::steady_clock::time_point> starts_;
	// Down (pid_ -1) until then; nullopt while running.
	std::optional<std::chrono::steady_clock::time_point> down_until_;
	uint64_t starts_total_ = 0;
	uint64_t unreachable_ = 0;  // gated origins refused for their address
	bool draining_ = false;     // retire(): a connect request is not answered
	bool kernel_entries_ = true;
	proxy::WorldStats base_;     // what the proxies before this one counted
	proxy::WorldStats current_;  // what this one said last
	std::chrono::steady_clock::time_point stats_written_;
};

// Whether a running proxy takes a reload from `before` to `after` on its
// channel (only what the HTTP gate reads changed), or must start again.
bool proxy_takes_reload(const Policy& before, const Policy& after);

}  // namespace airlock::ops
