// DNS enforcement, with real clients inside `airlock run` sandboxes in the
// client namespace (dig, getent, curl, glibc's getaddrinfo from Python, iodine,
// dns2tcpc) and crafted datagrams, against a real resolver (dnsmasq) and a
// lying one (dns_world.h).
//
// Policies name no address for 10.77.0.2 (unless a test says otherwise): a
// connect there succeeds only through an answer the kernel learned for the
// sandbox. Every denial is judged by two oracles: the resolver (or the sink's
// capture of the wire, or the fake resolver's log) never saw the forbidden
// name, datagram or marker, AND the audit log holds the violation with its
// hook, reason, qname and qtype. Every test has a legitimate twin that must
// work, so that "deny all DNS" cannot pass. test_dns_oracle.cpp shows each
// attack succeeds without airlock.
#include <signal.h>

#include <fmt/format.h>

#include "dns_world.h"

namespace it {
namespace {

constexpr double kFastMs = 500;  // a denied resolution must fail well under 1 s (EPERM at send)

struct Opts {
	bool log_allowed = false;
	bool keep_caps = false;
	std::string nameserver = kResolver4;
	std::string audit_log;
	Ms timeout = 20s;
	Opts& allowed()
	{
		log_allowed = true;
		return *this;
	}
	Opts& caps()
	{
		keep_caps = true;
		return *this;
	}
	Opts& ns(const std::string& n)
	{
		nameserver = n;
		return *this;
	}
	Opts& audit(const std::string& a)
	{
		audit_log = a;
		return *this;
	}
	std::string user;
	Opts& as(const std::string& u)
	{
		user = u;
		return *this;
	}
	Opts& timeout_of(Ms t)
	{
		timeout = t;
		return *this;
	}
};

class Dns : public DnsTestBase {
protected:
	std::string sandbox(const std::string& tag) { return "d" + env().id + "-" + tag; }

	RunSpec spec(const std::string& name, const std::string& policy, const std::vector<std::string>& cmd,
		     const Opts& o)
	{
		RunSpec s;
		s.policy = policy;
		s.name = name;
		s.cmd = cmd;
		s.log_allowed = o.log_allowed;
		s.keep_caps = o.keep_caps;
		s.audit_log = o.audit_log;
		s.user = o.user;
		return s;
	}

	// Runs cmd in a sandbox to completion; it must exit 0 and leave nothing behind.
	RunResult sandboxed(const std::string& name, const std::string& policy, const std::vector<std::string>& cmd,
			    Opts o = Opts())
	{
		RunResult rr = world().run(spec(name, policy, cmd, o), o.timeout, o.nameserver);
		EXPECT_FALSE(rr.r.timed_out) << rr.describe();
		EXPECT_EQ(rr.r.status, 0) << rr.describe();
		EXPECT_FALSE(exists(env().sandbox_cgroup(name))) << "sandbox cgroup left behind: " << name;
		return rr;
	}

	Proc& background(const std::string& name, const std::string& policy, const std::vector<std::string>& cmd,
			 Opts o = Opts())
	{
		return world().start_run(spec(name, policy, cmd, o), o.nameserver);
	}

	// A TLS origin in the sink's namespace on [::]:9443 (Python's
	// http.server and ssl), serving files from `www`, its certificate
	// (openssl, self-signed) for allowed.test, *.allowed.test and evil.test.
	struct TlsOrigin {
		std::string cert, www;
		Proc* proc = nullptr;
	};
	TlsOrigin tls_origin()
	{
		TlsOrigin t;
		std::string dir = env().path("tls-origin");
		t.www = dir + "/www";
		std::filesystem::create_directories(t.www);
		OriginCert c = make_origin_cert(dir);
		t.cert = c.cert;
		std::string key = c.key;
		std::string server = env().write_text(
			"tls_origin.py",
			"import http.server, socket, ssl, sys, functools\n"
			"class S(http.server.ThreadingHTTPServer): address_family = socket.AF_INET6\n"
			"h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[3])\n"
			"s = S(('::', 9443), h)\n"
			"c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[1], sys.argv[2])\n"
			"s.socket = c.wrap_socket(s.socket, server_side=True)\n"
			"print('serving', flush=True)\n"
			"s.serve_forever()\n");
		Proc& origin = env().start({"ip", "netns", "exec", env().topo->sink_ns, python(), "-u", server, t.cert,
					    key, t.www},
					   "tls-origin");
		wait_until([&] { return origin.out().find("serving") != std::string::npos || !origin.running(); }, 10s,
			   10ms);
		t.proc = &origin;
		return t;
	}

	// An echo server (tests/clients/echo_server.py) in the sink's namespace
	// on [::]:9444, once it listens; and a policy whose gated rule for
	// allowed.test covers it.
	Proc& start_echo()
	{
		Proc& echo = env().start({"ip", "netns", "exec", env().topo->sink_ns, python(), "-u",
					  client_script("echo_server.py"), "9444"},
					 "echo");
		wait_until([&] { return echo.out().find("serving") != std::string::npos || !echo.running(); }, 10s,
			   10ms);
		return echo;
	}
	json gated_echo_policy(const std::string& name)
	{
		json p = standard_dns_policy(name);
		p["rules"].push_back({{"action", "allow"},
				      {"domain", "allowed.test"},
				      {"ports", json::array({9444})},
				      {"protocol", "tcp"},
				      {"tls", {{"sni", "require"}}}});
		return p;
	}

	void sni_gate(const std::string& user);
	void http_gate(const std::string& user);
	void sni_gate_bulk(const std::string& user, const std::string& mode = "end");

	json result(const RunResult& rr, const std::string& marker)
	{
		json r = ResultFor(rr, marker);
		EXPECT_TRUE(r.is_object()) << "the client reported nothing for " << marker << "\n" << rr.describe();
		return r.is_object() ? r : json::object();
	}

	// dns_connect: resolved to `addr` and delivered the marker on the first connect.
	void expect_connected(const RunResult& rr, const std::string& marker, const std::string& addr = kAllowed4)
	{
		json r = result(rr, marker);
		EXPECT_TRUE(r.value("resolved", false)) << "a legitimate name did not resolve: " << r.dump();
		EXPECT_EQ(r.value("addr", json()), json(addr)) << r.dump();
		EXPECT_TRUE(Ok(r)) << "the first connect to a just-resolved address failed: " << r.dump();
		EXPECT_TRUE(ArrivedIntact(env(), marker));
	}

	// dns_connect: the resolution failed, fast, and nothing was connected.
	void expect_resolution_denied(const RunResult& rr, const std::string& marker)
	{
		json r = result(rr, marker);
		EXPECT_FALSE(r.value("resolved", true)) << "a denied name resolved: " << r.dump();
		EXPECT_LT(r.value("resolve_ms", 1e9), kFastMs)
			<< "a denied resolution must fail at once (EPERM at send), not time out: " << r.dump();
		EXPECT_TRUE(r.value("addr", json()).is_null()) << r.dump();
	}

	// dns_raw_query / dns_connect: the send (or connect) failed with EPERM, at once.
	void expect_eperm(const json& r, const std::string& what)
	{
		EXPECT_FALSE(Ok(r)) << what << ": the send succeeded: " << r.dump();
		EXPECT_EQ(Errno(r), "EPERM") << what << ": " << r.dump();
		EXPECT_LT(r.value("send_ms", 0.0), 100.0) << what << ": " << r.dump();
		EXPECT_FALSE(r.value("answered", false)) << what << ": an answer came back: " << r.dump();
	}

	void expect_answered(const json& r, const std::string& what, const std::string& addr = kAllowed4)
	{
		EXPECT_TRUE(Ok(r)) << what << ": " << r.dump();
		EXPECT_TRUE(r.value("answered", false)) << what << ": no answer: " << r.dump();
		if (r.contains("answer")) {
			EXPECT_EQ(r["answer"].value("addrs", json::array()), json::array({addr}))
				<< what << ": " << r.dump();
		}
	}

	std::vector<json> sandbox_events(const std::string& event, const std::string& name)
	{
		std::vector<json> out;
		for (const auto& j : events(env().audit(), event))
			if (j.value("sandbox", name) == name)
				out.push_back(j);
		return out;
	}

	// dns-answer events (with --log-allowed) for qname that taught addr.
	size_t learned(const std::string& name, const std::string& qname, const std::string& addr)
	{
		size_t n = 0;
		for (const auto& j : sandbox_events("dns-answer", name))
			if (j.value("qname", "") == qname && j.value("addr", "") == addr && j.value("learned", false))
				n++;
		return n;
	}

	// No deny decision of this sandbox names one of these qnames.
	::testing::AssertionResult NoDnsDenialFor(const std::string& name, const std::set<std::string>& qnames)
	{
		for (const auto& j : env().audit())
			if (j.value("event", "") == "decision" && j.value("sandbox", "") == name &&
			    j.value("verdict", "") != "allow" && j.contains("qname") && j["qname"].is_string() &&
			    qnames.count(j["qname"].get<std::string>()))
				return ::testing::AssertionFailure() << "a legitimate query was denied: " << j.dump();
		return ::testing::AssertionSuccess();
	}

	size_t violations(const std::string& name, const std::string& audit_path = "")
	{
		size_t n = 0;
		for (const auto& j : read_json_lines(audit_path.empty() ? env().audit_path() : audit_path))
			if (j.value("event", "") == "decision" && j.value("sandbox", "") == name &&
			    j.value("violation", false))
				n++;
		return n;
	}

	std::vector<std::string> dig(const std::string& tag, const std::string& name, const std::string& type,
				     std::vector<std::string> extra = {}, int time_s = 3)
	{
		std::vector<std::string> a = {"dig",      std::string("@") + kResolver4,   name,    type,
					      "+tries=1", fmt::format("+time={}", time_s), "+short"};
		a.insert(a.end(), extra.begin(), extra.end());
		return world().exec(tag, a, time_s + 5);
	}

	std::vector<std::string> raw(const json& specs, std::vector<std::string> opts = {})
	{
		// "json:": `airlock run` (CLI11) splits an argument "[a,b]" at its commas.
		opts.push_back("json:" + specs.dump());
		return env().py("dns_raw_query.py", opts);
	}

	static json q(const std::string& name, const std::string& type, const std::string& marker,
		      const std::string& c = "query")
	{
		return {{"case", c}, {"name", name}, {"type", type}, {"marker", marker}};
	}

	std::string frozen_state(const std::string& name)
	{
		auto st = env().status_of(name);
		return st ? st->value("state", "") : "(not listed)";
	}
};

// Real clients: dig, getent, getaddrinfo (v4, v6, both), curl, UDP.
TEST_F(Dns, AllowedNamesResolveAndConnectOnTheFirstTry)
{
	DnsWorld& w = world();
	HttpServer& http = w.start_http();
	json p = standard_dns_policy("it-dns-allowed");
	for (auto& r : p["rules"])
		if (r.contains("domain"))
			r["ports"] = json::array({kRulePorts, kHttpPort});
	std::string policy = env().write_policy("allowed.json", p);
	std::string name = sandbox("allowed");
	std::string m1 = env().marker("v4"), m2 = env().marker("mixed"), m3 = env().marker("v6"),
		    m4 = env().marker("any"), m5 = env().marker("udp"), m6 = env().marker("port"),
		    m7 = env().marker("rawip"), page = env().marker("curl");
	http.put(page, page);
	auto rr = sandboxed(name, policy,
			    Sequence({dig("dig", "allowed.test", "A"), dig("dig-mixed", "AlLoWeD.TeSt", "A"),
				      w.exec("getent", {"getent", "hosts", "x.allowed.test"}),
				      env().py("dns_connect.py", {"n1.allowed.test:9000", m1, "AlLoWeD.TeSt:9001", m2}),
				      env().py("dns_connect.py", {"--family", "6", "n2.allowed.test:9002", m3}),
				      env().py("dns_connect.py", {"--family", "any", "n3.allowed.test:9003", m4}),
				      env().py("dns_connect.py", {"--proto", "udp", "n4.allowed.test:9004", m5}),
				      w.exec("curl", {"curl", "-sS", "--max-time", "5",
						      fmt::format("http://n5.allowed.test:{}/{}", kHttpPort, page)}),
				      // A learned address opens only the rule's ports...
				      env().py("udp_send.py", {dest4(kAllowed4, 9050), m6}),
				      // ...but all of them, for the sandbox, without resolving again.
				      env().py("tcp_send.py", {dest4(kAllowed4, 9005), m7})}),
			    Opts().allowed());

	json dig1 = result(rr, "dig"), dig2 = result(rr, "dig-mixed");
	EXPECT_EQ(dig1.value("out", ""), "10.77.0.2\n") << dig1.dump();
	EXPECT_EQ(dig2.value("out", ""), "10.77.0.2\n") << "mixed case is the same name: " << dig2.dump();
	json g = result(rr, "getent");
	EXPECT_EQ(g.value("status", -1), 0) << g.dump();
	EXPECT_NE(g.value("out", "").find("fd77::2"), std::string::npos)
		<< "getent hosts asks AAAA first: " << g.dump();
	expect_connected(rr, m1);
	expect_connected(rr, m2);
	expect_connected(rr, m3, kAllowed6);
	json any = result(rr, m4);
	EXPECT_TRUE(Ok(any)) << any.dump();
	EXPECT_TRUE(ArrivedIntact(env(), m4));
	expect_connected(rr, m5);
	json c = result(rr, "curl");
	EXPECT_EQ(c.value("out", ""), page) << c.dump();
	EXPECT_EQ(http.requests_for(page), 1u) << http.log();
	json r7 = result(rr, m7);
	EXPECT_TRUE(Ok(r7)) << r7.dump();
	EXPECT_TRUE(ArrivedIntact(env(), m7));

	// The port outside the rule: denied, both oracles.
	json r6 = result(rr, m6);
	EXPECT_EQ(Errno(r6), "EPERM") << r6.dump();
	EXPECT_TRUE(NothingArrived(env(), m6));
	EXPECT_TRUE(Logged(env().audit(), Violation("sendmsg4", "no-rule", kAllowed4, 9050), name));
	EXPECT_EQ(violations(name), 1u) << "only the port outside the rule is a violation\n"
					<< dump_lines(env().audit());

	// The resolver saw every legitimate query.
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count("allowed.test", "A"), 3u) << "two digs and one getaddrinfo";
	EXPECT_GE(w.resolver().count("x.allowed.test", "AAAA"), 1u);
	EXPECT_EQ(w.resolver().count("n1.allowed.test", "A"), 1u);
	EXPECT_EQ(w.resolver().count("n2.allowed.test", "AAAA"), 1u);
	EXPECT_GE(w.resolver().count("n5.allowed.test"), 1u);

