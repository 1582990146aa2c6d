#include "ops/proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include "confine/process.h"
#include "kernel/views.h"
#include "net/address.h"
#include "ops/proxy_sockets.h"
#include "proxyd/args.h"
#include "util/error.h"
#include "util/text.h"
#include "util/files.h"
#include "util/netns.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace airlock::ops {

namespace {

constexpr int kRecordsFd = 3;  // the first the proxy is handed; the rest follow

Fd high_dup(int fd)
{
	int n = ::fcntl(fd, F_DUPFD_CLOEXEC, 100);
	if (n < 0)
		fail_errno("dup a descriptor for the proxy");
	return Fd(n);
}

}  // namespace

bool needs_proxy(const Policy& p)
{
	for (const auto& r : p.rules)
		if (r.through_proxy())
			return true;
	return false;
}

std::string records_file(const Policy& p, const std::string& sandbox)
{
	std::string dir = p.world ? p.world->records_dir : WorldPolicy{}.records_dir;
	return dir + "/" + sandbox + ".jsonl";
}

std::string ca_bundle_file(const Paths& paths, const std::string& sandbox)
{
	return paths.state_dir + "/world/" + sandbox + ".ca.pem";
}

SandboxProxy::SandboxProxy(kernel::Kernel& k, const Paths& paths, const SandboxRecord& rec, const Policy& policy,
			   ProxyOptions o)
    : k_(k), paths_(paths), rec_(rec), policy_(policy), o_(std::move(o)), records_(records_file(policy, rec.name)),
      netns_inode_(netns_inode_of(o_.netns))
{
	bool inspected = std::any_of(policy_.rules.begin(), policy_.rules.end(),
				     [](const Rule& r) { return r.http.has_value(); });
	if (policy_.world || inspected) {
		// The sandbox's CA: one for the sandbox's life (a restarted proxy
		// gets the same), its key in this process's memory and the
		// proxy's, never in a file. The bundle offered to its commands is
		// that CA alone in a world (nothing real is reached), and the
		// system's roots with it where the HTTP gate ends TLS for real
		// origins (every other destination keeps verifying as before).
		ca_ = proxy::make_world_ca(rec_.name);
		ca_file_ = ca_bundle_file(paths_, rec_.name);
		// A command that runs as another user reaches the bundle: the state
		// directory is made traversable (0711: its names are not listed).
		struct stat st {};
		if (::stat(paths_.state_dir.c_str(), &st) == 0)
			::chmod(paths_.state_dir.c_str(), (st.st_mode & 07777) | 0011);
		make_dirs(paths_.state_dir + "/world", 0755);
		std::string bundle = ca_.cert_pem;
		if (!policy_.world) {
			auto roots = read_file(X509_get_default_cert_file());
			if (!roots)
				spdlog::warn(
					"{}: the system's roots ({}) could not be read: the sandbox's bundle holds "
					"its CA alone",
					rec_.name, X509_get_default_cert_file());
			bundle = roots.value_or("") + "\n" + bundle;
		}
		write_file_atomic(ca_file_, bundle, 0644);
	}
	k_.create_origin_table(rec_.slot);
	try {
		// An entry left by a proxy of an agent that died with it (its port
		// claimed, nobody listening) goes before anything else.
		k_.set_proxy(rec_.slot, al_proxy{});
		// Every count exists, at 0, from the start (start() writes them).
		make_dirs(paths_.state_dir + "/world", 0755);
		start();
	} catch (...) {
		forget_ca();
		::unlink(paths_.proxy_stats(rec_.name).c_str());
		try {
			k_.set_proxy(rec_.slot, al_proxy{});
			k_.delete_origin_table(rec_.slot);
		} catch (const std::exception& e) {
			spdlog::error("{}: {}", rec_.name, e.what());
		}
		throw;
	}
}

proxy::ProxyCounts SandboxProxy::counts() const
{
	proxy::ProxyCounts c;
	c.starts = starts_total_;
	for (const auto& f : proxy::kStatsFields)
		c.stats.*f.member = base_.*f.member + current_.*f.member;
	return c;
}

