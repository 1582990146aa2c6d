// Byte budgets of allow rules, counted in the kernel at egress: an upload
// to the sink past its rule's budget is cut (the sink never gets more than
// the budget) and takes on_violation; the count is of TCP payload once, so
// retransmissions under real loss (nftables drops at the sink) do not
// count twice; after the budget is spent the rule's connects fail.
#include <fmt/format.h>

#include <functional>
#include <regex>

#include "fixture.h"

namespace it {
namespace {

class Budget : public AirlockTest {
protected:
	std::string sandbox(const std::string& tag) { return "b" + env().id + "-" + tag; }

	// The first rule (10.77.0.2, the test ports) with a budget.
	json budget_policy(uint64_t bytes, const std::string& on_violation)
	{
		json p = base_policy("it-budget", on_violation);
		p["rules"][0]["budget"] = {{"egress_bytes", bytes}};
		return p;
	}

	// The budget of rule 0 as `airlock status` shows it.
	std::optional<json> budget_of(const std::string& name)
	{
		auto s = env().status_of(name);
		if (!s || !(*s)["budgets"].is_array())
			return std::nullopt;
		for (const auto& b : (*s)["budgets"])
			if (b.value("rule", -1) == 0)
				return b;
		return std::nullopt;
	}

	// Bytes of the sink's stream that carries marker (0: none).
	size_t received(const std::string& marker)
	{
		env().sink->refresh();
		size_t n = 0;
		for (const auto& p : env().sink->payloads_with(marker))
			n += p.size();
		return n;
	}

	void spent_budget_refuses(const std::string& user);
	void refused_bytes_never_leave(const std::string& user);

	// cmd in sandbox `name` under a budget of 1,000 bytes (deny), as user
	// (uid 0 when empty), with its capabilities if keep_caps; its end
	// waited for.
	RunResult run_under_budget(const std::string& name, std::vector<std::string> cmd, const std::string& user = "",
				   bool keep_caps = false)
	{
		RunSpec s;
		s.policy = env().write_policy(name + ".json", budget_policy(1000, "deny"));
		s.name = name;
		s.user = user;
		s.keep_caps = keep_caps;
		s.cmd = std::move(cmd);
		return env().run(s, 40s);
	}

	// After a run whose upload of MARKER to PORT crossed a budget of 1,000
	// and closed its socket: the run says it ended the one socket (`where`
	// follows in its line), none is left to the port (in the client
	// namespace, or the one mounted at netns), the sink has at most the
	// budget, and the crossing was a violation.
	void expect_socket_ended(const RunResult& rr, const std::string& name, int port, const std::string& marker,
				 const std::string& where = "", const std::string& netns = "")
	{
		EXPECT_NE(rr.r.err.find(name + ": 1 TCP socket(s) of its cgroup ended" + where), std::string::npos)
			<< rr.describe();
		EXPECT_EQ(TcpSocketsTo(env(), port, netns), "");
		EXPECT_LE(received(marker), 1000u);
		Match m = Violation("egress", "budget", kAllowed4, port);
		EXPECT_TRUE(Logged(env().audit(), m, name)) << dump_lines(env().audit());
	}

