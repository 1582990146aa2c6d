#include "daemon/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <systemd/sd-daemon.h>
#include <spdlog/spdlog.h>

#include "daemon/control_server.h"
#include "daemon/event_loop.h"
#include "daemon/policy_watcher.h"
#include "kernel/kernel.h"
#include "metrics/metrics.h"
#include "ops/config.h"
#include "ops/control.h"
#include "ops/ops.h"
#include "ops/proxy.h"
#include "ops/request.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/supervisor.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/exit_code.h"
#include "util/fd.h"
#include "util/files.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace airlock {

namespace {

struct Subscriber {
	Fd fd;
	std::string sandbox;  // "" for every sandbox
};

struct Daemon {
	Daemon(const Paths& p, Metrics* m)
	    : paths(p), metrics(m), policies(loop, [this](const std::string& dir, const std::string& path) {
		      policy_changed(dir, path);
	      })
	{
		// Every audit line this process writes, its requests' lifecycle
		// lines too, goes to `airlock events`.
		AuditLog::tee_all([this](const std::string& sb, const std::string& line) { publish(sb, line); });
	}
	~Daemon()
	{
		// Each proxy stopped (SIGTERM; it dies with this process anyway) and
		// its kernel entry cleared: redirected connects fail closed until a
		// daemon starts them again.
		for (auto& [name, w] : proxies)
			unwatch(w);
		proxies.clear();
		AuditLog::tee_all(nullptr);
	}
	Daemon(const Daemon&) = delete;
	Daemon& operator=(const Daemon&) = delete;
	const Paths& paths;
	Metrics* metrics;
	EventLoop loop;
	std::optional<kernel::Kernel> k;
	std::map<std::string, std::unique_ptr<Supervisor>> sups;
	std::vector<Subscriber> subs;
	// Policy files of supervised sandboxes: a change is a reload.
	PolicyWatcher policies;
	std::deque<std::pair<std::string, std::string>> recent;  // (sandbox, line), the last kRecent
	std::string policy_dir;  // absolute; "" for none
	std::string audit_log;   // for sandboxes made through the daemon without one
	AuditBound audit_bound;  // likewise
	std::vector<DeclaredSandbox> declared;
	std::string config_file;  // where `declared` comes from
	std::map<std::string, std::string> declared_errors;  // name -> last error, logged once
	std::map<std::string, std::string> supervise_errors;  // likewise

	// The proxies of supervised sandboxes whose policy needs one (a
	// redirect to the world, the SNI gate), with the descriptors of theirs
	// the loop watches: new ones at each start. Declared after `k` and
	// `sups`: destroyed before them, each clearing its kernel entry.
	struct ProxyWatch {
		std::unique_ptr<ops::SandboxProxy> proxy;
		int pidfd = -1, control = -1;
		uint64_t generation = 0;  // of the proxy whose descriptors these are
	};
	// Proxies sent SIGTERM, waited for by the loop, never by a call that
	// would hold up another sandbox's freeze: killed 2 s later if still
	// there. Declared before `proxies`, which hand theirs over as they go.
	struct Stopping {
		pid_t pid;
		Fd pidfd;
		uint64_t deadline_ns;
	};
	std::map<int, Stopping> stopping;  // by pidfd
	std::map<std::string, ProxyWatch> proxies;
	std::map<std::string, std::string> proxy_errors;  // name -> last error, logged once
	// A proxy that failed to start (or to start again) is tried again at
	// most every 10 s, not at every rescan.
	std::map<std::string, uint64_t> proxy_retry_ns;
	static constexpr uint64_t kProxyRetryNs = 10000000000ull;

	void forget(Supervisor& sup)
	{
		stop_proxy(sup.record().name, false);
		loop.remove(sup.epoll_fd());
		if (metrics)
			metrics->untrack(sup.record().name);
	}

	void unwatch(ProxyWatch& w)
	{
		for (int* fd : {&w.pidfd, &w.control})
			if (*fd >= 0) {
				loop.remove(*fd);
				*fd = -1;
			}
	}

