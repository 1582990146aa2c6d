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

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "kernel/kernel.h"
#include "metrics/metrics.h"
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
				for (auto& [name, sup] : sups)
					if (sup->record().policy_file == path) {
						spdlog::info("{}: {} changed; reloading", name, path);
						sup->reload_from_file("policy file changed");
					}
			}
		}
	}

	// One request per connection, one JSON line: {"cmd": "events",
	// "follow": bool, "sandbox": NAME} or {"cmd": "ping"}. Root only.
	void serve(int listen_fd)
	{
		Fd c(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
		if (!c.valid())
			return;
		auto reply = [&](const nlohmann::json& j) {
			std::string t = j.dump() + "\n";
			::send(c.get(), t.data(), t.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
		};
		struct ucred cr {};
		socklen_t len = sizeof(cr);
		if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != 0) {
			spdlog::warn("control socket: refused uid {} (pid {})", cr.uid, cr.pid);
			reply({{"error", "the control socket is root's"}});
			return;
		}
		struct timeval tv = {1, 0};
		::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		std::string req;
		char buf[512];
		while (req.find('\n') == std::string::npos && req.size() < 4096) {
			ssize_t n = ::recv(c.get(), buf, sizeof(buf), 0);
			if (n <= 0)
				break;
			req.append(buf, static_cast<size_t>(n));
		}
		auto j = nlohmann::json::parse(req.substr(0, req.find('\n')), nullptr, false);
		std::string cmd = j.is_object() ? j.value("cmd", "") : "";
		if (cmd == "ping") {
			nlohmann::json names = nlohmann::json::array();
			for (const auto& [name, sup] : sups)
				names.push_back(name);
			reply({{"ok", true}, {"pid", ::getpid()}, {"supervising", names}});
		} else if (cmd == "events") {
			std::string sandbox = j.value("sandbox", "");
			for (const auto& [sb, line] : recent)
				if (sandbox.empty() || sb == sandbox)
					::send(c.get(), line.data(), line.size(), MSG_NOSIGNAL);
			if (j.value("follow", false))
				subs.push_back({std::move(c), sandbox});
		} else {
			reply({{"error", "unknown request; expected {\"cmd\": \"events\"|\"ping\"}"}});
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
				::epoll_ctl(ep.get(), EPOLL_CTL_DEL, it->second->epoll_fd(), nullptr);
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
			if (sups.count(r.name) || runner_alive(r))
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
				if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, sup->epoll_fd(), &ev) != 0)
					fail_errno("epoll_ctl");
				spdlog::info("{}: supervising {} ({})", r.name, r.cgroup,
					     r.attached ? "attached" : "its runner is gone");
				sups[r.name] = std::move(sup);
			} catch (const std::exception& e) {
				spdlog::warn("{}: cannot supervise: {}", r.name, e.what());
			}
		}
	}
};

}  // namespace

std::string control_socket(const Paths& paths)
{
	return paths.state_dir + "/control.sock";
}

int cmd_events(const Paths& paths, const std::string& sandbox, bool follow)
{
	std::string path = control_socket(paths);
	Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
	struct sockaddr_un sa = {};
	sa.sun_family = AF_UNIX;
	std::memcpy(sa.sun_path, path.c_str(), std::min(path.size() + 1, sizeof(sa.sun_path) - 1));
	if (!s.valid() || ::connect(s.get(), reinterpret_cast<struct sockaddr*>(&sa), sizeof(sa)) != 0) {
		int e = errno;
		if (e == ENOENT || e == ECONNREFUSED)
			fail("no airlock daemon runs for {} (start one: airlock daemon)", paths.state_dir);
		fail_errno("connect to the daemon's control socket " + path, e);
	}
	std::string req = nlohmann::json{{"cmd", "events"}, {"follow", follow}, {"sandbox", sandbox}}.dump() + "\n";
	// A daemon that refuses answers and closes at once: read its reason
	// even when the request could not be sent.
	int send_errno = ::send(s.get(), req.data(), req.size(), MSG_NOSIGNAL) < 0 ? errno : 0;
	char buf[4096];
	for (bool first = true;; first = false) {
		ssize_t n = ::recv(s.get(), buf, sizeof(buf), 0);
		if (n <= 0) {
			if (first && send_errno)
				fail_errno("send to the daemon", send_errno);
			break;
		}
		std::string chunk(buf, static_cast<size_t>(n));
		if (chunk.rfind("{\"error\"", 0) == 0) {
			auto j = nlohmann::json::parse(chunk.substr(0, chunk.find('\n')), nullptr, false);
			fail("the daemon refused: {}", j.is_object() ? j.value("error", chunk) : chunk);
		}
		std::fwrite(buf, 1, static_cast<size_t>(n), stdout);
		std::fflush(stdout);
	}
	return kExitOk;
}

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

	std::unique_ptr<Metrics> metrics;
	if (!o.metrics.empty() && o.metrics != "off") {
		try {
			metrics = std::make_unique<Metrics>(paths, o.metrics);
		} catch (const std::exception& e) {
			fail("serve metrics on {}: {}", o.metrics, e.what());
		}
		spdlog::info("airlock daemon: metrics on http://{}/metrics", o.metrics);
	}
	Daemon d{paths, metrics.get(), Fd(::epoll_create1(EPOLL_CLOEXEC)), std::nullopt, {}, {}, {}, {}, {}};
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
	spdlog::info("airlock daemon: watching {} (pins {}), control socket {}", paths.state_dir, paths.bpf_dir,
		     sock_path);

	uint64_t last_scan = 0;
	for (;;) {
		uint64_t now = monotonic_ns();
		if (now - last_scan >= 1000000000ull) {
			d.rescan();
			last_scan = now;
		}
		struct epoll_event evs[16];
		int n = ::epoll_wait(d.ep.get(), evs, 16, 200);
		if (n < 0 && errno != EINTR)
			fail_errno("epoll_wait");
		for (auto& [name, sup] : d.sups)
			sup->poll();
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
			if (evs[i].data.u64 == 3) {
				d.serve(listener.get());
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
					for (auto& [name, sup] : d.sups)
						sup->reload_from_file("SIGHUP to the daemon");
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
