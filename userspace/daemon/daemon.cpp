#include "daemon/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <systemd/sd-daemon.h>
#include <spdlog/spdlog.h>

#include "daemon/control_server.h"
#include "daemon/declared.h"
#include "daemon/event_feed.h"
#include "daemon/event_loop.h"
#include "daemon/policy_dir.h"
#include "daemon/policy_watcher.h"
#include "daemon/proxy_supervisor.h"
#include "kernel/kernel.h"
#include "metrics/metrics.h"
#include "ops/config.h"
#include "ops/control.h"
#include "ops/ops.h"
#include "ops/request.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/supervisor.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/exit_code.h"
#include "util/fd.h"
#include "util/files.h"

namespace airlock {

namespace {

// The node agent's own state: the sandboxes it supervises, each with its
// ring's descriptor in the loop, and the units it wires to them (their
// proxies, the event feed, the declared sandboxes, the policy files).
class Daemon {
public:
	Daemon(const Paths& p, Metrics* m, const DaemonConfig& config, const std::string& config_file)
	    : paths_(p), metrics_(m),
	      policies_(loop_, [this](const std::string& dir, const std::string& path) { policy_changed(dir, path); }),
	      policy_dir_(config.policy_dir), audit_log_(config.audit_log), audit_bound_(config.audit_bound),
	      declared_(paths_, config_file, config.sandboxes, [this](const Request& q) { return new_sandbox(q); }),
	      proxies_(loop_, paths_,
		       {[this](const std::string& name) { poll(name); },
			[this](const std::string& name, const nlohmann::json& j) { gate_denied(name, j); }})
	{
	}
	Daemon(const Daemon&) = delete;
	Daemon& operator=(const Daemon&) = delete;

	EventLoop& loop() { return loop_; }

	// The first look: the policy directory checked, the sandboxes nobody
	// runs taken up, the declared ones made.
	void start()
	{
		if (!policy_dir_.empty()) {
			policies_.watch_dir(policy_dir_.path());
			policy_dir_.check_all();
		}
		every_second();
	}

	// Sandboxes taken up and let go, declared ones made, readiness.
	void every_second()
	{
		rescan();
		declared_.ensure();
		declared_.notify_when_enforcing([this](const std::string& name) { return sups_.count(name) != 0; },
						sups_.size());
	}

	// Every sandbox at least every 200 ms: a latch set while its ring was
	// full, a thaw, learned addresses to sweep.
	void every_200ms()
	{
		poll_all();
		proxies_.kill_lingering();
		feed_.prune();
	}

	// A sandbox record was written or removed.
	void records_changed()
	{
		rescan();
		poll_all();
	}

	// SIGHUP: the configuration's sandboxes again, every audit log reopened
	// (after logrotate) and every policy file read again.
	void reread()
	{
		::sd_notify(0, "RELOADING=1");
		declared_.reread();
		for (auto& [name, sup] : sups_) {
			sup->audit().reopen();
			sup->reload_from_file("SIGHUP to the daemon");
		}
		declared_.ensure();
		::sd_notify(0, "READY=1");
	}

	std::optional<ControlServer::Answer> refuse(const struct ucred& cr) const;
	ControlServer::Answer serve(const std::string& line, const struct ucred& cr);

private:
	void poll(const std::string& name)
	{
		if (auto it = sups_.find(name); it != sups_.end())
			it->second->poll();
	}
	void poll_all()
	{
		for (auto& [name, sup] : sups_)
			sup->poll();
	}

	void forget(Supervisor& sup)
	{
		proxies_.stop(sup.record().name, false);
		loop_.remove(sup.epoll_fd());
		if (metrics_)
			metrics_->untrack(sup.record().name);
	}

	// The proxy a sandbox's policy needs, started, handed its policy, or
	// stopped (the sandbox is no longer supervised).
	void sync_proxy(const std::string& name, int pid_hint = 0)
	{
		auto s = sups_.find(name);
		if (s == sups_.end())
			proxies_.stop(name);
		else
			proxies_.sync(*k_, *s->second, pid_hint);
	}