	// --log-allowed: allowed queries, learned answers, connects allowed by them.
	auto lines = env().audit();
	DnsMatch allow;
	allow.verdict = "allow";
	allow.reasons = {"dns-allow"};
	allow.violation = false;
	allow.sandbox = name;
	allow.qname = "n1.allowed.test";
	allow.qtype = "A";
	EXPECT_TRUE(DnsLogged(lines, allow));
	allow.qname = "allowed.test";  // AlLoWeD.TeSt, lowercased
	EXPECT_TRUE(DnsLogged(lines, allow, 2));
	EXPECT_GE(learned(name, "n1.allowed.test", kAllowed4), 1u) << dump_lines(lines);
	EXPECT_GE(learned(name, "n2.allowed.test", kAllowed6), 1u) << dump_lines(lines);
	for (const auto& j : sandbox_events("dns-answer", name))
		if (j.value("qname", "") == "n1.allowed.test") {
			EXPECT_EQ(j.value("ttl", -1), 60)
				<< "dnsmasq answers with TTL 60, inside [30, 3600]: " << j.dump();
		}
	Match viaLearned;
	viaLearned.hook = "connect4";
	viaLearned.verdict = "allow";
	viaLearned.reason = "learned";
	viaLearned.dst = kAllowed4;
	viaLearned.port = 9000;
	EXPECT_TRUE(Logged(lines, viaLearned, name));
	for (const auto& j : decisions(lines, viaLearned))
		EXPECT_TRUE(j.contains("rule") && j["rule"].is_number())
			<< "names the rule of the question: " << j.dump();
}

// Denied names, types and lengths: fast failure, never at the resolver.
TEST_F(Dns, DeniedNamesTypesAndLengthsFailFastAndNeverReachTheResolver)
{
	DnsWorld& w = world();
	json p = standard_dns_policy("it-dns-denied");
	p["dns"]["max_name_length"] = 40;
	p["dns"]["max_label_length"] = 20;
	std::string policy = env().write_policy("denied.json", p);
	std::string name = sandbox("denied");
	// Lengths count the presentation form without the trailing dot.
	std::string l20 = std::string(20, 'a') + ".allowed.test";                               // 33, label 20: ok
	std::string l21 = std::string(21, 'a') + ".allowed.test";                               // 34, label 21
	std::string n40 = std::string(13, 'b') + "." + std::string(13, 'c') + ".allowed.test";  // 40: ok
	std::string n41 = std::string(14, 'b') + "." + std::string(13, 'c') + ".allowed.test";  // 41
	ASSERT_EQ(n40.size(), 40u);
	std::string d1 = env().marker("denied"), d2 = env().marker("bad"), d3 = env().marker("upper"),
		    d4 = env().marker("label"), d5 = env().marker("name"), d6 = env().marker("caps");
	std::string a1 = env().marker("l20"), a2 = env().marker("n40"), a3 = env().marker("ok"),
		    a4 = env().marker("mixed");
	auto rr = sandboxed(name, policy,
			    Sequence({env().py("dns_connect.py", {"denied.test:9000",
								  d1,
								  "badallowed.test:9001",
								  d2,
								  "UPPER.DENIED.TEST:9002",
								  d3,
								  l21 + ":9003",
								  d4,
								  n41 + ":9004",
								  d5,
								  l20 + ":9005",
								  a1,
								  n40 + ":9006",
								  a2,
								  "ok.allowed.test:9007",
								  a3,
								  "AlLoWeD.TeSt:9008",
								  a4,
								  "DENIED.TEST:9009",
								  d6}),
				      raw(json::array({q("txt.allowed.test", "TXT", "txt"),
						       q("allowed.test", "NULL", "null"),
						       q("allowed.test", "ANY", "any"),
						       q("allowed.test", "TYPE65280", "private"),
						       q("allowed.test", "A", "twin"),
						       {{"case", "query"},
							{"name", "AlLoWeD.TeSt"},
							{"edns", true},
							{"marker", "twin-edns"}}}),
					  {"--wait", "1"}),
				      // dig ignores EPERM from its UDP send and waits out +time: kept short.
				      dig("dig-denied", "denied.test", "A", {}, 1),
				      dig("dig-txt", "txt.allowed.test", "TXT", {}, 1),
				      w.exec("getent", {"getent", "hosts", "denied.test"}),
				      w.exec("curl", {"curl", "-sS", "--max-time", "5", "http://denied.test:9000/"})}));

	for (const auto& m : {d1, d2, d3, d4, d5, d6})
		expect_resolution_denied(rr, m);
	for (const auto& m : {a1, a2, a3, a4})
		expect_connected(rr, m);
	for (const auto& t : {"txt", "null", "any", "private"})
		expect_eperm(result(rr, t), t);
	expect_answered(result(rr, "twin"), "plain A query");
	expect_answered(result(rr, "twin-edns"), "query with EDNS0 and a cookie, like dig's");
	json dd = result(rr, "dig-denied");
	EXPECT_NE(dd.value("status", 0), 0) << dd.dump();
	EXPECT_EQ(dd.value("out", "").find("10.77.0.2"), std::string::npos) << dd.dump();
	json dt = result(rr, "dig-txt");
	EXPECT_NE(dt.value("status", 0), 0) << dt.dump();
	json g = result(rr, "getent");
	EXPECT_EQ(g.value("status", -1), 2) << "getent: not found" << g.dump();
	EXPECT_LT(g.value("ms", 1e9), kFastMs) << g.dump();
	json c = result(rr, "curl");
	EXPECT_EQ(c.value("status", -1), 6) << "curl: could not resolve host" << c.dump();
	EXPECT_LT(c.value("ms", 1e9), 1000.0) << c.dump();

	// Oracle 1: the resolver and the wire never saw them.
	EXPECT_TRUE(NeverQueried(w, "denied.test"));
	EXPECT_TRUE(NeverQueried(w, "upper.denied.test"));
	EXPECT_TRUE(NeverQueried(w, "badallowed.test"));
	EXPECT_TRUE(NeverQueried(w, l21));
	EXPECT_TRUE(NeverQueried(w, n41));
	EXPECT_TRUE(NeverQueried(w, "txt.allowed.test"));
	EXPECT_EQ(w.resolver().count_type("TXT"), 0u);
	EXPECT_EQ(w.resolver().count_type("NULL"), 0u);
	EXPECT_EQ(w.resolver().count_type("ANY"), 0u);
	EXPECT_EQ(w.resolver().count_type("TYPE65280") + w.resolver().count_type("type=65280"), 0u);
	EXPECT_GE(w.resolver().count(l20), 1u);
	EXPECT_GE(w.resolver().count(n40), 1u);

	// Oracle 2: the audit log, lowercased names, type names.
	auto lines = env().audit();
	EXPECT_TRUE(
		DnsLogged(lines, DnsDenied("dns-name", name, "denied.test", "A"), 3));  // denied.test, DENIED.TEST, dig
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-name", name, "upper.denied.test", "A")));
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-name", name, "badallowed.test", "A")));
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-length", name, l21, "A")));
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-length", name, n41, "A")));
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-type", name, "txt.allowed.test", "TXT"), 2));
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-type", name, "allowed.test", "NULL")));
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-type", name, "allowed.test", "ANY")));
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-type", name, "allowed.test", "TYPE65280")));
	for (const auto& j : dns_decisions(lines, DnsDenied("dns-name", name))) {
		EXPECT_EQ(j.value("protocol", ""), "udp") << j.dump();
		EXPECT_TRUE(j.contains("pid") && j.contains("comm")) << j.dump();
	}
	EXPECT_TRUE(NoDnsDenialFor(name, {lower(l20), n40, "ok.allowed.test"}));
}

// An exact rule is the name itself, nothing below.
TEST_F(Dns, ExactRuleCoversOnlyTheNameItself)
{
	DnsWorld& w = world();
	std::string policy = env().write_policy("exact.json",
						dns_policy("it-dns-exact", json::array({allow_domain("allowed.test")}),
							   dns_block()));
	std::string name = sandbox("exact");
	std::string a = env().marker("exact"), d1 = env().marker("sub"), d2 = env().marker("deep");
	auto rr = sandboxed(name, policy,
			    env().py("dns_connect.py", {"allowed.test:9000", a, "sub.allowed.test:9001", d1,
							"a.b.allowed.test:9002", d2}));
	expect_connected(rr, a);
	expect_resolution_denied(rr, d1);
	expect_resolution_denied(rr, d2);
	EXPECT_TRUE(NeverQueried(w, "sub.allowed.test"));
	EXPECT_TRUE(NeverQueried(w, "a.b.allowed.test"));
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-name", name, "sub.allowed.test", "A")));
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-name", name, "a.b.allowed.test", "A")));
}

// A wildcard is strictly below: not the name itself, not a lookalike.
TEST_F(Dns, WildcardRuleCoversOnlyNamesStrictlyBelow)
{
	DnsWorld& w = world();
	std::string policy = env().write_policy("wild.json",
						dns_policy("it-dns-wild", json::array({allow_domain("*.allowed.test")}),
							   dns_block()));
	std::string name = sandbox("wild");
	std::string d1 = env().marker("apex"), d2 = env().marker("lookalike"), a1 = env().marker("deep"),
		    a2 = env().marker("sub");
	auto rr = sandboxed(name, policy,
			    env().py("dns_connect.py", {"allowed.test:9000", d1, "badallowed.test:9001", d2,
							"a.b.allowed.test:9002", a1, "Sub.Allowed.Test:9003", a2}));
	expect_resolution_denied(rr, d1);
	expect_resolution_denied(rr, d2);
	expect_connected(rr, a1);
	expect_connected(rr, a2);
	EXPECT_TRUE(NeverQueried(w, "allowed.test"));
	EXPECT_TRUE(NeverQueried(w, "badallowed.test"));
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-name", name, "allowed.test", "A")));
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-name", name, "badallowed.test", "A")));
	EXPECT_TRUE(NoDnsDenialFor(name, {"a.b.allowed.test", "sub.allowed.test"}));
}

// Datagrams to port 53 that are not one plain question.
TEST_F(Dns, MalformedQueriesAreDroppedAtEgress)
{
	DnsWorld& w = world();
	std::string policy = env().write_policy("malformed.json", standard_dns_policy("it-dns-malformed"));
	std::string name = sandbox("malformed");
	// Where the name itself is broken, dns-name is acceptable too.
	std::vector<std::string> name_cases = {"ptr", "label-overrun", "reserved-label"};
	std::vector<std::string> other_cases = {"two-questions", "zero-questions",     "qr",           "opcode",
						"trailing",      "trailing-after-opt", "short-header", "empty"};
	json specs = json::array();
	std::map<std::string, std::string> markers;
	for (const auto& group : {name_cases, other_cases})
		for (const auto& c : group) {
			markers[c] = env().marker(c.substr(0, 8));
			// An allowed name (the marker under allowed.test): only the shape is wrong.
			specs.push_back(q(markers[c] + ".allowed.test", "A", markers[c], c));
		}
	std::string t1 = env().marker("twin"), t2 = env().marker("twin-edns");
	specs.push_back(q(t1 + ".allowed.test", "A", t1));
	specs.push_back({{"case", "query"}, {"name", t2 + ".allowed.test"}, {"edns", true}, {"marker", t2}});
	auto rr = sandboxed(name, policy, raw(specs, {"--wait", "0.5"}));

	expect_answered(result(rr, t1), "well-formed twin");
	expect_answered(result(rr, t2), "well-formed twin with EDNS0");
	for (const auto& [c, m] : markers) {
		SCOPED_TRACE(c);
		json r = result(rr, m);
		expect_eperm(r, c);
		EXPECT_TRUE(NeverSentFrom(w, r.value("sport", 0)));
		EXPECT_FALSE(w.resolver().mentions(m)) << "the resolver logged the marker of " << c;
	}
	auto lines = env().audit();
	DnsMatch mal = DnsDenied("dns-malformed", name);
	EXPECT_TRUE(DnsLogged(lines, mal, other_cases.size()));
	// Garbage after an OPT record breaks the record's length: dns-edns.
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-edns", name), 1));
	mal.reasons = {"dns-malformed", "dns-name", "dns-edns"};
	EXPECT_TRUE(DnsLogged(lines, mal, other_cases.size() + name_cases.size()));
	EXPECT_TRUE(NoDnsDenialFor(name, {lower(t1) + ".allowed.test", lower(t2) + ".allowed.test"}));
}

// Port 53 only to a listed resolver, whatever the CIDR rules say.
TEST_F(Dns, OnlyListedResolversMayBeAsked)
{
	DnsWorld& w = world();
	FakeResolver& fake = w.start_fake("good");
	json p = standard_dns_policy("it-dns-resolvers");
	// 10.77.0.2 allowed on every port by CIDR: port 53 there is still not a resolver.
	p["rules"].push_back(allow_cidr("10.77.0.2/32"));
	p["rules"].push_back(allow_cidr("fd77::2/128"));
	std::string policy = env().write_policy("resolvers.json", p);
	std::string name = sandbox("resolvers");
	auto nm = [&](const std::string& tag) { return env().marker(tag) + ".allowed.test"; };
	std::string n54 = nm("r54"), n2 = nm("r2"), nc = nm("r54c"), n6 = nm("r6"), nt = nm("r54t"), twin = nm("twin");
	std::string tcp_twin = env().marker("cidr");
	auto one = [&](const std::string& n) { return json::array({q(n, "A", n)}); };
	auto rr = sandboxed(
		name, policy,
		Sequence({raw(one(n54), {"--server", kFakeResolver4}), raw(one(n2), {"--server", kAllowed4}),
			  raw(one(nc), {"--server", kFakeResolver4, "--connect"}),
			  raw(one(n6), {"--server", kAllowed6}), raw(one(nt), {"--server", kFakeResolver4, "--tcp"}),
			  raw(one(twin)), env().py("tcp_send.py", {dest4(kAllowed4, 9000), tcp_twin})}));
	for (const auto& n : {n54, n2, nc, n6, nt})
		expect_eperm(result(rr, n), n);
	EXPECT_EQ(result(rr, nc).value("stage", ""), "connect") << "a connected UDP socket is refused at connect";
	EXPECT_EQ(result(rr, nt).value("stage", ""), "connect");
	expect_answered(result(rr, twin), "query to the listed resolver");
	EXPECT_TRUE(ArrivedIntact(env(), tcp_twin)) << "the CIDR rule still opens 10.77.0.2 off port 53";

	// glibc pointed at an unlisted resolver: its connect() fails, at once.
	std::string name2 = sandbox("resolvers2");
	std::string g = env().marker("gai");
	auto rr2 = sandboxed(name2, policy, env().py("dns_connect.py", {"x.allowed.test:9001", g}),
			     Opts().ns(kFakeResolver4));
	expect_resolution_denied(rr2, g);

	// Oracle 1: nothing reached the wire or the fake resolver.
	ASSERT_TRUE(env().fence());
	for (const auto& n : {n54, n2, nc, n6, nt}) {
		EXPECT_EQ(wire_queries_for(env(), n), 0u) << "LEAK on the wire: " << n;
		EXPECT_EQ(fake.queries_for(n), 0u) << "LEAK: the fake resolver got " << n;
	}
	EXPECT_EQ(fake.queries_for("x.allowed.test"), 0u);
	EXPECT_EQ(fake.queries().size(), 0u) << dump_lines(fake.log());
	size_t tcp53 = 0;
	for (const auto& f : wire_frames(env()))
		if (f.proto == 6 && f.dport == 53)
			tcp53++;
	EXPECT_EQ(tcp53, 0u) << "a TCP segment to port 53 left";

	// Oracle 2: the audit log.
	auto lines = env().audit();
	auto resolver = [&](const std::string& hook, const std::string& dst, const std::string& sb, size_t n = 1) {
		DnsMatch m = DnsDenied("dns-resolver", sb);
		m.hook = hook;
		m.dst = dst;
		return DnsLogged(lines, m, n);
	};
	EXPECT_TRUE(resolver("sendmsg4", kFakeResolver4, name));
	EXPECT_TRUE(resolver("sendmsg4", kAllowed4, name));
	EXPECT_TRUE(resolver("connect4", kFakeResolver4, name, 2));  // connected UDP and TCP
	EXPECT_TRUE(resolver("sendmsg6", kAllowed6, name));
	EXPECT_TRUE(resolver("connect4", kFakeResolver4, name2));
}

// TCP to the resolver only with dns.tcp.
TEST_F(Dns, TcpToTheResolverNeedsDnsTcp)
{
	DnsWorld& w = world();
	std::string policy = env().write_policy("notcp.json", standard_dns_policy("it-dns-notcp"));
	std::string name = sandbox("notcp");
	std::string n1 = env().marker("digtcp") + ".allowed.test", n2 = env().marker("rawtcp") + ".allowed.test",
		    n3 = env().marker("udp") + ".allowed.test";
	auto rr = sandboxed(name, policy,
			    Sequence({dig("digtcp", n1, "A", {"+tcp"}, 2),
				      raw(json::array({q(n2, "A", n2)}), {"--tcp"}), dig("digudp", n3, "A")}));
	json dt = result(rr, "digtcp");
	EXPECT_NE(dt.value("status", 0), 0) << dt.dump();
	EXPECT_LT(dt.value("ms", 1e9), 1000.0) << "connect() fails with EPERM at once: " << dt.dump();
	EXPECT_NE((dt.value("out", "") + dt.value("err", "")).find("permission denied"), std::string::npos)
		<< dt.dump();
	expect_eperm(result(rr, n2), "raw TCP query");
	EXPECT_EQ(result(rr, n2).value("stage", ""), "connect");
	EXPECT_EQ(result(rr, "digudp").value("out", ""), "10.77.0.2\n") << result(rr, "digudp").dump();
	EXPECT_TRUE(NeverQueried(w, n1));
	EXPECT_TRUE(NeverQueried(w, n2));
	size_t tcp53 = 0;
	for (const auto& f : wire_frames(env()))
		if (f.proto == 6 && f.dport == 53)
			tcp53++;
	EXPECT_EQ(tcp53, 0u) << "not even a SYN may leave";
	DnsMatch m = DnsDenied("dns-tcp", name);
	m.hook = "connect4";
	m.protocol = "tcp";
	EXPECT_TRUE(DnsLogged(env().audit(), m, 2));

	// With dns.tcp: the same clients work.
	json p = standard_dns_policy("it-dns-tcp");
	p["dns"]["tcp"] = true;
	std::string policy2 = env().write_policy("tcp.json", p);
	std::string name2 = sandbox("tcp");
	std::string n4 = env().marker("digtcp2") + ".allowed.test", n5 = env().marker("rawtcp2") + ".allowed.test";
	auto rr2 = sandboxed(name2, policy2,
			     Sequence({dig("digtcp2", n4, "A", {"+tcp"}),
				       raw(json::array({q(n5, "A", n5)}), {"--tcp"})}));
	EXPECT_EQ(result(rr2, "digtcp2").value("out", ""), "10.77.0.2\n") << result(rr2, "digtcp2").dump();
	expect_answered(result(rr2, n5), "TCP query with dns.tcp");
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count(n4), 1u);
	EXPECT_EQ(w.resolver().count(n5), 1u);
	EXPECT_EQ(violations(name2), 0u) << dump_lines(env().audit());
}

