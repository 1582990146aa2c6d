// The command line: `policy check` reports every error as one line naming the
// file and the JSON path and exits 1; `run` with a bad policy exits 125 and
// creates nothing; exit statuses pass through; every subcommand has --help.
#include <sys/stat.h>

#include <fmt/format.h>

#include "fixture.h"

namespace it {
namespace {

class Cli : public AirlockTest {
protected:
	bool with_sink() const override { return false; }

	static std::vector<std::string> lines_of(const std::string& s)
	{
		std::vector<std::string> out;
		std::istringstream in(s);
		std::string l;
		while (std::getline(in, l))
			if (!l.empty())
				out.push_back(l);
		return out;
	}
};

TEST_F(Cli, PolicyCheckAcceptsValidFiles)
{
	std::string p = env().write_policy("ok.json", base_policy("it-cli"));
	Result r = env().airlock({"policy", "check", p});
	EXPECT_EQ(r.status, 0) << r.describe();
	EXPECT_TRUE(lines_of(r.err).empty()) << r.describe();
	Result bundled = env().airlock({"policy", "check", source_dir() + "/policies/default.json",
					source_dir() + "/policies/research-agent.json",
					source_dir() + "/policies/wiki-agent.json"});
	EXPECT_EQ(bundled.status, 0) << bundled.describe();
}

// `policy show` says where each rule is decided: the kernel alone, the
// kernel rewriting the connect to a target, or the proxy.
TEST_F(Cli, PolicyShowSaysWhereEachRuleIsDecided)
{
	json p = {{"version", 1},
		  {"name", "it-show"},
		  {"rules",
		   {{{"action", "redirect"},
		     {"cidr", "0.0.0.0/0"},
		     {"ports", {80}},
		     {"protocol", "tcp"},
		     {"to", "127.0.0.1:8080"}},
		    {{"action", "redirect"}, {"domain", "smtp.example.com"}, {"to", "world"}},
		    {{"action", "allow"}, {"domain", "pypi.org"}, {"protocol", "tcp"}, {"tls", {{"sni", "require"}}}},
		    {{"action", "allow"}, {"cidr", "10.0.0.0/8"}, {"budget", {{"egress_bytes", 100}}}}}},
		  {"world", {{"dns", "resolvers"}}}};
	Result r = env().airlock({"policy", "show", env().write_policy("show.json", p)});
	ASSERT_EQ(r.status, 0) << r.describe();
	auto lines = lines_of(r.out);
	ASSERT_GE(lines.size(), 5u) << r.out;
	EXPECT_EQ(lines[1],
		  "  rule 0: redirect 0.0.0.0/0 ports 80 tcp to 127.0.0.1:8080 [kernel, the connect rewritten to "
		  "the target]");
	EXPECT_EQ(lines[2], "  rule 1: redirect smtp.example.com to world [proxy]");
	EXPECT_EQ(lines[3], "  rule 2: allow pypi.org tcp sni-gate [proxy]");
	EXPECT_EQ(lines[4], "  rule 3: allow 10.0.0.0/8 budget 100 bytes [kernel, budget counted in the kernel]");
}

TEST_F(Cli, PolicyCheckNamesFileAndJsonPath)
{
	struct Case {
		const char* what;
		std::string text;
		std::string path;  // expected JSON path at the start of the message
		// An unknown key may be reported at its own path or at its parent's
		// path with the key named in the message: both name where it is.
		std::string parent = "", key = "";
	};
	auto with_rule = [](const json& rule) {
		json p = {{"version", 1}, {"name", "it-bad"}, {"rules", json::array({rule})}};
		return p.dump();
	};
	std::vector<Case> cases = {
		{"prefix too long", with_rule({{"action", "allow"}, {"cidr", "10.0.0.0/33"}}), "rules/0/cidr"},
		{"host bits set", with_rule({{"action", "allow"}, {"cidr", "10.0.0.1/8"}}), "rules/0/cidr"},
		{"not an address", with_rule({{"action", "allow"}, {"cidr", "10.0.0.300"}}), "rules/0/cidr"},
		{"bad IPv6", with_rule({{"action", "allow"}, {"cidr", "fd77::2::1/128"}}), "rules/0/cidr"},
		{"port out of range", with_rule({{"action", "allow"}, {"cidr", "10.0.0.0/8"}, {"ports", {70000}}}),
		 "rules/0/ports/0"},
		{"reversed range",
		 with_rule({{"action", "allow"}, {"cidr", "10.0.0.0/8"}, {"ports", {443, "9000-8000"}}}),
		 "rules/0/ports/1"},
		{"bad action", with_rule({{"action", "permit"}, {"cidr", "10.0.0.0/8"}}), "rules/0/action"},
		{"bad protocol", with_rule({{"action", "allow"}, {"cidr", "10.0.0.0/8"}, {"protocol", "sctp"}}),
		 "rules/0/protocol"},
		{"unknown rule key", with_rule({{"action", "allow"}, {"cidr", "10.0.0.0/8"}, {"prots", {80}}}),
		 "rules/0/prots", "rules/0", "prots"},
		{"unknown top-level key", R"({"version":1,"name":"it-bad","rules":[],"colour":"red"})", "colour",
		 "(root)", "colour"},
		{"bad on_violation", R"({"version":1,"name":"it-bad","rules":[],"on_violation":"explode"})",
		 "on_violation"},
		{"bad mode", R"({"version":1,"name":"it-bad","rules":[],"mode":"learn"})", "mode"},
		{"bad version", R"({"version":2,"name":"it-bad","rules":[]})", "version"},
		{"bad name", R"({"version":1,"name":"no spaces allowed","rules":[]})", "name"},
	};
	for (size_t i = 0; i < cases.size(); i++) {
		const Case& c = cases[i];
		std::string f = env().write_text(fmt::format("bad{}.json", i), c.text);
		Result r = env().airlock({"policy", "check", f});
		EXPECT_EQ(r.status, 1) << c.what << ": " << r.describe();
		auto l = lines_of(r.err);
		ASSERT_EQ(l.size(), 1u) << c.what << ": expected exactly one error line\n" << r.describe();
		std::string want = f + ": " + c.path + ": ";
		bool at_path = l[0].rfind(want, 0) == 0;
		bool at_parent = !c.parent.empty() && l[0].rfind(f + ": " + c.parent + ": ", 0) == 0 &&
				 l[0].find("'" + c.key + "'") != std::string::npos;
		EXPECT_TRUE(at_path || at_parent)
			<< c.what << ": expected a line starting with '" << want << "', got '" << l[0] << "'";
		EXPECT_GT(l[0].size(), want.size()) << c.what << ": no message";
	}
}

TEST_F(Cli, PolicyCheckReportsEveryErrorAndEveryFile)
{
	json two = {{"version", 1},
		    {"name", "it-bad"},
		    {"rules", json::array({json{{"action", "allow"}, {"cidr", "10.0.0.0/33"}},
					   json{{"action", "allow"}, {"cidr", "10.0.0.0/8"}, {"ports", {0, 70000}}}})}};
	std::string bad = env().write_policy("two.json", two);
	std::string good = env().write_policy("good.json", base_policy("it-good"));
	std::string garbage = env().write_text("garbage.json", "{\"version\": 1, \"name\": ");
	Result r = env().airlock({"policy", "check", good, bad, garbage});
	EXPECT_EQ(r.status, 1) << r.describe();
	auto l = lines_of(r.err);
	int in_bad = 0, in_garbage = 0, in_good = 0;
	for (const auto& s : l) {
		in_bad += s.rfind(bad + ": rules/", 0) == 0;
		// A syntax error has no JSON path yet: "FILE: ..." or "FILE:LINE:COL: ...".
		in_garbage += s.rfind(garbage + ":", 0) == 0;
		in_good += s.find(good) != std::string::npos;
	}
	EXPECT_GE(in_bad, 2) << "both errors of " << bad << " must be reported\n" << r.describe();
	EXPECT_EQ(in_garbage, 1) << r.describe();
	EXPECT_EQ(in_good, 0) << r.describe();
	EXPECT_EQ(static_cast<int>(l.size()), in_bad + in_garbage) << "stray lines on stderr\n" << r.describe();
}

TEST_F(Cli, RunWithBadPolicyExits125AndCreatesNothing)
{
	std::string bad = env().write_text(
		"bad.json", R"({"version":1,"name":"it-bad","rules":[{"action":"allow","cidr":"10.0.0.0/33"}]})");
	std::string name = "x" + env().id;
	RunSpec s;
	s.policy = bad;
	s.name = name;
	s.cmd = {"/bin/true"};
	RunResult rr = env().run(s, 15s);
	EXPECT_EQ(rr.r.status, 125) << rr.describe();
	EXPECT_NE(rr.r.err.find(bad + ": rules/0/cidr"), std::string::npos) << rr.describe();
	EXPECT_FALSE(exists(env().sandbox_cgroup(name))) << "a cgroup was created for a rejected policy";
	EXPECT_FALSE(exists(cgroup2_mount() + "/" + env().cgroup_parent)) << "the cgroup parent was created";
	EXPECT_FALSE(exists(env().state_dir + "/sandboxes/" + name + ".json"));
	s.policy = env().path("does-not-exist.json");
	RunResult missing = env().run(s, 15s);
	EXPECT_EQ(missing.r.status, 125) << missing.describe();
	EXPECT_FALSE(exists(env().sandbox_cgroup(name)));
}

TEST_F(Cli, RunPassesTheCommandsStatusThrough)
{
	std::string p = env().write_policy("ok.json", base_policy("it-cli"));
	auto status_of = [&](const std::string& tag, std::vector<std::string> cmd) {
		RunSpec s;
		s.policy = p;
		s.name = "s" + env().id + "-" + tag;
		s.cmd = std::move(cmd);
		RunResult rr = env().run(s, 15s);
		EXPECT_FALSE(exists(env().sandbox_cgroup(s.name))) << tag << ": cgroup left behind";
		return rr;
	};
	RunResult ok = status_of("ok", {"/bin/true"});
	EXPECT_EQ(ok.r.status, 0) << ok.describe();
	RunResult seven = status_of("seven", {"/bin/sh", "-c", "exit 7"});
	EXPECT_EQ(seven.r.status, 7) << seven.describe();
	RunResult sig = status_of("sig", {"/bin/sh", "-c", "kill -TERM $$"});
	EXPECT_EQ(sig.r.status, 128 + 15) << sig.describe();
	RunResult nf = status_of("nf", {env().path("no-such-command")});
	EXPECT_EQ(nf.r.status, 127) << nf.describe();
	std::string noexec = env().write_text("noexec.sh", "#!/bin/sh\nexit 0\n");
	::chmod(noexec.c_str(), 0644);
	RunResult ne = status_of("ne", {noexec});
	EXPECT_EQ(ne.r.status, 126) << ne.describe();
	// Only stdio is inherited: the command sees no descriptor above 2.
	RunResult fds = status_of("fds", {"/bin/sh", "-c", "ls /proc/self/fd | tr '\\n' ' '"});
	EXPECT_EQ(fds.r.status, 0) << fds.describe();
	EXPECT_EQ(fds.r.out, "0 1 2 3 ") << "fd 3 is ls's own directory; anything more was inherited";
}

TEST_F(Cli, RunPassesTheCommandVerbatim)
{
	// Arguments that look like option lists, empty ones, and "--" again reach
	// the command as written.
	std::string p = env().write_policy("ok.json", base_policy("it-cli"));
	RunSpec s;
	s.policy = p;
	s.name = "v" + env().id;
	s.cmd = {"/usr/bin/printf", "<%s>", "[.a,.b]", "", "a,b", "--", "-n", "--help"};
	RunResult rr = env().run(s, 15s);
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(rr.r.out, "<[.a,.b]><><a,b><--><-n><--help>") << rr.describe();
	// Without "--" there is no command: a usage error, nothing created.
	Result r = env().airlock({"run", "--policy", p, "--name", "w" + env().id, "/bin/true"});
	EXPECT_NE(r.status, 0) << r.describe();
	EXPECT_NE(r.err.find("after --"), std::string::npos) << r.describe();
	EXPECT_FALSE(exists(env().sandbox_cgroup("w" + env().id)));
}

TEST_F(Cli, TwoSandboxesCannotShareAName)
{
	std::string p = env().write_policy("ok.json", base_policy("it-cli"));
	std::string name = "d" + env().id;
	RunSpec s;
	s.policy = p;
	s.name = name;
	s.cmd = env().py("wait_file.py", {env().path("go"), "15"});
	Proc& first = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return env().status_of(name).has_value() || !first.running(); }, 10s))
		<< first.describe();
	s.cmd = {"/bin/true"};
	RunResult second = env().run(s, 15s);
	EXPECT_EQ(second.r.status, 125) << second.describe();
	EXPECT_TRUE(first.running()) << "the first sandbox was disturbed\n" << first.describe();
	EXPECT_TRUE(exists(env().sandbox_cgroup(name)));
	write_file(env().path("go"), "");
	auto st = first.wait(10s);
	ASSERT_TRUE(st) << first.describe();
	EXPECT_EQ(*st, 0) << first.describe();
}

