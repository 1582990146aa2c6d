#include "dns_world.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

namespace it {

namespace fs = std::filesystem;

// ---- names -------------------------------------------------------------------------

std::string lower(std::string s)
{
	for (auto& c : s)
		c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
	return s;
}

namespace {

std::string strip_dot(std::string s)
{
	while (!s.empty() && s.back() == '.')
		s.pop_back();
	return s;
}

bool name_eq(const std::string& a, const std::string& b)
{
	return lower(strip_dot(a)) == lower(strip_dot(b));
}

bool name_under(const std::string& name, const std::string& zone)
{
	std::string n = lower(strip_dot(name)), z = lower(strip_dot(zone));
	return n == z || (n.size() > z.size() && n.compare(n.size() - z.size(), z.size(), z) == 0 &&
			  n[n.size() - z.size() - 1] == '.');
}

// Runs `ip ARGS`, throws with the failing command.
void ip(std::vector<std::string> args)
{
	args.insert(args.begin(), "ip");
	Result r = run(args, 10s);
	if (r.status != 0)
		throw std::runtime_error("dns world: " + r.describe());
}

std::string tail(const std::string& s, size_t n)
{
	return s.size() > n ? "..." + s.substr(s.size() - n) : s;
}

}  // namespace

std::string dns_wire_name(const std::string& name)
{
	std::string out, n = strip_dot(name);
	size_t start = 0;
	while (!n.empty() && start <= n.size()) {
		size_t dot = n.find('.', start);
		std::string label = n.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
		out += static_cast<char>(label.size());
		out += label;
		if (dot == std::string::npos)
			break;
		start = dot + 1;
	}
	out += '\0';
	return out;
}

std::string dns_query_bytes(const std::string& name, uint16_t qtype, uint16_t id)
{
	std::string m;
	auto u16 = [&](uint16_t v) {
		m += static_cast<char>(v >> 8);
		m += static_cast<char>(v & 0xff);
	};
	u16(id);
	u16(0x0100);  // RD
	u16(1);
	u16(0);
	u16(0);
	u16(0);
	m += dns_wire_name(name);
	u16(qtype);
	u16(1);
	return m;
}

// ---- policies ------------------------------------------------------------------------

json allow_domain(const std::string& domain, json ports)
{
	json r = {{"action", "allow"}, {"domain", domain}};
	if (!ports.is_null())
		r["ports"] = ports;
	return r;
}

json allow_cidr(const std::string& cidr, json ports)
{
	json r = {{"action", "allow"}, {"cidr", cidr}};
	if (!ports.is_null())
		r["ports"] = ports;
	return r;
}

json deny_cidr(const std::string& cidr)
{
	return {{"action", "deny"}, {"cidr", cidr}};
}

json dns_block(std::vector<std::string> resolvers, std::vector<std::string> types)
{
	return {{"resolvers", resolvers}, {"types", types}};
}

json dns_policy(const std::string& name, json rules, json dns, const std::string& on_violation, const std::string& mode)
{
	json p = {{"version", 1}, {"name", name}, {"mode", mode}, {"on_violation", on_violation}, {"rules", rules}};
	if (!dns.is_null())
		p["dns"] = dns;
	return p;
}

json standard_dns_policy(const std::string& name, const std::string& on_violation, const std::string& mode)
{
	return dns_policy(name,
			  json::array({allow_domain("allowed.test"), allow_domain("*.allowed.test"),
				       deny_cidr(std::string(kDenied4) + "/32")}),
			  dns_block(), on_violation, mode);
}

// ---- the resolver ----------------------------------------------------------------------

void Resolver::start(Ms timeout)
{
	log_ = env_.path("dnsmasq.log");
	std::vector<std::string> a = {"ip", "netns", "exec", env_.topo->sink_ns, "/usr/sbin/dnsmasq",
				      "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
				      "--no-poll", "--bind-interfaces", std::string("--listen-address=") + kResolver4,
				      "--port=53", "--cache-size=0", "--local-ttl=60", "--log-queries=extra",
				      "--log-facility=" + log_, "--pid-file=", "--user=root", "--group=root",
				      // The test zone: allowed.test and every name under it.
				      "--address=/allowed.test/10.77.0.2", "--address=/allowed.test/fd77::2",
				      "--address=/badallowed.test/10.77.0.2", "--address=/badallowed.test/fd77::2",
				      "--address=/denied.test/10.77.0.2", "--address=/denied.test/fd77::2",
				      // Most specific wins: a name under allowed.test that points at the denied host.
				      "--address=/rebind.allowed.test/10.77.0.3",
				      // A name under allowed.test bound to loopback (a sandbox's own
				      // resolver's doing).
				      "--address=/loopback.allowed.test/127.0.0.1",
				      "--address=/loopback.allowed.test/::1", "--cname=www.chain.test,mid.chain.test",
				      "--cname=mid.chain.test,end.chain.test",
				      "--host-record=end.chain.test,10.77.0.2,fd77::2",
				      "--txt-record=txt.allowed.test,hello",  // no shell: no quotes
				      // Attacker zones, delegated to the tunnel servers.
				      std::string("--server=/") + kIodineZone + "/" + kIodineServer4,
				      std::string("--server=/") + kDns2tcpZone + "/" + kDns2tcpServer4};
	proc_ = &env_.start(a, "dnsmasq");
	bool ok = wait_until(
		[&] {
			if (!proc_->running())
				return true;
			return query("ready.allowed.test", 1, 200ms).has_value();
		},
		timeout, 20ms);
	if (!ok || !proc_->running())
		throw std::runtime_error("dnsmasq did not answer: " + proc_->describe() + "\nlog:\n" +
					 tail(log(), 3000));
}

std::string Resolver::log() const
{
	return read_file(log_);
}

std::vector<DnsQuery> Resolver::queries() const
{
	static const std::regex re(R"(: (\d+) ([0-9a-fA-F.:]+)/(\d+) query\[([^\]]+)\] (.*) from (\S+)\s*$)");
	std::vector<DnsQuery> out;
	std::istringstream in(log());
	std::string line;
	std::smatch m;
	while (std::getline(in, line)) {
		if (line.find(" query[") == std::string::npos)
			continue;
		if (!std::regex_search(line, m, re))
			continue;
		DnsQuery q;
		q.serial = std::stol(m[1]);
		q.src = m[2];
		q.sport = std::stoi(m[3]);
		q.type = m[4];
		q.name = m[5];
		q.from = m[6];
		out.push_back(q);
	}
	return out;
}

std::vector<DnsForward> Resolver::forwarded() const
{
	static const std::regex re(R"(: (\d+) \S+ forwarded (.*) to (\S+)\s*$)");
	std::vector<DnsForward> out;
	std::istringstream in(log());
	std::string line;
	std::smatch m;
	while (std::getline(in, line)) {
		if (line.find(" forwarded ") == std::string::npos)
			continue;
		if (!std::regex_search(line, m, re))
			continue;
		out.push_back({std::stol(m[1]), m[2], m[3]});
	}
	return out;
}

size_t Resolver::count(const std::string& name, const std::string& type) const
{
	size_t n = 0;
	for (const auto& q : queries())
		if (name_eq(q.name, name) && (type.empty() || lower(q.type) == lower(type)))
			n++;
	return n;
}

size_t Resolver::count_under(const std::string& zone) const
{
	size_t n = 0;
	for (const auto& q : queries())
		if (name_under(q.name, zone))
			n++;
	return n;
}

size_t Resolver::forwarded_under(const std::string& zone) const
{
	size_t n = 0;
	for (const auto& f : forwarded())
		if (name_under(f.name, zone))
			n++;
	return n;
}

size_t Resolver::count_type(const std::string& type) const
{
	size_t n = 0;
	for (const auto& q : queries())
		if (lower(q.type) == lower(type))
			n++;
	return n;
}

size_t Resolver::lines_from_port(int sport) const
{
	std::string needle = fmt::format(" {}/{} ", kClient4, sport);
	return count_occurrences(log(), needle);
}

bool Resolver::mentions(const std::string& text) const
{
	return lower(log()).find(lower(text)) != std::string::npos;
}

std::optional<std::string> Resolver::query(const std::string& name, uint16_t qtype, Ms timeout)
{
	int fd = env_.topo->socket_in_client(AF_INET, SOCK_DGRAM);
	uint16_t id = static_cast<uint16_t>(std::stoul(random_hex(4), nullptr, 16));
	std::string q = dns_query_bytes(name, qtype, id);
	sockaddr_in sa = {};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(53);
	inet_pton(AF_INET, kResolver4, &sa.sin_addr);
	std::optional<std::string> out;
	if (::sendto(fd, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) ==
	    static_cast<ssize_t>(q.size())) {
		auto deadline = std::chrono::steady_clock::now() + timeout;
		while (!out) {
			auto left = std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now()).count();
			if (left <= 0)
				break;
			pollfd p = {fd, POLLIN, 0};
			if (::poll(&p, 1, static_cast<int>(left)) <= 0)
				continue;
			char buf[4096];
			ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
			if (n >= 12 &&
			    (static_cast<unsigned char>(buf[0]) << 8 | static_cast<unsigned char>(buf[1])) == id)
				out = std::string(buf, n);
		}
	}
	::close(fd);
	return out;
}