void SandboxProxy::write_stats()
{
	stats_written_ = std::chrono::steady_clock::now();
	try {
		write_file_atomic(paths_.proxy_stats(rec_.name), proxy::proxy_counts_json(counts()) + "\n", 0644);
	} catch (const std::exception& e) {
		spdlog::warn("{}: {}", rec_.name, e.what());
	}
}

// The proxy's counts since it started, as it claims them. Written down at
// most 4 times a second, however often a proxy sends them (it sends at
// most once a second); the latest waits for the next message, or the
// proxy's exit.
void SandboxProxy::take_stats(const proxy::StatsReport& r)
{
	current_ = r.stats;
	if (std::chrono::steady_clock::now() - stats_written_ >= std::chrono::milliseconds(250))
		write_stats();
}

void SandboxProxy::forget_ca()
{
	OPENSSL_cleanse(ca_.key_pem.data(), ca_.key_pem.size());
	if (!ca_file_.empty())
		::unlink(ca_file_.c_str());
}

SandboxProxy::~SandboxProxy()
{
	try {
		if (kernel_entries_)
			k_.set_proxy(rec_.slot, al_proxy{});
	} catch (const std::exception& e) {
		spdlog::error("{}: {}", rec_.name, e.what());
	}
	stop();
	forget_ca();
	::unlink(paths_.proxy_stats(rec_.name).c_str());
	try {
		if (kernel_entries_)
			k_.delete_origin_table(rec_.slot);
	} catch (const std::exception& e) {
		spdlog::error("{}: {}", rec_.name, e.what());
	}
}

// The proxy's sockets, on one port: TCP on 127.0.0.1 (always) and ::1,
// UDP on both.
struct SandboxProxy::Listeners {
	Fd l4, l6, u4, u6;
	// Each attempt binds another port: those given up stay bound, here,
	// until one is claimed.
	std::vector<Fd> held;
};

// What the proxy finds open at exec: each descriptor (a copy of this
// process's, numbered high) with the number it gets in the proxy, in
// ascending order, and its arguments naming them.
struct SandboxProxy::Handover {
	proxyd::ProxyArgs args;
	std::vector<std::pair<Fd, int>> fds;
};

// Listeners first: the same port again if it is free, so that the
// records of one sandbox name one proxy port. The port is claimed in
// the kernel before the proxy runs, and never one another sandbox's
// proxy holds in another network namespace: another port is bound then.
void SandboxProxy::bind_port(Listeners& ls)
{
	for (int attempt = 0;; attempt++) {
		if (ls.l4.valid())
			ls.held.emplace_back(ls.l4.release());  // l4 is empty after
		for (Fd* f : {&ls.l6, &ls.u4, &ls.u6})
			f->reset();
		if (attempt == 0 && port_ != 0)
			ls.l4 = listener(o_.netns, AF_INET, port_);
		if (!ls.l4.valid())
			ls.l4 = fresh_listener(o_.netns, ls.held);
		if (!ls.l4.valid())
			fail_errno("listen on 127.0.0.1 for the proxy of sandbox " + rec_.name);
		port_ = port_of(ls.l4.get());
		ls.l6 = listener(o_.netns, AF_INET6, port_);
		int e6 = errno;
		// Datagrams on the same port: without, they are refused (redirect-udp).
		ls.u4 = datagram_socket(o_.netns, AF_INET, port_);
		int eu4 = errno;
		ls.u6 = ls.l6.valid() ? datagram_socket(o_.netns, AF_INET6, port_) : Fd();
		int eu6 = errno;
		al_proxy px{};
		px.addr4 = htonl(INADDR_LOOPBACK);
		px.port = port_;
		if (ls.l6.valid()) {
			px.flags |= AL_PROXY_IPV6;
			std::memcpy(px.addr6, &in6addr_loopback, sizeof(px.addr6));
		}
		if (ls.u4.valid())
			px.flags |= AL_PROXY_UDP4;
		if (ls.u6.valid())
			px.flags |= AL_PROXY_UDP6;
		if (k_.set_proxy(rec_.slot, px)) {
			if (!ls.l6.valid())
				spdlog::warn("{}: no proxy listener on [::1]:{} ({}): IPv6 destinations are not "
					     "redirected, their connects fail (no-proxy)",
					     rec_.name, port_, std::strerror(e6));
			if (!ls.u4.valid())
				spdlog::warn("{}: no proxy UDP socket on 127.0.0.1:{} ({}): redirected IPv4 datagrams "
					     "are refused (redirect-udp)",
					     rec_.name, port_, std::strerror(eu4));
			if (ls.l6.valid() && !ls.u6.valid())
				spdlog::warn("{}: no proxy UDP socket on [::1]:{} ({}): redirected IPv6 datagrams "
					     "are refused (redirect-udp)",
					     rec_.name, port_, std::strerror(eu6));
			return;
		}
		if (attempt == 7)
			fail("the proxy of sandbox {}: 8 ports bound, each another sandbox's proxy port", rec_.name);
		spdlog::info("{}: port {} is another sandbox's proxy port; binding another", rec_.name, port_);
	}
}

