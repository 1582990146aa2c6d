#pragma once
#include <sys/types.h>
// What acts on one sandbox's kernel state from user space: its events go to
// the audit log (and, rate-limited, the terminal), its latch to a freeze or a
// kill, its learned addresses are swept. `airlock run` has one for its own
// sandbox; `airlock daemon` has one for every sandbox without a runner.
#include <bpf/libbpf.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "events/audit.h"
#include "kernel/kernel.h"
#include "policy/policy.h"
#include "sandbox/state.h"
#include "util/clock.h"
#include "util/fd.h"

namespace airlock {

class Supervisor {
public:
	enum class State { Running, Frozen, Killed };

	// Opens the sandbox's ring and its audit log (rec.audit_log). Throws if
	// the ring is missing.
	Supervisor(kernel::Kernel& k, const Paths& paths, SandboxRecord rec, Policy policy);
	~Supervisor();
	Supervisor(const Supervisor&) = delete;
	Supervisor& operator=(const Supervisor&) = delete;

	// A descriptor that becomes readable when events are waiting, or the
	// cgroup changed while a freeze or kill is being confirmed.
	int epoll_fd() const { return ep_.get(); }
	// Reads every waiting event, then looks at the latch, a thaw, expired
	// learned addresses, and (once a second) what the kernel's event rate
	// limit held back. Cheap enough to call on every wake-up.
	void poll();
	// SIGHUP: enforce the sandbox's policy file again (as `airlock reload`).
	void reload_from_file(const char* by);
	// The sandbox was reloaded by someone else: take up its record and the
	// policy its live bank was compiled from.
	void refresh();
	// For a supervisor no daemon tells (`airlock run` alone): when the
	// sandbox's record was replaced with another bank live (`airlock
	// reload` from another process), refresh() and on_reload(true). A
	// stat(2) when nothing changed.
	void follow_outside_reload();

	const SandboxRecord& record() const { return rec_; }
	const Policy& policy() const { return policy_; }  // what the live bank was compiled from
	State state() const { return state_; }
	bool killed_on_violation() const { return killed_on_violation_; }
	AuditLog& audit() { return audit_; }

	// Told of each freeze (its latency in seconds) and each reload (ok or not).
	std::function<void(double)> on_frozen;
	std::function<void(bool)> on_reload;

private:
	static int ring_cb(void* ctx, void* data, size_t size);
	void on_event(const al_event& e, const al_dns_event* dns, const al_unix_event* ux = nullptr);
	bool terminal_budget();
	// Writes cgroup.freeze (or cgroup.kill) once the latch is set;
	// check_latch then watches cgroup.events, never waiting on it, and
	// records the outcome: frozen (or emptied) once cgroup.events says so,
	// failed if it has not within kConfirmNs.
	void start_quarantine();
	void adopt_quarantine();
	void check_latch();
	void finish_quarantine(bool done, uint64_t violated_ns);
	void check_thawed();
	void sweep_learned();
	// One "suppressed" line per hook and reason whose count grew since the
	// last: at most once a second, and always at the end.
	void summarize_suppressed(bool final);

	kernel::Kernel& k_;
	const Paths& paths_;
	SandboxRecord rec_;
	ino_t record_ino_ = 0;  // of the record file last looked at
	Policy policy_;         // what the live bank was compiled from, to name rules
	AuditLog audit_;
	Fd ring_fd_;
	ring_buffer* rb_ = nullptr;
	State state_ = State::Running;
	bool killed_on_violation_ = false;
	bool quarantine_started_ = false;
	static constexpr uint64_t kConfirmNs = 5000000000ull;
	uint64_t confirm_deadline_ = 0;
	Fd cg_events_;  // cgroup.events, while a quarantine is being confirmed
	Fd recheck_;    // a timer: cgroup.events read again every 250 us at first
	uint64_t recheck_until_ = 0;
	Fd ep_;  // the ring's epoll descriptor, cg_events_ and recheck_
	uint8_t action_ = AL_ON_VIOLATION_FREEZE;
	uint64_t window_start_ = 0;
	unsigned in_window_ = 0, suppressed_ = 0;
	uint64_t last_sweep_ = 0;
	// al_counters.suppressed as last written to the audit log.
	std::vector<uint64_t> suppressed_seen_;
	uint64_t last_summary_ = 0;
};

}  // namespace airlock