	// The loop watches the proxy's current descriptors: its exit (then it
	// is started again, or stays down), its channel (the SNI gate's
	// requests, its counts).
	// A proxy started again has new descriptors, which may have the old
	// ones' numbers: its generation tells.
	void watch(const std::string& name, ProxyWatch& w)
	{
		const auto& px = *w.proxy;
		if (w.generation == px.generation() && w.pidfd == px.pidfd() && w.control == px.control_fd())
			return;
		unwatch(w);
		w.generation = px.generation();
		w.pidfd = px.pidfd();
		w.control = px.control_fd();
		if (w.pidfd >= 0)
			loop.add(w.pidfd, EPOLLIN, [this, name](uint32_t) {
				with_proxy(name, [](ops::SandboxProxy& p) { p.reap(); });
			});
		if (w.control >= 0)
			loop.add(w.control, EPOLLIN, [this, name](uint32_t) {
				with_proxy(name, [](ops::SandboxProxy& p) { p.serve(); });
				// A connection the gate denied set the latch: the freeze starts now.
				if (auto s = sups.find(name); s != sups.end())
					s->second->poll();
			});
	}

	// What the loop does with a proxy (reap it and start it again, serve its
	// channel), its descriptors watched again after. What fails there (no
	// port, no fork, no records file) stops that proxy, its kernel entry
	// cleared (redirects fail closed), to be tried again later: never the
	// daemon, which supervises every other sandbox.
	void with_proxy(const std::string& name, const std::function<void(ops::SandboxProxy&)>& f)
	{
		auto it = proxies.find(name);
		if (it == proxies.end())
			return;
		try {
			f(*it->second.proxy);
			watch(name, it->second);
			return;
		} catch (const std::exception& e) {
			spdlog::error("{}: its proxy: {}; stopped, tried again in {} s; redirected connects fail (reason "
				      "no-proxy)",
				      name, e.what(), kProxyRetryNs / 1000000000ull);
		}
		stop_proxy(name);
		proxy_retry_ns[name] = monotonic_ns() + kProxyRetryNs;
	}

	// Stops a sandbox's proxy. `record_kept`: the sandbox is still this
	// one, its kernel entry is cleared (a redirected connect fails with
	// no-proxy); else its slot may be another sandbox's already, and only
	// the process and the files go.
	void stop_proxy(const std::string& name, bool record_kept = true)
	{
		proxy_errors.erase(name);
		proxy_retry_ns.erase(name);
		auto it = proxies.find(name);
		if (it == proxies.end())
			return;
		unwatch(it->second);
		if (!record_kept)
			it->second.proxy->keep_kernel_entries();
		proxies.erase(it);
	}

	// The network namespace a sandbox's proxy listens in: its processes'
	// (their connects are rewritten to a loopback address of their own
	// namespace). A sandbox made through the daemon has its commands
	// started in the daemon's (`airlock exec` checks): an invalid Fd. An
	// attached cgroup (or a runner's sandbox left behind): the namespace of
	// its first process; nullopt while it has none (the proxy starts when
	// one appears).
	std::optional<Fd> proxy_netns(const SandboxRecord& r, int pid_hint) const
	{
		if (r.managed)
			return Fd();
		std::vector<int> pids;
		if (pid_hint > 0)
			pids.push_back(pid_hint);
		for (int p : cgroup::pids_within(r.cgroup, 16))
			pids.push_back(p);
		for (int p : pids) {
			// The process must still be in the sandbox when its namespace is open.
			Fd ns(::open(fmt::format("/proc/{}/ns/net", p).c_str(), O_RDONLY | O_CLOEXEC));
			std::string cg;
			try {
				cg = cgroup::of_pid(p);
			} catch (const std::exception&) {
				continue;
			}
			if (ns.valid() && (cg == r.cgroup || cg.rfind(r.cgroup + "/", 0) == 0))
				return ns;
		}
		return std::nullopt;
	}

