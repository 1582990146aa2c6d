// The kernel's DNS parsers on crafted packets, byte by byte: the pinned
// egress and ingress programs run through BPF_PROG_TEST_RUN from inside a
// sandbox (the kernel gives the test packet a socket of the caller's
// cgroup, so the sandbox's policy decides). Nothing is sent anywhere. Each
// case is judged by the program's verdict and by the audit line that names
// the query's id.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>

#include "fixture.h"

namespace it {
namespace {

std::string be16(unsigned v)
{
	return std::string{static_cast<char>((v >> 8) & 0xff), static_cast<char>(v & 0xff)};
}

std::string be32(uint32_t v)
{
	return be16(v >> 16) + be16(v & 0xffff);
}

std::string ip4(const std::string& dotted)
{
	unsigned a, b, c, d;
	sscanf(dotted.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d);
	return std::string{static_cast<char>(a), static_cast<char>(b), static_cast<char>(c), static_cast<char>(d)};
}

// A name in wire form, as written: labels with their lengths, the root.
std::string wire_name(const std::string& name)
{
	std::string out;
	size_t start = 0;
	while (start < name.size()) {
		size_t dot = name.find('.', start);
		if (dot == std::string::npos)
			dot = name.size();
		out += static_cast<char>(dot - start);
		out += name.substr(start, dot - start);
		start = dot + 1;
	}
	return out + std::string(1, '\0');
}

struct Query {
	unsigned id = 0;
	std::string name = "allowed.test";
	unsigned type = 1, cls = 1;
	unsigned flags = 0x0100;  // RD
	unsigned qd = 1, an = 0, ns = 0, ar = 0;
	std::string qname_wire;  // instead of name, when set
	std::string after;       // bytes after the question
	std::string bytes() const
	{
		return be16(id) + be16(flags) + be16(qd) + be16(an) + be16(ns) + be16(ar) +
		       (qname_wire.empty() ? wire_name(name) : qname_wire) + be16(type) + be16(cls) + after;
	}
};

// An EDNS option: code, length, data.
std::string opt(unsigned code, const std::string& data)
{
	return be16(code) + be16(data.size()) + data;
}

// An EDNS OPT record: root owner, type 41, the UDP size in the class, the
// TTL (extended RCODE, version, flags), rdlength (the options' length
// unless given).
struct Opt {
	unsigned size = 1232, ext_rcode = 0, version = 0, flags = 0;
	std::string options;
	std::optional<unsigned> rdlen;
	std::string owner = std::string(1, '\0');
	unsigned type = 41;
	std::string bytes() const
	{
		return owner + be16(type) + be16(size) + std::string(1, static_cast<char>(ext_rcode)) +
		       std::string(1, static_cast<char>(version)) + be16(flags) + be16(rdlen.value_or(options.size())) +
		       options;
	}
};

std::string udp4(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload)
{
	std::string udp = be16(sport) + be16(dport) + be16(8 + payload.size()) + be16(0) + payload;
	std::string ip = std::string("\x45\x00", 2) + be16(20 + udp.size()) + be16(1) + be16(0x4000) +
			 std::string("\x40\x11", 2) + be16(0) + ip4(src) + ip4(dst);
	return ip + udp;
}

std::string tcp4_syn(const std::string& src, const std::string& dst, unsigned sport, unsigned dport)
{
	std::string tcp = be16(sport) + be16(dport) + be32(1) + be32(0) + std::string("\x50\x02", 2) + be16(64240) +
			  be16(0) + be16(0);
	std::string ip = std::string("\x45\x00", 2) + be16(20 + tcp.size()) + be16(1) + be16(0x4000) +
			 std::string("\x40\x06", 2) + be16(0) + ip4(src) + ip4(dst);
	return ip + tcp;
}

std::string hex(const std::string& bytes)
{
	std::string out;
	for (unsigned char c : bytes)
		out += fmt::format("{:02x}", c);
	return out;
}

// An answer to `q` with one A record per address, the owner a pointer to
// the question (offset 12), as resolvers write it.
std::string answer_to(const Query& q, const std::vector<std::string>& addrs, unsigned id, uint32_t ttl = 300)
{
	std::string out = be16(id) + be16(0x8180) + be16(1) + be16(addrs.size()) + be16(0) + be16(0) +
			  wire_name(q.name) + be16(q.type) + be16(1);
	for (const auto& a : addrs)
		out += be16(0xc00c) + be16(1) + be16(1) + be32(ttl) + be16(4) + ip4(a);
	return out;
}

constexpr const char* kResolver = "10.77.0.53";
constexpr const char* kSandboxIp = "10.77.0.1";

class DnsParser : public AirlockTest {
protected:
	bool with_topology() const override { return false; }

	void SetUp() override
	{
		AirlockTest::SetUp();
		if (HasFatalFailure())
			return;
		policy_ = env().write_policy(
			"policy.json",
			json{{"version", 1},
			     {"name", "it-dns-parser"},
			     {"on_violation", "deny"},
			     {"rules",
			      json::array({json{{"action", "allow"}, {"domain", "allowed.test"}, {"ports", {9000}}},
					   json{{"action", "allow"}, {"domain", "*.allowed.test"}, {"ports", {9000}}},
					   json{{"action", "deny"}, {"domain", "*.blocked.allowed.test"}},
					   // `airlock status` inside asks the daemon's control socket first.
					   json{{"action", "allow"}, {"unix", env().state_dir + "/control.sock"}}})},
			     {"dns",
			      {{"resolvers", {kResolver}},
			       {"types", {"A", "AAAA"}},
			       {"max_name_length", 40},
			       {"max_label_length", 20}}}});
	}