// Answers teach only when they answer a question this sandbox asked.
TEST_F(Dns, ForgedAnswersTeachNothing)
{
	DnsWorld& w = world();
	FakeResolver& fake = w.start_fake("good");
	json p = standard_dns_policy("it-dns-spoof");
	p["dns"]["resolvers"] = json::array({kFakeResolver4});
	std::string policy = env().write_policy("spoof.json", p);
	for (std::string mode : {"good", "wrong-id", "wrong-name", "from-other-source", "unsolicited"}) {
		SCOPED_TRACE(mode);
		std::string name = sandbox(mode.substr(0, 10));
		std::string m = env().marker(mode.substr(0, 8));
		std::vector<std::string> args = {"--server",  kFakeResolver4,
						 "--name",    mode + ".spoof.allowed.test",
						 "--wait",    "1.0",
						 "--connect", dest4(kAllowed4, 9000),
						 "--marker",  m};
		if (mode == "unsolicited")
			args.insert(args.end(), {"--unsolicited", fake.trigger_dir()});
		else
			fake.set_mode(mode);
		size_t sent_before = fake.sent().size();
		auto rr = sandboxed(name, policy, env().py("dns_spoof_client.py", args));
		json out = rr.last();
		ASSERT_TRUE(out.contains("received")) << rr.describe();
		// The attack was made: the fake resolver sent its (forged) answer.
		EXPECT_EQ(fake.sent().size(), sent_before + 1) << dump_lines(fake.log());
		json r = result(rr, m);
		if (mode == "good") {
			EXPECT_EQ(out["sent"].value("errno", json()), json()) << out.dump();
			ASSERT_EQ(out["received"].size(), 1u) << out.dump();
			EXPECT_EQ(out["received"][0]["addrs"], json::array({kAllowed4})) << out.dump();
			EXPECT_TRUE(Ok(r)) << "a genuine answer must open its address: " << r.dump();
			EXPECT_TRUE(ArrivedIntact(env(), m));
			continue;
		}
		EXPECT_TRUE(out["received"].empty()) << "the forged answer reached the socket: " << out.dump();
		EXPECT_EQ(Errno(r), "EPERM") << "a forged answer opened " << kAllowed4 << ": " << r.dump();
		EXPECT_TRUE(NothingArrived(env(), m));
		Match v = Violation("connect4", "no-rule", kAllowed4, 9000);
		EXPECT_TRUE(Logged(env().audit(), v, name));
	}
}

// The answer is learned before the socket sees it: a connect right after the
// answer never loses the race. 30 names, 30 fresh addresses.
TEST_F(Dns, ConnectRightAfterTheAnswerAlwaysSucceeds)
{
	DnsWorld& w = world();
	w.start_fake("good");
	for (int k = 0; k < 30; k++)
		w.add_neighbour(fmt::format("10.77.0.{}", 100 + k));
	json p = standard_dns_policy("it-dns-race");
	p["dns"]["resolvers"] = json::array({kFakeResolver4});
	std::string policy = env().write_policy("race.json", p);
	std::string name = sandbox("race");
	std::vector<std::string> args = {"--proto", "udp"}, markers;
	for (int k = 0; k < 30; k++) {
		markers.push_back(env().marker(fmt::format("race{}", k)));
		args.push_back(fmt::format("n{}.race.allowed.test:{}", k, 9000 + k));
		args.push_back(markers.back());
	}
	// The same range, never resolved: closed. The 30 successes are the answers' doing.
	w.add_neighbour("10.77.0.130");
	std::string unresolved = env().marker("unresolved");
	auto rr = sandboxed(name, policy,
			    Sequence({env().py("dns_connect.py", args),
				      env().py("udp_send.py", {dest4("10.77.0.130", 9000), unresolved})}),
			    Opts().ns(kFakeResolver4));
	EXPECT_EQ(Errno(result(rr, unresolved)), "EPERM") << result(rr, unresolved).dump();
	EXPECT_TRUE(NothingArrived(env(), unresolved));
	EXPECT_TRUE(Logged(env().audit(), Violation("sendmsg4", "no-rule", "10.77.0.130", 9000), name));
	for (int k = 0; k < 30; k++) {
		json r = result(rr, markers[k]);
		EXPECT_EQ(r.value("addr", json()), json(fmt::format("10.77.0.{}", 100 + k))) << r.dump();
		EXPECT_TRUE(Ok(r)) << "the datagram right after the answer was refused: " << r.dump();
		EXPECT_TRUE(env().sink->wait_frames(markers[k], 1, 2s)) << markers[k];
	}
	EXPECT_EQ(violations(name), 1u) << "only the unresolved address" << dump_lines(env().audit());
}

