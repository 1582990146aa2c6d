// `airlock daemon`: the node agent's loop. It supervises every sandbox that
// has no `airlock run` of its own (attached cgroups, orphans of a runner
// that died): their events go to their audit logs, their latches to a freeze
// or a kill. Enforcement never depends on it: it lives in the kernel.
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "kernel/kernel.h"
#include "metrics/metrics.h"
#include "ops/config.h"
#include "daemon/control_server.h"
#include "ops/control.h"
#include "ops/ops.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/supervisor.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/files.h"

#include <nlohmann/json.hpp>

namespace airlock {

namespace {

struct Subscriber {
	Fd fd;
	std::string sandbox;  // "" for every sandbox
};

struct Daemon {
	Daemon(const Paths& p, Metrics* m) : paths(p), metrics(m), ep(::epoll_create1(EPOLL_CLOEXEC)) {}
	const Paths& paths;
	Metrics* metrics;
	Fd ep;
	std::optional<kernel::Kernel> k;
	std::map<std::string, std::unique_ptr<Supervisor>> sups;
	std::vector<Subscriber> subs;
	// Policy files of supervised sandboxes: a change is a reload.
	Fd policy_ino;
	std::map<int, std::string> watched_dirs;  // inotify wd -> directory
	std::deque<std::pair<std::string, std::string>> recent;  // (sandbox, line), the last kRecent
	std::string policy_dir;  // absolute; "" for none
	std::string audit_log;   // for sandboxes made through the daemon without one
	AuditBound audit_bound;  // likewise
	std::vector<DeclaredSandbox> declared;
	std::map<std::string, std::string> declared_errors;  // name -> last error, logged once
	// Each ring's epoll tag, so that an event wakes its own supervisor alone.
	std::map<uint64_t, std::string> ring_tags;
	uint64_t next_tag = kFirstRingTag;
	static constexpr uint64_t kFirstRingTag = 1000;
	static constexpr uint64_t kFirstControlTag = 1ull << 48;  // ControlServer's connections

	void forget(const std::string& name, Supervisor& sup)
	{
		::epoll_ctl(ep.get(), EPOLL_CTL_DEL, sup.epoll_fd(), nullptr);
		for (auto it = ring_tags.begin(); it != ring_tags.end(); ++it)
			if (it->second == name) {
				ring_tags.erase(it);
				break;
			}
	}

	// A ring has events: its sandbox's supervisor reads them (a violation
	// among them is frozen now, not after every other sandbox was looked at).
	void ring_ready(uint64_t tag)
	{
		auto t = ring_tags.find(tag);
		if (t == ring_tags.end())
			return;
		if (auto it = sups.find(t->second); it != sups.end())
			it->second->poll();
	}

	static constexpr size_t kRecent = 200;