// Everything the child needs, made before it exists: between fork and
// exec it only moves descriptors. Records, the origin table, the sockets
// (listeners, then UDP), the CA, the channel to this process, then the
// SNI gate's learned names, numbered in that order from kRecordsFd.
SandboxProxy::Handover SandboxProxy::make_handover(const Listeners& ls)
{
	Handover h;
	proxyd::ProxyArgs& a = h.args;
	a.sandbox = rec_.name;
	a.slot = rec_.slot;
	a.policy_file = paths_.policy_copy(rec_.name, rec_.bank);
	a.user = o_.user;
	int next = kRecordsFd;
	auto give = [&](int fd) {
		h.fds.emplace_back(high_dup(fd), next);
		return next++;
	};

	std::string dir = records_.substr(0, records_.rfind('/'));
	make_dirs(dir, 0750);
	Fd records(::open(records_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640));
	if (!records.valid())
		fail_errno("open the world's records " + records_);
	a.records_fd = give(records.get());
	a.origin_fd = give(k_.origin_table_readonly(rec_.slot).get());
	a.listen_fds.push_back(give(ls.l4.get()));
	if (ls.l6.valid())
		a.listen_fds.push_back(give(ls.l6.get()));
	for (const Fd* u : {&ls.u4, &ls.u6})
		if (u->valid())
			a.udp_fds.push_back(give(u->get()));
	// The CA, certificate and key, in a sealed memfd.
	if (!ca_.key_pem.empty()) {
		std::string blob = ca_.cert_pem + ca_.key_pem;
		Fd m = sealed_memfd("airlock-world-ca", blob);
		int e = errno;
		OPENSSL_cleanse(blob.data(), blob.size());
		if (!m.valid())
			fail_errno("hand the world's CA to the proxy of sandbox " + rec_.name, e);
		a.ca_fd = give(m.get());
	}
	int sv[2];
	if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		fail_errno("the channel to the proxy of sandbox " + rec_.name);
	ctl_ = Fd(sv[0]);
	Fd peer(sv[1]);
	int nb = 1;
	::ioctl(ctl_.get(), FIONBIO, &nb);
	a.control_fd = give(peer.get());
	if (gated()) {
		a.learned_fd = give(k_.learned_table_readonly(rec_.slot).get());
		if (!origin_ro_.valid())
			origin_ro_ = k_.origin_table_readonly(rec_.slot);
	}
	return h;
}

