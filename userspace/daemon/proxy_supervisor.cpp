#include "daemon/proxy_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sandbox/cgroup.h"
#include "util/clock.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace airlock {

namespace {

// The network namespace a sandbox's proxy listens in: its processes'
// (their connects are rewritten to a loopback address of their own
// namespace). A sandbox made through the daemon has its commands
// started in the daemon's (`airlock exec` checks): an invalid Fd. An
// attached cgroup (or a runner's sandbox left behind): the namespace of
// its first process; nullopt while it has none (the proxy starts when
// one appears).
std::optional<Fd> proxy_netns(const SandboxRecord& r, int pid_hint)
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

}  // namespace

ProxySupervisor::ProxySupervisor(EventLoop& loop, const Paths& paths, Hooks hooks)
    : loop_(loop), paths_(paths), hooks_(std::move(hooks))
{
}

ProxySupervisor::~ProxySupervisor()
{
	for (auto& [name, w] : proxies_)
		unwatch(w);
	proxies_.clear();
}

void ProxySupervisor::unwatch(Watch& w)
{
	for (int* fd : {&w.pidfd, &w.control})
		if (*fd >= 0) {
			loop_.remove(*fd);
			*fd = -1;
		}
}

// The loop watches the proxy's current descriptors: its exit (then it
// is started again, or stays down), its channel (the SNI gate's
// requests, its counts).
// A proxy started again has new descriptors, which may have the old
// ones' numbers: its generation tells.
void ProxySupervisor::watch(const std::string& name, Watch& w)
{
	const auto& px = *w.proxy;
	if (w.generation == px.generation() && w.pidfd == px.pidfd() && w.control == px.control_fd())
		return;
	unwatch(w);
	w.generation = px.generation();
	w.pidfd = px.pidfd();
	w.control = px.control_fd();
	if (w.pidfd >= 0)
		loop_.add(w.pidfd, EPOLLIN,
			  [this, name](uint32_t) { with_proxy(name, [](ops::SandboxProxy& p) { p.reap(); }); });
	if (w.control >= 0)
		loop_.add(w.control, EPOLLIN, [this, name](uint32_t) {
			with_proxy(name, [](ops::SandboxProxy& p) { p.serve(); });
			hooks_.served(name);
		});
}

// What the loop does with a proxy (reap it and start it again, serve its
// channel), its descriptors watched again after. What fails there (no
// port, no fork, no records file) stops that proxy, its kernel entry
// cleared (redirects fail closed), to be tried again later.
void ProxySupervisor::with_proxy(const std::string& name, const std::function<void(ops::SandboxProxy&)>& f)
{
	auto it = proxies_.find(name);
	if (it == proxies_.end())
		return;
	try {
		f(*it->second.proxy);
		watch(name, it->second);
		return;
	} catch (const std::exception& e) {
		spdlog::error("{}: its proxy: {}; stopped, tried again in {} s; redirected connects fail (reason "
			      "no-proxy)",
			      name, e.what(), kRetryNs / 1000000000ull);
	}
	stop(name);
	retry_ns_[name] = monotonic_ns() + kRetryNs;
}

void ProxySupervisor::stop(const std::string& name, bool record_kept)
{
	errors_.erase(name);
	retry_ns_.erase(name);
	auto it = proxies_.find(name);
	if (it == proxies_.end())
		return;
	unwatch(it->second);
	if (!record_kept)
		it->second.proxy->keep_kernel_entries();
	proxies_.erase(it);
}

void ProxySupervisor::sync(kernel::Kernel& k, const Supervisor& sup, int pid_hint)
{
	const std::string& name = sup.record().name;
	auto it = proxies_.find(name);
	if (!ops::needs_proxy(sup.policy())) {
		if (it != proxies_.end())
			spdlog::info("{}: its policy needs no proxy now; stopped", name);
		stop(name);
		return;
	}
	if (it != proxies_.end()) {
		// Unwatched first: a restart hands the old one's pidfd over to
		// be waited for, and its descriptors are new.
		unwatch(it->second);
		with_proxy(name, [&](ops::SandboxProxy& p) { p.set_policy(sup.policy(), sup.record().bank); });
		return;
	}
	start(k, sup, pid_hint);
}