bool Resolver::fence(Ms timeout)
{
	std::string name = fmt::format("fence-{}.fence.test", random_hex(12));
	auto deadline = std::chrono::steady_clock::now() + timeout;
	while (std::chrono::steady_clock::now() < deadline) {
		query(name, 1, 300ms);
		if (wait_until([&] { return count(name) > 0; }, 300ms))
			return true;
	}
	return count(name) > 0;
}

// ---- the lying resolver ----------------------------------------------------------------

void FakeResolver::start(const std::string& mode, Ms timeout)
{
	log_ = env_.path("fake-resolver.jsonl");
	mode_file_ = env_.path("fake-resolver.mode");
	trigger_dir_ = env_.path("fake-triggers");
	fs::create_directories(trigger_dir_);
	set_mode(mode);
	std::string ready = env_.path("fake-resolver.ready");
	std::vector<std::string> a = {"ip", "netns", "exec", env_.topo->sink_ns};
	auto py = env_.py("dns_fake_resolver.py",
			  {"--addr",        kFakeResolver4, "--other",       kAllowed4, "--log",       log_,
			   "--ready",       ready,          "--mode",        mode,      "--mode-file", mode_file_,
			   "--trigger-dir", trigger_dir_,   "--answer4",     kAllowed4, "--answer6",   kAllowed6,
			   "--ttl",         "60",           "--max-seconds", "300"});
	a.insert(a.end(), py.begin(), py.end());
	proc_ = &env_.start(a, "fake-resolver");
	if (!wait_until([&] { return exists(ready) || !proc_->running(); }, timeout) || !exists(ready))
		throw std::runtime_error("fake resolver did not start: " + proc_->describe());
}

