// The HTTP gate in policy files: "http" entries, "inject", "tls":
// {"upstream_ca"} and "secrets"; every error exactly, with its path; what
// an inspected rule compiles to.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/compile.h"
#include "policy/policy.h"
#include "policy_text.h"

namespace airlock {
namespace {

using policy_test::errors_of;
using policy_test::parse_ok;
using Lines = std::vector<std::string>;

// A policy with one rule: an allow of wiki.example.org over TCP with the
// keys `more` adds.
std::string rule(const std::string& more, const std::string& doc_more = "")
{
	return R"({"version": 1, "name": "t", )" + doc_more +
	       R"("rules": [{"action": "allow", "domain": "wiki.example.org", "ports": [443], "protocol": "tcp", )" +
	       more + "}]}";
}

TEST(PolicyHttp, TheIssueExampleReadsWhole)
{
	Policy p = parse_ok(R"({"version": 1, "name": "research-agent", "mode": "enforce", "on_violation": "deny",
	 "secrets": {
	   "wiki-token": {"file": "/etc/airlock/secrets/wiki-token"},
	   "project-env": {"env_file": "/srv/agent/.env"}
	 },
	 "rules": [
	   {"action": "allow", "domain": "wiki.example.org", "ports": [443], "protocol": "tcp",
	    "http": [
	      {"methods": ["GET", "HEAD"], "path": "/wiki/*"},
	      {"methods": ["GET"], "path": "/w/index.php", "query": {"action": ["view", "raw"]}, "rate": "60/m"},
	      {"methods": ["POST"], "path": "/api/mail/send", "json": {"/to": "*@example.org"}, "max_body_bytes": 65536}
	    ],
	    "inject": {"Authorization": "Bearer ${secret:wiki-token}"},
	    "tls": {"upstream_ca": "/etc/airlock/ca/internal.pem"}}
	 ]})");
	ASSERT_EQ(p.rules.size(), 1u);
	const Rule& r = p.rules[0];
	ASSERT_TRUE(r.http);
	EXPECT_TRUE(r.gated());
	EXPECT_TRUE(r.through_proxy());
	EXPECT_FALSE(r.tls_sni_require);
	const HttpGate& g = *r.http;
	ASSERT_EQ(g.entries.size(), 3u);
	EXPECT_EQ(g.entries[0].methods, (std::vector<std::string>{"GET", "HEAD"}));
	EXPECT_EQ(g.entries[0].path, "/wiki/");
	EXPECT_TRUE(g.entries[0].prefix);
	EXPECT_EQ(g.entries[1].path, "/w/index.php");
	EXPECT_FALSE(g.entries[1].prefix);
	EXPECT_EQ(g.entries[1].query, (std::vector<HttpQueryRule>{{"action", {"view", "raw"}}}));
	EXPECT_EQ(g.entries[1].rate, (HttpRate{60, 60}));
	EXPECT_EQ(g.entries[2].json, (std::vector<HttpJsonRule>{{"/to", "*@example.org"}}));
	EXPECT_EQ(g.entries[2].max_body_bytes, 65536u);
	ASSERT_EQ(g.inject.size(), 1u);
	EXPECT_EQ(g.inject[0].name, "Authorization");
	EXPECT_EQ(g.inject[0].value, (std::vector<InjectPart>{{false, "Bearer "}, {true, "wiki-token"}}));
	EXPECT_EQ(g.upstream_ca, "/etc/airlock/ca/internal.pem");
	EXPECT_EQ(p.secrets, (std::vector<SecretSource>{{"project-env", true, "/srv/agent/.env"},
							{"wiki-token", false, "/etc/airlock/secrets/wiki-token"}}));
	EXPECT_EQ(describe(r), "allow wiki.example.org ports 443 tcp http-gate (3 entries)");
}

TEST(PolicyHttp, AnInspectedRuleCompilesToARedirectToTheProxy)
{
	Policy p = parse_ok(R"({"version": 1, "name": "t", "rules": [
	  {"action": "allow", "cidr": "10.0.0.0/8", "ports": [80], "protocol": "tcp",
	   "http": [{"methods": ["GET"], "path": "/*"}]}]})");
	auto c = compile_policy(p, 1);
	ASSERT_TRUE(c) << c.rejection().first();
	EXPECT_EQ(kernel_lookup(*c, 1, *parse_address("10.1.2.3"), 80, AL_PROTO_TCP), (KernelDecision{false, 0, true}));
	EXPECT_EQ(kernel_lookup(*c, 1, *parse_address("10.1.2.3"), 81, AL_PROTO_TCP),
		  (KernelDecision{false, AL_RULE_NONE, false}));
}