	// Starts the proxy a supervised sandbox's policy needs, or stops the
	// one it no longer needs; a policy that still needs one is handed to
	// it (after a reload). Never throws: a proxy that cannot start leaves
	// redirected connects failing closed (no-proxy), and says why once;
	// returns why ("" when it runs, or none is needed).
	std::string sync_proxy(const std::string& name, int pid_hint = 0)
	{
		auto s = sups.find(name);
		if (s == sups.end()) {
			stop_proxy(name);
			return "";
		}
		Supervisor& sup = *s->second;
		bool need = ops::needs_proxy(sup.policy());
		auto it = proxies.find(name);
		if (!need) {
			if (it != proxies.end())
				spdlog::info("{}: its policy needs no proxy now; stopped", name);
			stop_proxy(name);
			return "";
		}
		if (it != proxies.end()) {
			// Unwatched first: a restart hands the old one's pidfd over to
			// be waited for, and its descriptors are new.
			unwatch(it->second);
			with_proxy(name, [&](ops::SandboxProxy& p) { p.set_policy(sup.policy(), sup.record().bank); });
			return "";
		}
		proxy_retry_ns.erase(name);
		std::string error;
		try {
			auto netns = proxy_netns(sup.record(), pid_hint);
			if (!netns) {
				error = "no process in its cgroup yet: its proxy starts when one appears (until then "
					"redirected connects fail, reason no-proxy)";
			} else {
				ops::ProxyOptions po;
				po.netns = std::move(*netns);
				po.on_stopping = [this](pid_t pid, Fd pidfd) { wait_for_stop(pid, std::move(pidfd)); };
				auto px = std::make_unique<ops::SandboxProxy>(*k, paths, sup.record(), sup.policy(),
									      std::move(po));
				px->on_violation = [this, name](const nlohmann::json& j) { gate_denied(name, j); };
				auto& w = proxies[name];
				w.proxy = std::move(px);
				watch(name, w);
				proxy_errors.erase(name);
				return "";
			}
		} catch (const std::exception& e) {
			error = fmt::format("its proxy cannot start: {}; redirected connects fail (reason no-proxy)",
					    e.what());
			proxy_retry_ns[name] = monotonic_ns() + kProxyRetryNs;
		}
		std::string& last = proxy_errors[name];
		if (last != error)
			spdlog::warn("{}: {}", name, error);
		last = error;
		return error;
	}

	void wait_for_stop(pid_t pid, Fd pidfd)
	{
		int fd = pidfd.get();
		if (fd < 0)
			return;
		// A proxy halted from within a handler of its own is still watched
		// under this descriptor: the watch goes, the wait takes it over.
		for (auto& [n, w] : proxies)
			if (w.pidfd == fd) {
				loop.remove(fd);
				w.pidfd = -1;
			}
		stopping[fd] = Stopping{pid, std::move(pidfd), monotonic_ns() + 2000000000ull};
		try {
			loop.add(fd, EPOLLIN, [this, fd](uint32_t) { reap_stopped(fd); });
		} catch (const std::exception& e) {
			// Waited for by kill_lingering's rounds instead.
			spdlog::warn("proxy {}: {}", pid, e.what());
		}
	}