void FakeResolver::set_mode(const std::string& mode)
{
	write_file(mode_file_, mode + "\n");
}

std::vector<json> FakeResolver::log() const
{
	return read_json_lines(log_);
}

std::vector<json> FakeResolver::queries(const std::string& to) const
{
	std::vector<json> out;
	for (const auto& j : log())
		if (j.value("kind", "") == "query" && (to.empty() || j.value("to", "") == to))
			out.push_back(j);
	return out;
}

std::vector<json> FakeResolver::sent() const
{
	std::vector<json> out;
	for (const auto& j : log())
		if (j.value("kind", "") == "answer" || j.value("kind", "") == "unsolicited")
			out.push_back(j);
	return out;
}

size_t FakeResolver::queries_for(const std::string& name, const std::string& to) const
{
	size_t n = 0;
	for (const auto& j : queries(to))
		if (j["qname"].is_string() && name_eq(j["qname"].get<std::string>(), name))
			n++;
	return n;
}

// ---- tunnel servers ----------------------------------------------------------------------

void TunnelServer::start(Ms timeout)
{
	std::vector<std::string> a = {"ip", "netns", "exec", env_.topo->sink_ns, "stdbuf", "-oL", "-eL"};
	std::string ready_text;
	if (kind_ == Kind::Iodine) {
		// -c: the queries come from dnsmasq, not from the client itself.
		a.insert(a.end(), {"iodined", "-f", "-c", "-DD", "-P", kTunnelPassword, "10.99.0.1", kIodineZone, "-l",
				   kIodineServer4, "-p", "53"});
		ready_text = "Listening to dns for domain";
	} else {
		std::string chroot = env_.path("dns2tcpd-root");
		fs::create_directories(chroot);
		std::string conf = env_.write_text(
			"dns2tcpd.conf", fmt::format("listen = {}\nport = 53\nuser = root\nchroot = {}\ndomain = {}\n"
						     "resources = sink:{}:{}\n",
						     kDns2tcpServer4, chroot, kDns2tcpZone, kAllowed4, kPortLo));
		a.insert(a.end(), {"dns2tcpd", "-F", "-d", "3", "-f", conf});
		ready_text = "Listening on";
	}
	proc_ = &env_.start(a, kind_ == Kind::Iodine ? "iodined" : "dns2tcpd");
	bool ok = wait_until([&] { return output().find(ready_text) != std::string::npos || !proc_->running(); },
			     timeout, 10ms);
	if (!ok || !proc_->running())
		throw std::runtime_error("tunnel server did not start: " + proc_->describe());
}

