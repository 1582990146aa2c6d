// The HTTP gate's verdict (gate/judge.h): each part of an entry, the first
// entry deciding, the nearest miss named, JSON bodies read one way only,
// rates per entry.
#include <gtest/gtest.h>

#include <string>

#include "gate/judge.h"
#include "policy/policy.h"
#include "policy_text.h"

namespace airlock::gate {
namespace {

using Clock = RateTable::Clock;

// The gate of the first rule of a policy whose rules are `rules`.
HttpGate gate_of(const std::string& http)
{
	Policy p = policy_test::parse_ok(
		R"({"version": 1, "name": "t", "rules": [{"action": "allow", "domain": "wiki.example.org",
		    "ports": [443], "protocol": "tcp", "http": )" +
		http + "}]}");
	return *p.rules.at(0).http;
}

const HttpGate kWiki = gate_of(R"([
	{"methods": ["GET", "HEAD"], "path": "/wiki/*"},
	{"methods": ["GET"], "path": "/w/index.php", "query": {"action": ["view", "raw"]}},
	{"methods": ["POST"], "path": "/api/mail/send", "json": {"/to": "*@example.org"}, "max_body_bytes": 200}
])");

struct Req {
	Req(std::string m, std::string t, std::string ct = "", std::string b = "")
	    : method(std::move(m)), target(std::move(t)), content_type(std::move(ct)), body(std::move(b))
	{
	}
	std::string method, target, content_type, body;
};

Verdict judge_of(const HttpGate& g, const Req& in, RateTable& rates, Clock::time_point now = Clock::now())
{
	auto t = url::canonical_target(in.target);
	EXPECT_TRUE(t) << in.target;
	Request r{in.method, "wiki.example.org", *t, in.content_type, in.body};
	return judge(g, 0, r, rates, now);
}

// "allow N", or "REASON: DETAIL".
std::string verdict(const HttpGate& g, const Req& in)
{
	RateTable rates;
	Verdict v = judge_of(g, in, rates);
	if (v.kind == Verdict::Allow)
		return "allow " + std::to_string(*v.entry);
	return v.reason + ": " + v.detail;
}