	void gate_denied(const std::string& name, const nlohmann::json& j);
	void policy_changed(const std::string& dir, const std::string& path);
	bool drop(const std::string& name);
	Result<nlohmann::json> new_sandbox(const Request& q);
	nlohmann::json status() const;
	Result<nlohmann::json> handle(const Request& q);
	Result<nlohmann::json> reload(const Request& q);
	Result<nlohmann::json> remove(const Request& q);
	std::optional<std::string> sandbox_of_pid(int pid) const;
	bool release_removed(const std::vector<SandboxRecord>& records);
	void rescan();
	void supervise(const SandboxRecord& r, int pid_hint = 0);

	const Paths& paths_;
	Metrics* metrics_;
	EventLoop loop_;
	std::optional<kernel::Kernel> k_;
	std::map<std::string, std::unique_ptr<Supervisor>> sups_;
	// Every audit line this process writes, its requests' lifecycle lines
	// too, goes to `airlock events`.
	EventFeed feed_;
	// Policy files of supervised sandboxes: a change is a reload.
	PolicyWatcher policies_;
	PolicyDir policy_dir_;
	std::string audit_log_;   // for sandboxes made through the daemon without one
	AuditBound audit_bound_;  // likewise
	DeclaredSandboxes declared_;
	std::map<std::string, std::string> supervise_errors_;  // name -> last error, logged once
	// Declared after `k_` and `sups_`: destroyed before them, each proxy
	// clearing its kernel entry.
	ProxySupervisor proxies_;
};

// A connection the SNI gate denied: a violation, which takes the
// sandbox's on_violation through its latch.
void Daemon::gate_denied(const std::string& name, const nlohmann::json& j)
{
	auto s = sups_.find(name);
	if (s == sups_.end())
		return;
	const SandboxRecord& r = s->second->record();
	nlohmann::json e = j;
	e["latched"] = k_->set_latch(r.slot, r.cgroup_id);
	s->second->audit().write(name, e);
	bool http = e.value("event", "") == "http-gate";
	spdlog::warn("{}: denied by the {} gate: {}:{} '{}': {}", name, http ? "HTTP" : "SNI", e.value("dst", ""),
		     e.value("port", 0), e.value(http ? "host" : "sni", ""), e.value("reason", ""));
}

// A policy file was written or replaced: every supervised sandbox
// enforcing it reloads it (a bad file is rejected, the old policy stays).
void Daemon::policy_changed(const std::string& dir, const std::string& path)
{
	bool used = false;
	for (auto& [name, sup] : sups_)
		if (sup->record().policy_file == path) {
			spdlog::info("{}: {} changed; reloading", name, path);
			sup->reload_from_file("policy file changed");
			used = true;
		}
	if (!used)
		policy_dir_.changed(dir, path);
}

// Stops supervising a sandbox, reading what its ring still holds first.
bool Daemon::drop(const std::string& name)
{
	auto it = sups_.find(name);
	if (it == sups_.end())
		return false;
	it->second->poll();
	bool killed = it->second->killed_on_violation();
	proxies_.stop(name);  // its record is still there: its kernel entry is cleared
	forget(*it->second);
	sups_.erase(it);
	return killed;
}

Result<nlohmann::json> Daemon::new_sandbox(const Request& q)
{
	ops::NewSandbox n;
	n.name = q.name;
	n.policy_file = policy_dir_.resolve(q.policy);
	n.audit_log = q.audit_log.empty() ? audit_log_ : q.audit_log;
	n.log_allowed = q.log_allowed;
	n.audit_bound = q.audit_bound.over(audit_bound_);
	if (q.cmd == Request::Cmd::Attach) {
		n.cgroup = q.cgroup;
		n.pid = q.pid;
		n.cgroup_id = q.cgroup_id;
		if (n.cgroup.empty() && n.pid <= 0)
			fail("attach: give a cgroup or a pid");
		// A container restarted under the same id makes its cgroup
		// again at once: the ended one's sandbox goes first.
		release_removed(load_records(paths_));
	} else {
		n.managed = true;
		n.runner_pid = q.runner_pid;
	}
	n.starts_proxy = true;
	std::string msg;
	auto added = ops::add(paths_, n, &msg);
	if (!added)
		return added.rejection();
	const SandboxRecord& rec = *added;
	// Supervised before the answer, so that a command started next is
	// watched; a sandbox that cannot be is unmade, not left enforced
	// with nobody to freeze it.
	try {
		supervise(rec, n.pid);
	} catch (const std::exception& e) {
		ops::unmake(paths_, rec, std::string("cannot supervise it: ") + e.what());
		fail("{}: cannot supervise it: {}; {}", rec.name, e.what(),
		     rec.attached ? "detached again" : "removed again");
	}
	rescan();
	// Made and enforced, but said: its redirects fail closed meanwhile.
	if (auto trouble = proxies_.trouble(rec.name))
		msg += "; " + *trouble;
	return nlohmann::json{{"ok", true}, {"message", msg}, {"cgroup", rec.cgroup}, {"name", rec.name}};
}

nlohmann::json Daemon::status() const
{
	auto st = ops::status(paths_);
	for (auto& s : st["sandboxes"]) {
		auto it = sups_.find(s["name"].get<std::string>());
		s["supervised_by_daemon"] = it != sups_.end();
		if (it != sups_.end()) {
			auto state = it->second->state();
			s["supervisor"] = {{"state", state == Supervisor::State::Running  ? "running"
						     : state == Supervisor::State::Frozen ? "frozen"
											  : "killed"},
					   {"killed_on_violation", it->second->killed_on_violation()}};
		}
		if (auto proxy = proxies_.status(s["name"].get<std::string>()))
			s["supervisor"]["proxy"] = std::move(*proxy);
	}
	return {{"ok", true}, {"status", st}};
}

Result<nlohmann::json> Daemon::reload(const Request& q)
{
	const std::string& name = q.name;
	// A runner's pending events belong to the policy they were decided under.
	poll(name);
	std::string file = policy_dir_.resolve(q.policy);
	auto msg = ops::reload(paths_, name, file);
	if (metrics_)
		metrics_->reload(name, msg.ok());
	if (!msg)
		return msg.rejection();
	policies_.watch_file(file);
	if (auto it = sups_.find(name); it != sups_.end()) {
		it->second->refresh();
		sync_proxy(name);
	}
	return nlohmann::json{{"ok", true}, {"message", *msg}};
}

// `detach` and `delete`.
Result<nlohmann::json> Daemon::remove(const Request& q)
{
	const std::string& name = q.name;
	bool detach = q.cmd == Request::Cmd::Detach;
	// Checked before its supervisor is let go of.
	if (auto rec = load_record(paths_, name))
		ops::check_removable(*rec, detach);
	bool killed = drop(name);
	std::string msg;
	try {
		msg = detach ? ops::detach(paths_, name) : ops::remove(paths_, name);
	} catch (...) {
		rescan();
		throw;
	}
	// Said, not hidden: the declaration makes it again at the next rescan.
	bool declared_here = declared_.declares(name);
	if (declared_here)
		msg += fmt::format("; it is declared in {}, so the daemon {} it again within a second: "
				   "remove it there and send the daemon SIGHUP to keep it gone",
				   declared_.config_file(), detach ? "attaches" : "makes");
	return nlohmann::json{{"ok", true},
			      {"message", msg},
			      {"killed_on_violation", killed},
			      {"declared", declared_here}};
}

// Requests other than `events`: one answer each.
Result<nlohmann::json> Daemon::handle(const Request& q)
{
	const std::string& name = q.name;
	using Cmd = Request::Cmd;
	switch (q.cmd) {
	case Cmd::Ping: {
		nlohmann::json names = nlohmann::json::array();
		for (const auto& [n, sup] : sups_)
			names.push_back(n);
		return nlohmann::json{{"ok", true}, {"pid", ::getpid()}, {"supervising", names}};
	}
	case Cmd::Status:
		return status();
	case Cmd::Thaw: {
		std::string msg = ops::thaw(paths_, name);
		poll(name);
		return nlohmann::json{{"ok", true}, {"message", msg}};
	}
	case Cmd::Kill: {
		std::string msg = ops::kill(paths_, name);
		rescan();
		return nlohmann::json{{"ok", true}, {"message", msg}};
	}
	case Cmd::Reload:
		return reload(q);
	case Cmd::Attach:
	case Cmd::Create:
		return new_sandbox(q);
	case Cmd::Detach:
	case Cmd::Delete:
		return remove(q);
	case Cmd::Events:
		break;
	}
	fail("request '{}' is not answered here", to_string(q.cmd));
}

// The sandbox a process is in, if any: a root process inside one must
// not be able to reload, delete or thaw its way out through this socket.
std::optional<std::string> Daemon::sandbox_of_pid(int pid) const
{
	std::string cg;
	try {
		cg = cgroup::of_pid(pid);
	} catch (const std::exception&) {
		return "?";  // gone, or unreadable: not trusted
	}
	for (const auto& r : load_records(paths_))
		if (cg == r.cgroup || cg.rfind(r.cgroup + "/", 0) == 0)
			return r.name;
	return std::nullopt;
}

// The control socket's checks before a byte is read: root only, and
// never from inside a sandbox.
std::optional<ControlServer::Answer> Daemon::refuse(const struct ucred& cr) const
{
	auto refused = [](const char* why) {
		return ControlServer::Answer{nlohmann::json({{"error", why}}).dump() + "\n", nullptr};
	};
	if (cr.uid != 0) {
		spdlog::warn("control socket: refused uid {} (pid {})", cr.uid, cr.pid);
		return refused("the control socket is root's");
	}
	if (auto inside = sandbox_of_pid(cr.pid)) {
		spdlog::warn("control socket: refused pid {}, which is inside sandbox {}", cr.pid, *inside);
		return refused("requests from inside a sandbox are refused");
	}
	return std::nullopt;
}

// One request per connection, one JSON line (ops/request.h).
ControlServer::Answer Daemon::serve(const std::string& line, const struct ucred& cr)
{
	auto text = [](const nlohmann::json& r) { return ControlServer::Answer{r.dump() + "\n", nullptr}; };
	auto parsed = parse_request(line);
	if (!parsed)
		return text({{"error", parsed.rejection().first()}});
	const Request& q = *parsed;
	try {
		if (q.cmd == Request::Cmd::Events) {
			auto a = feed_.events(q.sandbox, q.follow);
			if (!a)
				return text({{"error", a.rejection().first()}});
			return std::move(*a);
		}
		auto r = handle(q);
		if (q.cmd != Request::Cmd::Ping && q.cmd != Request::Cmd::Status)
			spdlog::info("control: {} {} by pid {}", to_string(q.cmd), q.name, cr.pid);
		if (!r)
			return text({{"error", r.rejection().first()}, {"errors", r.rejection().lines}});
		return text(*r);
	} catch (const std::exception& e) {
		return text({{"error", e.what()}});
	}
}

// Attached sandboxes whose cgroup is gone (a container ended and its
// runtime removed the cgroup): what their rings still hold is read,
// then they are let go, so that ended containers leave no slot taken.
// Returns whether any was let go.
bool Daemon::release_removed(const std::vector<SandboxRecord>& records)
{
	bool released = false;
	for (const auto& r : records) {
		if (!ops::cgroup_removed(r))
			continue;
		drop(r.name);
		try {
			if (ops::release_if_removed(paths_, r.name)) {
				spdlog::info("{}: its cgroup {} was removed; let go", r.name, r.cgroup);
				released = true;
			}
		} catch (const std::exception& e) {
			std::string& last = supervise_errors_[r.name];
			if (last != e.what())
				spdlog::warn("{}: its cgroup {} was removed, but it cannot be let go: {}", r.name,
					     r.cgroup, e.what());
			last = e.what();
		}
	}
	return released;
}

// Takes up sandboxes that nobody runs, lets go of those that are gone.
void Daemon::rescan()
{
	auto records = load_records(paths_);
	if (release_removed(records))
		records = load_records(paths_);
	std::map<std::string, const SandboxRecord*> by_name;
	for (const auto& r : records)
		by_name[r.name] = &r;
	for (auto it = sups_.begin(); it != sups_.end();) {
		if (!by_name.count(it->first)) {
			forget(*it->second);
			spdlog::info("{}: gone; no longer supervised", it->first);
			it = sups_.erase(it);
		} else {
			++it;
		}
	}
	// A proxy that is down (it died too often, or was halted) starts
	// again when its time comes; one that could not start yet (an
	// attached cgroup without a process) is tried again.
	proxies_.tend();
	for (const auto& [name, sup] : sups_)
		proxies_.retry(*k_, *sup);
	for (const auto& r : records) {
		// A runner supervises its own sandbox, unless it was made through the daemon.
		if (sups_.count(r.name) || (runner_alive(r) && !r.managed))
			continue;
		try {
			supervise(r);
			supervise_errors_.erase(r.name);
		} catch (const std::exception& e) {
			// Once per change, not once per rescan.
			std::string& last = supervise_errors_[r.name];
			if (last != e.what())
				spdlog::warn("{}: cannot supervise: {}", r.name, e.what());
			last = e.what();
		}
	}
}

// Starts supervising one sandbox, and its proxy if its policy needs
// one; throws what stands in the way of the supervision.
void Daemon::supervise(const SandboxRecord& r, int pid_hint)
{
	if (!k_)
		k_.emplace(kernel::Kernel::adopt(paths_.bpf_dir));
	// The policy text the live bank was compiled from names the rules in events.
	auto parsed = parse_policy_file(paths_.policy_copy(r.name, r.bank));
	auto sup = std::make_unique<Supervisor>(*k_, paths_, r, parsed ? *parsed : Policy{});
	policies_.watch_file(r.policy_file);
	if (metrics_) {
		sup->on_frozen = [m = metrics_](double s) { m->freeze_latency(s); };
		metrics_->track(r.name);
	}
	sup->on_reload = [this, name = r.name](bool ok) {
		if (metrics_)
			metrics_->reload(name, ok);
		if (ok)
			sync_proxy(name);
	};
	// A ring's events wake its own supervisor alone, before any
	// request: a violation among them is frozen now.
	loop_.add(
		sup->epoll_fd(), EPOLLIN, [this, name = r.name](uint32_t) { poll(name); }, EventLoop::kUrgent);
	spdlog::info("{}: supervising {} ({})", r.name, r.cgroup,
		     r.attached  ? "attached"
		     : r.managed ? "made through the daemon"
				 : "its runner is gone");
	sups_[r.name] = std::move(sup);
	sync_proxy(r.name, pid_hint);
}

// One daemon per state directory: two would share each ring's reader.
Fd lock_state_dir(const Paths& paths)
{
	make_dirs(paths.state_dir);
	std::string lock_path = paths.state_dir + "/daemon.lock";
	Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
	if (!lock.valid())
		fail_errno("open " + lock_path);
	if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
		fail("another airlock daemon runs for {} ({} is locked)", paths.state_dir, lock_path);
	return lock;
}

// The configuration file, then the command line over it.
DaemonConfig configure(const DaemonOptions& o)
{
	DaemonConfig config;
	if (!o.config.empty()) {
		auto loaded = load_daemon_config(o.config);
		if (!loaded) {
			const auto& lines = loaded.rejection().lines;
			for (const auto& l : lines)
				spdlog::error("{}", l);
			fail("{}: rejected ({} error{})", o.config, lines.size(), lines.size() == 1 ? "" : "s");
		}
		config = *loaded;
	}
	if (!o.metrics.empty())
		config.metrics = o.metrics;
	if (config.metrics.empty())
		config.metrics = "127.0.0.1:9464";
	if (!o.policy_dir.empty())
		config.policy_dir = o.policy_dir;
	if (!config.policy_dir.empty()) {
		std::error_code ec;
		if (!std::filesystem::is_directory(config.policy_dir, ec))
			fail("policy directory {}: not a directory", config.policy_dir);
		config.policy_dir = std::filesystem::absolute(config.policy_dir).lexically_normal().string();
		while (config.policy_dir.size() > 1 && config.policy_dir.back() == '/')
			config.policy_dir.pop_back();
	}
	if (!o.audit_log.empty())
		config.audit_log = std::filesystem::absolute(o.audit_log).string();
	if (config.audit_log.empty())
		config.audit_log = "/var/log/airlock/audit.jsonl";
	config.audit_bound = o.audit_bound.over(config.audit_bound);
	return config;
}

// SIGINT, SIGTERM and SIGHUP, blocked and read from a descriptor.
Fd signals()
{
	sigset_t mask;
	sigemptyset(&mask);
	for (int s : {SIGINT, SIGTERM, SIGHUP})
		sigaddset(&mask, s);
	sigprocmask(SIG_BLOCK, &mask, nullptr);
	Fd sigfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
	if (!sigfd.valid())
		fail_errno("signalfd");
	return sigfd;
}

std::unique_ptr<Metrics> serve_metrics(const Paths& paths, const DaemonConfig& config)
{
	if (config.metrics == "off")
		return nullptr;
	std::unique_ptr<Metrics> metrics;
	try {
		metrics = std::make_unique<Metrics>(paths, config.metrics);
	} catch (const std::exception& e) {
		fail("metrics: {}", e.what());
	}
	spdlog::info("airlock daemon: metrics on http://{}/metrics", config.metrics);
	return metrics;
}

// A sandbox record written or removed wakes the daemon at once; the
// periodic rescan only catches runners that died.
Fd watch_records(const Paths& paths)
{
	make_dirs(paths.state_dir + "/sandboxes");
	Fd records(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
	if (!records.valid() || ::inotify_add_watch(records.get(), (paths.state_dir + "/sandboxes").c_str(),
						    IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_CLOSE_WRITE) < 0)
		fail_errno("watch " + paths.state_dir + "/sandboxes");
	return records;
}

}  // namespace

int run_daemon(const Paths& paths, const DaemonOptions& o)
{
	Fd lock = lock_state_dir(paths);
	Fd sigfd = signals();
	DaemonConfig config = configure(o);
	std::unique_ptr<Metrics> metrics = serve_metrics(paths, config);
	Daemon d(paths, metrics.get(), config, o.config);
	EventLoop& loop = d.loop();

	std::optional<int> exit_status;
	loop.add(sigfd.get(), EPOLLIN, [&](uint32_t) {
		struct signalfd_siginfo ssi;
		while (!exit_status && ::read(sigfd.get(), &ssi, sizeof(ssi)) == sizeof(ssi)) {
			if (ssi.ssi_signo == SIGHUP) {
				d.reread();
				continue;
			}
			spdlog::info("airlock daemon: signal {}, exiting; enforcement stays in the kernel",
				     ssi.ssi_signo);
			exit_status = kExitOk;
		}
	});
	Fd records = watch_records(paths);
	loop.add(records.get(), EPOLLIN, [&](uint32_t) {
		char buf[4096];
		while (::read(records.get(), buf, sizeof(buf)) > 0) {
		}
		d.records_changed();
	});
	// The control socket: root's alone (mode 0600, and the peer's uid is
	// checked). Its connections never block the loop: a client that stalls
	// costs a descriptor until its deadline, not another sandbox's freeze.
	std::string sock_path = control_socket(paths);
	Fd listener = ControlServer::listen(sock_path);
	ControlServer control(
		loop, listener.get(), [&](const struct ucred& cr) { return d.refuse(cr); },
		[&](const std::string& line, const struct ucred& cr) { return d.serve(line, cr); });
	spdlog::info("airlock daemon: watching {} (pins {}), control socket {}", paths.state_dir, paths.bpf_dir,
		     sock_path);
	d.start();
	loop.every(1000000000ull, [&] { d.every_second(); });
	loop.every(200000000ull, [&] {
		d.every_200ms();
		control.expire(monotonic_ns());
	});
	while (!exit_status)
		loop.run_once();
	::sd_notify(0, "STOPPING=1");
	::unlink(sock_path.c_str());
	return *exit_status;
}

}  // namespace airlock