	uint64_t retransmitted_segments()
	{
		Result r = env().in_client({"nstat", "-az", "TcpRetransSegs"});
		std::smatch m;
		static const std::regex re(R"(TcpRetransSegs\s+([0-9]+))");
		return std::regex_search(r.out, m, re) ? std::stoull(m[1]) : 0;
	}
};

// 1 MB to a rule with a budget of 100,000 bytes under on_violation freeze:
// the sink gets at most the budget, the packet that crossed it is a
// `budget` violation at egress, the sandbox is frozen, and status shows the
// count past the budget by less than one packet's payload.
TEST_F(Budget, AnUploadPastItsBudgetIsCutAndTheSandboxFrozen)
{
	std::string name = sandbox("cut"), marker = env().marker("budget-cut");
	RunSpec s;
	s.policy = env().write_policy(name + ".json", budget_policy(100000, "freeze"));
	s.name = name;
	s.cmd = env().py("upload.py", {"--timeout", "20", dest4(kAllowed4, kPortLo + 5), marker, "1000000"});
	Proc& p = env().start_run(s);
	std::optional<json> st;
	ASSERT_TRUE(wait_until(
		[&] {
			st = env().status_of(name);
			return st && st->value("state", "") == "frozen";
		},
		15s))
		<< p.describe() << (st ? st->dump() : "");
	auto b = budget_of(name);
	ASSERT_TRUE(b) << st->dump();
	EXPECT_EQ(b->value("limit_bytes", 0), 100000);
	EXPECT_EQ(b->value("spent", false), true);
	uint64_t used = b->value("used_bytes", uint64_t{0});
	EXPECT_GT(used, 100000u);
	EXPECT_LE(used, 100000u + 65536u) << "more than one packet's payload past the budget";
	EXPECT_LE(received(marker), 100000u);
	Match m = Violation("egress", "budget", kAllowed4, kPortLo + 5);
	EXPECT_TRUE(Logged(env().audit(), m, name)) << dump_lines(env().audit());
	env().airlock({"kill", name});
	p.wait(15s);
}

// Under 25% loss of data packets on the way to the sink, 300,000 bytes go through a rule with
// a budget of 10 MB: TCP retransmits (the kernel's own counter says so),
// and the count is exactly the payload, each byte once.
TEST_F(Budget, RetransmissionsAreCountedOnce)
{
	std::string name = sandbox("loss"), marker = env().marker("budget-loss");
	// One data packet in four to the port dropped as it reaches the sink
	// (nftables in the sink's namespace, which the test made and removes).
	auto in_sink = [&](std::vector<std::string> argv) {
		argv.insert(argv.begin(), {"ip", "netns", "exec", env().topo->sink_ns});
		return run(argv);
	};
	for (const auto& cmd : std::vector<std::vector<std::string>>{{"nft", "add", "table", "inet", "airlock_loss"},
								     {"nft", "add", "chain", "inet", "airlock_loss",
								      "in", "{ type filter hook input priority 0; }"},
								     {"nft",
								      "add",
								      "rule",
								      "inet",
								      "airlock_loss",
								      "in",
								      "tcp",
								      "dport",
								      std::to_string(kPortLo + 6),
								      "meta",
								      "length",
								      ">",
								      "200",
								      "numgen",
								      "inc",
								      "mod",
								      "4",
								      "<",
								      "1",
								      "drop"}}) {
		Result r = in_sink(cmd);
		ASSERT_EQ(r.status, 0) << r.describe();
	}
	struct Undo {
		std::function<Result(std::vector<std::string>)> f;
		~Undo() { f({"nft", "delete", "table", "inet", "airlock_loss"}); }
	} undo{in_sink};
	uint64_t before = retransmitted_segments();
	RunSpec s;
	s.policy = env().write_policy(name + ".json", budget_policy(10000000, "deny"));
	s.name = name;
	s.cmd = {"/bin/sh", "-c", "\"$@\"; sleep 30", "sh"};
	auto py = env().py("upload.py", {"--timeout", "30", dest4(kAllowed4, kPortLo + 6), marker, "300000"});
	s.cmd.insert(s.cmd.end(), py.begin(), py.end());
	Proc& p = env().start_run(s);
	size_t want = marker.size() + 300000;
	ASSERT_TRUE(wait_until([&] { return p.out().find("\"ok\":true") != std::string::npos; }, 60s)) << p.describe();
	EXPECT_TRUE(wait_until([&] { return received(marker) == want; }, 5s)) << received(marker) << " of " << want;
	EXPECT_GT(retransmitted_segments(), before) << "no retransmission: the loss did not happen";
	auto b = budget_of(name);
	ASSERT_TRUE(b);
	EXPECT_EQ(b->value("used_bytes", uint64_t{0}), want);
	EXPECT_EQ(b->value("spent", true), false);
	env().airlock({"kill", name});
	p.wait(15s);
}

// on_violation deny: 5,000 bytes to a budget of 1,000 are cut (none of the
// first connection's reaches the sink past the budget); then a new connection to the rule's destination fails with
// EPERM (`budget`), and one to the other rule's destination, which has no
// budget, goes through.
TEST_F(Budget, ASpentBudgetRefusesTheRulesConnects)
{
	// As uid 0, then as nobody.
	for (const std::string user : {"", "nobody"}) {
		SCOPED_TRACE(user.empty() ? "uid 0" : user);
		spent_budget_refuses(user);
	}
}

void Budget::spent_budget_refuses(const std::string& user)
{
	std::string tag = user.empty() ? "root" : user;
	std::string name = sandbox("spent-" + tag), m1 = env().marker("budget-first-" + tag),
		    m2 = env().marker("budget-after-" + tag), m3 = env().marker("budget-other-" + tag);
	RunResult rr = run_under_budget(name,
					env().py("upload.py", {"--timeout", "3", dest4(kAllowed4, kPortLo + 7), m1,
							       "5000", dest4(kAllowed4, kPortLo + 8), m2, "10",
							       dest6(kAllowed6, kPortLo + 9), m3, "10"}),
					user);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	ASSERT_FALSE(rr.out_json.empty()) << rr.describe();
	const json& res = rr.out_json[0]["results"];
	ASSERT_EQ(res.size(), 3u) << rr.describe();
	EXPECT_EQ(res[1].value("ok", true), false) << res.dump();
	EXPECT_EQ(res[1].value("errno", ""), "EPERM") << res.dump();
	EXPECT_EQ(res[2].value("ok", false), true) << res.dump();
	EXPECT_LE(received(m1), 1000u);
	EXPECT_EQ(received(m2), 0u);
	EXPECT_TRUE(wait_until([&] { return received(m3) == m3.size() + 10; }, 5s)) << received(m3);
	Match refused = Violation("connect4", "budget", kAllowed4, kPortLo + 8);
	EXPECT_TRUE(Logged(env().audit(), refused, name)) << dump_lines(env().audit());
}

// The bytes egress refused wait in their socket's send queue, and the
// command closing it (it exits) leaves the socket to the kernel to send
// them. When the run ends and the sandbox is removed, that socket is
// ended before the programs are detached: none of the sandbox's sockets
// to the port is left (an orphan in FIN-WAIT-1 otherwise, which the next
// retransmission would empty into the sink), and the sink never has more
// than the budget.
TEST_F(Budget, BytesRefusedAtEgressNeverLeaveOnceTheSandboxIsGone)
{
	// As uid 0, then as nobody.
	for (const std::string user : {"", "nobody"}) {
		SCOPED_TRACE(user.empty() ? "uid 0" : user);
		refused_bytes_never_leave(user);
	}
}

void Budget::refused_bytes_never_leave(const std::string& user)
{
	std::string tag = user.empty() ? "root" : user;
	std::string name = sandbox("orphan-" + tag), marker = env().marker("budget-orphan-" + tag);
	int port = kPortLo + (user.empty() ? 10 : 11);
	RunResult rr = run_under_budget(
		name, env().py("upload.py", {"--timeout", "1", dest4(kAllowed4, port), marker, "20000"}), user);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	expect_socket_ended(rr, name, port, marker);
}

// The same from a socket made in another network namespace: a process
// of the sandbox that may (CAP_SYS_ADMIN kept) joins the sink's and
// uploads to the sink's address over that namespace's loopback; its
// socket stays there when it exits. `airlock run` ends, in its own
// namespace: the socket is found and ended in the sink's, and the sink
// never has more than the budget.
TEST_F(Budget, BytesRefusedInAnotherNamespaceNeverLeaveOnceTheSandboxIsGone)
{
	std::string name = sandbox("orphan-ns"), marker = env().marker("budget-orphan-ns");
	int port = kPortLo + 12;
	std::vector<std::string> cmd = {"nsenter", "--net=" + env().topo->sink_ns_path(), "--"};
	auto py = env().py("upload.py", {"--timeout", "1", dest4(kAllowed4, port), marker, "20000"});
	cmd.insert(cmd.end(), py.begin(), py.end());
	RunResult rr = run_under_budget(name, cmd, "", true);
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	expect_socket_ended(rr, name, port, marker, " in net:[", env().topo->sink_ns_path());
}

// The same from a child cgroup the sandbox's process (uid 0) made, sent
// from and removed before the end: the socket keeps the id of a cgroup
// that no longer exists, and is found by the mark egress put on it when
// it refused its bytes (al_sk_held), and ended.
TEST_F(Budget, BytesRefusedFromARemovedChildCgroupNeverLeaveOnceTheSandboxIsGone)
{
	std::string name = sandbox("orphan-cg"), marker = env().marker("budget-orphan-cg");
	int port = kPortLo + 13;
	RunResult rr = run_under_budget(name, env().py("hidden_upload.py", {dest4(kAllowed4, port), marker, "20000"}));
	ASSERT_EQ(rr.r.status, 0) << rr.describe();
	ASSERT_FALSE(rr.out_json.empty()) << rr.describe();
	const json& out = rr.out_json[0];
	ASSERT_EQ(out.value("moved", false), true) << out.dump();
	ASSERT_EQ(out.value("removed", false), true) << out.dump();
	EXPECT_GT(out.value("queued", 0), 1000) << out.dump();
	expect_socket_ended(rr, name, port, marker);
}

}  // namespace
}  // namespace it
