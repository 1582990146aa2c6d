// `airlock proxy`: the process that reads what redirected connections send.
// The agent starts it as root with its descriptors in place (records,
// the origin map read-only, the listeners); before it reads a byte of a
// sandbox's it becomes an unprivileged user with no capabilities, under a
// seccomp filter that leaves it no way to open a file, make a socket or
// connect anywhere.
#include "cli/proxy_cmd.h"

#include <bpf/bpf.h>
#include <grp.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <pwd.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <openssl/crypto.h>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstring>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "net/address.h"
#include "policy/policy.h"
#include "policy/dnsname.h"
#include "proxy/agent_channel.h"
#include "proxy/tls.h"
#include "proxy/world.h"
#include "util/error.h"
#include "util/exit_code.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

namespace airlock {

namespace {

void check_fd(int fd, const char* what, bool socket)
{
	struct stat st{};
	if (fd < 0 || ::fstat(fd, &st) != 0)
		fail("{}: descriptor {} is not open", what, fd);
	if (socket != S_ISSOCK(st.st_mode))
		fail("{}: descriptor {} is {}a socket", what, fd, socket ? "not " : "");
}

// uid 0 to the proxy's user: groups, gid, uid, and no way back (no new
// privileges, an empty bounding set, no capabilities left).
void drop_privileges(const std::string& user)
{
	uid_t uid = 65534;
	gid_t gid = 65534;
	if (struct passwd* pw = ::getpwnam(user.c_str())) {
		uid = pw->pw_uid;
		gid = pw->pw_gid;
	} else if (struct passwd* nobody = ::getpwnam("nobody")) {
		uid = nobody->pw_uid;
		gid = nobody->pw_gid;
	}
	if (uid == 0)
		fail("proxy user '{}' is uid 0", user);
	if (::geteuid() == 0) {
		for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
			::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
		if (::setgroups(0, nullptr) != 0)
			fail_errno("setgroups");
	}
	if (::setresgid(gid, gid, gid) != 0)
		fail_errno("setresgid");
	if (::setresuid(uid, uid, uid) != 0)
		fail_errno("setresuid");
	if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		fail_errno("no_new_privs");
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {};
	if (::syscall(SYS_capset, &h, d) != 0)
		fail_errno("capset");
	if (::setuid(0) == 0)
		fail("the proxy could become uid 0 again");
}

// What the recorder needs and nothing more: its sockets, its clock, its
// memory, lookups in the origin map. No open, socket, connect, bind,
// execve: the rest fails with EPERM. sendto names an address only on the
// UDP sockets (an answer to a DNS query), which are bound to lo.
void install_seccomp(const std::vector<int>& udp_fds)
{
	scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		fail("seccomp_init failed");
	const char* allowed[] = {
		"read", "write", "readv", "writev", "recvfrom", "recvmsg", "sendmsg", "accept", "accept4",
		"close", "shutdown", "getpeername", "getsockname", "getsockopt", "setsockopt", "fcntl",
		"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd2", "timerfd_create",
		"timerfd_settime", "timerfd_gettime", "clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday",
		"futex", "mmap", "munmap", "mremap", "brk", "madvise", "mprotect", "rt_sigreturn", "rt_sigprocmask",
		"exit", "exit_group", "fstat", "newfstatat", "lseek", "getrandom", "sched_yield", "restart_syscall",
		"getpid", "gettid", "rseq", "fsync", "fdatasync", "ftruncate", "poll", "ppoll", "pipe2", "splice"};
	int rc = 0;
	for (const char* name : allowed) {
		int nr = ::seccomp_syscall_resolve_name(name);
		if (nr != __NR_SCMP_ERROR)
			rc |= ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	}
	rc |= ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(bpf), 1, SCMP_A0(SCMP_CMP_EQ, BPF_MAP_LOOKUP_ELEM));
	// Sends name no address (but on the UDP sockets); ioctl only sets and reads what a socket
	// needs (not TIOCSTI on a terminal); signals only to itself.
	rc |= ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto), 1, SCMP_A4(SCMP_CMP_EQ, 0));
	for (int fd : udp_fds)
		rc |= ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto), 1,
					 SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(fd)));
	rc |= ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, FIONBIO));
	rc |= ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, FIONREAD));
	rc |= ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, SIOCATMARK));
	rc |= ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
				 SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(::getpid())));
	if (rc == 0)
		rc = ::seccomp_load(ctx);
	::seccomp_release(ctx);
	if (rc != 0)
		fail("seccomp filter: {}", std::strerror(-rc));
}

