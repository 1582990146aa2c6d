#include "sandbox/supervisor.h"

#include <sys/stat.h>

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>

#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock {

using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// Learned addresses stay in the kernel this long past their TTL, so that
// flows let through while they were valid keep going; then they are removed
// and their table space is free again.
constexpr uint64_t kLearnedLingerNs = 600ull * 1000000000ull;

}  // namespace

Supervisor::Supervisor(kernel::Kernel& k, const Paths& paths, SandboxRecord rec, Policy policy)
    : k_(k), paths_(paths), rec_(std::move(rec)), policy_(std::move(policy))
{
	if (!rec_.audit_log.empty())
		audit_ = AuditLog(rec_.audit_log, rec_.audit_bound);
	adopt_quarantine();
	ring_fd_ = k_.ring(rec_.slot);
	rb_ = ring_fd_.valid() ? ring_buffer__new(ring_fd_.get(), ring_cb, this, nullptr) : nullptr;
	if (!rb_)
		fail("cannot open the event ring of sandbox {}", rec_.name);
	// One descriptor for the daemon or runner to watch: the ring, and the
	// timer that rereads cgroup.events while a freeze is confirmed.
	ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
	recheck_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
	struct epoll_event ev = {};
	ev.events = EPOLLIN;
	if (!ep_.valid() || !recheck_.valid() ||
	    ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, ring_buffer__epoll_fd(rb_), &ev) != 0 ||
	    ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, recheck_.get(), &ev) != 0) {
		int err = errno;
		ring_buffer__free(rb_);
		rb_ = nullptr;
		fail_errno("epoll for the event ring of sandbox " + rec_.name, err);
	}
	// What was held back before this supervisor took over was reported
	// by the one before it (or is in the counters of a fresh slot: zero).
	al_counters c = k_.counters(rec_.slot);
	suppressed_seen_.assign(&c.suppressed[0][0], &c.suppressed[0][0] + size_t{AL_HOOK_MAX} * size_t{AL_REASON_MAX});
	last_summary_ = monotonic_ns();
}

// A sandbox quarantined before this supervisor took over (a restarted
// daemon, a runner gone) and already frozen, or emptied by a kill on
// violation, is taken as it is: no second freeze, no `frozen` line and no
// latency sample for a violation another supervisor already reported. A
// latched sandbox that is not frozen yet is quarantined by the first poll,
// with its real latency.
void Supervisor::adopt_quarantine()
{
	if (!k_.latch(rec_.slot).violated_ns)
		return;
	auto sb = k_.sandbox(rec_.cgroup_id);
	uint8_t action = sb ? sb->on_violation : uint8_t(AL_ON_VIOLATION_FREEZE);
	auto ev = cgroup::events(rec_.cgroup);
	if (action == AL_ON_VIOLATION_KILL && cgroup::settled_empty(ev)) {
		action_ = action;
		state_ = State::Killed;
		killed_on_violation_ = true;
		spdlog::info("{}: killed on its violation before; adopted as it is", rec_.name);
	} else if (action != AL_ON_VIOLATION_KILL && cgroup::settled_frozen(ev)) {
		action_ = action;
		state_ = State::Frozen;
		spdlog::info("{}: frozen on its violation before; adopted frozen", rec_.name);
	}
}

Supervisor::~Supervisor()
{
	if (rb_) {
		ring_buffer__consume(rb_);
		ring_buffer__free(rb_);
	}
	try {
		summarize_suppressed(true);
	} catch (const std::exception& e) {
		spdlog::warn("{}: counting suppressed events at the end: {}", rec_.name, e.what());
	}
}

void Supervisor::poll()
{
	// The latch is set before its event is submitted: act on it before
	// reading (and writing out) whatever the ring holds.
	start_quarantine();
	ring_buffer__consume(rb_);
	check_latch();
	check_thawed();
	sweep_learned();
	summarize_suppressed(false);
}