	// Every audit line of a supervised sandbox, to `airlock events`. A
	// subscriber that cannot keep up is dropped, never waited for.
	void publish(const std::string& sandbox, const std::string& line)
	{
		recent.emplace_back(sandbox, line);
		if (recent.size() > kRecent)
			recent.pop_front();
		for (auto it = subs.begin(); it != subs.end();) {
			bool keep = true;
			if (it->sandbox.empty() || it->sandbox == sandbox)
				keep = ::send(it->fd.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
				       static_cast<ssize_t>(line.size());
			it = keep ? std::next(it) : subs.erase(it);
		}
	}

	void watch_policy(const std::string& file)
	{
		std::string dir = file.substr(0, file.rfind('/'));
		if (dir.empty() || !policy_ino.valid())
			return;
		int wd = ::inotify_add_watch(policy_ino.get(), dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO);
		if (wd < 0)
			spdlog::warn("cannot watch {} for policy changes: {}", dir, std::strerror(errno));
		else
			watched_dirs[wd] = dir;
	}

	static bool is_policy_name(const std::string& f)
	{
		return f.size() > 5 && f.compare(f.size() - 5, 5, ".json") == 0 && f[0] != '.';
	}

	// A policy in the directory that no sandbox uses yet: checked, so that
	// a mistake shows before a sandbox asks for it.
	void check_policy(const std::string& path)
	{
		try {
			Policy p = load_policy(path);
			spdlog::info("policy {} ('{}'): ok", path, p.name);
		} catch (const PolicyRejected& e) {
			for (const auto& l : e.lines())
				spdlog::error("{}", l);
			spdlog::error("policy {}: rejected; a sandbox cannot use it until it is fixed", path);
		} catch (const std::exception& e) {
			spdlog::error("policy {}: {}", path, e.what());
		}
	}

	void check_policy_dir()
	{
		std::error_code ec;
		std::vector<std::string> files;
		for (const auto& ent : std::filesystem::directory_iterator(policy_dir, ec))
			if (is_policy_name(ent.path().filename()))
				files.push_back(ent.path());
		std::sort(files.begin(), files.end());
		for (const auto& f : files)
			check_policy(f);
	}

	// A policy file was written or replaced: every supervised sandbox
	// enforcing it reloads it (a bad file is rejected, the old policy stays).
	void policy_changed()
	{
		alignas(struct inotify_event) char buf[8192];
		for (;;) {
			ssize_t n = ::read(policy_ino.get(), buf, sizeof(buf));
			if (n <= 0)
				break;
			for (ssize_t off = 0; off < n;) {
				auto* ev = reinterpret_cast<struct inotify_event*>(buf + off);
				off += sizeof(struct inotify_event) + ev->len;
				auto dir = watched_dirs.find(ev->wd);
				if (dir == watched_dirs.end() || ev->len == 0)
					continue;
				std::string path = dir->second + "/" + ev->name;
				bool used = false;
				for (auto& [name, sup] : sups)
					if (sup->record().policy_file == path) {
						spdlog::info("{}: {} changed; reloading", name, path);
						sup->reload_from_file("policy file changed");
						used = true;
					}
				if (!used && dir->second == policy_dir && is_policy_name(ev->name))
					check_policy(path);
			}
		}
	}

	// A policy argument: a file by its path, or a name in the policy directory.
	std::string resolve_policy(const std::string& arg) const
	{
		std::error_code ec;
		if (!policy_dir.empty() && !arg.empty() && arg.find('/') == std::string::npos) {
			for (const std::string& f : {policy_dir + "/" + arg + ".json", policy_dir + "/" + arg})
				if (std::filesystem::is_regular_file(f, ec))
					return f;
			fail("no policy named '{}' in {}", arg, policy_dir);
		}
		if (arg.empty() || arg.front() != '/')
			fail("policy '{}': give an absolute path{}", arg, policy_dir.empty() ? "" : " or a name in " + policy_dir);
		return std::filesystem::path(arg).lexically_normal().string();
	}

	// Stops supervising a sandbox, reading what its ring still holds first.
	bool drop(const std::string& name)
	{
		auto it = sups.find(name);
		if (it == sups.end())
			return false;
		it->second->poll();
		bool killed = it->second->killed_on_violation();
		forget(name, *it->second);
		sups.erase(it);
		return killed;
	}

	nlohmann::json new_sandbox(const nlohmann::json& j, bool attach)
	{
		ops::NewSandbox n;
		n.name = j.value("name", "");
		n.policy_file = resolve_policy(j.value("policy", ""));
		n.audit_log = j.value("audit_log", "");
		if (n.audit_log.empty())
			n.audit_log = audit_log;
		n.log_allowed = j.value("log_allowed", false);
		n.audit_bound = audit_bound_of(j).over(audit_bound);
		if (attach) {
			n.cgroup = j.value("cgroup", "");
			n.pid = j.value("pid", 0);
			if (n.cgroup.empty() && n.pid <= 0)
				fail("attach: give a cgroup or a pid");
		} else {
			n.managed = true;
			n.runner_pid = j.value("runner_pid", 0);
		}
		std::string msg;
		SandboxRecord rec = ops::add(paths, n, &msg);
		watch_policy(rec.policy_file);
		rescan();  // supervised before the answer: a command started next is watched
		return {{"ok", true}, {"message", msg}, {"cgroup", rec.cgroup}, {"name", rec.name}};
	}

	nlohmann::json status() const
	{
		auto st = ops::status(paths);
		for (auto& s : st["sandboxes"]) {
			auto it = sups.find(s["name"].get<std::string>());
			s["supervised_by_daemon"] = it != sups.end();
			if (it != sups.end()) {
				auto state = it->second->state();
				s["supervisor"] = {{"state", state == Supervisor::State::Running  ? "running"
							     : state == Supervisor::State::Frozen ? "frozen"
												  : "killed"},
						   {"killed_on_violation", it->second->killed_on_violation()}};
			}
		}
		return {{"ok", true}, {"status", st}};
	}

	// Requests other than `events`: one answer each.
	nlohmann::json handle(const std::string& cmd, const nlohmann::json& j)
	{
		std::string name = j.value("name", "");
		if (cmd == "ping") {
			nlohmann::json names = nlohmann::json::array();
			for (const auto& [n, sup] : sups)
				names.push_back(n);
			return {{"ok", true}, {"pid", ::getpid()}, {"supervising", names}};
		}
		if (cmd == "status")
			return status();
		if (cmd == "thaw") {
			std::string msg = ops::thaw(paths, name);
			if (auto it = sups.find(name); it != sups.end())
				it->second->poll();
			return {{"ok", true}, {"message", msg}};
		}
		if (cmd == "kill") {
			std::string msg = ops::kill(paths, name);
			rescan();
			return {{"ok", true}, {"message", msg}};
		}
		if (cmd == "reload") {
			std::string file = resolve_policy(j.value("policy", ""));
			try {
				std::string msg = ops::reload(paths, name, file);
				watch_policy(file);
				if (auto it = sups.find(name); it != sups.end())
					it->second->refresh();
				if (metrics)
					metrics->reload(true);
				return {{"ok", true}, {"message", msg}};
			} catch (const PolicyRejected&) {
				if (metrics)
					metrics->reload(false);
				throw;
			}
		}
		if (cmd == "attach")
			return new_sandbox(j, true);
		if (cmd == "create")
			return new_sandbox(j, false);
		if (cmd == "detach" || cmd == "delete") {
			// Checked before its supervisor is let go of.
			if (auto rec = load_record(paths, name))
				ops::check_removable(*rec, cmd == "detach");
			bool killed = drop(name);
			std::string msg;
			try {
				msg = cmd == "detach" ? ops::detach(paths, name) : ops::remove(paths, name);
			} catch (...) {
				rescan();
				throw;
			}
			return {{"ok", true}, {"message", msg}, {"killed_on_violation", killed}};
		}
		fail("unknown request '{}'", cmd);
	}

	// The sandbox a process is in, if any: a root process inside one must
	// not be able to reload, delete or thaw its way out through this socket.
	std::string sandbox_of_pid(int pid) const
	{
		std::string cg;
		try {
			cg = cgroup::of_pid(pid);
		} catch (const std::exception&) {
			return "?";  // gone, or unreadable: not trusted
		}
		for (const auto& r : load_records(paths))
			if (cg == r.cgroup || cg.rfind(r.cgroup + "/", 0) == 0)
				return r.name;
		return "";
	}

	static constexpr size_t kMaxSubscribers = 64;

	// Followers that hung up are let go at once, not at their next line.
	void prune_subscribers()
	{
		subs.erase(std::remove_if(subs.begin(), subs.end(),
					  [](const Subscriber& s) {
						  char b;
						  ssize_t n = ::recv(s.fd.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
						  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
					  }),
			   subs.end());
	}

	// The control socket's checks before a byte is read: root only, and
	// never from inside a sandbox. "" serves the request.
	std::string refuse(const struct ucred& cr) const
	{
		if (cr.uid != 0) {
			spdlog::warn("control socket: refused uid {} (pid {})", cr.uid, cr.pid);
			return nlohmann::json({{"error", "the control socket is root's"}}).dump() + "\n";
		}
		if (std::string inside = sandbox_of_pid(cr.pid); !inside.empty()) {
			spdlog::warn("control socket: refused pid {}, which is inside sandbox {}", cr.pid, inside);
			return nlohmann::json({{"error", "requests from inside a sandbox are refused"}}).dump() + "\n";
		}
		return "";
	}

	// One request per connection, one JSON line: {"cmd": ..., ...}.
	ControlServer::Answer serve(const std::string& line, const struct ucred& cr)
	{
		auto j = nlohmann::json::parse(line, nullptr, false);
		auto text = [](const nlohmann::json& r) { return r.dump() + "\n"; };
		try {
			if (!j.is_object() || !j.contains("cmd") || !j["cmd"].is_string())
				fail("a request is one JSON object on one line, with a string \"cmd\"");
			std::string cmd = j["cmd"].get<std::string>();
			if (j.contains("name") && !(j["name"].is_string() && (j["name"].get<std::string>().empty() ||
									    valid_sandbox_name(j["name"].get<std::string>()))))
				fail("\"name\" is not a sandbox name (1-63 of A-Z a-z 0-9 . _ -)");
			if (cmd == "events") {
				std::string sandbox = j.value("sandbox", "");
				bool follow = j.value("follow", false);
				if (follow && subs.size() >= kMaxSubscribers)
					prune_subscribers();
				if (follow && subs.size() >= kMaxSubscribers)
					fail("{} followers already; no more", kMaxSubscribers);
				ControlServer::Answer a;
				for (const auto& [sb, l] : recent)
					if (sandbox.empty() || sb == sandbox)
						a.text += l;
				if (follow)
					a.then = [this, sandbox](Fd fd) { subs.push_back({std::move(fd), sandbox}); };
				return a;
			}
			// A runner's pending events belong to the policy they were decided under.
			if (cmd == "reload")
				if (auto it = sups.find(j.value("name", "")); it != sups.end())
					it->second->poll();
			auto r = handle(cmd, j);
			if (cmd != "ping" && cmd != "status")
				spdlog::info("control: {} {} by pid {}", cmd, j.value("name", ""), cr.pid);
			return {text(r), nullptr};
		} catch (const PolicyRejected& e) {
			return {text({{"error", e.what()}, {"errors", e.lines()}}), nullptr};
		} catch (const std::exception& e) {
			return {text({{"error", e.what()}}), nullptr};
		}
	}

	// Sandboxes the configuration declares: made or attached when missing
	// (a cgroup that does not exist yet is retried at each rescan).
	void ensure_declared()
	{
		for (const auto& d : declared) {
			if (load_record(paths, d.name))
				continue;
			nlohmann::json j = {{"name", d.name}, {"policy", d.policy}, {"audit_log", d.audit_log},
					    {"log_allowed", d.log_allowed}, {"cgroup", d.cgroup}};
			try {
				auto r = new_sandbox(j, !d.cgroup.empty());
				spdlog::info("{} (declared)", r.value("message", ""));
				declared_errors.erase(d.name);
			} catch (const std::exception& e) {
				std::string& last = declared_errors[d.name];
				if (last != e.what())
					spdlog::error("declared sandbox {}: {}", d.name, e.what());
				last = e.what();
			}
		}
	}

	// Takes up sandboxes that nobody runs, lets go of those that are gone.
	void rescan()
	{
		auto records = load_records(paths);
		std::map<std::string, const SandboxRecord*> by_name;
		for (const auto& r : records)
			by_name[r.name] = &r;
		for (auto it = sups.begin(); it != sups.end();) {
			if (!by_name.count(it->first)) {
				forget(it->first, *it->second);
				spdlog::info("{}: gone; no longer supervised", it->first);
				it = sups.erase(it);
			} else {
				++it;
			}
		}
		if (records.empty())
			return;
		if (!k) {
			try {
				k.emplace(kernel::Kernel::adopt(paths.bpf_dir));
			} catch (const std::exception& e) {
				spdlog::warn("cannot adopt the pinned programs yet: {}", e.what());
				return;
			}
		}
		for (const auto& r : records) {
			// A runner supervises its own sandbox, unless it was made through the daemon.
			if (sups.count(r.name) || (runner_alive(r) && !r.managed))
				continue;
			// The policy text the live bank was compiled from names the rules in events.
			auto parsed = parse_policy_file(paths.policy_copy(r.name, r.bank));
			try {
				auto sup = std::make_unique<Supervisor>(*k, paths, r, parsed.policy.value_or(Policy{}));
				sup->audit().tee([this](const std::string& sb, const std::string& line) { publish(sb, line); });
				watch_policy(r.policy_file);
				if (metrics) {
					sup->on_frozen = [m = metrics](double s) { m->freeze_latency(s); };
					sup->on_reload = [m = metrics](bool ok) { m->reload(ok); };
				}
				struct epoll_event ev = {};
				ev.events = EPOLLIN;
				ev.data.u64 = next_tag;
				if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, sup->epoll_fd(), &ev) != 0)
					fail_errno("epoll_ctl");
				ring_tags[next_tag++] = r.name;
				spdlog::info("{}: supervising {} ({})", r.name, r.cgroup,
					     r.attached ? "attached" : r.managed ? "made through the daemon" : "its runner is gone");
				sups[r.name] = std::move(sup);
			} catch (const std::exception& e) {
				spdlog::warn("{}: cannot supervise: {}", r.name, e.what());
			}
		}
	}
};

}  // namespace

int cmd_daemon(const Paths& paths, const DaemonOptions& o)
{
	make_dirs(paths.state_dir);
	// One daemon per state directory: two would share each ring's reader.
	std::string lock_path = paths.state_dir + "/daemon.lock";
	Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
	if (!lock.valid())
		fail_errno("open " + lock_path);
	if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
		fail("another airlock daemon runs for {} ({} is locked)", paths.state_dir, lock_path);

	sigset_t mask;
	sigemptyset(&mask);
	for (int s : {SIGINT, SIGTERM, SIGHUP})
		sigaddset(&mask, s);
	sigprocmask(SIG_BLOCK, &mask, nullptr);
	Fd sigfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));

	// The command line wins over the configuration file.
	DaemonConfig config;
	if (!o.config.empty()) {
		try {
			config = load_daemon_config(o.config);
		} catch (const PolicyRejected& e) {
			for (const auto& l : e.lines())
				spdlog::error("{}", l);
			fail("{}: rejected ({} error{})", o.config, e.lines().size(), e.lines().size() == 1 ? "" : "s");
		}
	}
	std::string metrics_addr = !o.metrics.empty() ? o.metrics : !config.metrics.empty() ? config.metrics : "127.0.0.1:9464";
	std::string policy_dir = !o.policy_dir.empty() ? o.policy_dir : config.policy_dir;
	if (!policy_dir.empty()) {
		std::error_code ec;
		if (!std::filesystem::is_directory(policy_dir, ec))
			fail("policy directory {}: not a directory", policy_dir);
		policy_dir = std::filesystem::absolute(policy_dir).lexically_normal().string();
		while (policy_dir.size() > 1 && policy_dir.back() == '/')
			policy_dir.pop_back();
	}

	std::unique_ptr<Metrics> metrics;
	if (metrics_addr != "off") {
		try {
			metrics = std::make_unique<Metrics>(paths, metrics_addr);
		} catch (const std::exception& e) {
			fail("serve metrics on {}: {}", metrics_addr, e.what());
		}
		spdlog::info("airlock daemon: metrics on http://{}/metrics", metrics_addr);
	}
	Daemon d(paths, metrics.get());
	d.policy_dir = policy_dir;
	d.audit_log = !o.audit_log.empty() ? std::filesystem::absolute(o.audit_log).string()
		      : !config.audit_log.empty() ? config.audit_log
						  : "/var/log/airlock/audit.jsonl";
	d.audit_bound = o.audit_bound.over(config.audit_bound);
	d.declared = config.sandboxes;
	d.policy_ino.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
	struct epoll_event pev = {};
	pev.events = EPOLLIN;
	pev.data.u64 = 4;
	if (!d.policy_ino.valid() || ::epoll_ctl(d.ep.get(), EPOLL_CTL_ADD, d.policy_ino.get(), &pev) != 0)
		fail_errno("watch policy files");
	struct epoll_event sev = {};
	sev.events = EPOLLIN;
	sev.data.u64 = 1;
	if (!d.ep.valid() || ::epoll_ctl(d.ep.get(), EPOLL_CTL_ADD, sigfd.get(), &sev) != 0)
		fail_errno("epoll");
	// A sandbox record written or removed wakes the daemon at once; the
	// periodic rescan only catches runners that died.
	make_dirs(paths.state_dir + "/sandboxes");
	Fd ino(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
	if (!ino.valid() || ::inotify_add_watch(ino.get(), (paths.state_dir + "/sandboxes").c_str(),
						  IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_CLOSE_WRITE) < 0)
		fail_errno("watch " + paths.state_dir + "/sandboxes");
	struct epoll_event iev = {};
	iev.events = EPOLLIN;
	iev.data.u64 = 2;
	if (::epoll_ctl(d.ep.get(), EPOLL_CTL_ADD, ino.get(), &iev) != 0)
		fail_errno("epoll");
	// The control socket: root's alone (mode 0600, and the peer's uid is checked).
	std::string sock_path = control_socket(paths);
	::unlink(sock_path.c_str());  // a dead daemon's; we hold the lock
	Fd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	struct sockaddr_un sa = {};
	sa.sun_family = AF_UNIX;
	if (sock_path.size() >= sizeof(sa.sun_path))
		fail("control socket path too long: {}", sock_path);
	std::memcpy(sa.sun_path, sock_path.c_str(), sock_path.size() + 1);
	mode_t old = ::umask(077);
	int bound = ::bind(listener.get(), reinterpret_cast<struct sockaddr*>(&sa), sizeof(sa));
	::umask(old);
	if (!listener.valid() || bound != 0 || ::chmod(sock_path.c_str(), 0600) != 0 || ::listen(listener.get(), 16) != 0)
		fail_errno("control socket " + sock_path);
	struct epoll_event lev = {};
	lev.events = EPOLLIN;
	lev.data.u64 = 3;
	if (::epoll_ctl(d.ep.get(), EPOLL_CTL_ADD, listener.get(), &lev) != 0)
		fail_errno("epoll");
	// Its connections never block the loop: a client that stalls costs a
	// descriptor until its deadline, not another sandbox's freeze.
	ControlServer control(
		d.ep.get(), listener.get(), Daemon::kFirstControlTag, [&](const struct ucred& cr) { return d.refuse(cr); },
		[&](const std::string& line, const struct ucred& cr) { return d.serve(line, cr); });
	spdlog::info("airlock daemon: watching {} (pins {}), control socket {}", paths.state_dir, paths.bpf_dir,
		     sock_path);
	if (!d.policy_dir.empty()) {
		d.watch_policy(d.policy_dir + "/x");
		d.check_policy_dir();
	}
	d.rescan();
	d.ensure_declared();

	uint64_t last_scan = 0, last_poll_all = 0;
	for (;;) {
		uint64_t now = monotonic_ns();
		if (now - last_scan >= 1000000000ull) {
			d.rescan();
			d.ensure_declared();
			last_scan = now;
		}
		struct epoll_event evs[64];
		int n = ::epoll_wait(d.ep.get(), evs, 64, 200);
		if (n < 0 && errno != EINTR)
			fail_errno("epoll_wait");
		for (int i = 0; i < n; i++)
			if (evs[i].data.u64 >= Daemon::kFirstRingTag && !control.owns(evs[i].data.u64))
				d.ring_ready(evs[i].data.u64);
		// Every sandbox at least every 200 ms: a latch set while its ring
		// was full, a thaw, learned addresses to sweep.
		if (now = monotonic_ns(); now - last_poll_all >= 200000000ull) {
			for (auto& [name, sup] : d.sups)
				sup->poll();
			d.prune_subscribers();
			control.expire(now);
			last_poll_all = now;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == 2) {
				char buf[4096];
				while (::read(ino.get(), buf, sizeof(buf)) > 0) {
				}
				d.rescan();
				for (auto& [name, sup] : d.sups)
					sup->poll();
				continue;
			}
			if (control.owns(evs[i].data.u64)) {
				control.ready(evs[i].data.u64, evs[i].events);
				continue;
			}
			if (evs[i].data.u64 == 3) {
				control.accept_all();
				continue;
			}
			if (evs[i].data.u64 == 4) {
				d.policy_changed();
				continue;
			}
			if (evs[i].data.u64 != 1)
				continue;
			struct signalfd_siginfo ssi;
			while (::read(sigfd.get(), &ssi, sizeof(ssi)) == sizeof(ssi)) {
				if (ssi.ssi_signo == SIGHUP) {
					if (!o.config.empty()) {
						try {
							d.declared = load_daemon_config(o.config).sandboxes;
						} catch (const PolicyRejected& e) {
							for (const auto& l : e.lines())
								spdlog::error("{}", l);
							spdlog::error("{}: rejected; the sandboxes it declared before stay", o.config);
						} catch (const std::exception& e) {
							spdlog::error("{}: {}; the sandboxes it declared before stay", o.config, e.what());
						}
					}
					for (auto& [name, sup] : d.sups) {
						sup->audit().reopen();
						sup->reload_from_file("SIGHUP to the daemon");
					}
					d.ensure_declared();
					continue;
				}
				spdlog::info("airlock daemon: signal {}, exiting; enforcement stays in the kernel",
					     ssi.ssi_signo);
				::unlink(sock_path.c_str());
				return kExitOk;
			}
		}
	}
}

}  // namespace airlock