std::string TunnelServer::output() const
{
	return proc_ ? proc_->out() + proc_->err() : "";
}

size_t TunnelServer::queries_seen() const
{
	std::string o = output();
	if (kind_ == Kind::Iodine)
		return count_occurrences(o, "RX: ");
	return count_occurrences(o, "Receive query");
}

// ---- HTTP server ----------------------------------------------------------------------------

void HttpServer::start(Ms timeout)
{
	dir_ = env_.path("www");
	fs::create_directories(dir_);
	// --bind :: makes http.server dual-stack: 10.77.0.2 and fd77::2 alike.
	proc_ = &env_.start({"ip", "netns", "exec", env_.topo->sink_ns, python(), "-u", "-m", "http.server",
			     std::to_string(kHttpPort), "--bind", "::", "--directory", dir_},
			    "http");
	bool ok = wait_until(
		[&] { return proc_->out().find("Serving HTTP") != std::string::npos || !proc_->running(); }, timeout,
		10ms);
	if (!ok || !proc_->running())
		throw std::runtime_error("http server did not start: " + proc_->describe());
}

void HttpServer::put(const std::string& file, const std::string& content)
{
	write_file(dir_ + "/" + file, content);
}

size_t HttpServer::requests_for(const std::string& file) const
{
	return count_occurrences(log(), "\"GET /" + file + " ");
}

std::string HttpServer::log() const
{
	return proc_ ? proc_->err() : "";
}

// ---- the wire ---------------------------------------------------------------------------------

std::vector<WireFrame> wire_frames(Env& env)
{
	std::vector<WireFrame> out;
	if (!env.sink)
		return out;
	std::istringstream in(read_file(env.sink->log_path()));
	std::string line;
	while (std::getline(in, line)) {
		if (line.find("\"frame\"") == std::string::npos)
			continue;
		json j = json::parse(line, nullptr, false);
		if (j.is_discarded() || j.value("kind", "") != "frame" || j.value("dir", "in") == "out")
			continue;
		std::string b = hex_decode(j.value("hex", ""));
		if (b.size() < 14)
			continue;
		auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
		auto u16 = [&](size_t i) { return u8(i) << 8 | u8(i + 1); };
		unsigned ethertype = u16(12);
		size_t l4 = 0;
		WireFrame f;
		char txt[INET6_ADDRSTRLEN];
		if (ethertype == 0x0800 && b.size() >= 14 + 20) {
			size_t ihl = (u8(14) & 0x0f) * 4;
			f.proto = static_cast<int>(u8(14 + 9));
			inet_ntop(AF_INET, b.data() + 14 + 12, txt, sizeof(txt));
			f.src = txt;
			inet_ntop(AF_INET, b.data() + 14 + 16, txt, sizeof(txt));
			f.dst = txt;
			l4 = 14 + ihl;
		} else if (ethertype == 0x86dd && b.size() >= 14 + 40) {
			f.proto = static_cast<int>(u8(14 + 6));
			inet_ntop(AF_INET6, b.data() + 14 + 8, txt, sizeof(txt));
			f.src = txt;
			inet_ntop(AF_INET6, b.data() + 14 + 24, txt, sizeof(txt));
			f.dst = txt;
			l4 = 14 + 40;
		} else {
			continue;
		}
		if (f.proto == 17 && b.size() >= l4 + 8) {
			f.sport = static_cast<int>(u16(l4));
			f.dport = static_cast<int>(u16(l4 + 2));
			f.payload = b.substr(l4 + 8);
		} else if (f.proto == 6 && b.size() >= l4 + 20) {
			f.sport = static_cast<int>(u16(l4));
			f.dport = static_cast<int>(u16(l4 + 2));
			size_t doff = (u8(l4 + 12) >> 4) * 4;
			f.payload = b.size() > l4 + doff ? b.substr(l4 + doff) : "";
		} else {
			continue;
		}
		out.push_back(std::move(f));
	}
	return out;
}