void Supervisor::summarize_suppressed(bool final)
{
	uint64_t now = monotonic_ns();
	if (!final && now - last_summary_ < 1000000000ull)
		return;
	uint64_t since = last_summary_;
	last_summary_ = now;
	al_counters c = k_.counters(rec_.slot);
	for (unsigned h = 0; h < AL_HOOK_MAX; h++) {
		for (unsigned r = 0; r < AL_REASON_MAX; r++) {
			uint64_t& seen = suppressed_seen_[h * AL_REASON_MAX + r];
			uint64_t total = c.suppressed[h][r];
			if (total <= seen) {
				seen = total;  // lower: the counters were reset (airlock thaw keeps them)
				continue;
			}
			bool allowed = reason_allows(r);
			audit_.write(rec_.name,
				     json{{"event", "suppressed"},
					  {"hook", hook_name(h)},
					  {"reason", reason_name(r)},
					  {"verdict", verdict_name(allowed                       ? AL_VERDICT_ALLOW
								   : policy_.mode == Mode::Audit ? AL_VERDICT_AUDIT
												 : AL_VERDICT_DENY)},
					  {"count", total - seen},
					  {"total", total},
					  {"seconds", (now - since) / 1e9},
					  {"policy", rec_.policy_name}});
			spdlog::warn("{}: {} more {} {} decisions ({}) held back by the event rate limit", rec_.name,
				     total - seen, hook_name(h), allowed ? "allowed" : "denied", reason_name(r));
			seen = total;
		}
	}
}

void Supervisor::on_event(const al_event& e, const al_dns_event* dns, const al_unix_event* ux)
{
	// A reload switched banks: the record names the policy now enforced,
	// and the state directory keeps the text that bank came from.
	if (e.policy_id && e.policy_id != policy_id_of(rec_.slot, rec_.bank)) {
		if (auto r = load_record(paths_, rec_.name)) {
			rec_ = *r;
			if (auto p = parse_policy_file(paths_.policy_copy(rec_.name, rec_.bank)))
				policy_ = *p;
		}
	}
	json j = dns ? dns_json(*dns) : ux ? unix_json(*ux) : decision_json(e);
	j["policy"] = rec_.policy_name;
	if (e.rule != AL_RULE_NONE && e.rule < policy_.rules.size())
		j["rule_text"] = describe(policy_.rules[e.rule]);
	audit_.write(rec_.name, j);
	if (!terminal_budget())
		return;
	std::string line = dns ? dns_line(*dns) : ux ? unix_line(*ux) : decision_line(e);
	if (e.verdict == AL_VERDICT_ALLOW)
		spdlog::info("{}: {}", rec_.name, line);
	else
		spdlog::warn("{}: {}", rec_.name, line);
}

bool Supervisor::terminal_budget()
{
	uint64_t now = monotonic_ns();
	if (now - window_start_ >= 1000000000ull) {
		if (suppressed_)
			spdlog::warn("{}: {} more decisions in the last second are only in the audit log", rec_.name,
				     suppressed_);
		window_start_ = now;
		in_window_ = suppressed_ = 0;
	}
	if (in_window_ < 20) {
		in_window_++;
		return true;
	}
	suppressed_++;
	return false;
}

void Supervisor::sweep_learned()
{
	uint64_t now = monotonic_ns();
	if (now - last_sweep_ < 1000000000ull || now < kLearnedLingerNs)
		return;
	last_sweep_ = now;
	try {
		k_.sweep_learned(rec_.slot, now - kLearnedLingerNs);
	} catch (const std::exception& ex) {
		spdlog::warn("{}: sweeping learned addresses: {}", rec_.name, ex.what());
	}
}