TEST_F(Cli, EverySubcommandHasHelp)
{
	std::vector<std::vector<std::string>> cmds = {{"--help"},
						      {"policy", "--help"},
						      {"policy", "check", "--help"},
						      {"policy", "show", "--help"},
						      {"run", "--help"},
						      {"status", "--help"},
						      {"thaw", "--help"},
						      {"kill", "--help"},
						      {"reload", "--help"}};
	for (const auto& c : cmds) {
		Result r = env().airlock(c);
		EXPECT_EQ(r.status, 0) << r.describe();
		EXPECT_FALSE(r.out.empty()) << r.describe();
	}
	Result run = env().airlock({"run", "--help"});
	for (const char* opt : {"--policy", "--name", "--audit-log", "--log-allowed", "--keep-caps"})
		EXPECT_NE(run.out.find(opt), std::string::npos) << "run --help does not mention " << opt;
	Result top = env().airlock({"--help"});
	for (const char* opt : {"--bpf-dir", "--state-dir", "--cgroup-parent"})
		EXPECT_NE(top.out.find(opt), std::string::npos) << "--help does not mention " << opt;
}

TEST_F(Cli, ControlCommandsOnUnknownSandboxesFail)
{
	Result st = env().airlock({"status", "--json"});
	ASSERT_EQ(st.status, 0) << st.describe();
	json j = json::parse(st.out, nullptr, false);
	ASSERT_FALSE(j.is_discarded()) << st.describe();
	EXPECT_EQ(j, json({{"sandboxes", json::array()}})) << st.out;
	std::string p = env().write_policy("ok.json", base_policy("it-cli"));
	for (auto args :
	     std::vector<std::vector<std::string>>{{"thaw", "nope"}, {"kill", "nope"}, {"reload", "nope", p}}) {
		Result r = env().airlock(args);
		EXPECT_EQ(r.status, 1) << r.describe();
		EXPECT_FALSE(r.err.empty()) << r.describe();
	}
}