void ProxySupervisor::start(kernel::Kernel& k, const Supervisor& sup, int pid_hint)
{
	const std::string& name = sup.record().name;
	retry_ns_.erase(name);
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
			auto px = std::make_unique<ops::SandboxProxy>(k, paths_, sup.record(), sup.policy(),
								      std::move(po));
			px->on_violation = [this, name](const nlohmann::json& j) { hooks_.denied(name, j); };
			auto& w = proxies_[name];
			w.proxy = std::move(px);
			watch(name, w);
			errors_.erase(name);
			return;
		}
	} catch (const std::exception& e) {
		error = fmt::format("its proxy cannot start: {}; redirected connects fail (reason no-proxy)", e.what());
		retry_ns_[name] = monotonic_ns() + kRetryNs;
	}
	std::string& last = errors_[name];
	if (last != error)
		spdlog::warn("{}: {}", name, error);
	last = error;
}

void ProxySupervisor::tend()
{
	std::vector<std::string> names;
	for (const auto& [name, w] : proxies_)
		names.push_back(name);
	for (const auto& name : names)
		with_proxy(name, [](ops::SandboxProxy& p) { p.tend(); });
}

void ProxySupervisor::retry(kernel::Kernel& k, const Supervisor& sup)
{
	const std::string& name = sup.record().name;
	if (proxies_.count(name) || !ops::needs_proxy(sup.policy()))
		return;
	auto due = retry_ns_.find(name);
	if (due == retry_ns_.end() || monotonic_ns() >= due->second)
		sync(k, sup);
}

void ProxySupervisor::wait_for_stop(pid_t pid, Fd pidfd)
{
	int fd = pidfd.get();
	if (fd < 0)
		return;
	// A proxy halted from within a handler of its own is still watched
	// under this descriptor: the watch goes, the wait takes it over.
	for (auto& [n, w] : proxies_)
		if (w.pidfd == fd) {
			loop_.remove(fd);
			w.pidfd = -1;
		}
	stopping_[fd] = Stopping{pid, std::move(pidfd), monotonic_ns() + kStopNs};
	try {
		loop_.add(fd, EPOLLIN, [this, fd](uint32_t) { reap_stopped(fd); });
	} catch (const std::exception& e) {
		// Waited for by kill_lingering's rounds instead.
		spdlog::warn("proxy {}: {}", pid, e.what());
	}
}

// A stopped proxy that exited is waited for (its zombie goes).
bool ProxySupervisor::reap_stopped(int fd)
{
	auto it = stopping_.find(fd);
	if (it == stopping_.end())
		return true;
	siginfo_t si{};
	if (::waitid(static_cast<idtype_t>(P_PIDFD), fd, &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0)
		return false;  // still running
	loop_.remove(fd);
	stopping_.erase(it);
	return true;
}

void ProxySupervisor::kill_lingering()
{
	uint64_t now = monotonic_ns();
	std::vector<int> fds;
	for (const auto& [fd, s] : stopping_)
		fds.push_back(fd);
	for (int fd : fds) {
		if (reap_stopped(fd))
			continue;
		Stopping& s = stopping_.at(fd);
		if (now >= s.deadline_ns) {
			spdlog::warn("proxy {}: still there 2 s after SIGTERM; killed", s.pid);
			::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
			s.deadline_ns = UINT64_MAX;
		}
	}
}

std::optional<std::string> ProxySupervisor::trouble(const std::string& name) const
{
	if (auto it = errors_.find(name); it != errors_.end())
		return it->second;
	return std::nullopt;
}

std::optional<nlohmann::json> ProxySupervisor::status(const std::string& name) const
{
	auto it = proxies_.find(name);
	if (it == proxies_.end())
		return std::nullopt;
	const auto& px = *it->second.proxy;
	return nlohmann::json{{"pid", px.pid() > 0 ? nlohmann::json(px.pid()) : nullptr},
			      {"port", px.port()},
			      {"netns", px.netns_inode()},
			      {"ca_file", px.ca_file()}};
}

}  // namespace airlock
