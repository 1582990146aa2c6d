// The DNS tests can fail: every attack of test_dns.cpp, run in the client
// namespace WITHOUT airlock, succeeds here. Denied names resolve and their
// markers arrive, malformed queries reach the resolver's wire, other resolvers
// answer, forged answers reach the socket, and both DNS tunnels work. Also
// checks that the world itself is what the tests assume (answers, TTLs,
// compression, the resolver's log). If one of these fails, the matching
// containment test proves nothing.
#include <fmt/format.h>

#include <algorithm>

#include "dns_world.h"

namespace it {
namespace {

class DnsOracle : public DnsTestBase {
protected:
	json one(const RunResult& rr, const std::string& marker)
	{
		json r = ResultFor(rr, marker);
		EXPECT_TRUE(r.is_object()) << "no result for " << marker << "\n" << rr.describe();
		return r;
	}
};

TEST_F(DnsOracle, WorldAnswersAsTheTestsAssume)
{
	DnsWorld& w = world();
	struct Case {
		std::string tag, name, type, want;
	};
	std::vector<Case> cases = {
		{"a", "allowed.test", "A", "10.77.0.2\n"},
		{"aaaa", "allowed.test", "AAAA", "fd77::2\n"},
		{"sub", "x.y.allowed.test", "A", "10.77.0.2\n"},
		{"mixed", "AlLoWeD.TeSt", "A", "10.77.0.2\n"},
		{"bad", "badallowed.test", "A", "10.77.0.2\n"},
		{"denied", "denied.test", "A", "10.77.0.2\n"},
		{"rebind", "rebind.allowed.test", "A", "10.77.0.3\n"},
		{"chain", "www.chain.test", "A", "mid.chain.test.\nend.chain.test.\n10.77.0.2\n"},
		{"chain6", "www.chain.test", "AAAA", "mid.chain.test.\nend.chain.test.\nfd77::2\n"},
		{"txt", "txt.allowed.test", "TXT", "\"hello\"\n"},
	};
	std::vector<std::vector<std::string>> cmds;
	for (const auto& c : cases)
		cmds.push_back(w.exec(c.tag, {"dig", std::string("@") + kResolver4, c.name, c.type, "+tries=1",
					      "+time=3", "+short"}));
	// dig's own query carries EDNS0 with a cookie (what the kernel parser must accept).
	cmds.push_back(
		w.exec("full", {"dig", std::string("@") + kResolver4, "allowed.test", "A", "+tries=1", "+time=3"}));
	auto rr = w.bare(Sequence(cmds));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	for (const auto& c : cases) {
		json r = one(rr, c.tag);
		EXPECT_EQ(r.value("status", -1), 0) << r.dump();
		EXPECT_EQ(r.value("out", ""), c.want) << c.name << " " << c.type << ": " << r.dump();
	}
	EXPECT_NE(one(rr, "full").value("out", "").find("EDNS: version: 0"), std::string::npos);

	// The resolver's log, parsed: type, name (case as sent), source.
	ASSERT_TRUE(w.resolver().fence());
	auto qs = w.resolver().queries();
	bool saw_mixed = false;
	for (const auto& q : qs)
		if (q.name == "AlLoWeD.TeSt" && q.type == "A" && q.from == kClient4 && q.src == kClient4 && q.sport > 0)
			saw_mixed = true;
	EXPECT_TRUE(saw_mixed) << w.resolver().log();
	EXPECT_EQ(w.resolver().count("allowed.test", "A"), 3u) << "allowed.test, AlLoWeD.TeSt and the full dig";
	EXPECT_EQ(w.resolver().count("ALLOWED.TEST", "AAAA"), 1u);
	EXPECT_EQ(w.resolver().count("txt.allowed.test", "TXT"), 1u);
	EXPECT_EQ(w.resolver().count_type("TXT"), 1u);
	EXPECT_EQ(w.resolver().count_under("chain.test"), 2u);

	// Answers use name compression and carry TTL 60 (--local-ttl).
	auto ans = w.resolver().query("x.allowed.test", 1);
	ASSERT_TRUE(ans) << "no answer to a direct query";
	std::string q = dns_query_bytes("x.allowed.test", 1, 0);
	ASSERT_GE(ans->size(), q.size() + 16);
	const unsigned char* a = reinterpret_cast<const unsigned char*>(ans->data()) + q.size();
	EXPECT_EQ(a[0], 0xc0) << "the answer's owner name is not a compression pointer";
	EXPECT_EQ(a[1], 0x0c);
	EXPECT_EQ((a[6] << 24) | (a[7] << 16) | (a[8] << 8) | a[9], 60) << "TTL";
	EXPECT_EQ(std::string(reinterpret_cast<const char*>(a) + 12, 4), std::string("\x0a\x4d\x00\x02", 4));
}

TEST_F(DnsOracle, DeniedNamesAndTypesResolveAndConnectWithoutAirlock)
{
	DnsWorld& w = world();
	HttpServer& http = w.start_http();
	std::string m1 = env().marker("o-denied"), m2 = env().marker("o-bad"), m3 = env().marker("o-upper"),
		    m4 = env().marker("o-long"), m6 = env().marker("o-v6");
	std::string long_label(21, 'a');
	std::string page = env().marker("o-curl");
	http.put(page, page);
	auto rr = w.bare(Sequence({
		env().py("dns_connect.py", {"denied.test:9000", m1, "badallowed.test:9001", m2,
					    "UPPER.DENIED.TEST:9002", m3, long_label + ".allowed.test:9003", m4}),
		env().py("dns_connect.py", {"--family", "6", "denied.test:9004", m6}),
		env().py("dns_raw_query.py",
			 {"--wait", "1", R"([{"case":"query","name":"txt.allowed.test","type":"TXT","marker":"txt"},
			{"case":"query","name":"allowed.test","type":"NULL","marker":"null"},
			{"case":"query","name":"allowed.test","type":"ANY","marker":"any"}])"}),
		w.exec("dig",
		       {"dig", std::string("@") + kResolver4, "denied.test", "A", "+tries=1", "+time=3", "+short"}),
		w.exec("getent", {"getent", "hosts", "denied.test"}),
		w.exec("curl",
		       {"curl", "-sS", "--max-time", "5", fmt::format("http://denied.test:{}/{}", kHttpPort, page)}),
	}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	for (const auto& m : {m1, m2, m3, m4, m6}) {
		json r = one(rr, m);
		EXPECT_TRUE(r.value("resolved", false)) << r.dump();
		EXPECT_TRUE(Ok(r)) << r.dump();
		EXPECT_TRUE(ArrivedIntact(env(), m));
	}
	EXPECT_EQ(one(rr, m6).value("addr", ""), kAllowed6);
	for (const auto& t : {"txt", "null", "any"}) {
		json r = one(rr, t);
		EXPECT_TRUE(Ok(r)) << r.dump();
		EXPECT_TRUE(r.value("answered", false)) << r.dump();
	}
	EXPECT_EQ(one(rr, "dig").value("out", ""), "10.77.0.2\n");
	EXPECT_NE(one(rr, "getent").value("out", "").find("fd77::2"), std::string::npos) << one(rr, "getent").dump();
	EXPECT_EQ(one(rr, "curl").value("out", ""), page) << one(rr, "curl").dump();
	EXPECT_EQ(http.requests_for(page), 1u) << http.log();
	ASSERT_TRUE(w.resolver().fence());
	for (const auto& n : {"denied.test", "badallowed.test", "upper.denied.test"})
		EXPECT_GE(w.resolver().count(n), 1u) << n;
	EXPECT_GE(w.resolver().count(long_label + ".allowed.test"), 1u);
	EXPECT_EQ(w.resolver().count("txt.allowed.test", "TXT"), 1u);
	EXPECT_EQ(w.resolver().count("allowed.test", "NULL"), 1u);
	EXPECT_EQ(w.resolver().count("allowed.test", "ANY"), 1u);
	ASSERT_TRUE(env().fence());
	EXPECT_GE(wire_queries_for(env(), "denied.test"), 1u);
	EXPECT_GE(wire_queries_for(env(), "upper.denied.test"), 1u) << "case-insensitive wire match";
}

TEST_F(DnsOracle, MalformedQueriesReachTheResolverWithoutAirlock)
{
	DnsWorld& w = world();
	std::vector<std::string> cases = {"ptr",           "label-overrun",  "reserved-label",
					  "two-questions", "zero-questions", "qr",
					  "opcode",        "trailing",       "trailing-after-opt",
					  "short-header",  "empty"};
	json specs = json::array();
	std::map<std::string, std::string> markers;
	for (const auto& c : cases) {
		markers[c] = env().marker("o-" + c.substr(0, 6));
		specs.push_back({{"case", c}, {"name", markers[c] + ".allowed.test"}, {"marker", markers[c]}});
	}
	auto rr = w.bare(env().py("dns_raw_query.py", {"--wait", "0.3", specs.dump()}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	ASSERT_TRUE(w.resolver().fence());
	ASSERT_TRUE(env().fence());
	for (const auto& c : cases) {
		json r = one(rr, markers[c]);
		EXPECT_TRUE(Ok(r)) << c << ": " << r.dump();
		int sport = r.value("sport", 0);
		EXPECT_GE(wire_frames_from(env(), sport), 1u) << c << ": the crafted datagram never reached the wire";
	}
	// dnsmasq logs most of them (refused as malformed, or even answered).
	for (const auto& c : {"ptr", "two-questions", "zero-questions", "opcode", "trailing"}) {
		int sport = one(rr, markers[c]).value("sport", 0);
		EXPECT_GE(w.resolver().lines_from_port(sport), 1u) << c << "\n" << w.resolver().log();
	}
	EXPECT_TRUE(w.resolver().mentions(markers["trailing"])) << "trailing garbage is answered by dnsmasq";
}

TEST_F(DnsOracle, OtherResolversAndTcpAnswerWithoutAirlock)
{
	DnsWorld& w = world();
	FakeResolver& fake = w.start_fake("good");
	std::string n1 = env().marker("o-res54") + ".allowed.test", n2 = env().marker("o-res2") + ".allowed.test",
		    n3 = env().marker("o-res6") + ".allowed.test", n4 = env().marker("o-tcp") + ".allowed.test";
	auto spec = [](const std::string& name) {
		return json::array({{{"case", "query"}, {"name", name}, {"marker", name}}}).dump();
	};
	auto rr = w.bare(Sequence({
				 env().py("dns_raw_query.py", {"--server", kFakeResolver4, spec(n1)}),
				 env().py("dns_raw_query.py", {"--server", kAllowed4, spec(n2)}),
				 env().py("dns_raw_query.py", {"--server", kAllowed6, "--wait", "0.2", spec(n3)}),
				 env().py("dns_raw_query.py", {"--tcp", spec(n4)}),
				 w.exec("digtcp", {"dig", "+tcp", std::string("@") + kResolver4, "allowed.test", "A",
						   "+tries=1", "+time=3", "+short"}),
				 env().py("dns_connect.py", {"--resolve-only", "x.allowed.test:9000", "gai54"}),
			 }),
			 20s, kFakeResolver4);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_TRUE(one(rr, n1).value("answered", false)) << one(rr, n1).dump();
	EXPECT_TRUE(one(rr, n2).value("answered", false)) << one(rr, n2).dump();
	EXPECT_TRUE(Ok(one(rr, n3))) << one(rr, n3).dump();
	EXPECT_TRUE(one(rr, n4).value("answered", false)) << one(rr, n4).dump();
	EXPECT_EQ(one(rr, "digtcp").value("out", ""), "10.77.0.2\n") << one(rr, "digtcp").dump();
	EXPECT_TRUE(one(rr, "gai54").value("resolved", false)) << "glibc asked 10.77.0.54: " << one(rr, "gai54").dump();
	EXPECT_EQ(fake.queries_for(n1, kFakeResolver4), 1u);
	EXPECT_EQ(fake.queries_for(n2, kAllowed4), 1u);
	EXPECT_EQ(fake.queries_for("x.allowed.test", kFakeResolver4), 1u);
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_EQ(w.resolver().count(n4), 1u) << "the TCP query reached dnsmasq";
	ASSERT_TRUE(env().fence());
	EXPECT_GE(wire_queries_for(env(), n3), 1u) << "the query to [fd77::2]:53 left";
	size_t tcp53 = 0;
	for (const auto& f : wire_frames(env()))
		if (f.proto == 6 && f.dport == 53)
			tcp53++;
	EXPECT_GE(tcp53, 2u);
}

TEST_F(DnsOracle, ForgedAnswersReachTheSocketWithoutAirlock)
{
	DnsWorld& w = world();
	FakeResolver& fake = w.start_fake("good");
	for (std::string mode : {"good", "wrong-id", "wrong-name", "from-other-source", "unsolicited"}) {
		SCOPED_TRACE(mode);
		std::string m = env().marker("o-" + mode.substr(0, 8));
		std::vector<std::string> args = {"--server",  kFakeResolver4,
						 "--name",    mode + ".spoof.allowed.test",
						 "--wait",    "1.0",
						 "--connect", dest4(kAllowed4, 9000),
						 "--marker",  m};
		if (mode == "unsolicited") {
			args.insert(args.end(), {"--unsolicited", fake.trigger_dir()});
		} else {
			fake.set_mode(mode);
		}
		auto rr = w.bare(env().py("dns_spoof_client.py", args));
		ASSERT_EQ(rr.r.status, 0) << rr.describe();
		json out = rr.last();
		ASSERT_TRUE(out["received"].is_array()) << rr.describe();
		ASSERT_EQ(out["received"].size(), 1u) << "the socket did not get the (forged) answer: " << out.dump();
		json got = out["received"][0];
		EXPECT_EQ(got["addrs"], json::array({kAllowed4})) << got.dump();
		EXPECT_EQ(got.value("src", ""), mode == "from-other-source" ? kAllowed4 : kFakeResolver4) << got.dump();
		if (mode == "wrong-id") {
			EXPECT_NE(got.value("id", -1), out.value("query_id", -2)) << got.dump();
		}
		if (mode == "wrong-name") {
			EXPECT_EQ(got["questions"][0].value("name", ""), "other.allowed.test") << got.dump();
		}
		EXPECT_TRUE(Ok(ResultFor(rr, m))) << rr.describe();
		EXPECT_TRUE(ArrivedIntact(env(), m));
	}
	EXPECT_EQ(fake.sent().size(), 5u) << dump_lines(fake.log());
}

// EDNS option bytes leave and reach the resolver; answers with records of
// other owners reach the socket and name an address that then connects.
TEST_F(DnsOracle, EdnsBytesAndOffChainRecordsPassWithoutAirlock)
{
	DnsWorld& w = world();
	FakeResolver& fake = w.start_fake("good");
	std::string m = env().marker("o-edns");
	std::string q = dns_query_bytes("one.edns.allowed.test", 1, 0x7101);
	q[11] = 1;
	auto be16 = [](unsigned v) { return std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xff)}; };
	std::string option = be16(65001) + be16(m.size()) + m;
	q += std::string(1, '\0') + be16(41) + be16(1232) + std::string(4, '\0') + be16(option.size()) + option;
	std::string hx;
	for (unsigned char c : q)
		hx += fmt::format("{:02x}", c);
	json specs = json::array({{{"case", "hex"}, {"marker", m}, {"hex", hx}}});
	auto rr = w.bare(env().py("dns_raw_query.py", {"--wait", "1.0", "json:" + specs.dump()}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	json r = one(rr, m);
	EXPECT_TRUE(Ok(r)) << r.dump();
	EXPECT_TRUE(r.value("answered", false)) << "dnsmasq answers a query with an unknown option: " << r.dump();
	ASSERT_TRUE(env().fence());
	EXPECT_GE(env().sink->count_frames(m), 1u) << "the option's marker is on the wire";

	for (std::string mode : {"extra", "extra-allowed", "chain"}) {
		SCOPED_TRACE(mode);
		fake.set_mode(mode);
		std::string mk = env().marker("o-" + mode.substr(0, 8));
		auto rs = w.bare(env().py("dns_spoof_client.py",
					  {"--server", kFakeResolver4, "--name", mode + ".oc.allowed.test", "--wait",
					   "1.0", "--connect", dest4(kDenied4, 9000), "--marker", mk}));
		ASSERT_EQ(rs.r.status, 0) << rs.describe();
		json out = rs.last();
		ASSERT_EQ(out["received"].size(), 1u) << out.dump();
		json addrs = out["received"][0]["addrs"];
		EXPECT_TRUE(std::find(addrs.begin(), addrs.end(), json(kDenied4)) != addrs.end())
			<< "the answer names " << kDenied4 << ": " << out.dump();
		EXPECT_TRUE(Ok(ResultFor(rs, mk))) << rs.describe();
		EXPECT_TRUE(ArrivedIntact(env(), mk));
	}
}

TEST_F(DnsOracle, IodineTunnelEstablishesWithoutAirlock)
{
	DnsWorld& w = world();
	TunnelServer& iodined = w.start_iodined();
	// In the background: iodine keeps the tunnel up until it is killed (by
	// PID, with its process group, when the test ends).
	Proc& iodine = env().start(w.with_resolv(env().topo->in_client(
					   {"iodine", "-f", "-r", "-P", kTunnelPassword, kResolver4, kIodineZone})),
				   "iodine");
	bool up = wait_until(
		[&] {
			return iodine.err().find("Connection setup complete") != std::string::npos || !iodine.running();
		},
		20s, 20ms);
	EXPECT_TRUE(up && iodine.running()) << iodine.describe() << "\niodined:\n" << iodined.output();
	EXPECT_GE(iodined.queries_seen(), 1u) << iodined.output();
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_GE(w.resolver().count_under(kIodineZone), 1u);
	EXPECT_GE(w.resolver().forwarded_under(kIodineZone), 1u);
	EXPECT_GE(w.resolver().count_type("NULL"), 1u) << "iodine autodetects NULL queries first";
	ASSERT_TRUE(env().fence());
	EXPECT_GE(wire_queries_for(env(), kIodineZone, true), 1u);
}

TEST_F(DnsOracle, Dns2tcpTunnelCarriesDataWithoutAirlock)
{
	DnsWorld& w = world();
	TunnelServer& d2 = w.start_dns2tcpd();
	std::string m = env().marker("o-d2t");
	auto rr = w.bare(
		w.exec("dns2tcpc", {"dns2tcpc", "-z", kDns2tcpZone, "-r", "sink", "-l", "-", kResolver4}, 8, m, 2.0));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	// dns2tcpd relays the marker to the sink's 10.77.0.2:9000 listener.
	EXPECT_TRUE(env().sink->wait_data(m, 1, 5s)) << "the tunnel did not carry the marker\n"
						     << rr.describe() << "\ndns2tcpd:\n"
						     << d2.output();
	EXPECT_GE(d2.queries_seen(), 1u) << d2.output();
	ASSERT_TRUE(w.resolver().fence());
	EXPECT_GE(w.resolver().count_under(kDns2tcpZone), 1u);
	EXPECT_GE(w.resolver().forwarded_under(kDns2tcpZone), 1u);
	EXPECT_GE(w.resolver().count_type("TXT"), 1u);
}

TEST_F(DnsOracle, FortyQueriesAllPassWithoutAirlock)
{
	DnsWorld& w = world();
	json specs = json::array();
	for (int i = 0; i < 40; i++)
		specs.push_back({{"case", "query"},
				 {"name", fmt::format("r{}-{}.allowed.test", i, env().id)},
				 {"marker", fmt::format("r{}", i)}});
	auto rr = w.bare(env().py("dns_raw_query.py", {"--wait", "1", specs.dump()}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	for (int i = 0; i < 40; i++)
		EXPECT_TRUE(ResultFor(rr, fmt::format("r{}", i)).value("answered", false)) << i;
	ASSERT_TRUE(w.resolver().fence());
	for (int i = 0; i < 40; i++)
		EXPECT_EQ(w.resolver().count(fmt::format("r{}-{}.allowed.test", i, env().id)), 1u) << i;
}

}  // namespace
}  // namespace it
