// The DNS test world, on top of the harness (harness.h): a real resolver
// (dnsmasq) with a test zone, a lying resolver for the spoofing tests, two
// DNS tunnel servers (iodined, dns2tcpd), an HTTP server, and the way to run
// real clients (dig, getent, curl, glibc's getaddrinfo) in the client
// namespace with /etc/resolv.conf pointing at the test resolver.
//
// Everything lives in the test's own namespaces: the resolver addresses are
// extra addresses of the sink's veth (10.77.0.53, .54, .66, .67), with
// permanent neighbour entries in the client namespace like the harness's own.
// Every process is started with Env::start, so Env's teardown kills it by PID
// (and its process group), also when a test fails half-way; the addresses go
// away with the namespaces.
//
// Oracles for a DNS denial (THREATS.md, "How a containment test judges"):
//  - the resolver: dnsmasq's query log never names the forbidden name (after
//    a fence query sent later has been logged), and the sink's capture of the
//    veth never saw a frame carrying it (after the harness's fence);
//  - the audit log: a decision line with the hook, reason, qname and qtype.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fixture.h"

namespace it {

// ---- addresses, names, ports ---------------------------------------------------
inline constexpr const char* kResolver4 = "10.77.0.53";       // dnsmasq
inline constexpr const char* kFakeResolver4 = "10.77.0.54";   // dns_fake_resolver.py
inline constexpr const char* kIodineServer4 = "10.77.0.66";   // iodined
inline constexpr const char* kDns2tcpServer4 = "10.77.0.67";  // dns2tcpd
inline constexpr const char* kIodineZone = "t1.attacker.test";
inline constexpr const char* kDns2tcpZone = "t2.attacker.test";
inline constexpr const char* kTunnelPassword = "airlockitpw";
inline constexpr const char* kRulePorts = "9000-9039";
inline constexpr int kHttpPort = 9080;  // outside the sink's range; rules that need it name it

std::string lower(std::string s);
// "a.b" -> "\x01a\x01b\x00" (labels as given; no trailing-dot handling beyond stripping it).
std::string dns_wire_name(const std::string& name);
// A standard query (RD, one question, no EDNS).
std::string dns_query_bytes(const std::string& name, uint16_t qtype, uint16_t id);

// ---- policies ----------------------------------------------------------------
json allow_domain(const std::string& domain, json ports = json::array({kRulePorts}));
json allow_cidr(const std::string& cidr, json ports = nullptr);
json deny_cidr(const std::string& cidr);
json dns_block(std::vector<std::string> resolvers = {kResolver4}, std::vector<std::string> types = {"A", "AAAA"});
json dns_policy(const std::string& name, json rules, json dns, const std::string& on_violation = "deny",
		const std::string& mode = "enforce");
// allow allowed.test and *.allowed.test on 9000-9039, deny 10.77.0.3/32; dns:
// resolvers [10.77.0.53], types [A, AAAA]. No rule names 10.77.0.2: it is
// reachable only through a learned answer.
json standard_dns_policy(const std::string& name, const std::string& on_violation = "deny",
			 const std::string& mode = "enforce");

// ---- the resolver --------------------------------------------------------------
struct DnsQuery {
	long serial = 0;
	std::string src;  // address/port dnsmasq logged ("10.77.0.1")
	int sport = 0;
	std::string type, name, from;
};
struct DnsForward {
	long serial = 0;
	std::string name, to;
};

class Resolver {
public:
	explicit Resolver(Env& env) : env_(env) {}
	// dnsmasq in the sink namespace on 10.77.0.53:53 (UDP and TCP), with the
	// test zone; returns once it answers a query from the client namespace.
	void start(Ms timeout = 10s);
	std::string log() const;
	const std::string& log_path() const { return log_; }
	std::vector<DnsQuery> queries() const;
	std::vector<DnsForward> forwarded() const;
	// Queries for exactly `name` (case-insensitive, trailing dot ignored), of `type` if given.
	size_t count(const std::string& name, const std::string& type = "") const;
	// Queries for zone or any name under it; and forwarded lines for them.
	size_t count_under(const std::string& zone) const;
	size_t forwarded_under(const std::string& zone) const;
	// Queries of a type, whatever the name.
	size_t count_type(const std::string& type) const;
	// Any log line about a datagram from 10.77.0.1:<sport> (dnsmasq logs even
	// the ones it refuses as malformed, with --log-queries=extra).
	size_t lines_from_port(int sport) const;
	// Case-insensitive substring anywhere in the log.
	bool mentions(const std::string& text) const;
	// One query from the client namespace, outside every sandbox; the raw
	// answer, or nullopt on timeout.
	std::optional<std::string> query(const std::string& name, uint16_t qtype = 1, Ms timeout = 1s);
	// Sends a query for a fresh name from the client namespace and waits until
	// dnsmasq has logged it: every datagram that reached it before is logged.
	bool fence(Ms timeout = 5s);
	Proc* proc() const { return proc_; }

private:
	Env& env_;
	Proc* proc_ = nullptr;
	std::string log_;
};

// ---- the lying resolver ---------------------------------------------------------
class FakeResolver {
public:
	explicit FakeResolver(Env& env) : env_(env) {}
	// dns_fake_resolver.py on 10.77.0.54:53 and 10.77.0.2:53 (sink namespace).
	void start(const std::string& mode = "good", Ms timeout = 10s);
	void set_mode(const std::string& mode);  // read by the server at each query
	std::vector<json> log() const;
	std::vector<json> queries(const std::string& to = "") const;  // kind "query", optionally to one address
	std::vector<json> sent() const;                               // kind "answer" and "unsolicited"
	size_t queries_for(const std::string& name, const std::string& to = "") const;
	const std::string& trigger_dir() const { return trigger_dir_; }
	const std::string& log_path() const { return log_; }
	Proc* proc() const { return proc_; }

private:
	Env& env_;
	Proc* proc_ = nullptr;
	std::string log_, mode_file_, trigger_dir_;
};

// ---- tunnel servers ----------------------------------------------------------------
class TunnelServer {
public:
	enum class Kind { Iodine, Dns2tcp };
	TunnelServer(Env& env, Kind kind) : env_(env), kind_(kind) {}
	// iodined: -f -c -DD -P pw 10.99.0.1 t1.attacker.test -l 10.77.0.66 -p 53
	// dns2tcpd: -F -d 3, listen 10.77.0.67:53, domain t2.attacker.test,
	//           resource sink:10.77.0.2:9000 (the harness's sink).
	void start(Ms timeout = 10s);
	std::string output() const;
	// Queries the server's debug output says it received ("RX: " for
	// iodined, "Receive query" for dns2tcpd).
	size_t queries_seen() const;
	const char* zone() const { return kind_ == Kind::Iodine ? kIodineZone : kDns2tcpZone; }
	Proc* proc() const { return proc_; }

private:
	Env& env_;
	Kind kind_;
	Proc* proc_ = nullptr;
};

// ---- an HTTP server (python -m http.server) on the sink, port 9080, v4 and v6 ----
class HttpServer {
public:
	explicit HttpServer(Env& env) : env_(env) {}
	void start(Ms timeout = 10s);
	// Serves `content` at /<file>.
	void put(const std::string& file, const std::string& content);
	// Request lines logged for /<file>.
	size_t requests_for(const std::string& file) const;
	std::string log() const;

private:
	Env& env_;
	Proc* proc_ = nullptr;
	std::string dir_;
};

// ---- frames seen on the wire (the harness sink's capture) ---------------------------
struct WireFrame {
	int proto = 0;  // 6 or 17
	std::string src, dst;
	int sport = 0, dport = 0;
	std::string payload;
};
// Incoming frames (client -> sink) captured by the sink, parsed to UDP/TCP.
std::vector<WireFrame> wire_frames(Env& env);
// The question name of a captured query (lowercase, no trailing dot), or
// nullopt if its first question cannot be walked without pointers.
std::optional<std::string> wire_qname(const WireFrame& f);
// Frames to port 53 asking for exactly `name` (case-insensitive); with
// under, for `name` or any name below it. A frame whose question cannot be
// decoded counts if its payload carries the name's wire form anywhere.
size_t wire_queries_for(Env& env, const std::string& name, bool under = false);
// Frames from 10.77.0.1:<sport> to port 53.
size_t wire_frames_from(Env& env, int sport);

// A self-signed certificate (openssl) for allowed.test, *.allowed.test and
// evil.test: DIR/cert.pem and DIR/key.pem (DIR is made).
struct OriginCert {
	std::string cert, key;
};
OriginCert make_origin_cert(const std::string& dir);

// ---- the world -------------------------------------------------------------------------
class DnsWorld {
public:
	explicit DnsWorld(Env& env);
	// Adds the resolver addresses to the sink veth (and permanent neighbour
	// entries for them in the client namespace) and starts the resolver.
	void start();
	FakeResolver& start_fake(const std::string& mode = "good");
	TunnelServer& start_iodined();
	TunnelServer& start_dns2tcpd();
	HttpServer& start_http();
	// A permanent neighbour entry (the sink's MAC) in the client namespace:
	// frames to addr leave at once and the sink's capture sees them.
	void add_neighbour(const std::string& addr);