// The key the kernel filed a redirected client's flow under: its address
// and port as the proxy sees them, and the network namespace.
std::optional<al_origin_key> origin_key_of(int fd, const sockaddr* from, uint8_t protocol)
{
	al_origin_key key{};
	key.protocol = protocol;
	socklen_t clen = sizeof(key.netns_cookie);
	if (::getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &key.netns_cookie, &clen) != 0)
		return std::nullopt;
	if (from->sa_family == AF_INET) {
		const auto* a = reinterpret_cast<const sockaddr_in*>(from);
		key.family = AL_FAMILY_IPV4;
		key.port = ntohs(a->sin_port);
		std::memcpy(key.addr, &a->sin_addr, 4);
	} else if (from->sa_family == AF_INET6) {
		const auto* a = reinterpret_cast<const sockaddr_in6*>(from);
		Address addr = normalise(from_raw(AL_FAMILY_IPV6, a->sin6_addr.s6_addr));
		key.family = addr.family;
		key.port = ntohs(a->sin6_port);
		std::memcpy(key.addr, addr.bytes.data(), sizeof(key.addr));
	} else {
		return std::nullopt;
	}
	return key;
}

std::optional<al_origin_key> connection_key_of(int fd)
{
	sockaddr_storage peer{};
	socklen_t len = sizeof(peer);
	if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0)
		return std::nullopt;
	return origin_key_of(fd, reinterpret_cast<const sockaddr*>(&peer), IPPROTO_TCP);
}

// The proxy's side of the SNI gate: the policy's gated rules, the
// sandbox's learned names, and the agent at the other end of the channel.
class AgentGate : public proxy::Gate {
public:
	AgentGate(boost::asio::io_context& io, const Policy& p, int control_fd, int learned_fd)
		: channel_(io, control_fd), learned_fd_(learned_fd)
	{
		for (const auto& r : p.rules)
			if (r.tls_sni_require && r.domain)
				rules_.emplace(static_cast<uint16_t>(r.index), proxy::GateRule{*r.domain, r.wildcard});
	}

	void start() { wait(); }
	// The recorder stopped: the channel closes, nothing more is waited for.
	void stop()
	{
		boost::system::error_code ignored;
		channel_.close(ignored);
	}

	const proxy::GateRule* rule(uint16_t index) const override
	{
		auto it = rules_.find(index);
		return it == rules_.end() ? nullptr : &it->second;
	}

	std::string learned_name(const Address& a) const override
	{
		al_learned_key key{};
		key.family = a.family;
		std::memcpy(key.addr, a.bytes.data(), sizeof(key.addr));
		al_learned v{};
		if (::bpf_map_lookup_elem(learned_fd_, &key, &v) != 0)
			return "";
		// The question's labels, last first, up to AL_NAME_END.
		size_t p = 0;
		while (p < sizeof(v.name.name) && v.name.name[p] != AL_NAME_END) {
			size_t len = v.name.name[p];
			if (len == 0 || len > 63 || p + 1 + len >= sizeof(v.name.name))
				return "";
			p += 1 + len;
		}
		if (p >= sizeof(v.name.name))
			return "";
		return name_from_key(v.name.name, p).value_or("");
	}

