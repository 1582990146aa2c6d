#include "proxyd/proxyd.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "confine/process.h"
#include "gate/inputs.h"
#include "policy/policy.h"
#include "proxy/gate_tls.h"
#include "proxy/http_gate.h"
#include "proxy/tls.h"
#include "proxy/world.h"
#include "proxyd/agent_gate.h"
#include "proxyd/lockdown.h"
#include "proxyd/origins.h"
#include "proxyd/stats_reporter.h"
#include "util/error.h"
#include "util/exit_code.h"

namespace airlock::proxyd {

namespace {

void check_fd(int fd, const char* what, bool socket)
{
	struct stat st {};
	if (fd < 0 || ::fstat(fd, &st) != 0)
		fail("{}: descriptor {} is not open", what, fd);
	if (socket != S_ISSOCK(st.st_mode))
		fail("{}: descriptor {} is {}a socket", what, fd, socket ? "not " : "");
}

// Each descriptor is what its option says it is.
void check_descriptors(const ProxyArgs& a)
{
	check_fd(a.records_fd, "--records-fd", false);
	check_fd(a.origin_fd, "--origin-fd", false);
	if (a.listen_fds.empty())
		fail("--listen-fd: at least one listener is needed");
	for (int fd : a.listen_fds)
		check_fd(fd, "--listen-fd", true);
	for (int fd : a.udp_fds)
		check_fd(fd, "--udp-fd", true);
	if (a.ca_fd >= 0)
		check_fd(a.ca_fd, "--ca-fd", false);
	if (a.control_fd >= 0)
		check_fd(a.control_fd, "--control-fd", true);
	if (a.learned_fd >= 0) {
		if (a.control_fd < 0)
			fail("--learned-fd: the SNI gate needs --control-fd too");
		check_fd(a.learned_fd, "--learned-fd", false);
	}
}

// The world's CA, read before the filter (OpenSSL loads its configuration
// here too) and closed; the key's bytes are wiped once parsed.
std::shared_ptr<proxy::TlsTerminator> read_ca(int ca_fd)
{
	std::string blob;
	char buf[4096];
	ssize_t n;
	off_t at = 0;
	while ((n = ::pread(ca_fd, buf, sizeof(buf), at)) > 0 && blob.size() < (64u << 10)) {
		blob.append(buf, static_cast<size_t>(n));
		at += n;
	}
	::close(ca_fd);
	OPENSSL_cleanse(buf, sizeof(buf));
	std::shared_ptr<proxy::TlsTerminator> tls;
	try {
		tls = std::make_shared<proxy::TlsTerminator>(blob, blob);
	} catch (...) {
		OPENSSL_cleanse(blob.data(), blob.size());
		throw;
	}
	OPENSSL_cleanse(blob.data(), blob.size());
	return tls;
}

// What the HTTP gate serves with (null: no rule is inspected and no
// secret named): the rules, the policy's secrets, the origins' roots, and
// TLS with the sandbox's CA (plain HTTP only without one).
std::shared_ptr<proxy::HttpGateSetup> http_gate_setup(const Policy& p, const gate::Inputs& in,
						      std::shared_ptr<proxy::GateTls> tls)
{
	auto setup = std::make_shared<proxy::HttpGateSetup>();
	for (const Rule& r : p.rules) {
		if (!r.http)
			continue;
		proxy::HttpGateRule g{r.domain.value_or(""), r.wildcard, *r.http, ""};
		if (auto ca = in.upstream_ca.find(r.index); ca != in.upstream_ca.end())
			g.upstream_ca_pem = ca->second;
		setup->rules.emplace(static_cast<uint16_t>(r.index), std::move(g));
	}
	// The secrets are never-send patterns for the world's recorder too.
	if (setup->rules.empty() && p.secrets.empty())
		return nullptr;
	setup->never_send = gate::NeverSend(in.secrets.never_send);
	for (const auto& v : in.secrets.injectable)
		setup->injectable[v.name] = v.value;
	setup->tls = std::move(tls);
	return setup;
}

// A reload's inputs (the agent's, gate/inputs.h): the HTTP gate's next
// requests are judged under them; the SNI gate's rules are the new
// policy's. What cannot be read leaves the gate as it was, and says so.
void take_reload(const std::string& text, const std::string& sandbox, const std::shared_ptr<proxy::GateTls>& tls,
		 proxy::WorldRecorder& recorder, AgentGate& gate)
{
	auto in = gate::decode_inputs(text);
	if (!in) {
		spdlog::error("proxy of sandbox {}: a reload: {}", sandbox, in.rejection().first());
		return;
	}
	auto p = parse_policy_text(in->policy_text, "reloaded policy");
	if (!p) {
		spdlog::error("proxy of sandbox {}: a reload: {}", sandbox, p.rejection().first());
		return;
	}
	recorder.update_http(http_gate_setup(*p, *in, tls));
	gate.set_rules(*p);
	spdlog::info("proxy of sandbox {}: the gate's rules are a reload's", sandbox);
}

// A gated connection spliced holds a pipe a way, four descriptors more
// than its two sockets: the soft limit goes up to the hard one (the
// recorder's max_connections bounds what is open), read by the recorder
// as it is made. A connection whose pipes would not fit goes through
// the proxy's buffers. A splice to a socket whose peer is gone raises
// SIGPIPE (splice has no MSG_NOSIGNAL): ignored, the call fails EPIPE.
void prepare_process()
{
	if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)::setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (::signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fail_errno("ignore SIGPIPE");
}

// Root to the proxy's user, tied to the agent's life, under the filter;
// the uid it runs as.
uid_t lock_down(const ProxyArgs& a)
{
	pid_t agent = ::getppid();
	drop_privileges(a.user);
	// The parent-death signal the agent set before exec is cleared by the
	// change of user: set again, SIGKILL (which the proxy cannot block),
	// so that a proxy never outlives the agent that started it (an agent
	// killed, a daemon that crashed), listening and holding its records.
	if (int e = confine::die_with_parent(agent, SIGKILL)) {
		if (e == ESRCH)
			fail("the agent that started the proxy is gone");
		fail_errno("PR_SET_PDEATHSIG", e);
	}
	uid_t uid = ::getuid();  // not allowed under the filter
	install_seccomp(a.udp_fds);
	return uid;
}

}  // namespace

int run(const ProxyArgs& a)
{
	auto parsed = parse_policy_file(a.policy_file);
	if (!parsed)
		fail("{}", parsed.rejection().first());
	check_descriptors(a);

	proxy::WorldOptions o;
	o.sandbox = a.sandbox;
	o.listen_fds = a.listen_fds;
	o.records_fd = a.records_fd;
	o.world = parsed->world.value_or(WorldPolicy{});
	if (a.ca_fd >= 0)
		o.tls = read_ca(a.ca_fd);
	// Read as root, before the filter: the secrets and the origins' roots.
	auto inputs = gate::read_inputs(*parsed, "");
	if (!inputs)
		fail("{}", inputs.rejection().first());
	// TLS to origins (the system's roots, read now) only where a rule is
	// inspected: a world without one runs where there are no roots.
	bool inspected = std::any_of(parsed->rules.begin(), parsed->rules.end(),
				     [](const Rule& r) { return r.http.has_value(); });
	std::shared_ptr<proxy::GateTls> gate_tls = o.tls && inspected ? std::make_shared<proxy::GateTls>(o.tls)
								      : nullptr;
	o.http = http_gate_setup(*parsed, *inputs, gate_tls);
	inputs = gate::Inputs{};
	prepare_process();

	boost::asio::io_context io;
	Origins origins(a.origin_fd, a.slot);
	o.udp_fds = a.udp_fds;
	o.datagram_origin = [&origins](int fd, const sockaddr* from, socklen_t) {
		return origins.of_datagram(fd, from);
	};
	std::shared_ptr<AgentGate> gate;
	if (a.learned_fd >= 0) {
		gate = std::make_shared<AgentGate>(io, *parsed, a.control_fd, a.learned_fd);
		o.gate = gate;
	}
	proxy::WorldRecorder recorder(io, o, [&origins](int fd) { return origins.of_connection(fd); });
	if (gate)
		gate->on_inputs([&](std::string text) {
			take_reload(text, a.sandbox, gate_tls, recorder, *gate);
			OPENSSL_cleanse(text.data(), text.size());
		});
	std::optional<StatsReporter> reporter;
	if (a.control_fd >= 0)
		reporter.emplace(io, recorder, a.control_fd);
	boost::asio::signal_set signals(io, SIGTERM, SIGINT);
	signals.async_wait([&](const boost::system::error_code&, int) {
		recorder.stop();
		if (reporter)
			reporter->stop();
		if (gate)
			gate->stop();
	});

	uid_t uid = lock_down(a);
	recorder.start();
	if (gate)
		gate->start();
	if (reporter)
		reporter->start();
	spdlog::info("proxy of sandbox {}: recording as uid {}", a.sandbox, uid);
	io.run();
	auto s = recorder.stats();
	spdlog::info("proxy of sandbox {}: {} connections, {} datagrams, {} records, {} dropped", a.sandbox,
		     s.connections, s.datagrams, s.records_written, s.records_dropped);
	return kExitOk;
}

}  // namespace airlock::proxyd