	Env& env() { return env_; }
	Resolver& resolver() { return resolver_; }
	FakeResolver& fake() { return *fake_; }
	HttpServer& http() { return *http_; }

	// Files that the client side sees as /etc/resolv.conf and /etc/nsswitch.conf
	// (hosts: files dns).
	std::string resolv_conf(const std::string& nameserver = kResolver4);
	// argv that runs `argv` in a private mount namespace where those files are
	// bind-mounted over /etc/resolv.conf and /etc/nsswitch.conf.
	std::vector<std::string> with_resolv(const std::vector<std::string>& argv,
					     const std::string& nameserver = kResolver4);
	// `airlock run` in the client namespace (Env::run_argv) with the resolver set.
	Proc& start_run(const RunSpec& s, const std::string& nameserver = kResolver4);
	RunResult run(const RunSpec& s, Ms timeout = 20s, const std::string& nameserver = kResolver4);
	// The same command in the client namespace WITHOUT airlock (the oracle tests).
	RunResult bare(const std::vector<std::string>& cmd, Ms timeout = 20s,
		       const std::string& nameserver = kResolver4);
	// dns_exec.py TAG -- argv: a real client, timed, reported as JSON.
	std::vector<std::string> exec(const std::string& tag, const std::vector<std::string>& argv,
				      double timeout_s = 10, const std::string& stdin_text = "",
				      double stdin_hold_s = 0);