// What one sandbox learned opens nothing for another.
TEST_F(Dns, LearnedAddressesBelongToOneSandbox)
{
	DnsWorld& w = world();
	std::string pa = env().write_policy("a.json", standard_dns_policy("it-dns-a"));
	std::string pb = env().write_policy("b.json", dns_policy("it-dns-b", json::array({allow_domain("other.test")}),
								 dns_block()));
	std::string na = sandbox("a"), nb = sandbox("b");
	std::string resolved = env().path("a-resolved"), done = env().path("b-done");
	std::string ma1 = env().marker("a1"), ma2 = env().marker("a2"), mb1 = env().marker("b1"),
		    mb2 = env().marker("b2");
	Proc& a = background(na, pa,
			     Sequence({env().py("dns_connect.py",
						{"--done", resolved, "--then-wait", done, "allowed.test:9000", ma1}),
				       env().py("tcp_send.py", {dest4(kAllowed4, 9001), ma2})}));
	Proc& b = background(nb, pb,
			     Sequence({env().py("wait_file.py", {resolved, "15"}),
				       env().py("tcp_send.py", {dest4(kAllowed4, 9002), mb1}),
				       env().py("dns_connect.py", {"--done", done, "allowed.test:9003", mb2})}));
	auto sb = b.wait(20s);
	auto sa = a.wait(20s);
	ASSERT_TRUE(sa && sb) << a.describe() << "\n" << b.describe();
	RunResult ra = parse_run(a, sa, false), rb = parse_run(b, sb, false);
	EXPECT_EQ(*sa, 0) << ra.describe();
	EXPECT_EQ(*sb, 0) << rb.describe();
	// A, before and after B's attempts.
	expect_connected(ra, ma1);
	EXPECT_TRUE(Ok(result(ra, ma2))) << "A's learned address must still be open for A";
	EXPECT_TRUE(ArrivedIntact(env(), ma2));
	// B, while A's learned entry is live.
	EXPECT_TRUE(rb.out_json.size() >= 1 && rb.out_json[0].value("found", false)) << rb.describe();
	EXPECT_EQ(Errno(result(rb, mb1)), "EPERM") << result(rb, mb1).dump();
	expect_resolution_denied(rb, mb2);
	EXPECT_TRUE(NothingArrived(env(), mb1));
	EXPECT_TRUE(NothingArrived(env(), mb2));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kAllowed4, 9002), nb));
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-name", nb, "allowed.test", "A")));
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count("allowed.test"), 1u) << "only A's query reached the resolver";
	EXPECT_EQ(violations(na), 0u);
}

// A name under an allowed zone that points at a denied address.
TEST_F(Dns, RebindingToADeniedAddressIsStillDenied)
{
	DnsWorld& w = world();
	std::string policy = env().write_policy("rebind.json", standard_dns_policy("it-dns-rebind"));
	std::string name = sandbox("rebind");
	std::string d1 = env().marker("rebind-tcp"), d2 = env().marker("rebind-udp"), a = env().marker("twin");
	auto rr = sandboxed(name, policy,
			    Sequence({env().py("dns_connect.py", {"rebind.allowed.test:9000", d1}),
				      env().py("dns_connect.py", {"--proto", "udp", "rebind.allowed.test:9001", d2}),
				      env().py("dns_connect.py", {"ok.allowed.test:9002", a})}));
	for (const auto& m : {d1, d2}) {
		json r = result(rr, m);
		EXPECT_TRUE(r.value("resolved", false)) << "the query itself is allowed: " << r.dump();
		EXPECT_EQ(r.value("addr", json()), json(kDenied4)) << r.dump();
		EXPECT_EQ(Errno(r), "EPERM") << "the deny rule must win over the learned address: " << r.dump();
		EXPECT_TRUE(NothingArrived(env(), m));
	}
	expect_connected(rr, a);
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "rule-deny", kDenied4, 9000), name));
	EXPECT_TRUE(Logged(env().audit(), Violation("sendmsg4", "rule-deny", kDenied4, 9001), name));
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_GE(w.resolver().count("rebind.allowed.test", "A"), 1u);
}

// A CNAME chain: the addresses at its end are learned under the rule of the
// question's name; the chain's other names stay denied as questions.
TEST_F(Dns, CnameChainIsLearnedUnderTheQuestionsRule)
{
	DnsWorld& w = world();
	std::string policy = env().write_policy("chain.json",
						dns_policy("it-dns-chain",
							   json::array({allow_domain("www.chain.test")}), dns_block()));
	std::string name = sandbox("chain");
	std::string a = env().marker("www"), a6 = env().marker("www6"), d1 = env().marker("end"),
		    d2 = env().marker("mid");
	auto rr = sandboxed(name, policy,
			    Sequence({env().py("dns_connect.py", {"www.chain.test:9000", a}),
				      env().py("dns_connect.py", {"--family", "6", "www.chain.test:9001", a6}),
				      env().py("dns_connect.py",
					       {"end.chain.test:9002", d1, "mid.chain.test:9003", d2})}),
			    Opts().allowed());
	expect_connected(rr, a);
	expect_connected(rr, a6, kAllowed6);
	expect_resolution_denied(rr, d1);
	expect_resolution_denied(rr, d2);
	EXPECT_TRUE(NeverQueried(w, "end.chain.test"));
	EXPECT_TRUE(NeverQueried(w, "mid.chain.test"));
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-name", name, "end.chain.test", "A")));
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-name", name, "mid.chain.test", "A")));
	EXPECT_GE(learned(name, "www.chain.test", kAllowed4), 1u) << dump_lines(env().audit());
	EXPECT_GE(learned(name, "www.chain.test", kAllowed6), 1u) << dump_lines(env().audit());
}

// The per-sandbox query budget.
TEST_F(Dns, QueryRateIsBudgetedPerSandbox)
{
	DnsWorld& w = world();
	json p = standard_dns_policy("it-dns-rate");
	p["dns"]["queries_per_second"] = 5;
	p["dns"]["query_burst"] = 10;
	std::string policy = env().write_policy("rate.json", p);
	std::string name = sandbox("rate");
	json specs = json::array();
	auto qn = [&](int i) { return fmt::format("r{}-{}.allowed.test", i, env().id); };
	for (int i = 0; i < 40; i++)
		specs.push_back(q(qn(i), "A", fmt::format("r{}", i)));
	auto rr = sandboxed(name, policy, raw(specs, {"--wait", "0.5"}));
	size_t passed = 0, denied = 0, later_passes = 0;
	bool seen_denial = false;
	for (int i = 0; i < 40; i++) {
		json r = result(rr, fmt::format("r{}", i));
		if (Ok(r)) {
			passed++;
			later_passes += seen_denial;
			EXPECT_TRUE(r.value("answered", false)) << r.dump();
		} else {
			denied++;
			seen_denial = true;
			EXPECT_EQ(Errno(r), "EPERM") << r.dump();
		}
		if (i < 10) {
			EXPECT_TRUE(Ok(r)) << "query " << i << " is within the burst: " << r.dump();
		}
	}
	// The burst, plus what 5/s refilled while the 40 were sent (well under a
	// second here; measured, so that a slow machine does not fail the test).
	double elapsed = result(rr, "r39").value("t", 0.0) - result(rr, "r0").value("t", 0.0);
	size_t refill = static_cast<size_t>(5 * elapsed) + 1;
	EXPECT_GE(passed, 10u);
	EXPECT_LE(passed, 10u + refill) << "elapsed " << elapsed << " s";
	EXPECT_LE(later_passes, refill) << "elapsed " << elapsed << " s";
	EXPECT_GE(denied, 20u) << "elapsed " << elapsed << " s";
	ASSERT_TRUE(w.resolver().fence());
	size_t at_resolver = 0;
	for (int i = 0; i < 40; i++) {
		size_t n = w.resolver().count(qn(i));
		EXPECT_EQ(n, Ok(result(rr, fmt::format("r{}", i))) ? 1u : 0u) << qn(i);
		at_resolver += n;
	}
	EXPECT_EQ(at_resolver, passed);
	// Past the event rate limit (a burst of 20, then 5 a second) denials are
	// counted in "suppressed" lines: lines plus counts are every denial.
	uint64_t held = 0;
	for (const auto& j : events(env().audit(), "suppressed"))
		if (j.value("sandbox", "") == name && j.value("reason", "") == "dns-rate")
			held += j["count"].get<uint64_t>();
	EXPECT_EQ(dns_decisions(env().audit(), DnsDenied("dns-rate", name)).size() + held, denied);

	// Another sandbox has its own budget.
	std::string name2 = sandbox("rate2");
	json specs2 = json::array();
	for (int i = 0; i < 5; i++)
		specs2.push_back(q(fmt::format("s{}-{}.allowed.test", i, env().id), "A", fmt::format("s{}", i)));
	auto rr2 = sandboxed(name2, policy, raw(specs2, {"--wait", "0.5"}));
	for (int i = 0; i < 5; i++)
		expect_answered(result(rr2, fmt::format("s{}", i)), "second sandbox");
	EXPECT_EQ(violations(name2), 0u);
}

// iodine (IP over DNS, NULL queries under t1.attacker.test).
TEST_F(Dns, IodineTunnelNeverEstablishes)
{
	DnsWorld& w = world();
	TunnelServer& iodined = w.start_iodined();
	std::vector<std::string> iodine = {"iodine", "-f", "-r", "-P", kTunnelPassword, kResolver4, kIodineZone};
	std::string a = env().marker("twin");
	std::string name = sandbox("iodine");
	// --keep-caps: iodine opens /dev/net/tun before it sends anything; without
	// CAP_NET_ADMIN it would give up before the first query.
	auto rr = sandboxed(name, env().write_policy("iodine.json", standard_dns_policy("it-dns-iodine")),
			    Sequence({env().py("dns_connect.py", {"ok.allowed.test:9000", a}),
				      w.exec("iodine", iodine, 4)}),
			    Opts().caps());
	expect_connected(rr, a);
	json io = result(rr, "iodine");
	std::string io_out = io.value("out", "") + io.value("err", "");
	EXPECT_NE(io_out.find("Opened dns0"), std::string::npos) << "iodine never got to send: " << io.dump();
	EXPECT_EQ(io_out.find("Version ok"), std::string::npos) << io.dump();
	EXPECT_EQ(io_out.find("Connection setup complete"), std::string::npos) << io.dump();
	EXPECT_EQ(iodined.queries_seen(), 0u) << iodined.output();
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count_under(kIodineZone), 0u);
	EXPECT_EQ(w.resolver().forwarded_under(kIodineZone), 0u);
	ASSERT_TRUE(env().fence());
	EXPECT_EQ(wire_queries_for(env(), kIodineZone, true), 0u);
	DnsMatch m = DnsDenied("dns-name", name);
	m.reasons = {"dns-name", "dns-type"};
	m.qname_suffix = kIodineZone;
	EXPECT_TRUE(DnsLogged(env().audit(), m));

	// With on_violation freeze: the first tunnel query freezes the sandbox.
	std::string fname = sandbox("iodine-frz");
	std::string a2 = env().marker("twin-frz");
	Proc& runner = background(
		fname, env().write_policy("iodine-frz.json", standard_dns_policy("it-dns-iodine-frz", "freeze")),
		Sequence({env().py("dns_connect.py", {"ok2.allowed.test:9001", a2}), w.exec("iodine", iodine, 8)}),
		Opts().caps());
	ASSERT_TRUE(wait_until([&] { return !sandbox_events("frozen", fname).empty(); }, 10s))
		<< "no frozen event\n"
		<< runner.describe() << dump_lines(env().audit());
	EXPECT_EQ(frozen_state(fname), "frozen");
	EXPECT_TRUE(ArrivedIntact(env(), a2));
	m.sandbox = fname;
	EXPECT_TRUE(DnsLogged(env().audit(), m));
	EXPECT_EQ(iodined.queries_seen(), 0u) << iodined.output();
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count_under(kIodineZone), 0u);
	Result k = env().airlock({"kill", fname});
	EXPECT_EQ(k.status, 0) << k.describe();
	EXPECT_EQ(runner.wait(10s), std::optional<int>(121)) << runner.describe();
}

// dns2tcp (TCP over TXT queries under t2.attacker.test).
TEST_F(Dns, Dns2tcpTunnelNeverEstablishes)
{
	DnsWorld& w = world();
	TunnelServer& d2 = w.start_dns2tcpd();
	std::string a = env().marker("twin"), m = env().marker("tunnel");
	std::vector<std::string> client = {"dns2tcpc", "-z", kDns2tcpZone, "-r", "sink", "-l", "-", kResolver4};
	std::string name = sandbox("d2t");
	auto rr = sandboxed(name, env().write_policy("d2t.json", standard_dns_policy("it-dns-d2t")),
			    Sequence({env().py("dns_connect.py", {"ok.allowed.test:9000", a}),
				      w.exec("dns2tcpc", client, 6, m, 2.0)}));
	expect_connected(rr, a);
	// The marker would reach the sink's 10.77.0.2:9000 through dns2tcpd.
	EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_EQ(d2.queries_seen(), 0u) << d2.output();
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count_under(kDns2tcpZone), 0u);
	EXPECT_EQ(w.resolver().forwarded_under(kDns2tcpZone), 0u);
	EXPECT_EQ(wire_queries_for(env(), kDns2tcpZone, true), 0u);
	DnsMatch v = DnsDenied("dns-name", name);
	v.reasons = {"dns-name", "dns-type"};
	v.qname_suffix = kDns2tcpZone;
	v.qtype = "TXT";
	EXPECT_TRUE(DnsLogged(env().audit(), v));

	std::string fname = sandbox("d2t-frz");
	std::string m2 = env().marker("tunnel-frz");
	Proc& runner = background(fname,
				  env().write_policy("d2t-frz.json", standard_dns_policy("it-dns-d2t-frz", "freeze")),
				  w.exec("dns2tcpc", client, 8, m2, 4.0));
	ASSERT_TRUE(wait_until([&] { return !sandbox_events("frozen", fname).empty(); }, 10s))
		<< "no frozen event\n"
		<< runner.describe() << dump_lines(env().audit());
	EXPECT_EQ(frozen_state(fname), "frozen");
	v.sandbox = fname;
	EXPECT_TRUE(DnsLogged(env().audit(), v));
	EXPECT_TRUE(NothingArrived(env(), m2));
	EXPECT_EQ(d2.queries_seen(), 0u) << d2.output();
	Result k = env().airlock({"kill", fname});
	EXPECT_EQ(k.status, 0) << k.describe();
	EXPECT_EQ(runner.wait(10s), std::optional<int>(121)) << runner.describe();
}