void Supervisor::reload_from_file(const char* by)
{
	audit_.reopen();
	auto r = load_record(paths_, rec_.name);
	if (!r)
		return;
	std::string file = r->policy_file;
	auto loaded = load_policy(file);
	if (!loaded) {
		const auto& lines = loaded.rejection().lines;
		audit_.write(rec_.name, json{{"event", "reload"},
					     {"result", "error"},
					     {"policy_file", file},
					     {"errors", lines},
					     {"by", by}});
		for (const auto& l : lines)
			spdlog::error("{}", l);
		spdlog::error("{}: reload rejected; policy '{}' stays enforced", rec_.name, rec_.policy_name);
		if (on_reload)
			on_reload(false);
		return;
	}
	try {
		const Policy& p = *loaded;
		FileLock lock(paths_.lock_file());
		auto cur = load_record(paths_, rec_.name);
		if (!cur)
			return;
		reload_sandbox(k_, paths_, *cur, p, file);
		rec_ = *cur;
		policy_ = p;
		audit_.write(rec_.name, json{{"event", "reload"},
					     {"result", "ok"},
					     {"policy", p.name},
					     {"policy_file", file},
					     {"by", by}});
		spdlog::info("{}: reloaded {} on {}", rec_.name, file, by);
		if (on_reload)
			on_reload(true);
	} catch (const std::exception& e) {
		spdlog::error("{}: reload failed: {}; the old policy stays enforced", rec_.name, e.what());
	}
}

void Supervisor::refresh()
{
	auto r = load_record(paths_, rec_.name);
	if (!r)
		return;
	rec_ = *r;
	if (auto parsed = parse_policy_file(paths_.policy_copy(rec_.name, rec_.bank)))
		policy_ = *parsed;
}

void Supervisor::follow_outside_reload()
{
	struct stat st {};
	if (::stat(paths_.record_file(rec_.name).c_str(), &st) != 0 || st.st_ino == record_ino_)
		return;
	record_ino_ = st.st_ino;
	auto r = load_record(paths_, rec_.name);
	if (!r || r->cgroup_id != rec_.cgroup_id)
		return;
	// Whatever replaced it (two reloads between looks may leave the same
	// bank live, with another policy): the live bank's policy is read
	// again, and the hooks compare it with what they hold.
	bool other_bank = r->bank != rec_.bank;
	refresh();
	if (other_bank)
		spdlog::info("{}: reloaded by another process: now '{}'", rec_.name, policy_.name);
	if (on_reload)
		on_reload(true);
}

void Supervisor::start_quarantine()
{
	if (state_ != State::Running || quarantine_started_)
		return;
	if (!k_.latch(rec_.slot).violated_ns)
		return;
	auto sb = k_.sandbox(rec_.cgroup_id);
	action_ = sb ? sb->on_violation : uint8_t(AL_ON_VIOLATION_FREEZE);
	if (action_ == AL_ON_VIOLATION_KILL)
		cgroup::kill(rec_.cgroup);
	else
		cgroup::freeze(rec_.cgroup);
	quarantine_started_ = true;
}