std::optional<std::string> wire_qname(const WireFrame& f)
{
	size_t off = f.proto == 6 ? 2 + 12 : 12;  // TCP: after the length prefix
	std::string name;
	const std::string& p = f.payload;
	while (off < p.size()) {
		unsigned len = static_cast<unsigned char>(p[off]);
		if (len == 0)
			return name;
		if (len > 63 || off + 1 + len > p.size())
			return std::nullopt;
		if (!name.empty())
			name += '.';
		name += lower(p.substr(off + 1, len));
		off += 1 + len;
	}
	return std::nullopt;
}

size_t wire_queries_for(Env& env, const std::string& name, bool under)
{
	std::string wire = lower(dns_wire_name(name));
	if (under)
		wire.pop_back();  // no terminating zero: a suffix of longer names too
	size_t n = 0;
	for (const auto& f : wire_frames(env)) {
		if (f.dport != 53)
			continue;
		auto q = wire_qname(f);
		if (q ? (under ? name_under(*q, name) : name_eq(*q, name))
		      : lower(f.payload).find(wire) != std::string::npos)
			n++;
	}
	return n;
}

size_t wire_frames_from(Env& env, int sport)
{
	size_t n = 0;
	for (const auto& f : wire_frames(env))
		if (f.dport == 53 && f.sport == sport && f.src == kClient4)
			n++;
	return n;
}

// ---- the world ----------------------------------------------------------------------------------

DnsWorld::DnsWorld(Env& env) : env_(env), resolver_(env) {}

void DnsWorld::add_sink_address(const std::string& addr)
{
	ip({"-n", env_.topo->sink_ns, "addr", "add", addr + "/24", "dev", env_.topo->sink_if});
	add_neighbour(addr);
}

void DnsWorld::add_neighbour(const std::string& addr)
{
	ip({"-n", env_.topo->client_ns, "neigh", "replace", addr, "lladdr", kSinkMac, "dev", env_.topo->client_if,
	    "nud", "permanent"});
}

void DnsWorld::start()
{
	if (!env_.topo)
		throw std::runtime_error("dns world: no topology");
	for (const char* a : {kResolver4, kFakeResolver4, kIodineServer4, kDns2tcpServer4})
		add_sink_address(a);
	resolver_.start();
}

FakeResolver& DnsWorld::start_fake(const std::string& mode)
{
	fake_ = std::make_unique<FakeResolver>(env_);
	fake_->start(mode);
	return *fake_;
}

TunnelServer& DnsWorld::start_iodined()
{
	iodined_ = std::make_unique<TunnelServer>(env_, TunnelServer::Kind::Iodine);
	iodined_->start();
	return *iodined_;
}

TunnelServer& DnsWorld::start_dns2tcpd()
{
	dns2tcpd_ = std::make_unique<TunnelServer>(env_, TunnelServer::Kind::Dns2tcp);
	dns2tcpd_->start();
	return *dns2tcpd_;
}

HttpServer& DnsWorld::start_http()
{
	http_ = std::make_unique<HttpServer>(env_);
	http_->start();
	return *http_;
}

std::string DnsWorld::resolv_conf(const std::string& nameserver)
{
	std::string file = "resolv-" + nameserver + ".conf";
	if (!resolv_files_.count(file)) {
		// One try, 2 s: a query the kernel drops without telling the sender
		// shows up as a ~2 s wait, which the timing assertions catch.
		env_.write_text(file, fmt::format("nameserver {}\noptions timeout:2 attempts:1\n", nameserver));
		resolv_files_.insert(file);
	}
	if (!exists(env_.path("nsswitch.conf"))) {
		// The host's file, with hosts resolved from files and DNS only (no
		// nss-resolve, mdns, or anything else that would not go over the wire).
		std::istringstream in(read_file("/etc/nsswitch.conf"));
		std::string line, out;
		while (std::getline(in, line))
			if (line.rfind("hosts:", 0) != 0)
				out += line + "\n";
		out += "hosts: files dns\n";
		env_.write_text("nsswitch.conf", out);
	}
	return env_.path(file);
}