// A command line that does not parse: one line on stderr naming what is
// wrong, and the documented status (1; 125 for run, whose other statuses
// are its command's). A mistyped subcommand is named, with the nearest one.
TEST_F(Cli, UsageErrorsAreOneLineWithTheDocumentedStatus)
{
	std::string p = env().write_policy("ok.json", base_policy("it-cli"));
	struct Case {
		std::vector<std::string> args;
		int status;
		std::string err;
	};
	std::vector<Case> cases = {
		{{"stauts"},
		 1,
		 "airlock error: 'stauts' is not a subcommand of airlock (did you mean 'status'?); airlock --help lists them"},
		{{"frobnicate"},
		 1,
		 "airlock error: 'frobnicate' is not a subcommand of airlock; airlock --help lists them"},
		{{"policy", "chek", p},
		 1,
		 "airlock error: 'chek' is not a subcommand of airlock policy (did you mean 'check'?); airlock policy --help "
		 "lists them"},
		{{"status", "--bogus"},
		 1,
		 "airlock error: status: The following argument was not expected: --bogus; airlock status --help shows its "
		 "options"},
		{{"thaw"}, 1, "airlock error: thaw: name is required; airlock thaw --help shows its options"},
		{{"thaw", "a b"},
		 1,
		 "airlock error: thaw: name: 'a b' is not a sandbox name (1-63 of A-Z a-z 0-9 . _ -, starting with a "
		 "letter or digit); airlock thaw --help shows its options"},
		{{"run", "--bogus", "--policy", p, "--", "true"},
		 125,
		 "airlock error: run: The following argument was not expected: --bogus; airlock run --help shows its "
		 "options"},
		{{"policy", "check", "/nonexistent/p.json"},
		 1,
		 "/nonexistent/p.json: (root): cannot read: No such file or directory"},
	};
	for (const auto& c : cases) {
		Result r = env().airlock(c.args);
		EXPECT_EQ(r.status, c.status) << r.describe();
		EXPECT_EQ(r.err, c.err + "\n") << r.describe();
	}
}

// --log-format json: every log line is one JSON object (ts, level, msg).
TEST_F(Cli, LogFormatJsonGivesOneObjectPerLine)
{
	Result r = env().airlock({"--log-format", "json", "thaw", "nope"});
	EXPECT_EQ(r.status, 1) << r.describe();
	auto lines = lines_of(r.err);
	ASSERT_EQ(lines.size(), 1u) << r.describe();
	json j = json::parse(lines[0], nullptr, false);
	ASSERT_TRUE(j.is_object()) << r.describe();
	EXPECT_EQ(j.value("level", ""), "error");
	EXPECT_EQ(j.value("msg", ""), "no sandbox named 'nope' (airlock status lists them)");
	EXPECT_EQ(j.value("ts", "").size(), std::string("2026-01-01T00:00:00.000000Z").size()) << j.dump();
}

}  // namespace
}  // namespace it