void Supervisor::check_latch()
{
	if (state_ != State::Running)
		return;
	start_quarantine();
	if (!quarantine_started_)
		return;
	uint64_t now = monotonic_ns();
	uint64_t expirations;
	if (::read(recheck_.get(), &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		spdlog::debug("{}: timer: {}", rec_.name, std::strerror(errno));
	if (!confirm_deadline_) {
		confirm_deadline_ = now + kConfirmNs;
		cg_events_ = cgroup::open_events(rec_.cgroup);
		struct epoll_event ev = {};
		ev.events = EPOLLPRI;
		if (cg_events_.valid())
			::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, cg_events_.get(), &ev);
		// The kernel notifies a change of cgroup.events at most every
		// 10 ms: for the first 100 ms a timer wakes this supervisor to
		// read it again every 250 us (never a wait in the loop).
		recheck_until_ = now + 100000000ull;
		struct itimerspec its = {};
		its.it_value.tv_nsec = 20000;
		its.it_interval.tv_nsec = 250000;
		::timerfd_settime(recheck_.get(), 0, &its, nullptr);
	} else if (recheck_until_ && now >= recheck_until_) {
		recheck_until_ = 0;
		struct itimerspec off = {};
		::timerfd_settime(recheck_.get(), 0, &off, nullptr);
	}
	auto ev = cg_events_.valid() ? cgroup::read_events(cg_events_.get()) : std::nullopt;
	bool done = action_ == AL_ON_VIOLATION_KILL ? cgroup::settled_empty(ev) : cgroup::settled_frozen(ev);
	if (!done && now < confirm_deadline_)
		return;  // the next change of cgroup.events (or the next poll) looks again
	finish_quarantine(done, k_.latch(rec_.slot).violated_ns);
}

void Supervisor::finish_quarantine(bool done, uint64_t violated_ns)
{
	uint64_t lat = monotonic_ns() - violated_ns;
	quarantine_started_ = false;
	confirm_deadline_ = 0;
	recheck_until_ = 0;
	struct itimerspec off = {};
	::timerfd_settime(recheck_.get(), 0, &off, nullptr);
	if (cg_events_.valid())
		::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, cg_events_.get(), nullptr);
	cg_events_.reset();
	if (action_ == AL_ON_VIOLATION_KILL) {
		state_ = State::Killed;
		killed_on_violation_ = true;
		audit_.write(rec_.name, json{{"event", "killed"},
					     {"by", "policy"},
					     {"latency_us", lat / 1000},
					     {"complete", done}});
		spdlog::warn("{}: killed on violation, {:.3f} ms after it", rec_.name, lat / 1e6);
		return;
	}
	if (!done) {
		spdlog::error("{}: cgroup.events did not report frozen 1 within {} s", rec_.name,
			      kConfirmNs / 1000000000ull);
		audit_.write(rec_.name, json{{"event", "freeze-failed"}, {"latency_us", lat / 1000}});
		return;
	}
	state_ = State::Frozen;
	audit_.write(rec_.name, json{{"event", "frozen"}, {"latency_us", lat / 1000}});
	if (on_frozen)
		on_frozen(lat / 1e9);
	spdlog::warn("{}: frozen {:.3f} ms after the violation; `airlock thaw {}` or `airlock kill {}`", rec_.name,
		     lat / 1e6, rec_.name, rec_.name);
}

void Supervisor::check_thawed()
{
	// A sandbox killed on its violation and kept (attached or made through
	// the daemon) runs again once `airlock thaw` lifts the quarantine.
	if (state_ == State::Killed && !k_.latch(rec_.slot).violated_ns) {
		state_ = State::Running;
		killed_on_violation_ = false;
		return;
	}
	if (state_ != State::Frozen)
		return;
	auto ev = cgroup::events(rec_.cgroup);
	if (ev && ev->populated && !ev->frozen) {
		state_ = State::Running;
		// cgroup.kill unfreezes on its way to killing: that is no thaw.
		std::error_code ec;
		if (!std::filesystem::exists(paths_.kill_marker(rec_.name), ec))
			spdlog::info("{}: thawed", rec_.name);
	}
}

int Supervisor::ring_cb(void* ctx, void* data, size_t size)
{
	if (size < sizeof(al_event))
		return 0;
	al_event e;
	std::memcpy(&e, data, sizeof(e));
	auto* r = static_cast<Supervisor*>(ctx);
	if ((e.kind == AL_EVENT_DNS_QUERY || e.kind == AL_EVENT_DNS_ANSWER) && size >= sizeof(al_dns_event)) {
		al_dns_event d;
		std::memcpy(&d, data, sizeof(d));
		r->on_event(d.base, &d);
	} else if (e.kind == AL_EVENT_UNIX && size >= sizeof(al_unix_event)) {
		al_unix_event u;
		std::memcpy(&u, data, sizeof(u));
		r->on_event(u.base, nullptr, &u);
	} else {
		r->on_event(e, nullptr);
	}
	if (e.latched)
		r->check_latch();
	return 0;
}

}  // namespace airlock