	// Runs the packets through PROG inside a fresh sandbox; returns the
	// verdicts (1 pass, 0 drop, -1 no result).
	std::vector<int> run_packets(const std::string& name,
				     const std::vector<std::pair<std::string, std::string>>& pkts)
	{
		std::vector<std::string> cmd = {AIRLOCK_SKB_TESTRUN};
		std::vector<std::string> progs;
		// skb_testrun takes one program: run each packet with its own.
		std::string script;
		for (const auto& [prog, bytes] : pkts) {
			script += fmt::format("{} {}/progs/{} {}; ", AIRLOCK_SKB_TESTRUN, env().bpf_dir, prog,
					      hex(bytes));
		}
		RunSpec s;
		s.policy = policy_;
		s.name = name;
		s.cmd = {"/bin/sh", "-c", script};
		s.keep_caps = true;  // BPF_PROG_TEST_RUN needs CAP_BPF
		s.log_allowed = true;
		s.in_client_ns = false;
		RunResult rr = env().run(s, 30s);
		EXPECT_EQ(rr.r.status, 0) << rr.describe();
		std::vector<int> out;
		for (const auto& j : rr.out_json)
			if (j.value("client", "") == "skb_testrun" && j["results"].size() == 1)
				out.push_back(j["results"][0]["retval"].is_number()
						      ? j["results"][0]["retval"].get<int>()
						      : -1);
		EXPECT_EQ(out.size(), pkts.size()) << rr.describe();
		out.resize(pkts.size(), -1);
		return out;
	}

	// The audit decision of the query with this id.
	json decision_for(unsigned qid)
	{
		for (const auto& j : env().audit())
			if (j.value("event", "") == "decision" && j.value("qid", -1) == static_cast<int>(qid))
				return j;
		return json();
	}

	struct Case {
		std::string what;
		Query q;
		int verdict;         // 1 leaves, 0 dropped
		std::string reason;  // of the audit decision
	};

	// Each query from its own port through al_egress: the verdict and the
	// reason of its audit decision (found by the query id) must be exact.
	// A sandbox reports at most 20 decisions of one kind at once
	// (AL_EVENTS_BURST; the rest are counted): cases go in batches, each in a
	// sandbox of its own.
	void judge(const std::string& name, std::vector<Case> cases, unsigned first_id)
	{
		constexpr size_t kBatch = 10;
		if (cases.size() > kBatch) {
			for (size_t at = 0, b = 0; at < cases.size(); at += kBatch, b++)
				judge(name + "b" + std::to_string(b),
				      std::vector<Case>(cases.begin() + at,
							cases.begin() + std::min(cases.size(), at + kBatch)),
				      first_id + at);
			return;
		}
		std::vector<std::pair<std::string, std::string>> pkts;
		for (size_t i = 0; i < cases.size(); i++) {
			cases[i].q.id = first_id + i;
			pkts.push_back({"al_egress", udp4(kSandboxIp, kResolver, 45000 + i, 53, cases[i].q.bytes())});
		}
		auto verdicts = run_packets(name, pkts);
		for (size_t i = 0; i < cases.size(); i++) {
			EXPECT_EQ(verdicts[i], cases[i].verdict) << cases[i].what;
			json d = decision_for(cases[i].q.id);
			ASSERT_TRUE(d.is_object()) << cases[i].what << ": no audit line\n" << dump_lines(env().audit());
			EXPECT_EQ(d.value("reason", ""), cases[i].reason) << cases[i].what << ": " << d.dump();
			EXPECT_EQ(d.value("violation", false), cases[i].verdict == 0)
				<< cases[i].what << ": " << d.dump();
			EXPECT_EQ(d.value("qname", ""), "allowed.test") << cases[i].what << ": " << d.dump();
		}
	}