std::vector<std::string> DnsWorld::with_resolv(const std::vector<std::string>& argv, const std::string& nameserver)
{
	std::string rc = resolv_conf(nameserver);
	// A private mount namespace for the whole command tree: the host's files
	// are never touched. nscd, if the host runs one, would answer from the
	// host's namespace: its socket directory is hidden.
	std::vector<std::string> a = {
		"unshare",
		"--mount",
		"--propagation",
		"private",
		"--",
		"/bin/sh",
		"-c",
		"mount --bind \"$1\" /etc/resolv.conf && mount --bind \"$2\" /etc/nsswitch.conf && "
		"{ [ ! -d /run/nscd ] || mount -t tmpfs none /run/nscd; } && shift 2 && exec \"$@\"",
		"dns-world",
		rc,
		env_.path("nsswitch.conf")};
	a.insert(a.end(), argv.begin(), argv.end());
	return a;
}

RunResult parse_run(Proc& p, std::optional<int> st, bool timed_out)
{
	RunResult rr;
	rr.r.argv = p.argv();
	rr.r.timed_out = timed_out;
	rr.r.status = st ? *st : -1;
	rr.r.out = p.out();
	rr.r.err = p.err();
	rr.out_json = json_objects_in(rr.r.out);
	return rr;
}

Proc& DnsWorld::start_run(const RunSpec& s, const std::string& nameserver)
{
	return env_.start(with_resolv(env_.run_argv(s), nameserver), "run-" + s.name);
}

RunResult DnsWorld::run(const RunSpec& s, Ms timeout, const std::string& nameserver)
{
	Proc& p = start_run(s, nameserver);
	auto st = p.wait(timeout);
	if (!st) {
		p.signal(SIGKILL);
		p.wait(5s);
	}
	return parse_run(p, st, !st);
}

RunResult DnsWorld::bare(const std::vector<std::string>& cmd, Ms timeout, const std::string& nameserver)
{
	Proc& p = env_.start(with_resolv(env_.topo->in_client(cmd), nameserver), "bare");
	auto st = p.wait(timeout);
	if (!st) {
		::kill(-p.pid(), SIGKILL);
		p.wait(5s);
	}
	return parse_run(p, st, !st);
}

std::vector<std::string> DnsWorld::exec(const std::string& tag, const std::vector<std::string>& argv, double timeout_s,
					const std::string& stdin_text, double stdin_hold_s)
{
	std::vector<std::string> args = {tag, "--timeout", fmt::format("{}", timeout_s)};
	if (!stdin_text.empty()) {
		args.insert(args.end(), {"--stdin", stdin_text, "--stdin-hold", fmt::format("{}", stdin_hold_s)});
	}
	args.push_back("--");
	args.insert(args.end(), argv.begin(), argv.end());
	return env_.py("dns_exec.py", args);
}

std::string DnsWorld::dump()
{
	std::string s = "---- dns world ----\n";
	s += "resolver log " + resolver_.log_path() + " (tail):\n" + tail(resolver_.log(), 6000) + "\n";
	if (fake_) {
		s += "fake resolver log (tail):\n";
		auto l = fake_->log();
		s += dump_lines(l, 20);
	}
	if (iodined_)
		s += "iodined output (tail):\n" + tail(iodined_->output(), 3000) + "\n";
	if (dns2tcpd_)
		s += "dns2tcpd output (tail):\n" + tail(dns2tcpd_->output(), 3000) + "\n";
	if (http_)
		s += "http server log (tail):\n" + tail(http_->log(), 2000) + "\n";
	return s;
}

// ---- audit matching ------------------------------------------------------------------------------

std::string DnsMatch::describe() const
{
	json j = json::object();
	if (hook)
		j["hook"] = *hook;
	if (verdict)
		j["verdict"] = *verdict;
	if (!reasons.empty())
		j["reason"] = reasons;
	if (dst)
		j["dst"] = *dst;
	if (port)
		j["port"] = *port;
	if (protocol)
		j["protocol"] = *protocol;
	if (qname)
		j["qname"] = *qname;
	if (qname_suffix)
		j["qname_under"] = *qname_suffix;
	if (qtype)
		j["qtype"] = *qtype;
	if (violation)
		j["violation"] = *violation;
	if (!sandbox.empty())
		j["sandbox"] = sandbox;
	return j.dump();
}

