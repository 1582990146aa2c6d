// What the fuzz targets (tests/fuzz) and the sanitized build found, each
// reduced to the property it broke. The fuzz targets' inputs are in their
// corpus too.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/config.h"
#include "policy/compile.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "policy_errors.h"

namespace airlock {
namespace {

using Lines = std::vector<std::string>;

Lines policy_errors(const std::string& text)
{
	auto r = parse_policy_text(text, "p.json");
	Lines out;
	for (const auto& e : errors_in(r))
		out.push_back(e.str());
	return out;
}

std::string only_error(const std::string& text)
{
	Lines errs = policy_errors(text);
	EXPECT_EQ(errs.size(), 1u);
	return errs.empty() ? "" : errs[0];
}

Lines config_errors(const std::string& text)
{
	const std::string path = "/etc/airlock/airlock.json";
	auto config = parse_daemon_config(text, path);
	Lines out;
	if (!config)
		for (const auto& l : config.rejection().lines)
			out.push_back(l.substr(path.size()));
	return out;
}

// nlohmann quotes what it last read verbatim but for C0 controls: a byte
// that is not UTF-8 made the line invalid UTF-8, and the daemon's JSON
// answer to a `reload` of such a file threw (type_error 316) out of its
// error handler, which ended the daemon.
TEST(Regressions, JsonSyntaxErrorsQuoteTheFileInPrintableAscii)
{
	std::string bad_utf8 = only_error("{\"name\": \"\xff\"}");
	EXPECT_EQ(bad_utf8, "p.json:1:11: (root): invalid JSON: syntax error while parsing value - invalid string: "
			    "ill-formed UTF-8 byte; last read: '\"\\xff'");
	EXPECT_NO_THROW((void)nlohmann::json({{"error", bad_utf8}}).dump());

	EXPECT_EQ(only_error("\x7f\n"), "p.json:1:1: (root): invalid JSON: syntax error while parsing value - "
					"invalid literal; last read: '\\x7f'");
}

// nlohmann throws a number it cannot hold (1e343) as out_of_range, not as
// parse_error: it escaped parse_policy_text and load_daemon_config, a
// message with neither file nor line.
TEST(Regressions, ANumberOutOfRangeIsAJsonErrorWithItsPlace)
{
	EXPECT_EQ(only_error("{\"version\": 1,\n \"x\": [1e343]}"),
		  "p.json:2:12: (root): invalid JSON: number overflow parsing '1e343'");
	EXPECT_EQ(config_errors("{\"audit_log_keep\": -1e999}"),
		  Lines{":1:25: (root): invalid JSON: number overflow parsing '-1e999'"});
}

// JSON paths are made of keys: a key holding a line break broke the line of
// an EDNS option's error and of a duplicate key's below it.
TEST(Regressions, KeysInJsonPathsAreEscaped)
{
	EXPECT_EQ(
		only_error(
			R"({"version": 1, "name": "a", "rules": [], "dns": {"edns": {"options": {"CO\nOKIE": 8}}}})"),
		"p.json: dns/edns/options/CO\\x0aOKIE: 'CO\\x0aOKIE' is not an EDNS option name airlock knows or a code "
		"(0-65535)");
	EXPECT_EQ(policy_errors(R"({"version": 1, "name": "a", "rules": [], "x\ny": {"k": 1, "k": 2}})"),
		  (Lines{"p.json: x\\x0ay: duplicate key 'k'", "p.json: (root): unknown key 'x\\x0ay'"}));
	// A canned response's header names are keys too (found by fuzz_policy).
	EXPECT_EQ(only_error(R"({"version": 1, "name": "a", "rules": [{"action": "redirect", "cidr": "0.0.0.0/0",
		  "to": "world"}], "world": {"responses": [{"host": "*", "headers": {"Conte\nt-Type": "x"}}]}})"),
		  "p.json: world/responses/0/headers/Conte\\x0at-Type: is not an HTTP header name");
	// So are an inject's header names, a query's parameter names and a JSON
	// rule's pointers: every key is escaped where the path is made.
	EXPECT_EQ(only_error(R"({"version": 1, "name": "a", "rules": [{"action": "allow", "domain": "a.test",
		  "protocol": "tcp", "http": [{"methods": ["GET"], "path": "/"}], "inject": {"Auth\u007fz": "x"}}]})"),
		  "p.json: rules/0/inject/Auth\\x7fz: 'Auth\\x7fz' is not a header name");
}

// The daemon's configuration echoed keys and values as JSON, which leaves
// DEL (invisible: "policy_di<DEL>r" read as "policy_dir") and non-ASCII as
// they are, and cut the value at 40 bytes, inside a UTF-8 character.
TEST(Regressions, ConfigMessagesAreAscii)
{
	EXPECT_EQ(
		config_errors(
			R"({"policy_di\u007fr": "/p", "audit_log_keep": "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"})"),
		(Lines{": audit_log_keep: expected a whole number, got \"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u0",
		       ": (root): unknown key \"policy_di\\u007fr\""}));
}

// The model of the kernel's unix lookup compared the name's chars (signed)
// with the key's bytes (unsigned): a name with a byte of 0x80 or more never
// matched its own exact or prefix entry in the model, while the kernel,
// comparing bytes, matched it.
TEST(Regressions, UnixModelMatchesBytesAboveAscii)
{
	auto r = parse_policy_text(R"({"version": 1, "name": "t", "rules": [
		{"action": "allow", "unix": "@session\u04d6us"},
		{"action": "allow", "unix": "/run/\u00e9t\u00e9/*"},
		{"action": "refuse", "unix": "@*"}]})",
				   "p.json");
	ASSERT_TRUE(r.ok());
	auto c = compile_policy(*r, 1);
	ASSERT_TRUE(c);
	const std::string abstract = "session\xd3\x96us", named = "/run/\xc3\xa9t\xc3\xa9/x.sock";
	EXPECT_EQ(kernel_unix_lookup(*c, true, abstract), (KernelDecision{true, 0}));
	EXPECT_EQ(kernel_unix_lookup(*c, false, named), (KernelDecision{true, 1}));
	EXPECT_EQ(reference_unix_decision(*r, true, abstract), (KernelDecision{true, 0}));
	EXPECT_EQ(reference_unix_decision(*r, false, named), (KernelDecision{true, 1}));
}

// Found by the sanitized build, where one unit test took minutes:
// nlohmann's callback parser, which noted duplicate keys, scans the
// enclosing array after each object, so a parse was quadratic in the number
// of rules (65,534 rules: seconds; 1 MB of empty objects: minutes of the
// daemon's loop, in which a reload is parsed).
TEST(Regressions, ParsingIsLinearInTheNumberOfObjects)
{
	std::string many = R"({"version": 1, "name": "a", "rules": [], "x": [)";
	for (int i = 0; i < 400000; i++)
		many += i ? ",{}" : "{}";
	many += "]}";
	auto start = std::chrono::steady_clock::now();
	EXPECT_EQ(policy_errors(many), Lines{"p.json: (root): unknown key 'x'"});
	EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "quadratic: minutes";
}

}  // namespace
}  // namespace airlock