	std::string policy_;
};

constexpr unsigned kCookie = 10, kNsid = 3, kPadding = 12;
const std::string kMarker = "EXFILTRATE-ME!";  // 14 bytes of anything

Query with_opt(const Opt& o, unsigned flags = 0x0100)
{
	Query q;
	q.flags = flags;
	q.ar = 1;
	q.after = o.bytes();
	return q;
}

TEST_F(DnsParser, QueriesAreJudgedByteByByte)
{
	struct Case {
		const char* what;
		Query q;
		int verdict;         // 1 leaves, 0 dropped
		const char* reason;  // of the audit decision
	};
	std::vector<Case> cases;
	auto add = [&](const char* what, Query q, int verdict, const char* reason) {
		q.id = 0x1000 + cases.size();
		cases.push_back({what, q, verdict, reason});
	};
	Query q;
	add("allowed name", q, 1, "dns-allow");
	q.name = "AlLoWeD.TeSt";
	add("mixed case", q, 1, "dns-allow");
	q.name = "a.b.allowed.test";
	add("below the wildcard", q, 1, "dns-allow");
	q.name = "badallowed.test";
	add("label boundary", q, 0, "dns-name");
	q.name = "x.blocked.allowed.test";
	add("deny wildcard below an allow wildcard", q, 0, "dns-name");
	q.name = "denied.test";
	add("no rule", q, 0, "dns-name");
	q = Query{};
	q.type = 16;
	add("TXT", q, 0, "dns-type");
	q.type = 10;
	add("NULL", q, 0, "dns-type");
	q.type = 255;
	add("ANY", q, 0, "dns-type");
	q = Query{};
	q.cls = 3;
	add("class CH", q, 0, "dns-type");
	q = Query{};
	q.name = std::string(21, 'a') + ".allowed.test";
	add("label over max_label_length", q, 0, "dns-length");
	q.name = std::string(20, 'a') + ".allowed.test";
	add("label at max_label_length", q, 1, "dns-allow");
	q.name = "aaaaaaaaaaaaaaaaaaaa.aaaaaa.allowed.test";  // 40 characters
	add("name at max_name_length", q, 1, "dns-allow");
	q.name = "aaaaaaaaaaaaaaaaaaaa.aaaaaaa.allowed.test";  // 41
	add("name over max_name_length", q, 0, "dns-length");
	q = Query{};
	q.flags = 0x0500;
	add("AA set in a query", q, 0, "dns-malformed");
	q.flags = 0x0300;
	add("TC set in a query", q, 0, "dns-malformed");
	q.flags = 0x0180;
	add("RA set in a query", q, 0, "dns-malformed");
	q.flags = 0x0140;
	add("the Z bit set", q, 0, "dns-malformed");
	q.flags = 0x0101;
	add("an RCODE in a query", q, 0, "dns-malformed");
	q.flags = 0x0130;
	add("AD and CD (dig sets AD)", q, 1, "dns-allow");
	q.flags = 0x0000;
	add("RD clear", q, 1, "dns-allow");
	q = Query{};
	q.qname_wire = std::string("\x07"
				   "allowed"
				   "\xc0\x0c",
				   10);
	add("compression pointer in the question", q, 0, "dns-malformed");
	q.qname_wire = std::string("\x3f"
				   "allowed",
				   8);
	add("label length past the end", q, 0, "dns-malformed");
	q = Query{};
	q.qd = 2;
	q.after = wire_name("allowed.test") + be16(1) + be16(1);
	add("two questions", q, 0, "dns-malformed");
	q = Query{};
	q.flags = 0x8100;
	add("QR set (an answer sent out)", q, 0, "dns-malformed");
	q.flags = 0x0900;
	add("opcode 1", q, 0, "dns-malformed");
	q = Query{};
	q.after = "trailing";
	add("trailing garbage", q, 0, "dns-malformed");
	q = Query{};
	q.an = 1;
	add("an answer count in a query", q, 0, "dns-malformed");

	std::vector<std::pair<std::string, std::string>> pkts;
	for (size_t i = 0; i < cases.size(); i++)
		pkts.push_back({"al_egress", udp4(kSandboxIp, kResolver, 40000 + i, 53, cases[i].q.bytes())});
	// Without an id to find them by: a header cut short, an empty datagram.
	pkts.push_back({"al_egress", udp4(kSandboxIp, kResolver, 41000, 53, std::string("\x12\x34\x01\x00", 4))});
	pkts.push_back({"al_egress", udp4(kSandboxIp, kResolver, 41001, 53, "")});
	// Port 53 elsewhere than a listed resolver; TCP to the resolver without dns.tcp.
	Query ok;
	ok.id = 0x2000;
	pkts.push_back({"al_egress", udp4(kSandboxIp, "10.77.0.2", 41002, 53, ok.bytes())});
	pkts.push_back({"al_egress", tcp4_syn(kSandboxIp, kResolver, 41003, 53)});

	auto verdicts = run_packets("p" + env().id, pkts);
	for (size_t i = 0; i < cases.size(); i++) {
		EXPECT_EQ(verdicts[i], cases[i].verdict) << cases[i].what;
		json d = decision_for(cases[i].q.id);
		if (cases[i].verdict == 0 || std::string(cases[i].reason) != "dns-allow") {
			ASSERT_TRUE(d.is_object()) << cases[i].what << ": no audit line\n" << dump_lines(env().audit());
		}
		if (d.is_object()) {
			EXPECT_EQ(d.value("reason", ""), cases[i].reason) << cases[i].what << ": " << d.dump();
			EXPECT_EQ(d.value("hook", ""), "egress") << d.dump();
			EXPECT_EQ(d.value("violation", false), cases[i].verdict == 0) << d.dump();
		}
	}
	size_t n = cases.size();
	EXPECT_EQ(verdicts[n], 0) << "truncated header";
	EXPECT_EQ(verdicts[n + 1], 0) << "empty datagram";
	EXPECT_EQ(verdicts[n + 2], 0) << "port 53 of an address that is not a listed resolver";
	EXPECT_EQ(verdicts[n + 3], 0) << "TCP/53 without dns.tcp";
	auto lines = env().audit();
	EXPECT_TRUE(Logged(lines, Violation("egress", "dns-resolver", "10.77.0.2", 53)));
	EXPECT_TRUE(Logged(lines, Violation("egress", "dns-tcp", kResolver, 53)));
	EXPECT_GE(decisions(lines, Violation("egress", "dns-malformed", kResolver, 53)).size(), 2u + 8u);
	// The name is in the audit line, lowercased; for a mixed-case query too.
	EXPECT_EQ(decision_for(0x1001).value("qname", ""), "allowed.test");
	EXPECT_EQ(decision_for(0x1003).value("qname", ""), "badallowed.test");
	EXPECT_EQ(decision_for(0x1006).value("qtype", ""), "TXT");
	EXPECT_TRUE(decision_for(0x1000 + 21).value("qname", json()).is_null()) << "an unparsed name is null";
}

// The default dns block: options {"COOKIE": 8}, sizes 512, 1200, 1220,
// 1232, 4096, DO allowed. Every way an OPT record could carry more than
// that is dropped with dns-edns, and the real clients' queries leave.
TEST_F(DnsParser, EdnsIsWalkedOptionByOption)
{
	std::vector<Case> cases;
	auto add = [&](std::string what, Query q, int verdict, std::string reason) {
		cases.push_back({std::move(what), std::move(q), verdict, std::move(reason)});
	};
	const std::string cookie("\x56\x9f\xdd\x65\x90\xe2\xc9\xae", 8);
	Opt o;
	o.options = opt(kCookie, cookie);
	add("dig 9.18's default: RD AD, 1232, an 8-byte client cookie", with_opt(o, 0x0120), 1, "dns-allow");
	o.flags = 0x8000;
	add("dig +dnssec: the DO bit", with_opt(o, 0x0120), 1, "dns-allow");
	Opt glibc;
	glibc.size = 1200;
	add("glibc with options edns0: no option, 1200", with_opt(glibc), 1, "dns-allow");
	o = Opt{};
	o.size = 512;
	add("the smallest size, no option", with_opt(o), 1, "dns-allow");

	o = Opt{};
	o.options = opt(kCookie, cookie + "X");
	add("a 9-byte cookie", with_opt(o), 0, "dns-edns");
	o.options = opt(kCookie, cookie + kMarker.substr(0, 8));
	add("a cookie with a server cookie (16 bytes)", with_opt(o), 0, "dns-edns");
	o.options = opt(kCookie, cookie) + opt(kCookie, cookie);
	add("the cookie twice", with_opt(o), 0, "dns-edns");
	o.options = opt(65001, kMarker);
	add("an unknown option code carrying the marker", with_opt(o), 0, "dns-edns");
	o.options = opt(kNsid, "");
	add("NSID, not listed", with_opt(o), 0, "dns-edns");
	o.options = opt(kPadding, std::string(8, '\0'));
	add("padding, not listed", with_opt(o), 0, "dns-edns");
	o.options = opt(kCookie, cookie);
	o.rdlen = 10;
	add("rdlength short of the options", with_opt(o), 0, "dns-edns");
	o.rdlen = 14;
	add("rdlength past the end", with_opt(o), 0, "dns-edns");
	o = Opt{};
	o.options = be16(kCookie) + be16(20) + cookie;
	add("an option length past rdlength", with_opt(o), 0, "dns-edns");
	o.options = opt(kCookie, cookie) + std::string("\x00", 1);
	add("a stray byte after the last option", with_opt(o), 0, "dns-edns");
	o = Opt{};
	o.options = opt(kCookie, cookie);
	Query two = with_opt(o);
	two.ar = 2;
	two.after = o.bytes() + o.bytes();
	add("two OPT records", two, 0, "dns-edns");
	Query trailing = with_opt(o);
	trailing.after += kMarker;
	add("bytes after the OPT record", trailing, 0, "dns-edns");
	o.version = 1;
	add("EDNS version 1", with_opt(o), 0, "dns-edns");
	o.version = 0;
	o.ext_rcode = 1;
	add("an extended RCODE in a query", with_opt(o), 0, "dns-edns");
	o.ext_rcode = 0;
	o.flags = 0x4000;
	add("a Z flag bit", with_opt(o), 0, "dns-edns");
	o.flags = 0x0001;
	add("the lowest Z flag bit", with_opt(o), 0, "dns-edns");
	o.flags = 0;
	o.size = 1337;
	add("a UDP size not listed (16 free bits otherwise)", with_opt(o), 0, "dns-edns");
	o.size = 1232;
	o.owner = wire_name("allowed.test");
	add("an OPT owner that is not the root", with_opt(o), 0, "dns-edns");
	o.owner = std::string(1, '\0');
	o.type = 1;
	add("an A record in the additional section", with_opt(o), 0, "dns-edns");
	o = Opt{};
	Query cut = with_opt(o);
	cut.after = cut.after.substr(0, 8);
	add("an OPT record cut short", cut, 0, "dns-edns");
	o.options = opt(65001, std::string(196, 'x'));
	add("200 option bytes", with_opt(o), 0, "dns-edns");
	judge("e" + env().id, cases, 0x5000);
}

// The policy decides: padding allowed (all zeros only), DO refused, one
// size; and "edns": false refuses the OPT record itself.
TEST_F(DnsParser, EdnsFollowsThePolicy)
{
	json p = json::parse(read_file(policy_));
	p["dns"]["edns"] = {{"options", {{"PADDING", 32}, {"65001", 4}}}, {"udp_sizes", {1400}}, {"dnssec_ok", false}};
	policy_ = env().write_policy("edns.json", p);
	std::vector<Case> cases;
	auto add = [&](std::string what, Query q, int verdict, std::string reason) {
		cases.push_back({std::move(what), std::move(q), verdict, std::move(reason)});
	};
	Opt o;
	o.size = 1400;
	o.options = opt(kPadding, std::string(32, '\0'));
	add("32 bytes of zero padding", with_opt(o), 1, "dns-allow");
	o.options = opt(kPadding, std::string(31, '\0') + "\x01");
	add("padding with a one in it", with_opt(o), 0, "dns-edns");
	o.options = opt(kPadding, std::string(33, '\0'));
	add("33 bytes of padding", with_opt(o), 0, "dns-edns");
	o.options = opt(65001, "abcd") + opt(kPadding, std::string(4, '\0'));
	add("a listed numeric code, then padding", with_opt(o), 1, "dns-allow");
	o.options = opt(kCookie, std::string(8, 'c'));
	add("a cookie, not listed here", with_opt(o), 0, "dns-edns");
	o.options = "";
	o.flags = 0x8000;
	add("DO while dnssec_ok is false", with_opt(o), 0, "dns-edns");
	o.flags = 0;
	o.size = 1232;
	add("1232, not listed here", with_opt(o), 0, "dns-edns");
	judge("f" + env().id, cases, 0x5100);

	p["dns"]["edns"] = false;
	policy_ = env().write_policy("noedns.json", p);
	cases.clear();
	add("no OPT record", Query{}, 1, "dns-allow");
	Opt plain;
	add("an OPT record while edns is false", with_opt(plain), 0, "dns-edns");
	judge("g" + env().id, cases, 0x5200);
}

TEST_F(DnsParser, AnswersAreLearnedOnlyForQueriesSent)
{
	Query a;
	a.id = 0x3001;
	a.name = "www.allowed.test";
	Query b;
	b.id = 0x3002;
	b.name = "api.allowed.test";
	std::vector<std::pair<std::string, std::string>> pkts = {
		// Queries that leave; their answers follow.
		{"al_egress", udp4(kSandboxIp, kResolver, 42001, 53, a.bytes())},
		{"al_egress", udp4(kSandboxIp, kResolver, 42002, 53, b.bytes())},
		// 2: wrong id.
		{"al_ingress", udp4(kResolver, kSandboxIp, 53, 42001, answer_to(a, {"10.77.0.9"}, 0x3999))},
		// 3: from another address than the resolver.
		{"al_ingress", udp4("10.77.0.2", kSandboxIp, 53, 42001, answer_to(a, {"10.77.0.9"}, a.id))},
		// 4: to another port than the query came from.
		{"al_ingress", udp4(kResolver, kSandboxIp, 53, 42009, answer_to(a, {"10.77.0.9"}, a.id))},
		// 5: the question of b on a's id and port.
		{"al_ingress", udp4(kResolver, kSandboxIp, 53, 42001, answer_to(b, {"10.77.0.9"}, a.id))},
		// 6: the real answer to a: learned.
		{"al_ingress", udp4(kResolver, kSandboxIp, 53, 42001, answer_to(a, {"10.77.0.7", "10.77.0.8"}, a.id))},
		// 7: the same answer again: its query was used up.
		{"al_ingress", udp4(kResolver, kSandboxIp, 53, 42001, answer_to(a, {"10.77.0.9"}, a.id))},
		// 8: an answer nobody asked for.
		{"al_ingress", udp4(kResolver, kSandboxIp, 53, 42055, answer_to(b, {"10.77.0.9"}, 0x3055))},
		// 9: an answer to b whose second record runs past the end.
		{"al_ingress", udp4(kResolver, kSandboxIp, 53, 42002,
				    answer_to(b, {"10.77.0.10", "10.77.0.11"}, b.id).substr(0, 60))},
	};
	auto v = run_packets("a" + env().id, pkts);
	EXPECT_EQ(v[0], 1);
	EXPECT_EQ(v[1], 1);
	EXPECT_EQ(v[2], 0) << "wrong id";
	EXPECT_EQ(v[3], 0) << "wrong source";
	EXPECT_EQ(v[4], 0) << "wrong port";
	EXPECT_EQ(v[5], 0) << "wrong question";
	EXPECT_EQ(v[6], 1) << "the real answer";
	EXPECT_EQ(v[7], 0) << "replayed answer";
	EXPECT_EQ(v[8], 0) << "unsolicited";
	EXPECT_EQ(v[9], 0) << "malformed records";

	std::set<std::string> learned, dropped_from;
	size_t dropped = 0;
	for (const auto& j : events(env().audit(), "dns-answer")) {
		if (j.value("dropped", false)) {
			dropped++;
			dropped_from.insert(j.value("from", ""));
			EXPECT_EQ(j.value("reason", ""),
				  j.value("qid", 0) == 0x3002 ? "dns-malformed" : "dns-unsolicited")
				<< j.dump();
		} else if (j.value("learned", false)) {
			learned.insert(j.value("addr", ""));
			EXPECT_EQ(j.value("qname", ""), "www.allowed.test") << j.dump();
			EXPECT_EQ(j.value("ttl", 0), 300) << j.dump();
		}
	}
	EXPECT_EQ(learned, (std::set<std::string>{"10.77.0.7", "10.77.0.8"})) << dump_lines(env().audit());
	EXPECT_EQ(dropped, 7u) << dump_lines(env().audit());
	EXPECT_TRUE(dropped_from.count("10.77.0.2")) << "the forged answer's real source is reported";
	// A dropped answer is not the sandbox's violation.
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

// An answer built record by record: header, the question as given (wire
// form), then the records.
struct Answer {
	unsigned id = 0;
	std::string qname_wire;
	std::vector<std::string> rrs;
	std::string bytes() const
	{
		std::string out = be16(id) + be16(0x8180) + be16(1) + be16(rrs.size()) + be16(0) + be16(0) +
				  qname_wire + be16(1) + be16(1);
		for (const auto& r : rrs)
			out += r;
		return out;
	}
	// Where the next record will start.
	size_t next() const { return bytes().size(); }
	// Where the rdata of the next record starts, given its owner's bytes.
	size_t next_rdata(const std::string& owner) const { return next() + owner.size() + 10; }
};

std::string rr(const std::string& owner, unsigned type, const std::string& rdata, uint32_t ttl = 300)
{
	return owner + be16(type) + be16(1) + be32(ttl) + be16(rdata.size()) + rdata;
}

std::string ptr(size_t off)
{
	return be16(0xc000 | off);
}

constexpr unsigned kA = 1, kCname = 5;

// Only records whose owner is the question or a name of its CNAME chain
// (followed in order, through compression pointers, case-insensitively)
// teach addresses; the others are counted and reported, and what they
// named stays closed. Names that cannot be walked (pointer loops, forward
// pointers) drop the whole answer.
TEST_F(DnsParser, AnswersTeachOnlyAlongTheChain)
{
	const std::string q = "q.allowed.test";
	const std::string qw = wire_name(q);
	const size_t kQ = 12, kAllowed = 14;  // offsets of "q.allowed.test" and "allowed.test"
	std::vector<Answer> answers;
	auto answer = [&](const std::string& question_wire) {
		Answer a;
		a.id = 0x6000 + answers.size();
		a.qname_wire = question_wire;
		return a;
	};
	// 0: q -> a.allowed.test -> b.elsewhere.test, two A records on b; no pointers.
	Answer a = answer(qw);
	a.rrs = {rr(qw, kCname, wire_name("a.allowed.test")),
		 rr(wire_name("a.allowed.test"), kCname, wire_name("b.elsewhere.test")),
		 rr(wire_name("b.elsewhere.test"), kA, ip4("10.77.6.1")),
		 rr(wire_name("b.elsewhere.test"), kA, ip4("10.77.6.2"))};
	answers.push_back(a);
	// 1: the question's own address, then addresses of other owners: evil.example and another allowed name.
	a = answer(qw);
	a.rrs = {rr(ptr(kQ), kA, ip4("10.77.6.3")), rr(wire_name("evil.example"), kA, ip4("10.77.6.4")),
		 rr(wire_name("www.allowed.test"), kA, ip4("10.77.6.5")),
		 rr(wire_name("evil.example"), 28, std::string("\xfd\x77", 2) + std::string(13, '\0') + "\x66")};
	answers.push_back(a);
	// 2: a compressed chain, letter case mixed: Q.Allowed.TEST -> A.<ptr allowed.test>
	// -> B.<ptr to the previous target>; the A record's owner b.a.<ptr allowed.test>.
	a = answer(wire_name("Q.Allowed.TEST"));
	{
		size_t t1 = a.next_rdata(ptr(kQ));
		a.rrs.push_back(rr(ptr(kQ), kCname,
				   std::string("\x01"
					       "A",
					       2) +
					   ptr(kAllowed)));
		a.rrs.push_back(rr(ptr(t1), kCname,
				   std::string("\x01"
					       "B",
					       2) +
					   ptr(t1)));
		a.rrs.push_back(rr(std::string("\x01"
					       "b"
					       "\x01"
					       "a",
					       4) +
					   ptr(kAllowed),
				   kA, ip4("10.77.6.6")));
	}
	answers.push_back(a);
	// 3: an owner that points at itself.
	a = answer(qw);
	a.rrs = {rr(ptr(a.next()), kA, ip4("10.77.6.9"))};
	answers.push_back(a);
	// 4: an owner that points forward (at the record's own address bytes).
	a = answer(qw);
	a.rrs = {rr(ptr(a.next() + 12), kA, ip4("10.77.6.10"))};
	answers.push_back(a);
	// 5: a CNAME target "a" + a pointer back to its own start; the next
	// owner points at it, so the comparison walks into the loop.
	a = answer(qw);
	{
		size_t t = a.next_rdata(ptr(kQ));
		a.rrs.push_back(rr(ptr(kQ), kCname,
				   std::string("\x01"
					       "a",
					       2) +
					   ptr(t)));
		a.rrs.push_back(rr(ptr(t), kA, ip4("10.77.6.11")));
	}
	answers.push_back(a);
	// 6: in order: b's address before the CNAME that leads to b is off the chain; after it, on it.
	a = answer(qw);
	a.rrs = {rr(wire_name("b.allowed.test"), kA, ip4("10.77.6.7")),
		 rr(ptr(kQ), kCname, wire_name("b.allowed.test")),
		 rr(wire_name("b.allowed.test"), kA, ip4("10.77.6.8"))};
	answers.push_back(a);
	// 7: a CNAME whose owner is off the chain moves nothing: its target's address is off the chain too.
	a = answer(qw);
	a.rrs = {rr(wire_name("evil.example"), kCname, wire_name("c.allowed.test")),
		 rr(wire_name("c.allowed.test"), kA, ip4("10.77.6.12"))};
	answers.push_back(a);
	// 8, 9: names that are only pointers to pointers, each strictly before the
	// last (a TXT record holds them; TXT is not walked): 40 hops are more than
	// a comparison follows (malformed), 10 are fine.
	for (int hops : {40, 10}) {
		a = answer(qw);
		std::string owner = ptr(kQ);
		size_t blob = a.next_rdata(owner) + 1;  // after the TXT string's length byte
		std::string ptrs = ptr(kQ);
		for (int i = 1; i < hops; i++)
			ptrs += ptr(blob + 2 * (i - 1));
		a.rrs.push_back(rr(owner, 16, std::string(1, static_cast<char>(ptrs.size())) + ptrs));
		a.rrs.push_back(rr(ptr(blob + 2 * (hops - 1)), kA, ip4(hops == 40 ? "10.77.6.13" : "10.77.6.14")));
		answers.push_back(a);
	}

	std::string queries, replies;
	for (size_t i = 0; i < answers.size(); i++) {
		Query qq;
		qq.id = answers[i].id;
		qq.name = q;
		queries += " " + hex(udp4(kSandboxIp, kResolver, 46000 + i, 53, qq.bytes()));
		replies += " " + hex(udp4(kResolver, kSandboxIp, 53, 46000 + i, answers[i].bytes()));
	}
	const std::vector<std::pair<std::string, int>> connects = {
		{"10.77.6.1", 1},  {"10.77.6.2", 1},  {"10.77.6.3", 1}, {"10.77.6.4", 0}, {"10.77.6.5", 0},
		{"10.77.6.6", 1},  {"10.77.6.7", 0},  {"10.77.6.8", 1}, {"10.77.6.9", 0}, {"10.77.6.11", 0},
		{"10.77.6.12", 0}, {"10.77.6.13", 0}, {"10.77.6.14", 1}};
	std::string syns;
	for (size_t i = 0; i < connects.size(); i++)
		syns += " " + hex(tcp4_syn(kSandboxIp, connects[i].first, 47000 + i, 9000));
	std::string status;
	for (const auto& arg : env().airlock_argv({"status", "--json"}))
		status += "'" + arg + "' ";
	std::string progs = env().bpf_dir + "/progs/";
	std::string script = fmt::format(
		"{0} {1}al_egress{2} && {0} {1}al_ingress{3} && {0} {1}al_egress{4} && {5} > {6}\n",
		AIRLOCK_SKB_TESTRUN, progs, queries, replies, syns, status, env().path("status.json"));
	RunSpec rs;
	rs.policy = policy_;
	rs.name = "c" + env().id;
	rs.cmd = {"/bin/sh", env().write_text("chain.sh", script)};
	rs.keep_caps = true;
	rs.log_allowed = true;
	rs.in_client_ns = false;
	RunResult r = env().run(rs, 60s);
	ASSERT_EQ(r.r.status, 0) << r.describe();
	ASSERT_EQ(r.out_json.size(), 3u) << r.describe();
	const std::vector<int> delivered = {1, 1, 1, 0, 0, 0, 1, 1, 0, 1};
	for (size_t i = 0; i < answers.size(); i++)
		EXPECT_EQ(r.out_json[1]["results"][i]["retval"], delivered[i]) << "answer " << i;
	for (size_t i = 0; i < connects.size(); i++)
		EXPECT_EQ(r.out_json[2]["results"][i]["retval"], connects[i].second)
			<< "connect to " << connects[i].first;

	std::set<std::string> learned, off_chain, malformed;
	for (const auto& j : events(env().audit(), "dns-answer")) {
		if (j.value("dropped", false)) {
			EXPECT_EQ(j.value("reason", ""), "dns-malformed") << j.dump();
			malformed.insert(fmt::format("{:x}", j.value("qid", 0)));
		} else if (j.value("learned", false)) {
			EXPECT_EQ(j.value("reason", ""), "learned") << j.dump();
			learned.insert(j.value("addr", ""));
		} else {
			EXPECT_EQ(j.value("reason", ""), "dns-off-chain") << j.dump();
			EXPECT_EQ(j.value("qname", ""), q) << j.dump();
			off_chain.insert(j.value("addr", ""));
		}
	}
	auto lines = env().audit();
	EXPECT_EQ(learned, (std::set<std::string>{"10.77.6.1", "10.77.6.2", "10.77.6.3", "10.77.6.6", "10.77.6.8",
						  "10.77.6.14"}))
		<< dump_lines(lines);
	EXPECT_EQ(off_chain, (std::set<std::string>{"10.77.6.4", "10.77.6.5", "fd77::66", "10.77.6.7", "10.77.6.12"}))
		<< dump_lines(lines);
	EXPECT_EQ(malformed, (std::set<std::string>{"6003", "6004", "6005", "6008"})) << dump_lines(lines);
	// The connects to what the answers named off the chain are violations.
	for (const char* addr : {"10.77.6.4", "10.77.6.5", "10.77.6.7", "10.77.6.12"})
		EXPECT_TRUE(Logged(lines, Violation("egress", "no-rule", addr, 9000))) << addr;
	json st = json::parse(read_file(env().path("status.json")), nullptr, false);
	json dns;
	for (const auto& sb : st["sandboxes"])
		if (sb["name"] == rs.name)
			dns = sb["dns"];
	ASSERT_TRUE(dns.is_object()) << st.dump(2);
	EXPECT_EQ(dns["records_off_chain"], 5) << dns.dump();
	EXPECT_EQ(dns["answers_learned"], 6) << dns.dump();
	EXPECT_EQ(dns["answers_dropped"], 4) << dns.dump();
}

// The learned table of a sandbox holds 4096 addresses: answers past that are
// delivered but teach nothing (counted), nothing already learned is evicted,
// and what was not learned stays closed.
TEST_F(DnsParser, LearnedTableIsBoundedPerSandbox)
{
	json p = json::parse(read_file(policy_));
	p["dns"]["queries_per_second"] = 100000;
	p["dns"]["query_burst"] = 100000;
	std::string policy = env().write_policy("many.json", p);
	const int kAnswers = 260, kPerAnswer = 16;  // 4160 addresses, 64 past the table
	auto addr = [](int i, int k) { return fmt::format("10.{}.{}.{}", 200 + i / 200, i % 200, k + 1); };
	// In two rounds of queries then answers: a sandbox has 256 pending
	// queries at most (the oldest is forgotten, and its answer dropped).
	const int kRound = 200;
	std::string queries[2], answers[2];
	for (int i = 0; i < kAnswers; i++) {
		Query q;
		q.id = 0x4000 + i;
		q.name = fmt::format("n{}.allowed.test", i);
		std::vector<std::string> a;
		for (int k = 0; k < kPerAnswer; k++)
			a.push_back(addr(i, k));
		queries[i / kRound] += " " + hex(udp4(kSandboxIp, kResolver, 43000 + i, 53, q.bytes()));
		answers[i / kRound] += " " + hex(udp4(kResolver, kSandboxIp, 53, 43000 + i, answer_to(q, a, q.id)));
	}
	std::string first = addr(0, 0), last = addr(kAnswers - 1, kPerAnswer - 1);
	std::string status;
	for (const auto& a : env().airlock_argv({"status", "--json"}))
		status += "'" + a + "' ";
	std::string progs = env().bpf_dir + "/progs/";
	std::string script;
	for (int round = 0; round < 2; round++)
		script += fmt::format("{0} {1}al_egress{2} && {0} {1}al_ingress{3} && ", AIRLOCK_SKB_TESTRUN, progs,
				      queries[round], answers[round]);
	script += fmt::format("{2} > {3} && {0} {1}al_egress {4} {5}", AIRLOCK_SKB_TESTRUN, progs, status,
			      env().path("status.json"), hex(tcp4_syn(kSandboxIp, first, 44000, 9000)),
			      hex(tcp4_syn(kSandboxIp, last, 44001, 9000)));
	RunSpec s;
	s.policy = policy;
	s.name = "m" + env().id;
	s.cmd = {"/bin/sh", env().write_text("many.sh", script + "\n")};  // too long for one argument
	s.keep_caps = true;
	s.in_client_ns = false;
	RunResult rr = env().run(s, 60s);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	ASSERT_EQ(rr.out_json.size(), 5u) << rr.describe();
	for (int round = 0; round < 2; round++) {
		for (const auto& r : rr.out_json[2 * round]["results"])
			ASSERT_EQ(r["retval"], 1) << "query " << r.dump();
		for (const auto& r : rr.out_json[2 * round + 1]["results"])
			ASSERT_EQ(r["retval"], 1) << "answers are delivered even when the table is full: " << r.dump();
	}
	json st = json::parse(read_file(env().path("status.json")), nullptr, false);
	ASSERT_TRUE(st.is_object()) << read_file(env().path("status.json"));
	json dns;
	for (const auto& sb : st["sandboxes"])
		if (sb["name"] == s.name)
			dns = sb["dns"];
	ASSERT_TRUE(dns.is_object()) << st.dump(2);
	EXPECT_EQ(dns["answers_learned"], 4096) << dns.dump();
	EXPECT_EQ(dns["learn_full"], kAnswers * kPerAnswer - 4096) << dns.dump();
	EXPECT_EQ(dns["learned_entries"], 4096) << dns.dump();
	EXPECT_EQ(dns["answers_dropped"], 0) << dns.dump();
	// The first address learned still opens its port; the last, refused, opens nothing.
	EXPECT_EQ(rr.out_json[4]["results"][0]["retval"], 1) << rr.out_json[4].dump();
	EXPECT_EQ(rr.out_json[4]["results"][1]["retval"], 0) << rr.out_json[4].dump();
}

}  // namespace
}  // namespace it