std::vector<json> dns_decisions(const std::vector<json>& lines, const DnsMatch& m)
{
	std::vector<json> out;
	auto str_is = field_is;
	for (const auto& j : lines) {
		if (!j.is_object() || j.value("event", "") != "decision")
			continue;
		if (!str_is(j, "hook", m.hook) || !str_is(j, "verdict", m.verdict) || !str_is(j, "dst", m.dst) ||
		    !str_is(j, "protocol", m.protocol) || !str_is(j, "qname", m.qname) || !str_is(j, "qtype", m.qtype))
			continue;
		if (!m.reasons.empty() && !(j.contains("reason") && j["reason"].is_string() &&
					    m.reasons.count(j["reason"].get<std::string>())))
			continue;
		if (m.port && !(j.contains("port") && j["port"].is_number() && j["port"].get<int>() == *m.port))
			continue;
		if (m.violation && !(j.contains("violation") && j["violation"] == *m.violation))
			continue;
		if (m.qname_suffix && !(j.contains("qname") && j["qname"].is_string() &&
					name_under(j["qname"].get<std::string>(), *m.qname_suffix)))
			continue;
		if (!m.sandbox.empty() && j.value("sandbox", "") != m.sandbox)
			continue;
		out.push_back(j);
	}
	return out;
}

::testing::AssertionResult DnsLogged(const std::vector<json>& lines, const DnsMatch& m, size_t at_least)
{
	auto found = dns_decisions(lines, m);
	if (found.size() >= at_least)
		return ::testing::AssertionSuccess();
	return ::testing::AssertionFailure() << found.size() << " audit decision lines match " << m.describe()
					     << " (want at least " << at_least << "); the log has:\n"
					     << dump_lines(lines, 40);
}

DnsMatch DnsDenied(const std::string& reason, const std::string& sandbox, std::optional<std::string> qname,
		   std::optional<std::string> qtype)
{
	DnsMatch m;
	m.reasons = {reason};
	m.sandbox = sandbox;
	m.qname = std::move(qname);
	m.qtype = std::move(qtype);
	return m;
}

::testing::AssertionResult NeverQueried(DnsWorld& w, const std::string& name, const std::string& type)
{
	if (!w.resolver().fence())
		return ::testing::AssertionFailure()
		       << "the resolver fence query was never logged: absence means nothing";
	size_t n = w.resolver().count(name, type);
	if (n)
		return ::testing::AssertionFailure() << "LEAK: the resolver received " << n << " queries for " << name
						     << (type.empty() ? "" : " " + type);
	if (!w.env().fence())
		return ::testing::AssertionFailure()
		       << "the fence datagram never reached the sink: absence means nothing";
	size_t f = wire_queries_for(w.env(), name);
	if (f)
		return ::testing::AssertionFailure()
		       << "LEAK: " << f << " frames to port 53 carrying " << name << " reached the sink's wire";
	return ::testing::AssertionSuccess();
}

::testing::AssertionResult NeverSentFrom(DnsWorld& w, int sport)
{
	if (sport <= 0)
		return ::testing::AssertionFailure() << "the client reported no source port";
	if (!w.resolver().fence())
		return ::testing::AssertionFailure()
		       << "the resolver fence query was never logged: absence means nothing";
	if (size_t n = w.resolver().lines_from_port(sport))
		return ::testing::AssertionFailure()
		       << "LEAK: the resolver logged " << n << " lines about port " << sport;
	if (!w.env().fence())
		return ::testing::AssertionFailure()
		       << "the fence datagram never reached the sink: absence means nothing";
	if (size_t f = wire_frames_from(w.env(), sport))
		return ::testing::AssertionFailure() << "LEAK: " << f << " frames from " << kClient4 << ":" << sport
						     << " to port 53 reached the sink's wire";
	return ::testing::AssertionSuccess();
}

OriginCert make_origin_cert(const std::string& dir)
{
	std::filesystem::create_directories(dir);
	OriginCert c{dir + "/cert.pem", dir + "/key.pem"};
	auto made = run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
			 "/CN=allowed.test", "-addext",
			 "subjectAltName=DNS:allowed.test,DNS:*.allowed.test,DNS:evil.test", "-keyout", c.key, "-out",
			 c.cert},
			30s);
	if (made.status != 0)
		throw std::runtime_error("openssl could not make the origin's certificate: " + made.err);
	return c;
}

json ResultOf(const RunResult& rr, const std::string& marker)
{
	return ResultFor(rr, marker);
}

}  // namespace it