// on_violation freeze: one TXT query, and no later query leaves.
TEST_F(Dns, FreezeOnADnsViolationStopsEveryLaterQuery)
{
	DnsWorld& w = world();
	std::string name = sandbox("freeze");
	std::string policy = env().write_policy("freeze.json", standard_dns_policy("it-dns-freeze", "freeze"));
	std::string pre = env().marker("pre") + ".allowed.test", post1 = env().marker("post1") + ".allowed.test",
		    post2 = env().marker("post2") + ".allowed.test", late = env().marker("late");
	// One process: the allowed query, the violation, then at once two allowed
	// queries (before any freeze can land: only the latch can stop them),
	// then a resolution and connect a moment later.
	Proc& runner = background(name, policy,
				  Sequence({raw(json::array({q(pre, "A", "pre"), q("txt.allowed.test", "TXT", "viol"),
							     q(post1, "A", "post1"), q(post2, "A", "post2")}),
						{"--wait", "0.5"}),
					    env().py("dns_connect.py", {"late.allowed.test:9000", late})}));
	std::string cg = env().sandbox_cgroup(name);
	ASSERT_TRUE(wait_until([&] { return !sandbox_events("frozen", name).empty(); }, 10s))
		<< "no frozen event\n"
		<< runner.describe() << dump_lines(env().audit());
	ASSERT_TRUE(wait_until(
		[&] {
			auto ev = cgroup_events(cg);
			return ev && (*ev)["frozen"] == "1";
		},
		5s))
		<< read_file(cg + "/cgroup.events");
	EXPECT_EQ(frozen_state(name), "frozen");
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-type", name, "txt.allowed.test", "TXT")));
	EXPECT_TRUE(NeverQueried(w, "txt.allowed.test"));
	EXPECT_TRUE(NeverQueried(w, post1));
	EXPECT_TRUE(NeverQueried(w, post2));
	EXPECT_TRUE(NeverQueried(w, "late.allowed.test"));
	EXPECT_TRUE(NothingArrived(env(), late));
	EXPECT_EQ(w.resolver().count(pre), 1u) << "the query before the violation went through";
	Result k = env().airlock({"kill", name});
	EXPECT_EQ(k.status, 0) << k.describe();
	EXPECT_EQ(runner.wait(10s), std::optional<int>(121)) << runner.describe();
	// If the client got to report before the freeze, the latch refused the later sends.
	RunResult rr = parse_run(runner, runner.status(), false);
	for (const auto& t : {"post1", "post2"}) {
		json r = ResultFor(rr, t);
		if (r.is_object()) {
			EXPECT_EQ(Errno(r), "EPERM") << r.dump();
		}
	}
}

// mode audit, then `airlock policy suggest`, then enforce that suggestion.
TEST_F(Dns, AuditModeRunSuggestsAPolicyThatRunsClean)
{
	DnsWorld& w = world();
	auto workload = [&](const std::string& tag) {
		std::string raw_ip = env().marker(tag + "-ip"), app = env().marker(tag + "-app"),
			    chain = env().marker(tag + "-chain");
		// The raw-IP connect comes first: 10.77.0.2 was not resolved yet.
		return std::make_tuple(Sequence({env().py("tcp_send.py", {dest4(kAllowed4, 9001), raw_ip}),
						 env().py("dns_connect.py", {"app.allowed.test:9000", app,
									     "www.chain.test:9002", chain})}),
				       std::vector<std::string>{raw_ip, app, chain});
	};
	std::string audit_policy = env().write_policy("audit.json", dns_policy("it-dns-audit",
									       json::array({deny_cidr("10.77.0.3/32")}),
									       dns_block(), "freeze", "audit"));
	std::string name = sandbox("audit");
	auto [cmd1, markers1] = workload("aud");
	auto rr = sandboxed(name, audit_policy, cmd1);  // no --log-allowed: what a user would run
	for (const auto& m : markers1) {
		EXPECT_TRUE(Ok(result(rr, m))) << "audit mode lets everything through: " << result(rr, m).dump();
		EXPECT_TRUE(ArrivedIntact(env(), m));
	}
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count("app.allowed.test", "A"), 1u) << "audit mode lets the query out";
	auto lines = env().audit();
	DnsMatch audited = DnsDenied("dns-name", name, "app.allowed.test", "A");
	audited.verdict = "audit";
	EXPECT_TRUE(DnsLogged(lines, audited));
	EXPECT_TRUE(events(lines, "frozen").empty()) << "audit mode never freezes";

	Result s = env().airlock({"policy", "suggest", env().audit_path(), "--sandbox", name});
	ASSERT_EQ(s.status, 0) << s.describe();
	json sug = json::parse(s.out, nullptr, false);
	ASSERT_TRUE(sug.is_object()) << "suggest must print one JSON policy: " << s.describe();
	std::string sug_file = env().write_policy("suggested.json", sug);
	Result chk = env().airlock({"policy", "check", sug_file});
	EXPECT_EQ(chk.status, 0) << chk.describe() << "\n" << sug.dump(2);

	// Its content: domain rules for the resolved names, the raw IP only for its port.
	std::set<std::string> domains;
	auto covers = [](const json& ports, int port) {
		if (ports.is_null())
			return true;
		for (const auto& p : ports) {
			if (p.is_number() && p.get<int>() == port)
				return true;
			if (p.is_string()) {
				std::string s = p.get<std::string>();
				auto dash = s.find('-');
				int lo = std::stoi(s.substr(0, dash)),
				    hi = dash == std::string::npos ? lo : std::stoi(s.substr(dash + 1));
				if (port >= lo && port <= hi)
					return true;
			}
		}
		return false;
	};
	ASSERT_TRUE(sug.contains("rules") && sug["rules"].is_array()) << sug.dump(2);
	for (const auto& r : sug["rules"]) {
		if (r.value("action", "") != "allow")
			continue;
		if (r.contains("domain"))
			domains.insert(lower(r["domain"].get<std::string>()));
		if (r.contains("cidr")) {
			std::string c = r["cidr"].get<std::string>();
			if (c == "10.77.0.2" || c == "10.77.0.2/32") {
				EXPECT_FALSE(covers(r.value("ports", json()), 9000))
					<< "a resolved address as a raw IP: " << r.dump();
				EXPECT_FALSE(covers(r.value("ports", json()), 9002))
					<< "a resolved address as a raw IP: " << r.dump();
			}
		}
	}
	EXPECT_TRUE(domains.count("app.allowed.test")) << sug.dump(2);
	EXPECT_TRUE(domains.count("www.chain.test")) << sug.dump(2);
	ASSERT_TRUE(sug.contains("dns")) << sug.dump(2);
	EXPECT_NE(sug["dns"].dump().find(kResolver4), std::string::npos) << sug.dump(2);
	EXPECT_NE(sug["dns"].value("types", json::array()).dump().find("\"A\""), std::string::npos) << sug.dump(2);

	// The same workload, enforced with the suggestion: clean.
	sug["mode"] = "enforce";
	sug["on_violation"] = "deny";
	std::string enforce_policy = env().write_policy("suggested-enforce.json", sug);
	std::string name2 = sandbox("enforce");
	std::string audit2 = env().path("enforce-audit.jsonl");
	auto [cmd2, markers2] = workload("enf");
	auto rr2 = sandboxed(name2, enforce_policy, cmd2, Opts().audit(audit2));
	for (const auto& m : markers2) {
		EXPECT_TRUE(Ok(result(rr2, m))) << result(rr2, m).dump() << "\nsuggested:\n" << sug.dump(2);
		EXPECT_TRUE(ArrivedIntact(env(), m));
	}
	EXPECT_EQ(violations(name2, audit2), 0u) << dump_lines(read_json_lines(audit2)) << "\nsuggested:\n"
						 << sug.dump(2);
	EXPECT_FALSE(events(read_json_lines(audit2), "sandbox-start").empty());
}

// `airlock status --json` counts DNS per sandbox.
TEST_F(Dns, StatusReportsDnsCounters)
{
	std::string name = sandbox("status");
	std::string policy = env().write_policy("status.json", standard_dns_policy("it-dns-status"));
	std::string done = env().path("resolved.json"), go = env().path("go");
	std::string a = env().marker("ok"), d = env().marker("denied");
	Proc& runner = background(name, policy,
				  env().py("dns_connect.py", {"--done", done, "--then-wait", go, "s1.allowed.test:9000",
							      a, "denied.test:9001", d}));
	ASSERT_TRUE(wait_until([&] { return exists(done) || !runner.running(); }, 10s)) << runner.describe();
	ASSERT_TRUE(exists(done)) << runner.describe();
	auto st = env().status_of(name);
	ASSERT_TRUE(st) << "status does not list " << name;
	ASSERT_TRUE(st->contains("dns") && (*st)["dns"].is_object()) << st->dump(2);
	json dns = (*st)["dns"];
	for (const auto& k : {"queries_allowed", "queries_denied", "answers_learned", "answers_dropped",
			      "learned_addresses", "learn_full"})
		EXPECT_TRUE(dns.contains(k) && dns[k].is_number()) << k << ": " << dns.dump();
	// One IPv4 lookup of an allowed name, answered with one address; the
	// denied name's queries are counted as the audit log has them.
	auto denied_lines = [&] {
		int n = 0;
		for (const auto& j : env().audit())
			n += j.value("event", "") == "decision" && j.contains("qname") &&
			     j.value("verdict", "") == "deny";
		return n;
	};
	EXPECT_TRUE(wait_until([&] { return denied_lines() == dns.value("queries_denied", -1); }, 5s))
		<< denied_lines() << " denied query lines; " << dns.dump();
	EXPECT_GE(dns.value("queries_denied", 0), 1) << dns.dump();
	EXPECT_EQ(dns.value("queries_allowed", -1), 1) << dns.dump();
	EXPECT_EQ(dns.value("answers_learned", -1), 1) << dns.dump();
	EXPECT_EQ(dns.value("learned_addresses", -1), 1) << dns.dump();
	EXPECT_EQ(dns.value("learned_entries", -1), 1) << dns.dump();
	EXPECT_EQ(dns.value("answers_dropped", -1), 0) << dns.dump();
	EXPECT_EQ(dns.value("learn_full", -1), 0) << dns.dump();
	write_file(go, "");
	EXPECT_EQ(runner.wait(10s), std::optional<int>(0)) << runner.describe();
	RunResult rr = parse_run(runner, runner.status(), false);
	expect_connected(rr, a);
	expect_resolution_denied(rr, d);
}

// A learned address lasts its TTL, clamped to [min_ttl, max_ttl]: dnsmasq
// says 60 s, max_ttl 2 makes it 2 s.
TEST_F(Dns, LearnedAddressExpiresWithItsClampedTtl)
{
	json p = standard_dns_policy("it-dns-ttl");
	p["dns"]["min_ttl"] = 1;
	p["dns"]["max_ttl"] = 2;
	std::string policy = env().write_policy("ttl.json", p);
	std::string name = sandbox("ttl");
	std::string m1 = env().marker("fresh"), m2 = env().marker("expired"), m3 = env().marker("again");
	auto rr = sandboxed(name, policy,
			    Sequence({env().py("dns_connect.py", {"e.allowed.test:9000", m1}),
				      env().py("wait_file.py", {env().path("never"), "3.5"}),
				      env().py("tcp_send.py", {dest4(kAllowed4, 9001), m2}),
				      env().py("dns_connect.py", {"e.allowed.test:9002", m3})}),
			    Opts().allowed());
	expect_connected(rr, m1);
	EXPECT_EQ(Errno(result(rr, m2)), "EPERM") << "the learned address outlived its TTL: " << result(rr, m2).dump();
	EXPECT_TRUE(NothingArrived(env(), m2));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kAllowed4, 9001), name));
	expect_connected(rr, m3);
	// The audit line reports the TTL that is enforced: the clamped one.
	for (const auto& j : sandbox_events("dns-answer", name))
		EXPECT_EQ(j.value("ttl", -1), 2) << j.dump();
	EXPECT_GE(learned(name, "e.allowed.test", kAllowed4), 2u) << dump_lines(env().audit());
}

