#pragma once
// The proxies of the sandboxes the daemon supervises whose policy needs one
// (a redirect to the world, the SNI gate): started, restarted, stopped and
// handed each reload, their descriptors watched in the daemon's loop. What
// fails with a proxy stops that proxy alone, its kernel entry cleared
// (redirected connects fail closed, reason no-proxy), to be tried again
// 10 s later: never the daemon, which supervises every other sandbox.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "daemon/event_loop.h"
#include "kernel/kernel.h"
#include "ops/proxy.h"
#include "sandbox/state.h"
#include "sandbox/supervisor.h"
#include "util/fd.h"

namespace airlock {

class ProxySupervisor {
public:
	// What a proxy tells the daemon, by the name of its sandbox.
	struct Hooks {
		// Its channel was served: a connection the gate denied set the
		// latch, and the sandbox's supervisor is to act on it now.
		std::function<void(const std::string& name)> served;
		// A connection the SNI gate denied (an audit record).
		std::function<void(const std::string& name, const nlohmann::json&)> denied;
	};

	// A proxy that failed to start (or to start again) is tried again at
	// most this often, not at every rescan.
	static constexpr uint64_t kRetryNs = 10000000000ull;
	// A proxy sent SIGTERM is killed this long after if still there.
	static constexpr uint64_t kStopNs = 2000000000ull;

	ProxySupervisor(EventLoop&, const Paths&, Hooks);
	// Each proxy stopped (SIGTERM; it dies with this process anyway) and
	// its kernel entry cleared: redirected connects fail closed until a
	// daemon starts them again.
	~ProxySupervisor();
	ProxySupervisor(const ProxySupervisor&) = delete;
	ProxySupervisor& operator=(const ProxySupervisor&) = delete;

	// Starts the proxy a supervised sandbox's policy needs, or stops the
	// one it no longer needs; a policy that still needs one is handed to
	// it (after a reload). Never throws: a proxy that cannot start leaves
	// redirected connects failing closed (no-proxy), and says why once
	// (trouble() tells it until it runs). pid_hint: a process of the
	// sandbox, whose network namespace the proxy listens in.
	void sync(kernel::Kernel&, const Supervisor&, int pid_hint = 0);
	// Stops a sandbox's proxy. `record_kept`: the sandbox is still this
	// one, its kernel entry is cleared (a redirected connect fails with
	// no-proxy); else its slot may be another sandbox's already, and only
	// the process and the files go.
	void stop(const std::string& name, bool record_kept = true);

	// A proxy that is down (it died too often, or was halted) starts again
	// when its time comes: at least once a second.
	void tend();
	// A sandbox whose policy needs a proxy it does not have (one could not
	// start yet: an attached cgroup without a process) tries again, once
	// its retry time came.
	void retry(kernel::Kernel&, const Supervisor&);
	// Stopped proxies: those that exited waited for, those that outlived
	// their 2 s killed (their pidfd then says so).
	void kill_lingering();

	// Why a sandbox's proxy does not run, if it said why.
	std::optional<std::string> trouble(const std::string& name) const;
	// The `status` answer's part of a sandbox's proxy, if it has one.
	std::optional<nlohmann::json> status(const std::string& name) const;

private:
	// A proxy, with the descriptors of its the loop watches: new ones at
	// each start.
	struct Watch {
		std::unique_ptr<ops::SandboxProxy> proxy;
		int pidfd = -1, control = -1;
		uint64_t generation = 0;  // of the proxy whose descriptors these are
	};
	// Proxies sent SIGTERM, waited for by the loop, never by a call that
	// would hold up another sandbox's freeze: killed 2 s later if still
	// there.
	struct Stopping {
		pid_t pid;
		Fd pidfd;
		uint64_t deadline_ns;
	};

	void start(kernel::Kernel&, const Supervisor&, int pid_hint);
	void watch(const std::string& name, Watch&);
	void unwatch(Watch&);
	void with_proxy(const std::string& name, const std::function<void(ops::SandboxProxy&)>& f);
	void wait_for_stop(pid_t pid, Fd pidfd);
	bool reap_stopped(int fd);

	EventLoop& loop_;
	const Paths& paths_;
	Hooks hooks_;
	// Declared before `proxies_`, which hand theirs over as they go.
	std::map<int, Stopping> stopping_;  // by pidfd
	std::map<std::string, Watch> proxies_;
	std::map<std::string, std::string> errors_;  // name -> last error, logged once
	std::map<std::string, uint64_t> retry_ns_;   // name -> when to try a start again
};

}  // namespace airlock
