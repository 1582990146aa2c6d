// The control socket's requests: what a client writes the daemon reads back
// field for field, and every bad line is one exact error, never an exception.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "ops/request.h"

namespace {

using airlock::parse_request;
using airlock::Request;
using Cmd = Request::Cmd;

std::string error_of(const std::string& line)
{
	auto r = parse_request(line);
	if (!r)
		return r.rejection().first();
	return "(parsed)";
}

Request parsed(const std::string& line)
{
	auto r = parse_request(line);
	if (!r)
		ADD_FAILURE() << line << ": " << r.rejection().first();
	return r ? *r : Request{};
}

TEST(ControlRequest, EveryFieldOfAnAttachSurvivesTheWire)
{
	Request r = Request::of(Cmd::Attach, "web-1");
	r.policy = "/etc/airlock/web.json";
	r.audit_log = "/var/log/a.jsonl";
	r.audit_bound.max_bytes = 8192;
	r.audit_bound.keep = 3;
	r.log_allowed = true;
	r.cgroup = "system.slice/web.service";
	r.pid = 4242;
	std::string line = airlock::to_line(r);
	ASSERT_EQ(line.back(), '\n');
	Request back = parsed(line.substr(0, line.size() - 1));
	EXPECT_EQ(back.cmd, Cmd::Attach);
	EXPECT_EQ(back.name, "web-1");
	EXPECT_EQ(back.policy, "/etc/airlock/web.json");
	EXPECT_EQ(back.audit_log, "/var/log/a.jsonl");
	EXPECT_EQ(back.audit_bound.max_bytes, 8192u);
	EXPECT_EQ(back.audit_bound.keep, 3u);
	EXPECT_TRUE(back.log_allowed);
	EXPECT_EQ(back.cgroup, "system.slice/web.service");
	EXPECT_EQ(back.pid, 4242);
}

TEST(ControlRequest, EveryCommandRoundTrips)
{
	for (Cmd c : {Cmd::Ping, Cmd::Status, Cmd::Thaw, Cmd::Kill, Cmd::Reload, Cmd::Attach, Cmd::Create, Cmd::Detach,
		      Cmd::Delete, Cmd::Events}) {
		Request r = Request::of(c, "sb");
		r.policy = "p";
		std::string line = airlock::to_line(r);
		EXPECT_EQ(parsed(line.substr(0, line.size() - 1)).cmd, c) << line;
	}
}

TEST(ControlRequest, EventsCarryTheirSandboxAndFollow)
{
	Request r = parsed(R"({"cmd": "events", "sandbox": "a.b", "follow": true})");
	EXPECT_EQ(r.cmd, Cmd::Events);
	EXPECT_EQ(r.sandbox, "a.b");
	EXPECT_TRUE(r.follow);
}

TEST(ControlRequest, ALineThatIsNotOneObjectIsRefused)
{
	EXPECT_EQ(error_of(""), "request: not one JSON object on one line");
	EXPECT_EQ(error_of("{\"cmd\": "), "request: not one JSON object on one line");
	EXPECT_EQ(error_of("[1, 2]"), "request: (root): not a JSON object");
	EXPECT_EQ(error_of("\"ping\""), "request: (root): not a JSON object");
}

TEST(ControlRequest, TheCommandIsNamedAndKnown)
{
	EXPECT_EQ(error_of("{}"), "request: cmd: missing");
	EXPECT_EQ(error_of(R"({"cmd": 7})"), "request: cmd: not a string");
	EXPECT_EQ(error_of(R"({"cmd": "shutdown"})"), "request: cmd: unknown request 'shutdown'");
}

TEST(ControlRequest, AFieldOfAnotherCommandIsRefused)
{
	EXPECT_EQ(error_of(R"({"cmd": "thaw", "name": "a", "policy": "x"})"), "request: policy: not a field of 'thaw'");
	EXPECT_EQ(error_of(R"({"cmd": "status", "follow": true})"), "request: follow: not a field of 'status'");
	EXPECT_EQ(error_of(R"({"cmd": "create", "cgroup": "/x"})"), "request: cgroup: not a field of 'create'");
	EXPECT_EQ(error_of(R"({"cmd": "attach", "runner_pid": 1})"), "request: runner_pid: not a field of 'attach'");
	// What the client wrote is echoed escaped: the error stays one line.
	EXPECT_EQ(error_of(R"({"cmd": "attach", "a\nb\u001b": 1})"), "request: a\\x0ab\\x1b: not a field of 'attach'");
	EXPECT_EQ(error_of(R"({"cmd": "sh\ru\n"})"), "request: cmd: unknown request 'sh\\x0du\\x0a'");
}

TEST(ControlRequest, EachFieldHasItsType)
{
	EXPECT_EQ(error_of(R"({"cmd": "kill", "name": 3})"), "request: name: not a string");
	EXPECT_EQ(error_of(R"({"cmd": "events", "follow": "yes"})"), "request: follow: not true or false");
	EXPECT_EQ(error_of(R"({"cmd": "attach", "pid": -1})"), "request: pid: not a whole number from 0 to 2147483647");
	EXPECT_EQ(error_of(R"({"cmd": "attach", "pid": 2147483648})"),
		  "request: pid: not a whole number from 0 to 2147483647");
	EXPECT_EQ(error_of(R"({"cmd": "create", "audit_log_keep": 1001})"),
		  "request: audit_log_keep: not a whole number from 0 to 1000");
	EXPECT_EQ(error_of(R"({"cmd": "create", "audit_log_max_bytes": 100})"),
		  "request: audit_log_max_bytes: 0 (never rotate) or at least 4096");
}

TEST(ControlRequest, NamesAreSandboxNames)
{
	EXPECT_EQ(
		error_of(R"({"cmd": "thaw", "name": "../x"})"),
		"request: name: '../x' is not a sandbox name (1-63 of A-Z a-z 0-9 . _ -, starting with a letter or digit)");
	EXPECT_EQ(
		error_of(R"({"cmd": "events", "sandbox": "a b"})"),
		"request: sandbox: 'a b' is not a sandbox name (1-63 of A-Z a-z 0-9 . _ -, starting with a letter or digit)");
	EXPECT_EQ(error_of(R"({"cmd": "thaw"})"), "request: name: 'thaw' needs a sandbox name");
	EXPECT_EQ(error_of(R"({"cmd": "delete", "name": ""})"), "request: name: 'delete' needs a sandbox name");
	EXPECT_EQ(error_of(R"({"cmd": "reload", "name": "a"})"), "request: policy: 'reload' needs a policy");
	// attach and create may leave the name to the daemon (the cgroup's own).
	EXPECT_EQ(parsed(R"({"cmd": "attach", "name": "", "cgroup": "x"})").name, "");
}

}  // namespace