// dig as it comes (9.18: EDNS with an 8-byte client cookie, AD set) through
// the real resolver; its answer opens the address on the first connect.
TEST_F(Dns, DigWithItsDefaultEdnsCookieResolvesAndConnects)
{
	DnsWorld& w = world();
	std::string policy = env().write_policy("digedns.json", standard_dns_policy("it-dns-digedns"));
	std::string name = sandbox("digedns");
	std::string qname = env().marker("dige") + ".allowed.test", m = env().marker("after-dig");
	auto rr = sandboxed(name, policy,
			    Sequence({dig("dig-default", qname, "A"),
				      env().py("tcp_send.py", {dest4(kAllowed4, 9000), m})}),
			    Opts().allowed());
	json dr = result(rr, "dig-default");
	EXPECT_EQ(dr.value("out", ""), "10.77.0.2\n") << dr.dump();
	EXPECT_TRUE(Ok(result(rr, m))) << result(rr, m).dump();
	EXPECT_TRUE(ArrivedIntact(env(), m));
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count(lower(qname), "A"), 1u) << w.resolver().log();
	// What left was dig's EDNS query with its cookie: the capture shows it.
	size_t with_cookie = 0;
	for (const auto& f : wire_frames(env()))
		if (f.dport == 53 && wire_qname(f) == lower(qname) &&
		    f.payload.find(std::string("\x00\x0a\x00\x08", 4)) != std::string::npos)
			with_cookie++;
	EXPECT_EQ(with_cookie, 1u);
	EXPECT_TRUE(NoDnsDenialFor(name, {lower(qname)}));
	EXPECT_GE(learned(name, lower(qname), kAllowed4), 1u) << dump_lines(env().audit());
}

// An allowed name whose EDNS option carries a marker: dropped before it
// leaves (EPERM), never at the resolver or on the wire, recorded as dns-edns;
// the same query with an 8-byte cookie in its place is answered.
TEST_F(Dns, EdnsOptionBytesNeverLeaveUnlisted)
{
	DnsWorld& w = world();
	std::string policy = env().write_policy("edns.json", standard_dns_policy("it-dns-edns"));
	std::string name = sandbox("edns");
	auto with_opt = [](const std::string& qname, uint16_t id, const std::string& options) {
		std::string m = dns_query_bytes(qname, 1, id);
		m[11] = 1;  // ARCOUNT
		auto be16 = [](unsigned v) {
			return std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
		};
		m += std::string(1, '\0') + be16(41) + be16(1232) + std::string(4, '\0') + be16(options.size()) +
		     options;
		return m;
	};
	auto opt = [](unsigned code, const std::string& data) {
		return std::string{static_cast<char>(code >> 8), static_cast<char>(code & 0xff), 0,
				   static_cast<char>(data.size())} +
		       data;
	};
	auto hexof = [](const std::string& b) {
		std::string o;
		for (unsigned char c : b)
			o += fmt::format("{:02x}", c);
		return o;
	};
	std::string m1 = env().marker("edns-unk"), m2 = env().marker("edns-ck"), twin = env().marker("edns-ok");
	std::string m3 = env().marker("edns-8");
	std::string n1 = "one.edns.allowed.test", n2 = "two.edns.allowed.test", nt = "twin.edns.allowed.test",
		    n3 = "three.edns.allowed.test";
	json specs = json::array({
		{{"case", "hex"}, {"marker", m1}, {"hex", hexof(with_opt(n1, 0x7101, opt(65001, m1)))}},
		// A client cookie and a server cookie: 8 + 16 bytes, more than the 8 the policy lists.
		{{"case", "hex"},
		 {"marker", m2},
		 {"hex", hexof(with_opt(n2, 0x7102, opt(10, "c00k1e!!" + m2.substr(0, 16))))}},
		{{"case", "hex"}, {"marker", twin}, {"hex", hexof(with_opt(nt, 0x7103, opt(10, "c00k1e!!")))}},
		// An unknown code within the cookie's size: refused by its code alone.
		{{"case", "hex"}, {"marker", m3}, {"hex", hexof(with_opt(n3, 0x7104, opt(65001, "8bytes!!")))}},
	});
	ASSERT_GE(m2.size(), 16u);
	auto rr = sandboxed(name, policy, raw(specs, {"--wait", "1.0"}));
	for (const auto& m : {m1, m2}) {
		SCOPED_TRACE(m);
		json r = result(rr, m);
		expect_eperm(r, m);
		EXPECT_TRUE(NeverSentFrom(w, r.value("sport", 0)));
		EXPECT_TRUE(NothingArrived(env(), m.substr(0, 16)));  // no frame anywhere carried its bytes
	}
	json r3 = result(rr, m3);
	expect_eperm(r3, "an unknown 8-byte option");
	EXPECT_TRUE(NeverSentFrom(w, r3.value("sport", 0)));
	EXPECT_TRUE(NeverQueried(w, n3));
	EXPECT_TRUE(DnsLogged(env().audit(), DnsDenied("dns-edns", name, n3, "A"), 1));
	expect_answered(result(rr, twin), "the same query with an 8-byte cookie");
	EXPECT_TRUE(NeverQueried(w, n1));
	EXPECT_TRUE(NeverQueried(w, n2));
	EXPECT_EQ(w.resolver().count(nt, "A"), 1u);
	auto lines = env().audit();
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-edns", name, n1, "A"), 1));
	EXPECT_TRUE(DnsLogged(lines, DnsDenied("dns-edns", name, n2, "A"), 1));
	EXPECT_TRUE(NoDnsDenialFor(name, {nt}));
}

// Answers from a resolver that adds records of other owners: only the
// question's records (and its CNAME chain's) teach; an address named by
// evil.example or by another allowed name stays closed, and the dns-answer
// line says why. The same address opens when it ends the question's chain
// (compressed, letter case changed).
TEST_F(Dns, AnswerRecordsOffTheChainTeachNothing)
{
	DnsWorld& w = world();
	FakeResolver& fake = w.start_fake("good");
	std::string policy = env().write_policy("offchain.json",
						dns_policy("it-dns-offchain",
							   json::array({allow_domain("*.allowed.test")}),
							   dns_block({kFakeResolver4})));
	for (std::string mode : {"extra", "extra-allowed", "chain"}) {
		SCOPED_TRACE(mode);
		fake.set_mode(mode);
		std::string name = sandbox(mode.substr(0, 10));
		std::string qname = mode + ".oc.allowed.test";
		std::string m = env().marker(mode.substr(0, 8));
		auto rr = sandboxed(name, policy,
				    env().py("dns_spoof_client.py",
					     {"--server", kFakeResolver4, "--name", qname, "--wait", "1.0", "--connect",
					      dest4(kDenied4, 9000), "--marker", m}),
				    Opts().allowed());
		json out = rr.last();
		ASSERT_TRUE(out.contains("received")) << rr.describe();
		ASSERT_EQ(out["received"].size(), 1u) << "the answer itself is delivered: " << out.dump();
		json r = result(rr, m);
		std::set<std::string> learned_addrs, off_chain;
		for (const auto& j : sandbox_events("dns-answer", name)) {
			if (j.value("learned", false))
				learned_addrs.insert(j.value("addr", ""));
			else if (j.value("reason", "") == "dns-off-chain")
				off_chain.insert(j.value("addr", ""));
		}
		if (mode == "chain") {
			EXPECT_TRUE(Ok(r)) << "the chain's end must open: " << r.dump();
			EXPECT_TRUE(ArrivedIntact(env(), m));
			EXPECT_EQ(learned_addrs, std::set<std::string>{kDenied4}) << dump_lines(env().audit());
			EXPECT_TRUE(off_chain.empty()) << dump_lines(env().audit());
			continue;
		}
		EXPECT_EQ(Errno(r), "EPERM") << "an off-chain record opened " << kDenied4 << ": " << r.dump();
		EXPECT_TRUE(NothingArrived(env(), m));
		EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kDenied4, 9000), name));
		EXPECT_EQ(learned_addrs, std::set<std::string>{kAllowed4}) << dump_lines(env().audit());
		EXPECT_EQ(off_chain, std::set<std::string>{kDenied4}) << dump_lines(env().audit());
	}
}

// In audit mode (no --log-allowed), the off-chain record is reported too,
// and the connect it would have opened is an audited violation.
TEST_F(Dns, AuditModeReportsOffChainRecords)
{
	DnsWorld& w = world();
	FakeResolver& fake = w.start_fake("extra");
	std::string policy = env().write_policy("offchain-audit.json",
						dns_policy("it-dns-offchain-audit",
							   json::array({allow_domain("*.allowed.test")}),
							   dns_block({kFakeResolver4}), "deny", "audit"));
	std::string name = sandbox("oc-audit");
	std::string m = env().marker("oc-audit");
	auto rr = sandboxed(name, policy,
			    env().py("dns_spoof_client.py",
				     {"--server", kFakeResolver4, "--name", "audit.oc.allowed.test", "--wait", "1.0",
				      "--connect", dest4(kDenied4, 9000), "--marker", m}));
	EXPECT_EQ(fake.sent().size(), 1u) << dump_lines(fake.log());
	size_t off_chain = 0;
	for (const auto& j : sandbox_events("dns-answer", name))
		if (!j.value("learned", true) && j.value("reason", "") == "dns-off-chain" &&
		    j.value("addr", "") == kDenied4)
			off_chain++;
	EXPECT_EQ(off_chain, 1u) << dump_lines(env().audit());
	Match v = Violation("connect4", "no-rule", kDenied4, 9000);
	v.verdict = "audit";
	EXPECT_TRUE(Logged(env().audit(), v, name));
}

// The bits an allowed query still carries (docs/dns.md, "What a query may
// still carry"), measured: a client encodes a payload into the letter case
// of an allowed name, the query ID and an 8-byte client cookie, as fast as
// the kernel lets it; a decoder at the resolver recovers it. The budget
// (200 at once, then 50 a second) bounds what gets through.
TEST_F(Dns, CovertBitsInAllowedQueriesAreBoundedByTheBudget)
{
	DnsWorld& w = world();
	FakeResolver& fake = w.start_fake("good");
	json p = standard_dns_policy("it-dns-covert");
	p["dns"]["resolvers"] = json::array({kFakeResolver4});
	std::string policy = env().write_policy("covert.json", p);
	std::string name = sandbox("covert");
	const std::string qname = "covert.allowed.test";
	const double kSeconds = 4;
	auto rr = sandboxed(name, policy,
			    env().py("dns_covert.py", {"--server", kFakeResolver4, "--name", qname, "--seconds",
						       fmt::format("{}", kSeconds), "--seed", "7"}));
	json sent = rr.last();
	ASSERT_EQ(sent.value("client", ""), "dns_covert") << rr.describe();
	double secs = sent.value("seconds", 0.0);
	int bits_per = sent.value("bits_per_query", 0);
	EXPECT_EQ(bits_per, 16 + 17 + 64);
	// What the budget lets out: 200 at once, then 50 a second (1 of slack
	// for the budget's clock starting before the client's).
	double bound = 200 + 50 * secs + 1;
	EXPECT_LE(sent.value("sent", 0), bound) << sent.dump();
	EXPECT_GT(sent.value("refused", 0), 0) << "the client must have run into the budget: " << sent.dump();
	auto dec = w.bare(env().py("dns_covert.py", {"--decode", fake.log_path(), "--name", qname, "--seed", "7"}));
	json d = dec.last();
	ASSERT_EQ(d.value("client", ""), "dns_covert_decode") << dec.describe();
	EXPECT_EQ(d.value("decoded", -1), sent.value("sent", 0))
		<< "every query that left carried its bits: " << d.dump();
	EXPECT_LE(d.value("decoded", 0), bound) << d.dump();
	double bps = d.value("bits", 0) / secs;
	// The documented bound for these fields: (200 + 50 t) queries of 97 bits in t seconds.
	EXPECT_LE(bps, bound * bits_per / secs) << d.dump();
	std::cout << fmt::format("covert channel through allowed queries: {} queries decoded in {:.2f} s, {} bits: "
				 "{:.0f} bit/s ({} bits/query; the first {} at once, then {:.0f} bit/s)\n",
				 d.value("decoded", 0), secs, d.value("bits", 0), bps, bits_per, 200, 50.0 * bits_per);
	DnsMatch rate = DnsDenied("dns-rate", name, qname, "A");
	rate.dst = kFakeResolver4;
	EXPECT_TRUE(DnsLogged(env().audit(), rate));
}

}  // namespace
}  // namespace it