TEST(GateJudge, MethodsAreExactAndPathsMatchWholeSegments)
{
	EXPECT_EQ(verdict(kWiki, {"GET", "/wiki/Main_Page"}), "allow 0");
	EXPECT_EQ(verdict(kWiki, {"HEAD", "/wiki/a/b/c"}), "allow 0");
	EXPECT_EQ(verdict(kWiki, {"GET", "/wiki/"}), "allow 0");
	EXPECT_EQ(verdict(kWiki, {"POST", "/wiki/Main_Page"}), "http-deny: no entry allows POST /wiki/Main_Page");
	EXPECT_EQ(verdict(kWiki, {"OPTIONS", "/wiki/x"}), "http-deny: no entry allows OPTIONS /wiki/x");
	EXPECT_EQ(verdict(kWiki, {"GET", "/wikix"}), "http-deny: no entry allows GET /wikix");
	EXPECT_EQ(verdict(kWiki, {"GET", "/wiki"}), "http-deny: no entry allows GET /wiki");
	EXPECT_EQ(verdict(kWiki, {"GET", "/WIKI/x"}), "http-deny: no entry allows GET /WIKI/x");
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php/x"}), "http-deny: no entry allows GET /w/index.php/x");
	// GET does not imply HEAD.
	HttpGate get_only = gate_of(R"([{"methods": ["GET"], "path": "/x"}])");
	EXPECT_EQ(verdict(get_only, {"HEAD", "/x"}), "http-deny: no entry allows HEAD /x");
	HttpGate any = gate_of(R"([{"methods": ["GET"], "path": "/*"}])");
	EXPECT_EQ(verdict(any, {"GET", "/"}), "allow 0");
	EXPECT_EQ(verdict(any, {"GET", "/a/b"}), "allow 0");
}

TEST(GateJudge, QueryParametersMustEachHaveAListedValue)
{
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php?action=view&title=X"}), "allow 1");
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php?title=X&action=raw"}), "allow 1");
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php?action=edit&title=X"}),
		  "http-deny: entry 1: query parameter 'action' is 'edit', not one of the entry's");
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php?title=X"}),
		  "http-deny: entry 1: query parameter 'action' is missing");
	// Every occurrence counts: servers differ on which of two they read.
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php?action=view&action=edit"}),
		  "http-deny: entry 1: query parameter 'action' is 'edit', not one of the entry's");
	// An encoded name is the name.
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php?action=view&%61ction=edit"}),
		  "http-deny: entry 1: query parameter 'action' is 'edit', not one of the entry's");
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php?action=vi%65w"}), "allow 1");
	EXPECT_EQ(verdict(kWiki, {"GET", "/w/index.php?action=view;action=edit"}),
		  "http-deny: entry 1: query parameter 'action' is 'view;action=edit', not one of the entry's");
	HttpGate only = gate_of(
		R"([{"methods": ["GET"], "path": "/s", "query": {"q": ["a", "b"]}, "query_only": true}])");
	EXPECT_EQ(verdict(only, {"GET", "/s?q=a"}), "allow 0");
	EXPECT_EQ(verdict(only, {"GET", "/s?q=a&x=1"}),
		  "http-deny: entry 0: query parameter 'x' is not one the entry names");
}

TEST(GateJudge, JsonFieldsAreReadOneWayOnly)
{
	auto post = [](const std::string& body, const std::string& type = "application/json") {
		return verdict(kWiki, {"POST", "/api/mail/send", type, body});
	};
	EXPECT_EQ(post(R"({"to": "ann@example.org", "body": "hi"})"), "allow 2");
	EXPECT_EQ(post(R"({"to": ["ann@example.org", "bob@example.org"]})"), "allow 2");
	EXPECT_EQ(post(R"({"to": "eve@evil.test"})"),
		  "http-deny: entry 2: body field /to is \"eve@evil.test\", which is not '*@example.org'");
	EXPECT_EQ(post(R"({"to": ["ann@example.org", "eve@evil.test"]})"),
		  "http-deny: entry 2: body field /to has \"eve@evil.test\", which is not '*@example.org'");
	EXPECT_EQ(post(R"({"cc": "ann@example.org"})"), "http-deny: entry 2: body field /to is missing");
	EXPECT_EQ(post(R"({"to": {"a": "x@example.org"}})"),
		  "http-deny: entry 2: body field /to is {\"a\":\"x@example.org\"}, which is not '*@example.org'");
	// Two readings of one body: a repeated key, a NUL a C server stops at,
	// a form that is also JSON, a body that is not JSON.
	EXPECT_EQ(post(R"({"to": "ann@example.org", "to": "eve@evil.test"})"),
		  "http-deny: entry 2: the body is not JSON: duplicate key 'to'");
	EXPECT_EQ(post(R"({"to": "eve@evil.test\u0000@example.org"})"),
		  "http-deny: entry 2: body field /to is \"eve@evil.test\\u0000@example.org\", which is not "
		  "'*@example.org'");
	EXPECT_EQ(post(R"({"to": "ann@example.org", "x": "&to=eve@evil.test"})", "application/x-www-form-urlencoded"),
		  "http-deny: entry 2: the body's type is 'application/x-www-form-urlencoded', not application/json");
	EXPECT_EQ(post("{\"to\": \"ann@example.org\""), "http-deny: entry 2: the body is not JSON: invalid JSON: "
							"syntax error while parsing object - unexpected end of input; "
							"expected '}'");
	EXPECT_EQ(post(R"({"to": "ann@example.org"})", "application/problem+json"), "allow 2");
	EXPECT_EQ(post(R"({"to": "ann@example.org", "pad": ")" + std::string(200, 'x') + "\"}"),
		  "http-deny: entry 2: the body's 236 bytes are more than the entry's 200");
}

TEST(GateJudge, TheFirstMatchingEntryDecides)
{
	HttpGate g = gate_of(R"([
		{"methods": ["GET"], "path": "/a", "query": {"v": ["1"]}},
		{"methods": ["GET"], "path": "/a/*"},
		{"methods": ["GET"], "path": "/a"}
	])");
	EXPECT_EQ(verdict(g, {"GET", "/a?v=1"}), "allow 0");
	EXPECT_EQ(verdict(g, {"GET", "/a?v=2"}), "allow 2");
	EXPECT_EQ(verdict(g, {"GET", "/a/b"}), "allow 1");
}

TEST(GateJudge, ARateIsPerEntryAndRefills)
{
	HttpGate g = gate_of(
		R"([{"methods": ["GET"], "path": "/r", "rate": "2/s"}, {"methods": ["GET"], "path": "/s"}])");
	RateTable rates;
	Clock::time_point t0 = Clock::now();
	EXPECT_EQ(judge_of(g, {"GET", "/r"}, rates, t0).kind, Verdict::Allow);
	EXPECT_EQ(judge_of(g, {"GET", "/r"}, rates, t0).kind, Verdict::Allow);
	Verdict third = judge_of(g, {"GET", "/r"}, rates, t0);
	EXPECT_EQ(third.kind, Verdict::Limited);
	EXPECT_EQ(third.reason, "http-rate");
	EXPECT_EQ(third.detail, "entry 0: more than 2 requests per second");
	EXPECT_EQ(judge_of(g, {"GET", "/s"}, rates, t0).kind, Verdict::Allow) << "another entry has its own";
	EXPECT_EQ(judge_of(g, {"GET", "/r"}, rates, t0 + std::chrono::milliseconds(499)).kind, Verdict::Limited);
	EXPECT_EQ(judge_of(g, {"GET", "/r"}, rates, t0 + std::chrono::milliseconds(1001)).kind, Verdict::Allow);
	// A denial takes no token.
	EXPECT_EQ(judge_of(g, {"POST", "/r"}, rates, t0).kind, Verdict::Deny);
}

TEST(GateJudge, GlobsMatchStarsAsAnyRun)
{
	EXPECT_TRUE(glob_match("*@example.org", "a@example.org"));
	EXPECT_TRUE(glob_match("*@example.org", "@example.org"));
	EXPECT_FALSE(glob_match("*@example.org", "a@example.org.evil"));
	EXPECT_FALSE(glob_match("*@example.org", "a@xexample.org"));
	EXPECT_TRUE(glob_match("a*b*c", "abc"));
	EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
	EXPECT_FALSE(glob_match("a*b*c", "aXbYcZ"));
	EXPECT_TRUE(glob_match("*", ""));
	EXPECT_TRUE(glob_match("", ""));
	EXPECT_FALSE(glob_match("", "x"));
	EXPECT_FALSE(glob_match("abc", "ab"));
	EXPECT_TRUE(glob_match("**x", "x"));
}

}  // namespace
}  // namespace airlock::gate