	void connect(int accepted_fd, const proxy::Origin&, std::function<void(int, int)> done) override
	{
		auto key = connection_key_of(accepted_fd);
		if (!key)
			return post(std::move(done), -1, errno ? errno : ENOTCONN);
		proxy::GateRequest q;
		q.type = proxy::kGateConnect;
		q.id = ++last_id_;
		q.key = *key;
		if (pending_.size() >= kMaxPending)
			return post(std::move(done), -1, EBUSY);
		if (::send(channel_.native_handle(), &q, sizeof(q), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(q))
			return post(std::move(done), -1, errno ? errno : EPIPE);
		pending_.emplace(q.id, std::move(done));
	}

	void violation(const proxy::Origin& o, const std::string& sni, const std::string& reason) override
	{
		proxy::GateRequest q;
		q.type = proxy::kGateViolation;
		q.key.family = o.addr.family;
		q.key.port = o.port;
		q.key.protocol = o.protocol;
		std::memcpy(q.key.addr, o.addr.bytes.data(), sizeof(q.key.addr));
		std::memcpy(q.sni, sni.data(), std::min(sni.size(), sizeof(q.sni) - 1));
		std::memcpy(q.reason, reason.data(), std::min(reason.size(), sizeof(q.reason) - 1));
		// The rule, in the place of the cookie the agent does not need here.
		q.key.netns_cookie = o.rule;
		if (::send(channel_.native_handle(), &q, sizeof(q), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(q))
			spdlog::error("SNI gate: the agent was not told of a denied connection: {}", std::strerror(errno));
	}

private:
	static constexpr size_t kMaxPending = 1024;

	void post(std::function<void(int, int)> done, int fd, int err)
	{
		boost::asio::post(channel_.get_executor(), [done = std::move(done), fd, err] { done(fd, err); });
	}

	void wait()
	{
		channel_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
				    [this](const boost::system::error_code& ec) {
					    if (ec)
						    return;
					    if (receive())
						    wait();
				    });
	}

	// Every reply waiting; false once the agent is gone (each pending
	// connect then fails).
	bool receive()
	{
		for (;;) {
			proxy::GateReply r;
			struct iovec iov = {&r, sizeof(r)};
			alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
			struct msghdr m = {};
			m.msg_iov = &iov;
			m.msg_iovlen = 1;
			m.msg_control = control;
			m.msg_controllen = sizeof(control);
			ssize_t n = ::recvmsg(channel_.native_handle(), &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return true;
			int fd = -1;
			for (struct cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
				    c->cmsg_len == CMSG_LEN(sizeof(int)))
					std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
			if (n <= 0) {
				spdlog::error("SNI gate: the channel to the agent is closed");
				auto waiting = std::move(pending_);
				pending_.clear();
				for (auto& [id, done] : waiting)
					done(-1, EPIPE);
				return false;
			}
			auto it = n == sizeof(r) ? pending_.find(r.id) : pending_.end();
			if (it == pending_.end()) {
				if (fd >= 0)
					::close(fd);
				continue;
			}
			auto done = std::move(it->second);
			pending_.erase(it);
			if (r.error == 0 && fd < 0)
				r.error = EPROTO;
			if (r.error != 0 && fd >= 0) {
				::close(fd);
				fd = -1;
			}
			done(fd, r.error);
		}
	}

	boost::asio::posix::stream_descriptor channel_;
	int learned_fd_;
	std::unordered_map<uint16_t, proxy::GateRule> rules_;
	std::unordered_map<uint32_t, std::function<void(int, int)>> pending_;
	uint32_t last_id_ = 0;
};

// The proxy's counts to the agent: once a second while they change, and
// once more as the proxy stops. A report the channel cannot take now is
// dropped: the next one carries the totals.
class StatsReporter {
public:
	StatsReporter(boost::asio::io_context& io, const proxy::WorldRecorder& recorder, int control_fd)
		: timer_(io), recorder_(recorder), fd_(control_fd)
	{
	}

	void start()
	{
		send(recorder_.stats());
		tick();
	}

	void stop()
	{
		if (stopped_)
			return;
		stopped_ = true;
		timer_.cancel();
		send(recorder_.stats());
	}

private:
	void tick()
	{
		timer_.expires_after(std::chrono::seconds(1));
		timer_.async_wait([this](const boost::system::error_code& ec) {
			if (ec || stopped_)
				return;
			auto s = recorder_.stats();
			if (!(s == last_))
				send(s);
			tick();
		});
	}

	void send(const proxy::WorldStats& s)
	{
		proxy::StatsReport r;
		r.stats = s;
		if (::send(fd_, &r, sizeof(r), MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof(r))
			last_ = s;
	}

	boost::asio::steady_timer timer_;
	const proxy::WorldRecorder& recorder_;
	int fd_;
	proxy::WorldStats last_;
	bool stopped_ = false;
};

// Where a client meant to go: its address and port as the proxy sees
// them, in its network namespace, filed by the kernel as it connected (TCP)
// or as its datagram left (UDP).
std::optional<proxy::Origin> lookup_origin(int origin_fd, uint32_t slot, int fd, const sockaddr* from,
					   uint8_t protocol)
{
	auto key = origin_key_of(fd, from, protocol);
	al_origin v{};
	if (!key || ::bpf_map_lookup_elem(origin_fd, &*key, &v) != 0 || v.slot != slot || v.protocol != protocol)
		return std::nullopt;
	proxy::Origin o;
	o.addr = from_raw(v.family, v.addr);
	o.port = v.port;
	o.protocol = v.protocol;
	o.rule = v.rule;
	return o;
}

std::optional<proxy::Origin> lookup_connection(int origin_fd, uint32_t slot, int fd)
{
	sockaddr_storage peer{};
	socklen_t len = sizeof(peer);
	if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0)
		return std::nullopt;
	return lookup_origin(origin_fd, slot, fd, reinterpret_cast<const sockaddr*>(&peer), IPPROTO_TCP);
}

}  // namespace

int cmd_proxy(const ProxyCommand& c)
{
	auto parsed = parse_policy_file(c.policy_file);
	if (!parsed)
		fail("{}", parsed.rejection().first());
	check_fd(c.records_fd, "--records-fd", false);
	check_fd(c.origin_fd, "--origin-fd", false);
	if (c.listen_fds.empty())
		fail("--listen-fd: at least one listener is needed");
	for (int fd : c.listen_fds)
		check_fd(fd, "--listen-fd", true);
	for (int fd : c.udp_fds)
		check_fd(fd, "--udp-fd", true);

	proxy::WorldOptions o;
	o.sandbox = c.sandbox;
	o.listen_fds = c.listen_fds;
	o.records_fd = c.records_fd;
	o.world = parsed->world.value_or(WorldPolicy{});
	if (c.ca_fd >= 0) {
		// Read before the filter (OpenSSL loads its configuration here too);
		// the key's bytes are wiped once parsed.
		check_fd(c.ca_fd, "--ca-fd", false);
		std::string blob;
		char buf[4096];
		ssize_t n;
		off_t at = 0;
		while ((n = ::pread(c.ca_fd, buf, sizeof(buf), at)) > 0 && blob.size() < (64u << 10)) {
			blob.append(buf, static_cast<size_t>(n));
			at += n;
		}
		::close(c.ca_fd);
		OPENSSL_cleanse(buf, sizeof(buf));
		try {
			o.tls = std::make_shared<proxy::TlsTerminator>(blob, blob);
		} catch (...) {
			OPENSSL_cleanse(blob.data(), blob.size());
			throw;
		}
		OPENSSL_cleanse(blob.data(), blob.size());
	}

	// A gated connection spliced holds a pipe a way, four descriptors more
	// than its two sockets: the soft limit goes up to the hard one (the
	// recorder's max_connections bounds what is open), read by the recorder
	// as it is made. A connection whose pipes would not fit goes through
	// the proxy's buffers. A splice to a socket whose peer is gone raises
	// SIGPIPE (splice has no MSG_NOSIGNAL): ignored, the call fails EPIPE.
	if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)::setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (::signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fail_errno("ignore SIGPIPE");
	boost::asio::io_context io;
	int origin_fd = c.origin_fd;
	uint32_t slot = c.slot;
	o.udp_fds = c.udp_fds;
	o.datagram_origin = [origin_fd, slot](int fd, const sockaddr* from, socklen_t) {
		return lookup_origin(origin_fd, slot, fd, from, IPPROTO_UDP);
	};
	std::shared_ptr<AgentGate> gate;
	if (c.control_fd >= 0)
		check_fd(c.control_fd, "--control-fd", true);
	if (c.learned_fd >= 0) {
		if (c.control_fd < 0)
			fail("--learned-fd: the SNI gate needs --control-fd too");
		check_fd(c.learned_fd, "--learned-fd", false);
		gate = std::make_shared<AgentGate>(io, *parsed, c.control_fd, c.learned_fd);
		o.gate = gate;
	}
	proxy::WorldRecorder recorder(io, o,
				      [origin_fd, slot](int fd) { return lookup_connection(origin_fd, slot, fd); });
	std::optional<StatsReporter> reporter;
	if (c.control_fd >= 0)
		reporter.emplace(io, recorder, c.control_fd);
	boost::asio::signal_set signals(io, SIGTERM, SIGINT);
	signals.async_wait([&](const boost::system::error_code&, int) {
		recorder.stop();
		if (reporter)
			reporter->stop();
		if (gate)
			gate->stop();
	});

	pid_t agent = ::getppid();
	drop_privileges(c.user);
	// The parent-death signal the agent set before exec is cleared by the
	// change of user: set again, SIGKILL (which the proxy cannot block),
	// so that a proxy never outlives the agent that started it (an agent
	// killed, a daemon that crashed), listening and holding its records.
	if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		fail_errno("PR_SET_PDEATHSIG");
	if (::getppid() != agent)
		fail("the agent that started the proxy is gone");
	uid_t uid = ::getuid();  // not allowed under the filter
	install_seccomp(c.udp_fds);
	recorder.start();
	if (gate)
		gate->start();
	if (reporter)
		reporter->start();
	spdlog::info("proxy of sandbox {}: recording as uid {}", c.sandbox, uid);
	io.run();
	auto s = recorder.stats();
	spdlog::info("proxy of sandbox {}: {} connections, {} datagrams, {} records, {} dropped", c.sandbox,
		     s.connections, s.datagrams, s.records_written, s.records_dropped);
	return kExitOk;
}

}  // namespace airlock