// Forks and execs the proxy on the handover; its pid and pidfd.
std::pair<pid_t, Fd> SandboxProxy::spawn(const Handover& h)
{
	std::vector<std::string> args = {"airlock", "proxy"};
	for (auto& s : h.args.to_argv())
		args.push_back(std::move(s));
	std::vector<char*> argv;
	argv.reserve(args.size() + 1);
	for (auto& a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	int last_fd = h.fds.back().second;
	pid_t parent = ::getpid();

	pid_t pid = ::fork();
	if (pid < 0)
		fail_errno("fork the proxy of sandbox " + rec_.name);
	if (pid == 0) {
		if (confine::die_with_parent(parent, SIGTERM) != 0)
			::_exit(127);
		// A session of its own: no controlling terminal to type into.
		if (::setsid() < 0)
			::_exit(127);
		sigset_t none;
		sigemptyset(&none);
		::sigprocmask(SIG_SETMASK, &none, nullptr);
		for (const auto& [fd, number] : h.fds)
			if (::dup2(fd.get(), number) < 0)
				::_exit(127);
		::syscall(SYS_close_range, last_fd + 1, ~0u, 0);
		::execv(o_.program.c_str(), argv.data());
		::_exit(127);
	}
	Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
	if (!pidfd.valid()) {
		int e = errno;
		::kill(pid, SIGKILL);  // not watched, it would not be waited for
		::waitpid(pid, nullptr, 0);
		errno = e;
		fail_errno("pidfd_open of the proxy");
	}
	return {pid, std::move(pidfd)};
}

void SandboxProxy::start()
{
	starts_.push_back(std::chrono::steady_clock::now());
	starts_total_++;
	Listeners ls;
	bind_port(ls);
	// Until the proxy runs, a failure clears the claim: its listeners close
	// with this call, and their port must not stay where redirects go.
	struct Unclaim {
		kernel::Kernel& k;
		uint32_t slot;
		bool armed = true;
		~Unclaim()
		{
			if (!armed)
				return;
			try {
				k.set_proxy(slot, al_proxy{});
			} catch (const std::exception& e) {
				spdlog::error("slot {}: {}", slot, e.what());
			}
		}
	} unclaim{k_, rec_.slot};

	Handover h = make_handover(ls);
	auto [pid, pidfd] = spawn(h);
	pid_ = pid;
	pidfd_ = std::move(pidfd);
	down_until_.reset();
	// The listeners are the proxy's alone now: when it dies, they close.
	unclaim.armed = false;
	write_stats();  // its start counted
	spdlog::info("{}: proxy {} on 127.0.0.1:{}{}{}{}, records in {}", rec_.name, pid_, port_,
		     ls.l6.valid() ? fmt::format(" and [::1]:{}", port_) : "",
		     ls.u4.valid() ? " (TCP and UDP)" : " (TCP)",
		     o_.netns.valid() ? fmt::format(" in net:[{}]", netns_inode_) : "", records_);
}

bool SandboxProxy::gated() const
{
	return std::any_of(policy_.rules.begin(), policy_.rules.end(), [](const Rule& r) { return r.gated(); });
}

void SandboxProxy::serve()
{
	guarded("serving its channel", [this] { serve_channel(); });
}

void SandboxProxy::serve_channel()
{
	// At most this many a call: a proxy that floods the channel holds up
	// nothing else the agent does.
	for (int i = 0; i < 64 && ctl_.valid(); i++) {
		union {
			uint32_t type;
			proxy::GateRequest gate;
			proxy::StatsReport stats;
		} m{};
		// recv, not recvmsg: a descriptor the proxy sent along is dropped.
		// A message of another size than its type's is ignored whole.
		ssize_t n = ::recv(ctl_.get(), &m, sizeof(m), MSG_DONTWAIT | MSG_TRUNC);
		if (n == 0) {
			ctl_.reset();  // the proxy is gone: its pidfd says so, reap() starts another
			return;
		}
		if (n < 0)
			return;
		// MSG_TRUNC: n is the message's own length, however long.
		auto size = static_cast<size_t>(n);
		if (m.type == proxy::kGateConnect && size == sizeof(m.gate) && !draining_)
			answer(m.gate);
		else if (m.type == proxy::kGateViolation && size == sizeof(m.gate))
			report(m.gate);
		else if (m.type == proxy::kProxyStats && size == sizeof(m.stats))
			take_stats(m.stats);
	}
}

// A socket to a gated origin, its connect under way, for the proxy: only
// for a flow the kernel filed for this sandbox under a rule the policy
// now enforced gates. The socket is this process's: outside every sandbox,
// never redirected.
void SandboxProxy::answer(const proxy::GateRequest& q)
{
	proxy::GateReply r;
	r.id = q.id;
	std::optional<al_origin> found;
	if (origin_ro_.valid())
		found = kernel::OriginView(origin_ro_.get()).find(q.key);
	al_origin v = found.value_or(al_origin{});
	Fd s;
	if (!found || v.slot != rec_.slot || v.protocol != IPPROTO_TCP) {
		r.error = ENOENT;
	} else if (v.rule >= policy_.rules.size() || !policy_.rules[v.rule].gated()) {
		r.error = EPERM;
	} else if (Address a = from_raw(v.family, v.addr); o_.netns.valid() && is_local_scope(a)) {
		// Never for a sandbox in another network namespace: the gate's
		// sockets are this process's, in its namespace, and a sandbox whose
		// resolver (its own namespace's) bound an allowed name to 127.0.0.1
		// would otherwise reach this host's loopback services through it.
		// (In this process's namespace, that address is the sandbox's own.)
		r.error = EPERM;
		// At most once a power of two: a sandbox that keeps asking costs no log.
		unreachable_++;
		if ((unreachable_ & (unreachable_ - 1)) == 0)
			spdlog::warn("{}: the SNI gate does not connect to {} (this host's, a link's, or a group's "
				     "address): {} time(s)",
				     rec_.name, format_address(a), unreachable_);
	} else {
		sockaddr_storage ss{};
		socklen_t len = to_sockaddr(a, v.port, ss);
		// In this process's network namespace, not the sandbox's: a
		// namespace the sandbox may rule (a container's root with
		// CAP_NET_ADMIN there) could route it elsewhere.
		s = Fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
		bool started = s.valid() &&
			       (::connect(s.get(), reinterpret_cast<sockaddr*>(&ss), len) == 0 || errno == EINPROGRESS);
		if (!started)
			r.error = errno;
	}
	if (send_with_fd(ctl_.get(), &r, sizeof(r), r.error == 0 ? s.get() : -1) < 0)
		spdlog::debug("{}: SNI gate reply: {}", rec_.name, std::strerror(errno));
}

// A connection the gate denied, as the proxy tells it (its words are
// printable, bounded, and never trusted for more than the record).
void SandboxProxy::report(const proxy::GateRequest& q)
{
	// Only the gate denies, and only for a rule it gates.
	if (q.key.netns_cookie >= policy_.rules.size() || !policy_.rules[q.key.netns_cookie].gated())
		return;
	bool http = policy_.rules[q.key.netns_cookie].http.has_value();
	auto text = [](const char* p, size_t n) { return printable(std::string(p, strnlen(p, n))); };
	Address a = from_raw(q.key.family == AL_FAMILY_IPV6 ? AL_FAMILY_IPV6 : AL_FAMILY_IPV4, q.key.addr);
	nlohmann::json j;
	j["event"] = http ? "http-gate" : "sni-gate";
	j["verdict"] = "deny";
	j["violation"] = true;
	j["dst"] = format_address(a);
	j["port"] = q.key.port;
	j["protocol"] = "tcp";
	j["rule"] = q.key.netns_cookie;
	j[http ? "host" : "sni"] = text(q.sni, sizeof(q.sni));
	j["reason"] = text(q.reason, sizeof(q.reason));
	if (on_violation)
		on_violation(j);
}

void SandboxProxy::stop()
{
	if (pid_ <= 0)
		return;
	::kill(pid_, SIGTERM);  // a child not yet waited for: its pid is its own
	if (o_.on_stopping) {
		o_.on_stopping(pid_, std::move(pidfd_));
		pid_ = -1;
		pidfd_.reset();
		return;
	}
	struct pollfd p = {pidfd_.get(), POLLIN, 0};
	if (::poll(&p, 1, 2000) != 1)
		::kill(pid_, SIGKILL);
	siginfo_t si{};
	::waitid(static_cast<idtype_t>(P_PIDFD), pidfd_.get(), &si, WEXITED);
	pid_ = -1;
	pidfd_.reset();
}

// What the proxy said last (its final counts), then the channel closes; a
// proxy started again counts from 0, added to what this one counted.
void SandboxProxy::retire()
{
	// Its last messages, until none is left (bounded: the socket's
	// buffer); no socket is made for a proxy that is gone.
	draining_ = true;
	for (int i = 0; i < 64 && ctl_.valid(); i++)
		serve_channel();
	draining_ = false;
	ctl_.reset();
	for (const auto& f : proxy::kStatsFields)
		base_.*f.member += current_.*f.member;
	current_ = {};
	write_stats();
}

namespace {

// What the proxy reads of a policy: its gated rules (index, name, what the
// HTTP gate allows), the secrets, the world.
bool same_for_the_proxy(const Policy& a, const Policy& b)
{
	auto gated = [](const Policy& p) {
		std::vector<std::tuple<unsigned, std::string, bool, bool, std::optional<HttpGate>>> out;
		for (const auto& r : p.rules)
			if (r.gated())
				out.emplace_back(r.index, r.domain.value_or(""), r.wildcard, r.tls_sni_require, r.http);
		return out;
	};
	return gated(a) == gated(b) && a.secrets == b.secrets && a.world == b.world;
}

}  // namespace

void SandboxProxy::set_policy(const Policy& p, unsigned bank)
{
	auto adopt = [&] {
		policy_ = p;
		rec_.bank = bank;
		records_ = records_file(policy_, rec_.name);
	};
	// A proxy that is down starts on the new policy when its time comes.
	if (same_for_the_proxy(policy_, p) || !running()) {
		adopt();
		return;
	}
	if (proxy_takes_reload(policy_, p) && hand_over(p, bank)) {
		spdlog::info("{}: the policy's inspected rules or secrets changed: the proxy takes them", rec_.name);
		adopt();
		return;
	}
	spdlog::info("{}: the policy's gated rules or world changed: the proxy starts again", rec_.name);
	guarded("stopping it for a reload", [this] {
		k_.set_proxy(rec_.slot, al_proxy{});
		// What the old proxy said last is read under the policy it judged by.
		stop();
		retire();
	});
	adopt();
	if (running() || down_until_)
		return;  // halted already
	guarded("starting it again for a reload", [this] {
		start();
		// A start for a reload is not a death: it counts in the starts,
		// not against the restarts allowed.
		starts_.pop_back();
	});
}

// Whatever fails in f halts the proxy, to be started again later.
template <typename F>
void SandboxProxy::guarded(const char* doing, F f)
{
	try {
		f();
	} catch (const std::exception& e) {
		halt(fmt::format("{}: {}", doing, e.what()), o_.retry_after);
	}
}

void SandboxProxy::halt(const std::string& why, std::chrono::seconds down_for)
{
	try {
		k_.set_proxy(rec_.slot, al_proxy{});
	} catch (const std::exception& e) {
		spdlog::error("{}: {}", rec_.name, e.what());
	}
	stop();
	try {
		retire();  // its last counts and reports
	} catch (const std::exception& e) {
		spdlog::error("{}: {}", rec_.name, e.what());
	}
	down_until_ = std::chrono::steady_clock::now() + down_for;
	spdlog::error("{}: the proxy is down ({}); started again in {} s; until then redirected connects fail "
		      "(reason no-proxy)",
		      rec_.name, why, down_for.count());
}

void SandboxProxy::tend()
{
	if (running() || !down_until_ || std::chrono::steady_clock::now() < *down_until_)
		return;
	down_until_.reset();
	spdlog::info("{}: the proxy's time down is over: it starts again", rec_.name);
	guarded("starting it again", [this] { start(); });
}

void SandboxProxy::reap()
{
	if (!running())
		return;
	guarded("reaping it", [this] {
		k_.set_proxy(rec_.slot, al_proxy{});
		retire();
	});
	siginfo_t si{};
	if (pidfd_.valid() &&
	    (::waitid(static_cast<idtype_t>(P_PIDFD), pidfd_.get(), &si, WEXITED | WNOHANG) != 0 || si.si_pid == 0))
		return;  // not yet: the caller polls again
	if (pid_ > 0)
		spdlog::warn("{}: the proxy {} {} {}", rec_.name, pid_,
			     si.si_code == CLD_EXITED ? "exited with" : "died of signal", si.si_status);
	pid_ = -1;
	pidfd_.reset();
	if (down_until_)
		return;  // halted: tend() starts it
	auto now = std::chrono::steady_clock::now();
	std::erase_if(starts_, [&](auto t) { return now - t > o_.window; });
	if (starts_.size() >= o_.max_restarts) {
		down_until_ = now + o_.window;
		spdlog::error(
			"{}: the proxy died {} times within {} s; it stays down for {} s, and redirected connects "
			"fail meanwhile (reason no-proxy)",
			rec_.name, starts_.size(), o_.window.count(), o_.window.count());
		return;
	}
	guarded("starting it again", [this] { start(); });
}

}  // namespace airlock::ops