	std::string dump();

private:
	void add_sink_address(const std::string& addr);
	Env& env_;
	Resolver resolver_;
	std::unique_ptr<FakeResolver> fake_;
	std::unique_ptr<TunnelServer> iodined_, dns2tcpd_;
	std::unique_ptr<HttpServer> http_;
	std::set<std::string> resolv_files_;
};

RunResult parse_run(Proc& p, std::optional<int> st, bool timed_out);

// ---- audit-log matching for DNS decisions ----------------------------------------------
struct DnsMatch {
	std::optional<std::string> hook = std::string("egress");
	std::optional<std::string> verdict = std::string("deny");
	std::set<std::string> reasons;  // any of these (empty: any reason)
	std::optional<std::string> dst = std::string(kResolver4);
	std::optional<int> port = 53;
	std::optional<std::string> protocol;
	std::optional<std::string> qname;         // exact (lowercase, no trailing dot)
	std::optional<std::string> qname_suffix;  // qname == suffix or ends with "." + suffix
	std::optional<std::string> qtype;
	std::optional<bool> violation = true;
	std::string sandbox;  // when not empty
	std::string describe() const;
};
std::vector<json> dns_decisions(const std::vector<json>& lines, const DnsMatch& m);
::testing::AssertionResult DnsLogged(const std::vector<json>& lines, const DnsMatch& m, size_t at_least = 1);
DnsMatch DnsDenied(const std::string& reason, const std::string& sandbox,
		   std::optional<std::string> qname = std::nullopt, std::optional<std::string> qtype = std::nullopt);

// The resolver oracle for a denied name: after a resolver fence, dnsmasq never
// logged a query for it (of `type` if given), and after the harness fence no
// captured frame to port 53 carried it.
::testing::AssertionResult NeverQueried(DnsWorld& w, const std::string& name, const std::string& type = "");
// The same for a datagram identified by its source port (malformed ones
// carry no parsable name).
::testing::AssertionResult NeverSentFrom(DnsWorld& w, int sport);

// Lines of stdout of a run, as parsed JSON client results, by marker/tag.
json ResultOf(const RunResult& rr, const std::string& marker);

// ---- the fixture base ------------------------------------------------------------------------
// AirlockTest (its own namespaces, pins, cgroups, sink) plus a started DnsWorld.
class DnsTestBase : public AirlockTest {
protected:
	void SetUp() override
	{
		AirlockTest::SetUp();
		if (HasFatalFailure())
			return;
		world_ = std::make_unique<DnsWorld>(env());
		try {
			world_->start();
		} catch (const std::exception& e) {
			FAIL() << "DNS world setup failed (a test that cannot set up fails, it never skips): "
			       << e.what();
		}
	}
	void TearDown() override
	{
		if (HasFailure() && world_)
			std::cerr << world_->dump();
		world_.reset();
		AirlockTest::TearDown();
	}
	DnsWorld& world() { return *world_; }
	std::unique_ptr<DnsWorld> world_;
};

}  // namespace it