TEST(PolicyHttp, EntriesSayWhatIsWrongWithEachPart)
{
	const std::string R = "p.json: rules/0/http";
	auto http = [](const std::string& entries) { return errors_of(rule("\"http\": " + entries)); };
	EXPECT_EQ(http("[]"), Lines{R + ": is empty (an entry per kind of request the rule allows)"});
	EXPECT_EQ(http("{}"), Lines{R + ": expected an array, got an object"});
	EXPECT_EQ(http(R"([{"path": "/x"}])"),
		  Lines{R + "/0/methods: missing (the methods the entry allows: [\"GET\", \"HEAD\"])"});
	EXPECT_EQ(http(R"([{"methods": ["GET"]}])"), Lines{R + "/0/path: missing (a path, or a prefix ending in /*)"});
	EXPECT_EQ(http(R"([{"methods": ["get", "GET", "GET", "CONNECT", "A B", 7], "path": "/x"}])"),
		  (Lines{R + "/0/methods/0: 'get' is not a method (upper case letters, as sent: GET, POST, ...)",
			 R + "/0/methods/2: 'GET' is listed twice",
			 R + "/0/methods/3: CONNECT is refused inside the gate (it would open a tunnel the gate cannot "
			     "read)",
			 R + "/0/methods/4: 'A B' is not a method (upper case letters, as sent: GET, POST, ...)",
			 R + "/0/methods/5: expected a string, got an integer"}));
	EXPECT_EQ(http(R"([{"methods": [], "path": "/x"}])"),
		  Lines{R + "/0/methods: is empty (name each method the entry allows)"});
	auto path = [&](const std::string& p) { return http(R"([{"methods": ["GET"], "path": ")" + p + R"("}])"); };
	EXPECT_EQ(path("wiki"), Lines{R + "/0/path: 'wiki': the target is not a path starting with '/'"});
	EXPECT_EQ(path("/wiki/../x"), Lines{R + "/0/path: '/wiki/../x': a '..' segment"});
	EXPECT_EQ(path("/a//b"), Lines{R + "/0/path: '/a//b': an empty segment ('//')"});
	EXPECT_EQ(path("/a%2fb"), Lines{R + "/0/path: '/a%2fb': an encoded '/' (%2F)"});
	EXPECT_EQ(path("/wiki*"), Lines{R + "/0/path: '/wiki*': '*' only ends a prefix, as the whole last segment "
					    "(\"/wiki/*\")"});
	EXPECT_EQ(path("/a/*/b"), Lines{R + "/0/path: '/a/*/b': '*' only ends a prefix, as the whole last segment "
					    "(\"/wiki/*\")"});
	EXPECT_EQ(path("/w?x=1"), Lines{R + "/0/path: '/w?x=1' has a '?': the query is matched apart, with \"query\""});
	EXPECT_EQ(path("/%7Euser/a%3ab"), Lines{R + "/0/path: '/%7Euser/a%3ab' is not in canonical form: write "
						    "'/~user/a%3Ab'"});
	EXPECT_EQ(path("/caf\\u00e9/*"), Lines{R + "/0/path: '/caf\\xc3\\xa9/*' is not in canonical form: write "
						   "'/caf%C3%A9/*'"});
	EXPECT_EQ(http(R"([{"methods": ["GET"], "path": "/x", "query": {"a": [], "b": "v", "": ["x"], "c": [1]}}])"),
		  (Lines{R + "/0/query/: a parameter has a name",
			 R + "/0/query/a: is empty (list the values the "
			     "parameter may have)",
			 R + "/0/query/b: expected an array of values, got a string",
			 R + "/0/query/c/0: expected a string, got an integer"}));
	EXPECT_EQ(http(R"([{"methods": ["POST"], "path": "/x", "json": {"to": "*", "": "*", "/a": 1, "/b~2": "x"}}])"),
		  (Lines{R + "/0/json/: the whole body is not a field: name one (\"/to\")",
			 R + "/0/json//a: expected a string (a glob: '*' any characters), got an integer",
			 R + "/0/json//b~2: '/b~2' is not a JSON pointer (\"/to\", \"/items/0/name\")",
			 R + "/0/json/to: 'to' is not a JSON pointer (\"/to\", \"/items/0/name\")"}));
	EXPECT_EQ(http(R"([{"methods": ["GET"], "path": "/x", "max_body_bytes": 67108865, "rate": "0/s"},
			   {"methods": ["GET"], "path": "/x", "max_body_bytes": -1, "rate": "5/d"},
			   {"methods": ["GET"], "path": "/x", "rate": "1000001/h", "then": "hold", "query_only": 1}])"),
		  (Lines{R + "/0/max_body_bytes: 67108865 is out of range (0-67108864)",
			 R + "/0/rate: '0/s' is not N/s, N/m or N/h (N from 1 to 1000000)",
			 R + "/1/max_body_bytes: -1 is out of range (0-67108864)",
			 R + "/1/rate: '5/d' is not N/s, N/m or N/h (N from 1 to 1000000)",
			 R + "/2/query_only: expected a boolean, got an integer",
			 R + "/2/rate: '1000001/h' is not N/s, N/m or N/h (N from 1 to 1000000)",
			 R + "/2/then: is reserved and not supported yet"}));
	EXPECT_EQ(http(R"([{"methods": ["GET"], "path": "/x", "headers": {}}])"),
		  Lines{R + "/0: unknown key 'headers'"});
}