namespace it {
namespace {

// The SNI gate with real clients and a real TLS origin (Python's ssl, a
// certificate for allowed.test from openssl) on port 9443 of 10.77.0.2 and fd77::2: curl,
// resolving allowed.test through the sandbox's resolver, reaches it through
// the proxy with its bytes intact (the page arrives, the certificate is the
// origin's own); the same address with another name in the ClientHello
// (curl --connect-to: evil.test fronted over allowed.test's address) is
// denied, recorded and audited as a violation, and evil.test's request never
// reaches the origin; so is b.allowed.test over the address only
// a.allowed.test resolved to, though the gated rule *.allowed.test covers
// both.
// The SNI gate, for a command run as `user` ("": uid 0): the rule's name
// passes, fronting is denied.
void Dns::sni_gate(const std::string& user)
{
	TlsOrigin o = tls_origin();
	ASSERT_TRUE(o.proc && o.proc->running()) << (o.proc ? o.proc->describe() : "");
	Proc& origin = *o.proc;
	std::string cert = o.cert;
	std::string page = env().marker("gated"), fronted = env().marker("fronted");
	write_file(o.www + "/" + page, page);
	write_file(o.www + "/" + fronted, fronted);

	json p = standard_dns_policy("it-sni-gate");
	p["rules"].push_back({{"action", "allow"},
			      {"domain", "allowed.test"},
			      {"ports", json::array({9443})},
			      {"protocol", "tcp"},
			      {"tls", {{"sni", "require"}}}});
	p["rules"].push_back({{"action", "allow"},
			      {"domain", "*.allowed.test"},
			      {"ports", json::array({9443})},
			      {"protocol", "tcp"},
			      {"tls", {{"sni", "require"}}}});
	std::string policy = env().write_policy("sni-gate.json", p);
	std::string name = sandbox("sni-" + (user.empty() ? std::string("root") : user));
	std::string records = "/var/log/airlock/world/" + name + ".jsonl";
	struct Cleanup {
		std::string f;
		~Cleanup() { std::filesystem::remove(f); }
	} cleanup{records};
	DnsWorld& w = world();
	std::string release = env().path("release-" + name);
	Proc& runner = background(
		name, policy,
		Sequence(
			{w.exec("pass", {"curl", "-sS", "--max-time", "5", "--cacert", cert,
					 "https://allowed.test:9443/" + page}),
			 // Python's and Node's own TLS, their own resolution.
			 w.exec("python",
				{python(), "-c",
				 "import ssl, sys, urllib.request\n"
				 "c = ssl.create_default_context(cafile=sys.argv[1])\n"
				 "u = urllib.request.urlopen('https://allowed.test:9443/' + sys.argv[2], context=c, timeout=5)\n"
				 "print(u.read().decode(), end='')\n",
				 cert, page}),
			 w.exec("node",
				{"node", "-e",
				 "const [cert, page] = process.argv.slice(1);"
				 "require('https').get({host: 'allowed.test', port: 9443, path: '/' + page, "
				 "ca: require('fs').readFileSync(cert), timeout: 5000}, r => {"
				 "let b = ''; r.on('data', c => b += c); r.on('end', () => process.stdout.write(b)); })"
				 ".on('error', e => { console.error(e.code); process.exit(1); });",
				 cert, page}),
			 w.exec("front", {"curl", "-sS", "--max-time", "5", "--cacert", cert, "--connect-to",
					  "evil.test:9443:allowed.test:9443", "https://evil.test:9443/" + fronted}),
			 // A name the rule covers, over the address another name of it
			 // resolved to (b. was never resolved: only a. was).
			 w.exec("sibling",
				{"curl", "-sS", "--max-time", "5", "--cacert", cert, "--connect-to",
				 "b.allowed.test:9443:a.allowed.test:9443", "https://b.allowed.test:9443/" + fronted}),
			 env().py("wait_file.py", {release, "30"})}),
		Opts().as(user));
	// The gate's verdicts, as `status` (and metrics) count them, while the
	// sandbox lives.
	json counts;
	EXPECT_TRUE(wait_until(
		[&] {
			auto st = env().status_of(name);
			counts = st ? (*st)["proxy"] : json();
			return counts.is_object() && counts.value("sni_denied", 0) == 2;
		},
		15s))
		<< counts.dump() << runner.describe();
	EXPECT_EQ(counts.value("sni_passed", 0), 3) << counts.dump();
	EXPECT_EQ(counts.value("connections", 0), 5) << counts.dump();
	write_file(release, "");
	EXPECT_EQ(runner.wait(20s), std::optional<int>(0)) << runner.describe();
	RunResult rr;
	rr.r.out = runner.out();
	rr.out_json = json_objects_in(rr.r.out);
	json pass = result(rr, "pass"), front = result(rr, "front");
	EXPECT_EQ(pass.value("status", -1), 0) << pass.dump();
	EXPECT_EQ(pass.value("out", ""), page) << pass.dump();
	for (const char* client : {"python", "node"}) {
		json r = result(rr, client);
		EXPECT_EQ(r.value("status", -1), 0) << r.dump();
		EXPECT_EQ(r.value("out", ""), page) << r.dump();
	}
	EXPECT_NE(front.value("status", 0), 0) << front.dump();
	EXPECT_EQ(front.value("out", ""), "") << front.dump();
	EXPECT_EQ(origin.err().find("/" + fronted), std::string::npos) << origin.err();
	EXPECT_NE(origin.err().find("GET /" + page), std::string::npos) << origin.err();

	json sibling = result(rr, "sibling");
	EXPECT_NE(sibling.value("status", 0), 0) << sibling.dump();
	std::optional<json> passed, denied, denied_sibling;
	for (const auto& j : read_json_lines(records)) {
		if (j.value("kind", "") == "sni" && j.value("verdict", "") == "pass")
			passed = j;
		if (j.value("kind", "") == "sni" && j.value("verdict", "") == "deny" &&
		    j.value("sni", "") == "evil.test")
			denied = j;
		if (j.value("kind", "") == "sni" && j.value("verdict", "") == "deny" &&
		    j.value("sni", "") == "b.allowed.test")
			denied_sibling = j;
	}
	ASSERT_TRUE(passed) << read_file(records);
	EXPECT_EQ(passed->value("sni", ""), "allowed.test");
	EXPECT_TRUE(passed->value("dst", "") == kAllowed4 || passed->value("dst", "") == kAllowed6) << passed->dump();
	EXPECT_EQ(passed->value("port", 0), 9443);
	EXPECT_GT(passed->value("bytes_out", 0u), 0u);
	EXPECT_GT(passed->value("bytes_back", 0u), 0u);
	ASSERT_TRUE(denied) << read_file(records);
	EXPECT_EQ(denied->value("sni", ""), "evil.test");
	EXPECT_EQ(denied->value("reason", ""), "'evil.test' is not allowed.test of rule 3");
	EXPECT_EQ(denied->value("bytes_out", 1u), 0u);
	ASSERT_TRUE(denied_sibling) << read_file(records);
	EXPECT_EQ(denied_sibling->value("rule", 0), 4);
	std::string dst = denied_sibling->value("dst", "");
	EXPECT_EQ(denied_sibling->value("reason", ""),
		  "'b.allowed.test' did not resolve to " + dst + " for this sandbox ('a.allowed.test' did)");
	size_t audited = 0;
	for (const auto& j : read_json_lines(env().audit_path()))
		if (j.value("event", "") == "sni-gate" && j.value("violation", false) && j.value("sandbox", "") == name)
			audited++;
	EXPECT_EQ(audited, 2u) << dump_lines(env().audit());
}

TEST_F(Dns, TheSniGatePassesTheRuleNameAndDeniesFronting)
{
	sni_gate("");
}

TEST_F(Dns, TheSniGatePassesTheRuleNameAndDeniesFrontingAsNobody)
{
	sni_gate("nobody");
}

// The HTTP gate on a real TLS origin (the sink's python https server, its
// self-signed certificate the rule's tls.upstream_ca): the sandbox's
// clients trust the bundle airlock offers them (the system's roots and the
// sandbox's CA, through SSL_CERT_FILE and curl's variable) and nothing
// else; a GET under /pub/ reaches the origin, from curl and from Python;
// a GET outside it and a POST under it are answered 403 by the gate, never
// reach the origin, and are recorded and audited as violations.
void Dns::http_gate(const std::string& user)
{
	TlsOrigin o = tls_origin();
	ASSERT_TRUE(o.proc && o.proc->running()) << (o.proc ? o.proc->describe() : "");
	Proc& origin = *o.proc;
	std::string page = env().marker("pub"), hidden = env().marker("hidden");
	std::filesystem::create_directories(o.www + "/pub");
	write_file(o.www + "/pub/" + page, page);
	write_file(o.www + "/" + hidden, hidden);

	json p = standard_dns_policy("it-http-gate");
	p["rules"].push_back({{"action", "allow"},
			      {"domain", "allowed.test"},
			      {"ports", json::array({9443})},
			      {"protocol", "tcp"},
			      {"http", json::array({{{"methods", json::array({"GET"})}, {"path", "/pub/*"}}})},
			      {"tls", {{"upstream_ca", o.cert}}}});
	std::string policy = env().write_policy("http-gate.json", p);
	std::string name = sandbox("http-" + (user.empty() ? std::string("root") : user));
	std::string records = "/var/log/airlock/world/" + name + ".jsonl";
	struct Cleanup {
		std::string f;
		~Cleanup() { std::filesystem::remove(f); }
	} cleanup{records};
	DnsWorld& w = world();
	std::string url = "https://allowed.test:9443/";
	RunResult rr = sandboxed(
		name, policy,
		Sequence({w.exec("get", {"curl", "-sS", "--max-time", "5", url + "pub/" + page}),
			  w.exec("python",
				 {python(), "-c",
				  "import sys, urllib.request\n"
				  "print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode(), end='')\n",
				  url + "pub/" + page}),
			  w.exec("hidden", {"curl", "-sS", "--max-time", "5", "-w", " %{http_code}", url + hidden}),
			  w.exec("post", {"curl", "-sS", "--max-time", "5", "-w", " %{http_code}", "-d", "x=1",
					  url + "pub/" + page})}),
		Opts().as(user).timeout_of(60s));
	json get = result(rr, "get"), py = result(rr, "python"), hid = result(rr, "hidden"), post = result(rr, "post");
	EXPECT_EQ(get.value("status", -1), 0) << get.dump();
	EXPECT_EQ(get.value("out", ""), page) << get.dump();
	EXPECT_EQ(py.value("status", -1), 0) << py.dump();
	EXPECT_EQ(py.value("out", ""), page) << py.dump();
	std::string hid_out = hid.value("out", ""), post_out = post.value("out", "");
	EXPECT_EQ(hid_out.substr(hid_out.size() < 4 ? 0 : hid_out.size() - 4), " 403") << hid.dump();
	EXPECT_NE(hid_out.find("\"reason\":\"http-deny\""), std::string::npos) << hid.dump();
	EXPECT_EQ(post_out.substr(post_out.size() < 4 ? 0 : post_out.size() - 4), " 403") << post.dump();
	EXPECT_NE(origin.err().find("\"GET /pub/" + page), std::string::npos) << origin.err();
	EXPECT_EQ(origin.err().find(hidden), std::string::npos) << origin.err();
	EXPECT_EQ(origin.err().find("POST"), std::string::npos) << origin.err();

	std::vector<std::string> verdicts;
	for (const auto& j : read_json_lines(records))
		if (j.value("kind", "") == "http-gate")
			verdicts.push_back(j.value("method", "") + " " + j.value("path", "") + " " +
					   j.value("verdict", "") + " " + j.value("reason", "") + " " +
					   std::to_string(j.value("status", 0)));
	EXPECT_EQ(verdicts,
		  (std::vector<std::string>{"GET /pub/" + page + " pass  200", "GET /pub/" + page + " pass  200",
					    "GET /" + hidden + " deny http-deny 403",
					    "POST /pub/" + page + " deny http-deny 403"}))
		<< read_file(records);
	size_t audited = 0;
	for (const auto& j : read_json_lines(env().audit_path()))
		if (j.value("event", "") == "http-gate" && j.value("violation", false) &&
		    j.value("sandbox", "") == name)
			audited++;
	EXPECT_EQ(audited, 2u) << dump_lines(env().audit());
}

TEST_F(Dns, TheHttpGateLetsThroughWhatItsEntriesAllowAndAnswersTheRest)
{
	http_gate("");
}

TEST_F(Dns, TheHttpGateLetsThroughWhatItsEntriesAllowAndAnswersTheRestAsNobody)
{
	http_gate("nobody");
}

// What follows a passed ClientHello goes through the gate untouched, in
// bulk, both ways at once, and each way ends when its side ends it: a real
// ClientHello for allowed.test (Python's ssl), then 8 MiB of a seeded
// stream, to an echo server in the sink's namespace behind a gated rule,
// which sends it all back and shuts its side down after the client's. The
// client gets back byte for byte what it sent; the record counts exactly
// that many bytes each way, and the server read exactly as many. Mode
// "urgent": one byte in the middle of the stream is sent as TCP urgent
// data, which stops a splice at its mark: that byte and the rest still go
// through, in their place.
void Dns::sni_gate_bulk(const std::string& user, const std::string& mode)
{
	constexpr size_t kBytes = 8u << 20;
	Proc& echo = start_echo();
	ASSERT_NE(echo.out().find("serving"), std::string::npos) << echo.describe();
	json p = gated_echo_policy("it-sni-bulk");
	std::string name = sandbox("bulk-" + mode + "-" + (user.empty() ? std::string("root") : user));
	std::string records = "/var/log/airlock/world/" + name + ".jsonl";
	struct Cleanup {
		std::string f;
		~Cleanup() { std::filesystem::remove(f); }
	} cleanup{records};
	RunResult rr = sandboxed(name, env().write_policy("sni-bulk.json", p),
				 world().exec("bulk",
					      {python(), client_script("gate_echo.py"), "--mode", mode, "allowed.test",
					       "9444", std::to_string(kBytes)},
					      30),
				 Opts().as(user).timeout_of(60s));
	json r = result(rr, "bulk");
	json out = json::parse(r.value("out", ""), nullptr, false);
	ASSERT_TRUE(out.is_object()) << r.dump();
	EXPECT_EQ(out.value("errno", -1), 0) << out.dump();
	EXPECT_TRUE(out.value("dst", "") == kAllowed4 || out.value("dst", "") == kAllowed6) << out.dump();
	size_t sent = out.value("hello", size_t{0}) + kBytes + (mode == "urgent" ? 1 : 0);
	EXPECT_EQ(out.value("sent", size_t{0}), sent) << out.dump();
	EXPECT_EQ(out.value("received", size_t{0}), sent) << out.dump();
	EXPECT_TRUE(out.value("same", false)) << out.dump();

	std::optional<json> passed;
	for (const auto& j : read_json_lines(records))
		if (j.value("kind", "") == "sni")
			passed = j;
	ASSERT_TRUE(passed) << read_file(records);
	EXPECT_EQ(passed->value("verdict", ""), "pass") << passed->dump();
	EXPECT_EQ(passed->value("bytes_out", size_t{0}), sent) << passed->dump();
	EXPECT_EQ(passed->value("bytes_back", size_t{0}), sent) << passed->dump();
	json ended;
	ASSERT_TRUE(wait_until(
		[&] {
			for (const auto& j : json_objects_in(echo.out()))
				if (j.contains("bytes"))
					ended = j;
			return ended.is_object();
		},
		5s))
		<< echo.describe();
	EXPECT_EQ(ended.value("bytes", size_t{0}), sent) << echo.describe();
}

TEST_F(Dns, TheSniGateMovesBulkBytesUntouchedBothWays)
{
	sni_gate_bulk("");
}

TEST_F(Dns, TheSniGateMovesBulkBytesUntouchedBothWaysAsNobody)
{
	sni_gate_bulk("nobody");
}

TEST_F(Dns, TheSniGateGoesOnPastTcpUrgentData)
{
	sni_gate_bulk("", "urgent");
}

// A client that resets its connection while the gate is splicing both ways
// (the echo server still sending) ends that connection only: the proxy
// goes on (a splice to the reset socket fails EPIPE and does not kill it
// with SIGPIPE), every connection is recorded as passed, and the next
// client's 1 MiB comes back byte for byte. Four resets: one alone reaches
// that splice in about two runs of three.
TEST_F(Dns, AClientsResetMidStreamEndsOnlyItsConnection)
{
	Proc& echo = start_echo();
	ASSERT_NE(echo.out().find("serving"), std::string::npos) << echo.describe();
	json p = gated_echo_policy("it-sni-reset");
	std::string name = sandbox("reset");
	std::string records = "/var/log/airlock/world/" + name + ".jsonl";
	struct Cleanup {
		std::string f;
		~Cleanup() { std::filesystem::remove(f); }
	} cleanup{records};
	auto client = [&](const std::string& tag, const std::string& mode, size_t bytes) {
		return world().exec(tag,
				    {python(), client_script("gate_echo.py"), "--mode", mode, "allowed.test", "9444",
				     std::to_string(bytes)},
				    30);
	};
	RunResult rr = sandboxed(name, env().write_policy("sni-reset.json", p),
				 Sequence({client("reset1", "reset", 8u << 20), client("reset2", "reset", 8u << 20),
					   client("reset3", "reset", 8u << 20), client("reset4", "reset", 8u << 20),
					   client("after", "end", 1u << 20)}),
				 Opts().timeout_of(60s));
	for (const char* tag : {"reset1", "reset2", "reset3", "reset4"}) {
		json reset = json::parse(result(rr, tag).value("out", ""), nullptr, false);
		ASSERT_TRUE(reset.is_object()) << rr.describe();
		EXPECT_GE(reset.value("received", 0), 1 << 16) << reset.dump();
		EXPECT_LT(reset.value("sent", size_t{0}), reset.value("hello", size_t{0}) + (8u << 20)) << reset.dump();
	}
	json after = json::parse(result(rr, "after").value("out", ""), nullptr, false);
	ASSERT_TRUE(after.is_object()) << rr.describe();
	EXPECT_TRUE(after.value("same", false)) << after.dump();
	EXPECT_EQ(after.value("sent", size_t{0}), after.value("hello", size_t{0}) + (1u << 20)) << after.dump();
	EXPECT_EQ(rr.r.err.find("died of signal"), std::string::npos) << rr.describe();
	EXPECT_EQ(rr.r.err.find("exited with"), std::string::npos) << rr.describe();
	size_t passed = 0;
	for (const auto& j : read_json_lines(records))
		passed += j.value("kind", "") == "sni" && j.value("verdict", "") == "pass";
	EXPECT_EQ(passed, 5u) << read_file(records);
}

// A sandbox whose processes are in another network namespace (an attached
// container's) resolves a name its gated rule covers to 127.0.0.1 (its own
// resolver may say anything). The ClientHello names it, and the name did
// resolve there for this sandbox: the gate passes it, but the daemon, whose
// sockets are in the host's namespace, never connects to this host's
// loopback for it. A service listening there (127.0.0.1:P of the host)
// is never reached; the connection ends, recorded with why; the daemon
// says so once and goes on.
TEST_F(Dns, TheGateNeverConnectsToTheHostsLoopbackForAnotherNamespace)
{
	int port = free_port();
	Proc& service = env().start({python(), "-u", client_script("echo_server.py"), std::to_string(port),
				     "127.0.0.1"},
				    "service");
	ASSERT_TRUE(wait_until([&] { return service.out().find("serving") != std::string::npos || !service.running(); },
			       10s, 10ms) &&
		    service.running())
		<< service.describe();
	Proc& daemon = env().start(env().airlock_argv(
					   {"daemon", "--metrics", "off", "--audit-log", env().audit_path()}),
				   "daemon");
	ASSERT_TRUE(wait_until([&] { return daemon.err().find("watching") != std::string::npos || !daemon.running(); },
			       10s) &&
		    daemon.running())
		<< daemon.describe();
	std::string cg = cgroup2_mount() + "/" + env().cgroup_parent + "/container";
	::mkdir((cgroup2_mount() + "/" + env().cgroup_parent).c_str(), 0755);
	ASSERT_EQ(::mkdir(cg.c_str(), 0755), 0) << cg;
	std::string release = env().path("release");
	auto inside = [&](const std::vector<std::string>& cmd) {
		std::vector<std::string> a = {"/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && shift && exec \"$@\"",
					      cg, "-"};
		a.insert(a.end(), cmd.begin(), cmd.end());
		return a;
	};
	Proc& holder = env().start(env().topo->in_client(inside(env().py("wait_file.py", {release, "60"}))), "holder");
	ASSERT_TRUE(wait_until([&] { return !read_file(cg + "/cgroup.procs").empty() || !holder.running(); }, 10s))
		<< holder.describe();

	json p = standard_dns_policy("it-sni-loopback");
	p["rules"].push_back({{"action", "allow"},
			      {"domain", "*.allowed.test"},
			      {"ports", json::array({port})},
			      {"protocol", "tcp"},
			      {"tls", {{"sni", "require"}}}});
	std::string name = sandbox("loopback");
	std::string records = "/var/log/airlock/world/" + name + ".jsonl";
	struct Cleanup {
		std::string f;
		~Cleanup() { std::filesystem::remove(f); }
	} cleanup{records};
	Result at = env().airlock({"attach", "--cgroup", cg, "--policy", env().write_policy("loopback.json", p),
				   "--name", name, "--audit-log", env().audit_path()});
	ASSERT_EQ(at.status, 0) << at.describe();
	ASSERT_TRUE(wait_until(
		[&] {
			auto st = env().status_of(name);
			return st && st->contains("supervisor") && (*st)["supervisor"].contains("proxy") &&
			       (*st)["supervisor"]["proxy"]["pid"].is_number();
		},
		10s))
		<< env().status().dump() << daemon.describe();

	// IPv4, then IPv6: 127.0.0.1, then ::1.
	for (const char* family : {"-4", "-6"}) {
		RunResult rr = world().bare(inside({"curl", family, "-sS", "-k", "--max-time", "5", "-w",
						    " curl=%{http_code}",
						    "https://loopback.allowed.test:" + std::to_string(port) + "/"}),
					    20s);
		EXPECT_NE(rr.r.status, 0) << rr.describe();
		EXPECT_EQ(rr.r.out.find("curl=200"), std::string::npos) << rr.describe();
	}
	std::vector<json> recs;
	ASSERT_TRUE(wait_until(
		[&] {
			recs.clear();
			for (const auto& j : read_json_lines(records))
				if (j.value("kind", "") == "sni")
					recs.push_back(j);
			return recs.size() >= 2;
		},
		5s))
		<< read_file(records) << daemon.describe();
	ASSERT_EQ(recs.size(), 2u) << read_file(records);
	size_t n = 0;
	for (const char* dst : {"127.0.0.1", "::1"}) {
		const json& rec = recs[n++];
		EXPECT_EQ(rec.value("sni", ""), "loopback.allowed.test") << rec.dump();
		EXPECT_EQ(rec.value("dst", ""), dst) << rec.dump();
		EXPECT_EQ(rec.value("verdict", ""), "deny") << rec.dump();
		EXPECT_EQ(rec.value("upstream_error", ""), std::strerror(EPERM)) << rec.dump();
		EXPECT_EQ(rec.value("bytes_out", 1u), 0u) << rec.dump();
		EXPECT_NE(daemon.err().find(
				  fmt::format("{}: the SNI gate does not connect to {} (this host's, a link's, "
					      "or a group's address): {} time(s)",
					      name, dst, n)),
			  std::string::npos)
			<< daemon.describe();
	}
	EXPECT_EQ(service.out().find("accepted"), std::string::npos) << service.describe();
	EXPECT_TRUE(daemon.running()) << daemon.describe();

	Result d = env().airlock({"detach", name});
	EXPECT_EQ(d.status, 0) << d.describe();
	write_file(release, "");
	EXPECT_EQ(holder.wait(10s), std::optional<int>(0)) << holder.describe();
}

// A reload that changes what the SNI gate judges by (here the gated rules
// swap indices: the name that was rule 3 is rule 4) starts the proxy again
// on the new policy: the same name passes before and after. A proxy left
// on the old rules would judge allowed.test against *.allowed.test and
// deny it.
TEST_F(Dns, AReloadThatChangesGatedRulesStartsTheProxyAgain)
{
	TlsOrigin o = tls_origin();
	ASSERT_TRUE(o.proc && o.proc->running()) << (o.proc ? o.proc->describe() : "");
	std::string before = env().marker("before"), after = env().marker("after");
	write_file(o.www + "/" + before, before);
	write_file(o.www + "/" + after, after);
	auto gated = [](const char* first, const char* second) {
		json p = standard_dns_policy("it-sni-reload");
		for (const char* d : {first, second})
			p["rules"].push_back({{"action", "allow"},
					      {"domain", d},
					      {"ports", json::array({9443})},
					      {"protocol", "tcp"},
					      {"tls", {{"sni", "require"}}}});
		return p;
	};
	std::string name = sandbox("sni-reload");
	struct Cleanup {
		std::string f;
		~Cleanup() { std::filesystem::remove(f); }
	} cleanup{"/var/log/airlock/world/" + name + ".jsonl"};
	std::string reloaded = env().path("reloaded");
	DnsWorld& w = world();
	Proc& runner = background(name, env().write_policy("sni-a.json", gated("allowed.test", "*.allowed.test")),
				  Sequence({w.exec("before", {"curl", "-sS", "--max-time", "5", "--cacert", o.cert,
							      "https://allowed.test:9443/" + before}),
					    env().py("wait_file.py", {reloaded, "30"}),
					    w.exec("after", {"curl", "-sS", "--max-time", "5", "--cacert", o.cert,
							     "https://allowed.test:9443/" + after})}));
	ASSERT_TRUE(wait_until(
		[&] {
			auto st = env().status_of(name);
			return st && (*st)["proxy"].is_object() && (*st)["proxy"].value("sni_passed", 0) == 1;
		},
		15s))
		<< runner.describe();
	Result r = env().airlock(
		{"reload", name, env().write_policy("sni-b.json", gated("*.allowed.test", "allowed.test"))});
	ASSERT_EQ(r.status, 0) << r.describe();
	json counts;
	EXPECT_TRUE(wait_until(
		[&] {
			auto st = env().status_of(name);
			counts = st ? (*st)["proxy"] : json();
			return counts.is_object() && counts.value("proxy_starts", 0) == 2;
		},
		10s))
		<< counts.dump() << runner.describe();
	write_file(reloaded, "");
	EXPECT_EQ(runner.wait(20s), std::optional<int>(0)) << runner.describe();
	RunResult rr;
	rr.r.out = runner.out();
	rr.out_json = json_objects_in(rr.r.out);
	for (const auto& [tag, page] : {std::pair{"before", before}, std::pair{"after", after}}) {
		json res = result(rr, tag);
		EXPECT_EQ(res.value("status", -1), 0) << res.dump() << runner.describe();
		EXPECT_EQ(res.value("out", ""), page) << res.dump();
	}
	EXPECT_NE(runner.err().find("the proxy starts again"), std::string::npos) << runner.err();
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

}  // namespace
}  // namespace it
