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
#include <unistd.h>

#include <map>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "kernel/kernel.h"
#include "metrics/metrics.h"
#include "sandbox/supervisor.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/files.h"

namespace airlock {

namespace {

struct Daemon {
	const Paths& paths;
	Metrics* metrics;
	Fd ep;
	std::optional<kernel::Kernel> k;
	std::map<std::string, std::unique_ptr<Supervisor>> sups;

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
	Daemon d{paths, metrics.get(), Fd(::epoll_create1(EPOLL_CLOEXEC)), std::nullopt, {}};
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
	spdlog::info("airlock daemon: watching {} (pins {})", paths.state_dir, paths.bpf_dir);

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
				return kExitOk;
			}
		}
	}
}

}  // namespace airlock