	// A stopped proxy that exited is waited for (its zombie goes).
	bool reap_stopped(int fd)
	{
		auto it = stopping.find(fd);
		if (it == stopping.end())
			return true;
		siginfo_t si{};
		if (::waitid(static_cast<idtype_t>(P_PIDFD), fd, &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0)
			return false;  // still running
		loop.remove(fd);
		stopping.erase(it);
		return true;
	}

	// Stopped proxies: those that exited waited for, those that outlived
	// their 2 s killed (their pidfd then says so).
	void kill_lingering()
	{
		uint64_t now = monotonic_ns();
		std::vector<int> fds;
		for (const auto& [fd, s] : stopping)
			fds.push_back(fd);
		for (int fd : fds) {
			if (reap_stopped(fd))
				continue;
			Stopping& s = stopping.at(fd);
			if (now >= s.deadline_ns) {
				spdlog::warn("proxy {}: still there 2 s after SIGTERM; killed", s.pid);
				::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
				s.deadline_ns = UINT64_MAX;
			}
		}
	}

	// A connection the SNI gate denied: a violation, which takes the
	// sandbox's on_violation through its latch.
	void gate_denied(const std::string& name, const nlohmann::json& j)
	{
		auto s = sups.find(name);
		if (s == sups.end())
			return;
		const SandboxRecord& r = s->second->record();
		nlohmann::json e = j;
		e["latched"] = k->set_latch(r.slot, r.cgroup_id);
		s->second->audit().write(name, e);
		spdlog::warn("{}: denied by the SNI gate: {}:{} '{}': {}", name, e.value("dst", ""), e.value("port", 0),
			     e.value("sni", ""), e.value("reason", ""));
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

	// A policy in the directory that no sandbox uses yet: checked, so that
	// a mistake shows before a sandbox asks for it.
	void check_policy(const std::string& path)
	{
		try {
			auto p = load_policy(path);
			if (p) {
				spdlog::info("policy {} ('{}'): ok", path, p->name);
				return;
			}
			for (const auto& l : p.rejection().lines)
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
			if (PolicyWatcher::is_policy_name(ent.path().filename()))
				files.push_back(ent.path());
		std::sort(files.begin(), files.end());
		for (const auto& f : files)
			check_policy(f);
	}

	// A policy file was written or replaced: every supervised sandbox
	// enforcing it reloads it (a bad file is rejected, the old policy stays).
	void policy_changed(const std::string& dir, const std::string& path)
	{
		bool used = false;
		for (auto& [name, sup] : sups)
			if (sup->record().policy_file == path) {
				spdlog::info("{}: {} changed; reloading", name, path);
				sup->reload_from_file("policy file changed");
				used = true;
			}
		if (!used && dir == policy_dir && PolicyWatcher::is_policy_name(path.substr(path.rfind('/') + 1)))
			check_policy(path);
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
		stop_proxy(name);  // its record is still there: its kernel entry is cleared
		forget(*it->second);
		sups.erase(it);
		return killed;
	}

	Result<nlohmann::json> new_sandbox(const Request& q)
	{
		ops::NewSandbox n;
		n.name = q.name;
		n.policy_file = resolve_policy(q.policy);
		n.audit_log = q.audit_log.empty() ? audit_log : q.audit_log;
		n.log_allowed = q.log_allowed;
		n.audit_bound = q.audit_bound.over(audit_bound);
		if (q.cmd == Request::Cmd::Attach) {
			n.cgroup = q.cgroup;
			n.pid = q.pid;
			n.cgroup_id = q.cgroup_id;
			if (n.cgroup.empty() && n.pid <= 0)
				fail("attach: give a cgroup or a pid");
			// A container restarted under the same id makes its cgroup
			// again at once: the ended one's sandbox goes first.
			release_removed(load_records(paths));
		} else {
			n.managed = true;
			n.runner_pid = q.runner_pid;
		}
		n.starts_proxy = true;
		std::string msg;
		auto added = ops::add(paths, n, &msg);
		if (!added)
			return added.rejection();
		const SandboxRecord& rec = *added;
		// Supervised before the answer, so that a command started next is
		// watched; a sandbox that cannot be is unmade, not left enforced
		// with nobody to freeze it.
		try {
			supervise(rec, n.pid);
		} catch (const std::exception& e) {
			ops::unmake(paths, rec, std::string("cannot supervise it: ") + e.what());
			fail("{}: cannot supervise it: {}; {}", rec.name, e.what(),
			     rec.attached ? "detached again" : "removed again");
		}
		rescan();
		// Made and enforced, but said: its redirects fail closed meanwhile.
		if (auto it = proxy_errors.find(rec.name); it != proxy_errors.end())
			msg += "; " + it->second;
		return nlohmann::json{{"ok", true}, {"message", msg}, {"cgroup", rec.cgroup}, {"name", rec.name}};
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
			if (auto p = proxies.find(s["name"].get<std::string>()); p != proxies.end()) {
				const auto& px = *p->second.proxy;
				s["supervisor"]["proxy"] = {{"pid", px.pid() > 0 ? nlohmann::json(px.pid()) : nullptr},
							    {"port", px.port()},
							    {"netns", px.netns_inode()},
							    {"ca_file", px.ca_file()}};
			}
		}
		return {{"ok", true}, {"status", st}};
	}

	// Requests other than `events`: one answer each.
	Result<nlohmann::json> handle(const Request& q)
	{
		const std::string& name = q.name;
		using Cmd = Request::Cmd;
		switch (q.cmd) {
		case Cmd::Ping: {
			nlohmann::json names = nlohmann::json::array();
			for (const auto& [n, sup] : sups)
				names.push_back(n);
			return nlohmann::json{{"ok", true}, {"pid", ::getpid()}, {"supervising", names}};
		}
		case Cmd::Status:
			return status();
		case Cmd::Thaw: {
			std::string msg = ops::thaw(paths, name);
			if (auto it = sups.find(name); it != sups.end())
				it->second->poll();
			return nlohmann::json{{"ok", true}, {"message", msg}};
		}
		case Cmd::Kill: {
			std::string msg = ops::kill(paths, name);
			rescan();
			return nlohmann::json{{"ok", true}, {"message", msg}};
		}
		case Cmd::Reload: {
			// A runner's pending events belong to the policy they were decided under.
			if (auto it = sups.find(name); it != sups.end())
				it->second->poll();
			std::string file = resolve_policy(q.policy);
			auto msg = ops::reload(paths, name, file);
			if (metrics)
				metrics->reload(name, msg.ok());
			if (!msg)
				return msg.rejection();
			policies.watch_file(file);
			if (auto it = sups.find(name); it != sups.end()) {
				it->second->refresh();
				sync_proxy(name);
			}
			return nlohmann::json{{"ok", true}, {"message", *msg}};
		}
		case Cmd::Attach:
		case Cmd::Create:
			return new_sandbox(q);
		case Cmd::Detach:
		case Cmd::Delete: {
			bool detach = q.cmd == Cmd::Detach;
			// Checked before its supervisor is let go of.
			if (auto rec = load_record(paths, name))
				ops::check_removable(*rec, detach);
			bool killed = drop(name);
			std::string msg;
			try {
				msg = detach ? ops::detach(paths, name) : ops::remove(paths, name);
			} catch (...) {
				rescan();
				throw;
			}
			// Said, not hidden: the declaration makes it again at the next rescan.
			bool declared_here = std::any_of(declared.begin(), declared.end(),
							 [&](const DeclaredSandbox& d) { return d.name == name; });
			if (declared_here)
				msg += fmt::format("; it is declared in {}, so the daemon {} it again within a second: "
						   "remove it there and send the daemon SIGHUP to keep it gone",
						   config_file, detach ? "attaches" : "makes");
			return nlohmann::json{{"ok", true}, {"message", msg}, {"killed_on_violation", killed},
					      {"declared", declared_here}};
		}
		case Cmd::Events:
			break;
		}
		fail("request '{}' is not answered here", to_string(q.cmd));
	}

	// The sandbox a process is in, if any: a root process inside one must
	// not be able to reload, delete or thaw its way out through this socket.
	std::optional<std::string> sandbox_of_pid(int pid) const
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
		return std::nullopt;
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
	// never from inside a sandbox.
	std::optional<ControlServer::Answer> refuse(const struct ucred& cr) const
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

	// The `events` request: the recent lines, then (follow) the connection
	// is a subscriber's.
	ControlServer::Answer events(const Request& q)
	{
		if (q.follow && subs.size() >= kMaxSubscribers)
			prune_subscribers();
		if (q.follow && subs.size() >= kMaxSubscribers)
			fail("{} followers already; no more", kMaxSubscribers);
		ControlServer::Answer a;
		for (const auto& [sb, l] : recent)
			if (q.sandbox.empty() || sb == q.sandbox)
				a.text += l;
		if (q.follow)
			a.then = [this, sandbox = q.sandbox](Fd fd) { subs.push_back({std::move(fd), sandbox}); };
		return a;
	}

	// One request per connection, one JSON line (ops/request.h).
	ControlServer::Answer serve(const std::string& line, const struct ucred& cr)
	{
		auto text = [](const nlohmann::json& r) { return ControlServer::Answer{r.dump() + "\n", nullptr}; };
		auto parsed = parse_request(line);
		if (auto* e = std::get_if<RequestError>(&parsed))
			return text({{"error", e->message}});
		const Request& q = std::get<Request>(parsed);
		try {
			if (q.cmd == Request::Cmd::Events)
				return events(q);
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

	// Sandboxes the configuration declares: made or attached when missing
	// (a cgroup that does not exist yet is retried at each rescan).
	void ensure_declared()
	{
		for (const auto& d : declared) {
			if (load_record(paths, d.name))
				continue;
			Request q;
			q.cmd = d.cgroup.empty() ? Request::Cmd::Create : Request::Cmd::Attach;
			q.name = d.name;
			q.policy = d.policy;
			q.audit_log = d.audit_log;
			q.log_allowed = d.log_allowed;
			q.cgroup = d.cgroup;
			std::string error;
			try {
				auto r = new_sandbox(q);
				if (r) {
					spdlog::info("{} (declared)", r->value("message", ""));
					declared_errors.erase(d.name);
					continue;
				}
				error = r.rejection().first();
			} catch (const std::exception& e) {
				error = e.what();
			}
			std::string& last = declared_errors[d.name];
			if (last != error)
				spdlog::error("declared sandbox {}: {}", d.name, error);
			last = error;
		}
	}

	// systemd's readiness (Type=notify): sent once every sandbox the
	// configuration declares is made or attached and supervised, so that a
	// unit ordered after airlock starts under enforcement. Until then the
	// status names what is missing and why.
	bool ready = false;
	std::string last_status;
	void notify_when_enforcing()
	{
		if (ready)
			return;
		std::vector<std::string> missing;
		for (const auto& d : declared) {
			if (sups.count(d.name))
				continue;
			// A cgroup to attach that does not exist yet is made by what
			// starts after the daemon (a unit, a container): it is attached
			// when it appears, and does not hold readiness back.
			std::error_code ec;
			std::string cg = d.cgroup.empty() || d.cgroup.front() == '/' ? d.cgroup : cgroup::path_of(d.cgroup);
			if (!cg.empty() && !std::filesystem::exists(cg + "/cgroup.procs", ec))
				continue;
			missing.push_back(d.name + (declared_errors.count(d.name) ? ": " + declared_errors[d.name] : ""));
		}
		if (!missing.empty()) {
			std::string status = fmt::format("STATUS=waiting for declared sandboxes: {}", fmt::join(missing, "; "));
			if (status != last_status)
				::sd_notify(0, status.c_str());
			last_status = status;
			return;
		}
		ready = true;
		::sd_notifyf(0, "READY=1\nSTATUS=enforcing %zu sandboxes", sups.size());
		spdlog::info("airlock daemon: enforcing {} sandboxes{}", sups.size(),
			     declared.empty() ? "" : fmt::format(", the {} declared ones included", declared.size()));
	}

	// Attached sandboxes whose cgroup is gone (a container ended and its
	// runtime removed the cgroup): what their rings still hold is read,
	// then they are let go, so that ended containers leave no slot taken.
	// Returns whether any was let go.
	bool release_removed(const std::vector<SandboxRecord>& records)
	{
		bool released = false;
		for (const auto& r : records) {
			if (!ops::cgroup_removed(r))
				continue;
			drop(r.name);
			try {
				if (ops::release_if_removed(paths, r.name)) {
					spdlog::info("{}: its cgroup {} was removed; let go", r.name, r.cgroup);
					released = true;
				}
			} catch (const std::exception& e) {
				std::string& last = supervise_errors[r.name];
				if (last != e.what())
					spdlog::warn("{}: its cgroup {} was removed, but it cannot be let go: {}", r.name,
						     r.cgroup, e.what());
				last = e.what();
			}
		}
		return released;
	}

	// Takes up sandboxes that nobody runs, lets go of those that are gone.
	void rescan()
	{
		auto records = load_records(paths);
		if (release_removed(records))
			records = load_records(paths);
		std::map<std::string, const SandboxRecord*> by_name;
		for (const auto& r : records)
			by_name[r.name] = &r;
		for (auto it = sups.begin(); it != sups.end();) {
			if (!by_name.count(it->first)) {
				forget(*it->second);
				spdlog::info("{}: gone; no longer supervised", it->first);
				it = sups.erase(it);
			} else {
				++it;
			}
		}
		// A proxy that is down (it died too often, or was halted) starts
		// again when its time comes; one that could not start yet (an
		// attached cgroup without a process) is tried again.
		std::vector<std::string> names;
		for (const auto& [name, w] : proxies)
			names.push_back(name);
		for (const auto& name : names)
			with_proxy(name, [](ops::SandboxProxy& p) { p.tend(); });
		uint64_t now = monotonic_ns();
		for (const auto& [name, sup] : sups)
			if (!proxies.count(name) && ops::needs_proxy(sup->policy()) &&
			    (!proxy_retry_ns.count(name) || now >= proxy_retry_ns[name]))
				sync_proxy(name);
		for (const auto& r : records) {
			// A runner supervises its own sandbox, unless it was made through the daemon.
			if (sups.count(r.name) || (runner_alive(r) && !r.managed))
				continue;
			try {
				supervise(r);
				supervise_errors.erase(r.name);
			} catch (const std::exception& e) {
				// Once per change, not once per rescan.
				std::string& last = supervise_errors[r.name];
				if (last != e.what())
					spdlog::warn("{}: cannot supervise: {}", r.name, e.what());
				last = e.what();
			}
		}
	}

	// Starts supervising one sandbox, and its proxy if its policy needs
	// one; throws what stands in the way of the supervision.
	void supervise(const SandboxRecord& r, int pid_hint = 0)
	{
		if (!k)
			k.emplace(kernel::Kernel::adopt(paths.bpf_dir));
		// The policy text the live bank was compiled from names the rules in events.
		auto parsed = parse_policy_file(paths.policy_copy(r.name, r.bank));
		auto sup = std::make_unique<Supervisor>(*k, paths, r, parsed.policy.value_or(Policy{}));
		policies.watch_file(r.policy_file);
		if (metrics) {
			sup->on_frozen = [m = metrics](double s) { m->freeze_latency(s); };
			metrics->track(r.name);
		}
		sup->on_reload = [this, name = r.name](bool ok) {
			if (metrics)
				metrics->reload(name, ok);
			if (ok)
				sync_proxy(name);
		};
		// A ring's events wake its own supervisor alone, before any
		// request: a violation among them is frozen now.
		loop.add(sup->epoll_fd(), EPOLLIN, [this, name = r.name](uint32_t) {
			if (auto it = sups.find(name); it != sups.end())
				it->second->poll();
		}, EventLoop::kUrgent);
		spdlog::info("{}: supervising {} ({})", r.name, r.cgroup,
			     r.attached ? "attached" : r.managed ? "made through the daemon" : "its runner is gone");
		sups[r.name] = std::move(sup);
		sync_proxy(r.name, pid_hint);
	}
};

}  // namespace

namespace {

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

// SIGHUP: the configuration's sandboxes again, every audit log reopened
// (after logrotate) and every policy file read again.
void reread(Daemon& d, const DaemonOptions& o)
{
	::sd_notify(0, "RELOADING=1");
	if (!o.config.empty()) {
		auto loaded = load_daemon_config(o.config);
		if (loaded) {
			d.declared = loaded->sandboxes;
		} else {
			for (const auto& l : loaded.rejection().lines)
				spdlog::error("{}", l);
			spdlog::error("{}: rejected; the sandboxes it declared before stay", o.config);
		}
	}
	for (auto& [name, sup] : d.sups) {
		sup->audit().reopen();
		sup->reload_from_file("SIGHUP to the daemon");
	}
	d.ensure_declared();
	::sd_notify(0, "READY=1");
}

}  // namespace

int run_daemon(const Paths& paths, const DaemonOptions& o)
{
	Fd lock = lock_state_dir(paths);
	sigset_t mask;
	sigemptyset(&mask);
	for (int s : {SIGINT, SIGTERM, SIGHUP})
		sigaddset(&mask, s);
	sigprocmask(SIG_BLOCK, &mask, nullptr);
	Fd sigfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
	if (!sigfd.valid())
		fail_errno("signalfd");

	DaemonConfig config = configure(o);
	std::unique_ptr<Metrics> metrics;
	if (config.metrics != "off") {
		try {
			metrics = std::make_unique<Metrics>(paths, config.metrics);
		} catch (const std::exception& e) {
			fail("metrics: {}", e.what());
		}
		spdlog::info("airlock daemon: metrics on http://{}/metrics", config.metrics);
	}
	Daemon d(paths, metrics.get());
	d.policy_dir = config.policy_dir;
	d.audit_log = config.audit_log;
	d.audit_bound = config.audit_bound;
	d.declared = config.sandboxes;
	d.config_file = o.config;

	std::optional<int> exit_status;
	d.loop.add(sigfd.get(), EPOLLIN, [&](uint32_t) {
		struct signalfd_siginfo ssi;
		while (!exit_status && ::read(sigfd.get(), &ssi, sizeof(ssi)) == sizeof(ssi)) {
			if (ssi.ssi_signo == SIGHUP) {
				reread(d, o);
				continue;
			}
			spdlog::info("airlock daemon: signal {}, exiting; enforcement stays in the kernel", ssi.ssi_signo);
			exit_status = kExitOk;
		}
	});
	// A sandbox record written or removed wakes the daemon at once; the
	// periodic rescan only catches runners that died.
	make_dirs(paths.state_dir + "/sandboxes");
	Fd records(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
	if (!records.valid() || ::inotify_add_watch(records.get(), (paths.state_dir + "/sandboxes").c_str(),
						      IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_CLOSE_WRITE) < 0)
		fail_errno("watch " + paths.state_dir + "/sandboxes");
	d.loop.add(records.get(), EPOLLIN, [&](uint32_t) {
		char buf[4096];
		while (::read(records.get(), buf, sizeof(buf)) > 0) {
		}
		d.rescan();
		for (auto& [name, sup] : d.sups)
			sup->poll();
	});
	// The control socket: root's alone (mode 0600, and the peer's uid is
	// checked). Its connections never block the loop: a client that stalls
	// costs a descriptor until its deadline, not another sandbox's freeze.
	std::string sock_path = control_socket(paths);
	Fd listener = ControlServer::listen(sock_path);
	ControlServer control(
		d.loop, listener.get(), [&](const struct ucred& cr) { return d.refuse(cr); },
		[&](const std::string& line, const struct ucred& cr) { return d.serve(line, cr); });
	spdlog::info("airlock daemon: watching {} (pins {}), control socket {}", paths.state_dir, paths.bpf_dir,
		     sock_path);
	if (!d.policy_dir.empty()) {
		d.policies.watch_dir(d.policy_dir);
		d.check_policy_dir();
	}
	d.rescan();
	d.ensure_declared();
	d.notify_when_enforcing();
	d.loop.every(1000000000ull, [&] {
		d.rescan();
		d.ensure_declared();
		d.notify_when_enforcing();
	});
	// Every sandbox at least every 200 ms: a latch set while its ring was
	// full, a thaw, learned addresses to sweep.
	d.loop.every(200000000ull, [&] {
		for (auto& [name, sup] : d.sups)
			sup->poll();
		d.kill_lingering();
		d.prune_subscribers();
		control.expire(monotonic_ns());
	});
	while (!exit_status)
		d.loop.run_once();
	::sd_notify(0, "STOPPING=1");
	::unlink(sock_path.c_str());
	return *exit_status;
}

}  // namespace airlock