TEST(PolicyHttp, OnlyAnAllowOverTcpToANameOrAnAddressIsInspected)
{
	const std::string http = R"("http": [{"methods": ["GET"], "path": "/*"}])";
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "t", "rules": [{"action": "deny", "domain": "a.test", )" + http +
			    "}]}"),
		  Lines{"p.json: rules/0/http: applies to allow rules only"});
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "t", "rules": [{"action": "allow", "domain": "a.test", )" + http +
			    "}]}"),
		  Lines{"p.json: rules/0/http: needs \"protocol\": \"tcp\" (UDP to the same destination would pass "
			"beside the gate: QUIC falls back to TCP when it is denied)"});
	EXPECT_EQ(errors_of(R"({"version": 1, "name": "t", "rules": [{"action": "allow", "unix": "/run/a.sock", )" +
			    http + "}]}"),
		  Lines{"p.json: rules/0/http: does not apply to a unix rule"});
	Policy p = parse_ok(R"({"version": 1, "name": "t", "rules": [{"action": "allow", "cidr": "10.1.0.0/16",
	    "protocol": "tcp", )" +
			    http + "}]}");
	EXPECT_TRUE(p.rules[0].http);
	EXPECT_EQ(
		errors_of(rule(R"("http": [{"methods": ["GET"], "path": "/*"}], "tls": {"sni": "require"})")),
		Lines{"p.json: rules/0/tls/sni: leave it out: with \"http\" the gate ends the TLS and checks the name "
		      "itself"});
	EXPECT_EQ(errors_of(rule(R"("tls": {"sni": "require", "upstream_ca": "/ca.pem"})")),
		  Lines{"p.json: rules/0/tls/upstream_ca: applies to rules with \"http\" (the SNI gate leaves the TLS "
			"to the sandbox)"});
	EXPECT_EQ(errors_of(rule(R"("http": [{"methods": ["GET"], "path": "/*"}], "tls": {"upstream_ca": "ca.pem"})")),
		  Lines{"p.json: rules/0/tls/upstream_ca: 'ca.pem' is not an absolute path"});
}

TEST(PolicyHttp, InjectNamesAFileSecretAndAHeaderTheGateDoesNotWrite)
{
	const std::string http = R"("http": [{"methods": ["GET"], "path": "/*"}], )";
	const std::string secrets = R"("secrets": {"tok": {"file": "/etc/tok"}, "env": {"env_file": "/w/.env"}}, )";
	auto inject = [&](const std::string& obj) { return errors_of(rule(http + "\"inject\": " + obj, secrets)); };
	const std::string R = "p.json: rules/0/inject/";
	EXPECT_EQ(inject(R"({"X-Api-Key": "${secret:tok}", "X-Static": "v1"})"), Lines{});
	EXPECT_EQ(inject(R"({"Authorization": "Bearer ${secret:nope}"})"),
		  Lines{R + "Authorization: secret 'nope' is not in \"secrets\""});
	EXPECT_EQ(inject(R"({"Authorization": "Bearer ${secret:env}"})"),
		  Lines{R + "Authorization: secret 'env' is an env_file (values never to send); inject takes a file "
			    "secret"});
	EXPECT_EQ(inject(R"({"Authorization": "Bearer ${env:HOME}"})"),
		  Lines{R + "Authorization: 'Bearer ${env:HOME}': '${' starts a reference, ${secret:NAME}"});
	EXPECT_EQ(inject(R"({"Authorization": "Bearer ${secret:tok"})"),
		  Lines{R + "Authorization: 'Bearer ${secret:tok': '${' starts a reference, ${secret:NAME}"});
	EXPECT_EQ(inject(R"({"Host": "x", "content-length": "1", "Transfer-Encoding": "x", "Bad Name": "x"})"),
		  (Lines{R + "Bad Name: 'Bad Name' is not a header name",
			 R + "Host: 'Host' frames the message or routes it: the gate writes it itself",
			 R + "Transfer-Encoding: 'Transfer-Encoding' frames the message or routes it: the gate writes "
			     "it itself",
			 R + "content-length: 'content-length' frames the message or routes it: the gate writes it "
			     "itself"}));
	EXPECT_EQ(inject(R"({"X": "a\r\nInjected: 1"})"), Lines{R + "X: a header value has no CR or LF"});
	EXPECT_EQ(inject(R"({"X": "a", "x": "b"})"), Lines{R + "x: is named twice (header names ignore case)"});
	EXPECT_EQ(errors_of(rule(R"("inject": {"X": "v"})")),
		  Lines{"p.json: rules/0/inject: applies to rules with \"http\" (the gate that sends the requests)"});
}

TEST(PolicyHttp, SecretsAreNamedFilesOrEnvFiles)
{
	auto secrets = [](const std::string& obj) {
		return errors_of(rule("\"comment\": \"\"", "\"secrets\": " + obj + ", "));
	};
	EXPECT_EQ(secrets(R"({"a": {"file": "/x"}, "b": {"env_file": "/y"}})"), Lines{});
	EXPECT_EQ(secrets(R"({"a": {}, "b": {"file": "/x", "env_file": "/y"}, "c": {"file": "rel"},
			     "bad name": {"file": "/x"}, "d": {"file": "/x", "mode": 1}, "e": "x"})"),
		  (Lines{"p.json: secrets/a: needs exactly one of 'file' or 'env_file'",
			 "p.json: secrets/b: needs exactly one of 'file' or 'env_file'",
			 "p.json: secrets/bad name: a secret's name is 1 to 64 of A-Z a-z 0-9 - _ .",
			 "p.json: secrets/c/file: 'rel' is not an absolute path",
			 "p.json: secrets/d: unknown key 'mode'",
			 "p.json: secrets/e: expected an object, got a string"}));
	EXPECT_EQ(secrets("[]"), Lines{"p.json: secrets: expected an object, got an array"});
}

}  // namespace
}  // namespace airlock
