// Policy files: every error the parser reports, exactly as a user reads it
// ("FILE: PATH: MESSAGE"), collect-all, defaults and the bundled policies.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "policy/compile.h"
#include "policy/policy.h"
#include "policy_text.h"
#include "policy_errors.h"

namespace airlock {
namespace {

using policy_test::errors_of;
using policy_test::kFile;
using policy_test::parse_ok;

// A document around one rule, or around a "dns" object.
std::string with_rule(const std::string& rule)
{
	return R"({"version": 1, "name": "t", "rules": [)" + rule + "]}";
}

std::string with_dns(const std::string& dns)
{
	return R"({"version": 1, "name": "t", "rules": [], "dns": )" + dns + "}";
}

Rule only_rule(const std::string& rule)
{
	Policy p = parse_ok(with_rule(rule));
	EXPECT_EQ(p.rules.size(), 1u);
	return p.rules.empty() ? Rule{} : p.rules[0];
}

// ---------------------------------------------------------------------------
// Bad inputs and the exact messages they produce.

struct BadCase {
	const char* name;
	std::string text;
	std::vector<std::string> errors;
};

void PrintTo(const BadCase& c, std::ostream* os)
{
	*os << c.name;
}

class PolicyErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(PolicyErrors, ExactMessages)
{
	const BadCase& c = GetParam();
	EXPECT_EQ(errors_of(c.text), c.errors) << c.text;
}

const std::string kLongLabel(64, 'a');
// 4 labels of 63 and three dots: 255 characters. Minus the last two: 253.
const std::string kLabel63(63, 'a');
const std::string kName255 = kLabel63 + "." + kLabel63 + "." + kLabel63 + "." + kLabel63;
const std::string kName254 = kName255.substr(0, 254);
const std::string kName253 = kName255.substr(0, 253);

std::vector<BadCase> bad_cases()
{
	const std::string R = "p.json: rules/0";
	const std::string PR = R"(is not a port range ("LO-HI", 1 <= LO <= HI <= 65535))";
	const std::string DN = "is not a domain name: ";
	const std::string STAR = "'*' may only stand alone as the first label ('*.example.com')";
	return {
		// -- document level
		{"RootNotObjectArray", "[]", {"p.json: (root): expected an object, got an array"}},
		{"RootNotObjectString", R"("policy")", {"p.json: (root): expected an object, got a string"}},
		{"RootNotObjectNull", "null", {"p.json: (root): expected an object, got null"}},
		{"EmptyObject", "{}", {"p.json: version: missing", "p.json: name: missing", "p.json: rules: missing"}},
		{"UnknownRootKey",
		 R"({"version": 1, "name": "t", "rules": [], "rule": []})",
		 {"p.json: (root): unknown key 'rule'"}},
		{"UnknownRootKeysSorted",
		 R"({"zeta": 1, "version": 1, "alpha": 2, "name": "t", "rules": []})",
		 {"p.json: (root): unknown key 'alpha'", "p.json: (root): unknown key 'zeta'"}},
		{"MissingVersion", R"({"name": "t", "rules": []})", {"p.json: version: missing"}},
		{"MissingName", R"({"version": 1, "rules": []})", {"p.json: name: missing"}},
		{"MissingRules", R"({"version": 1, "name": "t"})", {"p.json: rules: missing"}},
		{"VersionString",
		 R"({"version": "1", "name": "t", "rules": []})",
		 {"p.json: version: expected an integer, got a string"}},
		{"VersionFloat",
		 R"({"version": 1.0, "name": "t", "rules": []})",
		 {"p.json: version: expected an integer, got a number"}},
		{"VersionBool",
		 R"({"version": true, "name": "t", "rules": []})",
		 {"p.json: version: expected an integer, got a boolean"}},
		{"VersionUnsupported",
		 R"({"version": 2, "name": "t", "rules": []})",
		 {"p.json: version: 2 is not a supported version (1)"}},
		{"VersionNegative",
		 R"({"version": -1, "name": "t", "rules": []})",
		 {"p.json: version: -1 is not a supported version (1)"}},
		{"NameNotString",
		 R"({"version": 1, "name": 5, "rules": []})",
		 {"p.json: name: expected a string, got an integer"}},
		{"NameEmpty",
		 R"({"version": 1, "name": "", "rules": []})",
		 {"p.json: name: '' is not a policy name (1-64 of A-Z a-z 0-9 . _ -)"}},
		{"NameSpace",
		 R"({"version": 1, "name": "my policy", "rules": []})",
		 {"p.json: name: 'my policy' is not a policy name (1-64 of A-Z a-z 0-9 . _ -)"}},
		{"NameSlash",
		 R"({"version": 1, "name": "a/b", "rules": []})",
		 {"p.json: name: 'a/b' is not a policy name (1-64 of A-Z a-z 0-9 . _ -)"}},
		{"NameTooLong",
		 R"({"version": 1, "name": ")" + std::string(65, 'n') + R"(", "rules": []})",
		 {"p.json: name: '" + std::string(65, 'n') + "' is not a policy name (1-64 of A-Z a-z 0-9 . _ -)"}},
		{"DescriptionNotString",
		 R"({"version": 1, "name": "t", "description": 3, "rules": []})",
		 {"p.json: description: expected a string, got an integer"}},
		{"ModeUnknown",
		 R"({"version": 1, "name": "t", "mode": "learn", "rules": []})",
		 {"p.json: mode: 'learn' is not one of enforce, audit"}},
		{"ModeCaseMatters",
		 R"({"version": 1, "name": "t", "mode": "Audit", "rules": []})",
		 {"p.json: mode: 'Audit' is not one of enforce, audit"}},
		{"ModeNotString",
		 R"({"version": 1, "name": "t", "mode": true, "rules": []})",
		 {"p.json: mode: expected a string, got a boolean"}},
		{"OnViolationUnknown",
		 R"({"version": 1, "name": "t", "on_violation": "stop", "rules": []})",
		 {"p.json: on_violation: 'stop' is not one of deny, freeze, kill"}},
		{"OnViolationNull",
		 R"({"version": 1, "name": "t", "on_violation": null, "rules": []})",
		 {"p.json: on_violation: expected a string, got null"}},
		{"RulesNotArray",
		 R"({"version": 1, "name": "t", "rules": {}})",
		 {"p.json: rules: expected an array, got an object"}},
		{"DnsNotObject", with_dns("5"), {"p.json: dns: expected an object, got an integer"}},

		// -- rule level: shape
		{"RuleNotObject", with_rule("5"), {R + ": expected an object, got an integer"}},
		{"RuleUnknownKey",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "port": [80]})"),
		 {R + ": unknown key 'port'"}},
		{"RuleUnknownKeysSorted",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "z": 1, "a": 2})"),
		 {R + ": unknown key 'a'", R + ": unknown key 'z'"}},
		{"ActionMissing", with_rule(R"({"cidr": "10.0.0.0/8"})"), {R + "/action: missing"}},
		{"ActionNotString",
		 with_rule(R"({"action": 1, "cidr": "10.0.0.0/8"})"),
		 {R + "/action: expected a string, got an integer"}},
		{"ActionUnknown",
		 with_rule(R"({"action": "permit", "cidr": "10.0.0.0/8"})"),
		 {R + "/action: 'permit' is not one of allow, deny, refuse, redirect"}},
		{"ActionCaseMatters",
		 with_rule(R"({"action": "Allow", "cidr": "10.0.0.0/8"})"),
		 {R + "/action: 'Allow' is not one of allow, deny, refuse, redirect"}},
		{"ActionHoldReserved",
		 with_rule(R"({"action": "hold", "cidr": "10.0.0.0/8"})"),
		 {R + "/action: 'hold' is reserved and not supported yet"}},
		{"RedirectWithoutTo",
		 with_rule(R"({"action": "redirect", "cidr": "10.0.0.0/8"})"),
		 {R + "/to: missing: \"world\", or the HOST:PORT of a simulator"}},
		{"NeitherCidrNorDomain",
		 with_rule(R"({"action": "allow", "ports": [80]})"),
		 {R + ": needs exactly one of 'cidr', 'domain' or 'unix'"}},
		{"BothCidrAndDomain",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "domain": "a.com"})"),
		 {R + ": needs exactly one of 'cidr', 'domain' or 'unix'"}},
		{"NullActionAndCidr",
		 with_rule(R"({"action": null, "cidr": null})"),
		 {R + "/action: expected a string, got null", R + "/cidr: expected a string, got null"}},
		{"CommentNotString",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "comment": 1})"),
		 {R + "/comment: expected a string, got an integer"}},

		// -- cidr
		{"CidrNotString",
		 with_rule(R"({"action": "allow", "cidr": 10})"),
		 {R + "/cidr: expected a string, got an integer"}},
		{"CidrEmpty", with_rule(R"({"action": "allow", "cidr": ""})"), {R + "/cidr: '' is not a CIDR"}},
		{"CidrShortAddress",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0/8"})"),
		 {R + "/cidr: '10.0.0/8' is not a CIDR"}},
		{"CidrHostname",
		 with_rule(R"({"action": "allow", "cidr": "example.com/32"})"),
		 {R + "/cidr: 'example.com/32' is not a CIDR"}},
		{"CidrNoAddress", with_rule(R"({"action": "allow", "cidr": "/8"})"), {R + "/cidr: '/8' is not a CIDR"}},
		{"CidrEmptyPrefix",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/"})"),
		 {R + "/cidr: '10.0.0.0/' is not a CIDR"}},
		{"CidrNegativePrefix",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/-1"})"),
		 {R + "/cidr: '10.0.0.0/-1' is not a CIDR"}},
		{"CidrSpaceInPrefix",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/ 8"})"),
		 {R + "/cidr: '10.0.0.0/ 8' is not a CIDR"}},
		{"CidrTwoSlashes",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8/8"})"),
		 {R + "/cidr: '10.0.0.0/8/8' is not a CIDR"}},
		{"CidrV4PrefixTooLong",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/33"})"),
		 {R + "/cidr: '10.0.0.0/33' is not a CIDR"}},
		{"CidrV6PrefixTooLong",
		 with_rule(R"({"action": "allow", "cidr": "2001:db8::/129"})"),
		 {R + "/cidr: '2001:db8::/129' is not a CIDR"}},
		{"CidrMappedPrefixTooLong",
		 with_rule(R"({"action": "allow", "cidr": "::ffff:10.0.0.0/129"})"),
		 {R + "/cidr: '::ffff:10.0.0.0/129' is not a CIDR"}},
		{"CidrV4HostBits",
		 with_rule(R"({"action": "allow", "cidr": "10.1.0.0/8"})"),
		 {R + "/cidr: '10.1.0.0/8' has host bits set; did you mean '10.0.0.0/8'?"}},
		{"CidrV4HostBitsOddPrefix",
		 with_rule(R"({"action": "allow", "cidr": "172.31.0.0/12"})"),
		 {R + "/cidr: '172.31.0.0/12' has host bits set; did you mean '172.16.0.0/12'?"}},
		{"CidrV4HostBitsZeroPrefix",
		 with_rule(R"({"action": "allow", "cidr": "1.2.3.4/0"})"),
		 {R + "/cidr: '1.2.3.4/0' has host bits set; did you mean '0.0.0.0/0'?"}},
		{"CidrV6HostBits",
		 with_rule(R"({"action": "allow", "cidr": "2001:db8::1/32"})"),
		 {R + "/cidr: '2001:db8::1/32' has host bits set; did you mean '2001:db8::/32'?"}},
		{"CidrMappedHostBits",
		 with_rule(R"({"action": "allow", "cidr": "::ffff:10.0.0.1/104"})"),
		 {R + "/cidr: '::ffff:10.0.0.1/104' has host bits set; did you mean '10.0.0.0/8'?"}},
		{"CidrMappedBelow96",
		 with_rule(R"({"action": "allow", "cidr": "::ffff:10.0.0.0/95"})"),
		 {R + "/cidr: '::ffff:10.0.0.0/95' spans IPv4-mapped and other IPv6 addresses; write the IPv4 and "
		      "IPv6 parts as separate rules"}},
		{"CidrMappedZeroPrefix",
		 with_rule(R"({"action": "allow", "cidr": "::ffff:0.0.0.0/0"})"),
		 {R + "/cidr: '::ffff:0.0.0.0/0' spans IPv4-mapped and other IPv6 addresses; write the IPv4 and "
		      "IPv6 parts as separate rules"}},

		// -- ports
		{"PortsNotArray",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": 80})"),
		 {R + "/ports: expected an array, got an integer"}},
		{"PortsEmpty",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": []})"),
		 {R + "/ports: is empty (leave 'ports' out to mean every port)"}},
		{"PortZero",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [0]})"),
		 {R + "/ports/0: 0 is not a port (1-65535)"}},
		{"PortTooBig",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [80, 65536]})"),
		 {R + "/ports/1: 65536 is not a port (1-65535)"}},
		{"PortNegative",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [-1]})"),
		 {R + "/ports/0: -1 is not a port (1-65535)"}},
		{"PortFloat",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [1.5]})"),
		 {R + "/ports/0: expected a port number or a \"LO-HI\" string, got a number"}},
		{"PortBool",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [true]})"),
		 {R + "/ports/0: expected a port number or a \"LO-HI\" string, got a boolean"}},
		{"PortNull",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [null]})"),
		 {R + "/ports/0: expected a port number or a \"LO-HI\" string, got null"}},
		{"PortSingleAsString",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["80"]})"),
		 {R + "/ports/0: '80' " + PR}},
		{"PortRangeReversed",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["90-80"]})"),
		 {R + "/ports/0: '90-80' " + PR}},
		{"PortRangeFromZero",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["0-80"]})"),
		 {R + "/ports/0: '0-80' " + PR}},
		{"PortRangeTooBig",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["1-65536"]})"),
		 {R + "/ports/0: '1-65536' " + PR}},
		{"PortRangeThreeParts",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["1-2-3"]})"),
		 {R + "/ports/0: '1-2-3' " + PR}},
		{"PortRangeLetters",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["a-b"]})"),
		 {R + "/ports/0: 'a-b' " + PR}},
		{"PortRangeOpen",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["80-"]})"),
		 {R + "/ports/0: '80-' " + PR}},
		{"PortRangeSpaces",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": ["80 - 90"]})"),
		 {R + "/ports/0: '80 - 90' " + PR}},
		{"PortsEachReported",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [80, 0, 70000, "9-1"]})"),
		 {R + "/ports/1: 0 is not a port (1-65535)", R + "/ports/2: 70000 is not a port (1-65535)",
		  R + "/ports/3: '9-1' " + PR}},

		// -- protocol
		{"ProtocolUnknown",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "sctp"})"),
		 {R + "/protocol: 'sctp' is not one of tcp, udp, icmp"}},
		{"ProtocolCaseMatters",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": "TCP"})"),
		 {R + "/protocol: 'TCP' is not one of tcp, udp, icmp"}},
		{"ProtocolNotString",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "protocol": ["tcp"]})"),
		 {R + "/protocol: expected a string, got an array"}},
		{"IcmpWithPorts",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [80], "protocol": "icmp"})"),
		 {R + "/ports: ICMP has no ports: leave 'ports' out of an icmp rule"}},
		{"IcmpWithEmptyPorts",
		 with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [], "protocol": "icmp"})"),
		 {R + "/ports: is empty (leave 'ports' out to mean every port)",
		  R + "/ports: ICMP has no ports: leave 'ports' out of an icmp rule"}},

		// -- domain
		{"DomainNotString",
		 with_rule(R"({"action": "allow", "domain": 5})"),
		 {R + "/domain: expected a string, got an integer"}},
		{"DomainEmpty",
		 with_rule(R"({"action": "allow", "domain": ""})"),
		 {R + "/domain: '' " + DN + "it is empty"}},
		{"DomainOnlyDot",
		 with_rule(R"({"action": "allow", "domain": "."})"),
		 {R + "/domain: '.' " + DN + "it is empty"}},
		{"DomainWildcardInside",
		 with_rule(R"({"action": "allow", "domain": "a.*.com"})"),
		 {R + "/domain: 'a.*.com' " + DN + STAR}},
		{"DomainWildcardLast",
		 with_rule(R"({"action": "allow", "domain": "example.*"})"),
		 {R + "/domain: 'example.*' " + DN + STAR}},
		{"DomainWildcardGlued",
		 with_rule(R"({"action": "allow", "domain": "*example.com"})"),
		 {R + "/domain: '*example.com' " + DN + STAR}},
		{"DomainDoubleWildcard",
		 with_rule(R"({"action": "allow", "domain": "*.*.example.com"})"),
		 {R + "/domain: '*.*.example.com' " + DN + STAR}},
		{"DomainEmptyLabel",
		 with_rule(R"({"action": "allow", "domain": "a..example.com"})"),
		 {R + "/domain: 'a..example.com' " + DN + "empty label"}},
		{"DomainLeadingDot",
		 with_rule(R"({"action": "allow", "domain": ".example.com"})"),
		 {R + "/domain: '.example.com' " + DN + "empty label"}},
		{"DomainTwoTrailingDots",
		 with_rule(R"({"action": "allow", "domain": "example.com.."})"),
		 {R + "/domain: 'example.com..' " + DN + "empty label"}},
		{"DomainLabelTooLong",
		 with_rule(R"({"action": "allow", "domain": ")" + kLongLabel + R"(.com"})"),
		 {R + "/domain: '" + kLongLabel + ".com' " + DN +
		  "label 'aaaaaaaaaaaaaaaaaaaa...' is longer than 63 characters"}},
		{"DomainNameTooLong255",
		 with_rule(R"({"action": "allow", "domain": ")" + kName255 + R"("})"),
		 {R + "/domain: '" + kName255 + "' " + DN + "255 characters, the limit is 253"}},
		{"DomainNameTooLong254",
		 with_rule(R"({"action": "allow", "domain": ")" + kName254 + R"("})"),
		 {R + "/domain: '" + kName254 + "' " + DN + "254 characters, the limit is 253"}},
		{"DomainSpace",
		 with_rule(R"({"action": "allow", "domain": "ex ample.com"})"),
		 {R + "/domain: 'ex ample.com' " + DN +
		  "' ' is not allowed in a label (letters, digits, '-', '_'; write names in their ASCII form)"}},
		{"DomainDollar",
		 with_rule(R"({"action": "allow", "domain": "exa$mple.com"})"),
		 {R + "/domain: 'exa$mple.com' " + DN +
		  "'$' is not allowed in a label (letters, digits, '-', '_'; write names in their ASCII form)"}},
		{"DomainSlash",
		 with_rule(R"({"action": "allow", "domain": "example.com/"})"),
		 {R + "/domain: 'example.com/' " + DN +
		  "'/' is not allowed in a label (letters, digits, '-', '_'; write names in their ASCII form)"}},
		{"DomainBrackets",
		 with_rule(R"({"action": "allow", "domain": "[::1]"})"),
		 {R + "/domain: '[::1]' " + DN +
		  "'[' is not allowed in a label (letters, digits, '-', '_'; write names in their ASCII form)"}},
		{"DomainLeadingHyphen",
		 with_rule(R"({"action": "allow", "domain": "-a.example.com"})"),
		 {R + "/domain: '-a.example.com' " + DN + "label '-a' starts or ends with '-'"}},
		{"DomainTrailingHyphen",
		 with_rule(R"({"action": "allow", "domain": "a-.example.com"})"),
		 {R + "/domain: 'a-.example.com' " + DN + "label 'a-' starts or ends with '-'"}},
		{"DomainTldHyphen",
		 with_rule(R"({"action": "allow", "domain": "example.com-"})"),
		 {R + "/domain: 'example.com-' " + DN + "label 'com-' starts or ends with '-'"}},
		{"DomainIsIpv4",
		 with_rule(R"({"action": "allow", "domain": "10.0.0.1"})"),
		 {R + "/domain: '10.0.0.1' " + DN + "it is an address (use 'cidr' for addresses)"}},
		{"DomainIsIpv4TrailingDot",
		 with_rule(R"({"action": "allow", "domain": "10.0.0.1."})"),
		 {R + "/domain: '10.0.0.1.' " + DN + "it is an address (use 'cidr' for addresses)"}},
		{"DomainIsIpv6",
		 with_rule(R"({"action": "allow", "domain": "::1"})"),
		 {R + "/domain: '::1' " + DN + "it is an address (use 'cidr' for addresses)"}},
		{"DomainWildcardIp",
		 with_rule(R"({"action": "allow", "domain": "*.1.2.3.4"})"),
		 {R + "/domain: '*.1.2.3.4' " + DN + "it is an address (use 'cidr' for addresses)"}},
		{"DomainErrorQuotesOriginal",
		 with_rule(R"({"action": "allow", "domain": "*.Bad_Name-.COM."})"),
		 {R + "/domain: '*.Bad_Name-.COM.' " + DN + "label 'bad_name-' starts or ends with '-'"}},

		// -- dns
		{"DnsUnknownKey", with_dns(R"({"resolver": ["10.0.0.2"]})"), {"p.json: dns: unknown key 'resolver'"}},
		{"DnsResolversNotArray",
		 with_dns(R"({"resolvers": "10.0.0.2"})"),
		 {"p.json: dns/resolvers: expected an array, got a string"}},
		{"DnsResolverNotString",
		 with_dns(R"({"resolvers": ["10.0.0.2", 5]})"),
		 {"p.json: dns/resolvers/1: expected a string, got an integer"}},
		{"DnsResolverHostname",
		 with_dns(R"({"resolvers": ["dns.google"]})"),
		 {"p.json: dns/resolvers/0: 'dns.google' is not an IP address"}},
		{"DnsResolverCidr",
		 with_dns(R"({"resolvers": ["10.0.0.0/8"]})"),
		 {"p.json: dns/resolvers/0: '10.0.0.0/8' is not an IP address"}},
		{"DnsResolverWithPort",
		 with_dns(R"({"resolvers": ["10.0.0.2:53"]})"),
		 {"p.json: dns/resolvers/0: '10.0.0.2:53' is not an IP address"}},
		{"DnsTypesNotArray",
		 with_dns(R"({"types": "A"})"),
		 {"p.json: dns/types: expected an array, got a string"}},
		{"DnsTypeNotString",
		 with_dns(R"({"types": ["A", 1]})"),
		 {"p.json: dns/types/1: expected a string, got an integer"}},
		{"DnsTypeUnknown",
		 with_dns(R"({"types": ["A", "Bogus"]})"),
		 {"p.json: dns/types/1: 'Bogus' is not a DNS type airlock knows"}},
		{"DnsMaxNameZero",
		 with_dns(R"({"max_name_length": 0})"),
		 {"p.json: dns/max_name_length: 0 is out of range (1-253)"}},
		{"DnsMaxName254",
		 with_dns(R"({"max_name_length": 254})"),
		 {"p.json: dns/max_name_length: 254 is out of range (1-253)"}},
		{"DnsMaxNameNegative",
		 with_dns(R"({"max_name_length": -5})"),
		 {"p.json: dns/max_name_length: -5 is out of range (1-253)"}},
		{"DnsMaxNameString",
		 with_dns(R"({"max_name_length": "120"})"),
		 {"p.json: dns/max_name_length: expected an integer, got a string"}},
		{"DnsMaxNameFloat",
		 with_dns(R"({"max_name_length": 120.0})"),
		 {"p.json: dns/max_name_length: expected an integer, got a number"}},
		{"DnsMaxLabelZero",
		 with_dns(R"({"max_label_length": 0})"),
		 {"p.json: dns/max_label_length: 0 is out of range (1-63)"}},
		{"DnsMaxLabel64",
		 with_dns(R"({"max_label_length": 64})"),
		 {"p.json: dns/max_label_length: 64 is out of range (1-63)"}},
		{"DnsMaxLabelBool",
		 with_dns(R"({"max_label_length": false})"),
		 {"p.json: dns/max_label_length: expected an integer, got a boolean"}},
		{"DnsTcpInteger", with_dns(R"({"tcp": 1})"), {"p.json: dns/tcp: expected a boolean, got an integer"}},
		{"DnsTcpString", with_dns(R"({"tcp": "true"})"), {"p.json: dns/tcp: expected a boolean, got a string"}},
	};
}

INSTANTIATE_TEST_SUITE_P(Parse, PolicyErrors, ::testing::ValuesIn(bad_cases()),
			 [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(PolicyErrorsMeta, CaseNamesAndInputsAreDistinct)
{
	auto cases = bad_cases();
	EXPECT_GE(cases.size(), 30u);
	std::vector<std::string> texts;
	for (const auto& c : cases)
		texts.push_back(c.text);
	std::sort(texts.begin(), texts.end());
	EXPECT_EQ(std::adjacent_find(texts.begin(), texts.end()), texts.end()) << "duplicate input";
	// Every message is one line a terminal can show.
	for (const auto& c : cases)
		for (const auto& e : c.errors)
			EXPECT_EQ(e.find('\n'), std::string::npos) << c.name;
}

// Inputs that once gave misleading messages: a bare wildcard, integers past
// INT64_MAX (shown wrapped), and bytes outside printable ASCII.
TEST(PolicyErrorsEdge, ExactMessages)
{
	struct Edge {
		std::string text, message;
	};
	const std::vector<Edge> edges = {
		{with_rule(R"({"action": "allow", "domain": "*"})"),
		 "p.json: rules/0/domain: '*' is not a domain name: no name follows '*'; write '*.example.com'"},
		{with_rule(R"({"action": "allow", "domain": "*."})"),
		 "p.json: rules/0/domain: '*.' is not a domain name: no name follows '*'; write '*.example.com'"},
		{with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [18446744073709551615]})"),
		 "p.json: rules/0/ports/0: 18446744073709551615 is not a port (1-65535)"},
		{with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [9223372036854775808]})"),
		 "p.json: rules/0/ports/0: 9223372036854775808 is not a port (1-65535)"},
		{with_dns(R"({"max_name_length": 18446744073709551615})"),
		 "p.json: dns/max_name_length: 18446744073709551615 is out of range (1-253)"},
		{with_rule(R"({"action": "allow", "domain": "b\u00fccher.de"})"),
		 "p.json: rules/0/domain: 'b\\xc3\\xbccher.de' is not a domain name: '\\xc3' is not allowed in a label "
		 "(letters, digits, '-', '_'; write names in their ASCII form)"},
		{with_rule(R"({"action": "allow", "domain": "a\u0000b.com"})"),
		 "p.json: rules/0/domain: 'a\\x00b.com' is not a domain name: '\\x00' is not allowed in a label "
		 "(letters, digits, '-', '_'; write names in their ASCII form)"},
	};
	for (const auto& e : edges) {
		auto errs = errors_of(e.text);
		ASSERT_EQ(errs.size(), 1u) << e.text;
		EXPECT_EQ(errs[0], e.message) << e.text;
	}
}

// Text after a NUL must not be ignored: these are not 10.0.0.0/8 and 10.0.0.2.
TEST(PolicyParse, NulInsideAnAddressIsRejected)
{
	EXPECT_FALSE(errors_of(with_rule(R"({"action": "allow", "cidr": "10.0.0.0\u0000junk/8"})")).empty());
	EXPECT_FALSE(errors_of(with_dns(R"({"resolvers": ["10.0.0.2\u0000junk"]})")).empty());
}

// ---------------------------------------------------------------------------
// Collect-all.

TEST(PolicyCollectAll, ThreeIndependentErrorsReportedExactly)
{
	auto errs = errors_of(R"({
		"version": 1,
		"name": "t",
		"extra": true,
		"rules": [
			{"action": "allow", "cidr": "10.20.0.0/16", "ports": [443]},
			{"action": "allow", "cidr": "10.0.0.1/8"}
		],
		"dns": {"types": ["A", "BOGUS"]}
	})");
	EXPECT_EQ(errs, (std::vector<std::string>{
				"p.json: (root): unknown key 'extra'",
				"p.json: rules/1/cidr: '10.0.0.1/8' has host bits set; did you mean '10.0.0.0/8'?",
				"p.json: dns/types/1: 'BOGUS' is not a DNS type airlock knows",
			}));
}

TEST(PolicyCollectAll, EveryRuleAndEveryFieldIsChecked)
{
	auto errs = errors_of(R"({"version": 1, "name": "t", "rules": [
		{"action": "allow", "cidr": "10.1.0.0/8"},
		{"action": "allow", "cidr": "10.0.0.0/8"},
		{"action": "nope", "domain": "-a.com", "ports": [0, "5-1"], "protocol": "x"}
	]})");
	EXPECT_EQ(errs,
		  (std::vector<std::string>{
			  "p.json: rules/0/cidr: '10.1.0.0/8' has host bits set; did you mean '10.0.0.0/8'?",
			  "p.json: rules/2/action: 'nope' is not one of allow, deny, refuse, redirect",
			  "p.json: rules/2/domain: '-a.com' is not a domain name: label '-a' starts or ends with '-'",
			  "p.json: rules/2/protocol: 'x' is not one of tcp, udp, icmp",
			  "p.json: rules/2/ports/0: 0 is not a port (1-65535)",
			  "p.json: rules/2/ports/1: '5-1' is not a port range (\"LO-HI\", 1 <= LO <= HI <= 65535)",
		  }));
}

TEST(PolicyCollectAll, EveryTopLevelKeyIsChecked)
{
	auto errs = errors_of(
		R"({"version": "x", "name": "a b", "mode": "x", "on_violation": "x", "rules": 5, "dns": {"tcp": 0}})");
	EXPECT_EQ(errs, (std::vector<std::string>{
				"p.json: version: expected an integer, got a string",
				"p.json: name: 'a b' is not a policy name (1-64 of A-Z a-z 0-9 . _ -)",
				"p.json: mode: 'x' is not one of enforce, audit",
				"p.json: on_violation: 'x' is not one of deny, freeze, kill",
				"p.json: rules: expected an array, got an integer",
				"p.json: dns/tcp: expected a boolean, got an integer",
			}));
}

TEST(PolicyCollectAll, OneBadRuleRejectsTheWholePolicy)
{
	auto r = parse_policy_text(with_rule(R"({"action": "allow", "cidr": "10.0.0.0/8"},
		{"action": "allow", "cidr": "10.0.0.0/33"})"),
				   kFile);
	EXPECT_FALSE(r.ok());
	ASSERT_EQ(errors_in(r).size(), 1u);
	EXPECT_EQ(errors_in(r)[0].file, "p.json");
	EXPECT_EQ(errors_in(r)[0].path, "rules/1/cidr");
	EXPECT_EQ(errors_in(r)[0].message, "'10.0.0.0/33' is not a CIDR");
}

// ---------------------------------------------------------------------------
// JSON syntax errors: "FILE:LINE:COL: (root): invalid JSON: REASON".

struct SyntaxCase {
	std::string text;
	int line, col;
	std::string reason_has;
};

TEST(PolicyJsonSyntax, LineAndColumnOfTheOffendingCharacter)
{
	const std::vector<SyntaxCase> cases = {
		// a ',' where a value belongs: line 4, column 13
		{"{\n  \"version\": 1,\n  \"name\": \"x\",\n  \"rules\": [,]\n}\n", 4, 13, "unexpected ','"},
		// a trailing comma in an object: the '}' after it
		{"{\n  \"rules\": [\n    {\"action\": \"allow\",}\n  ]\n}\n", 3, 24, "unexpected '}'"},
		// a stray character at the start of a line after blank lines
		{"{\n\n\n   @\n}\n", 4, 4, "invalid literal"},
		// first character of the second line
		{"{\n@}", 2, 1, "invalid literal"},
		// a raw newline in a string: the newline itself, ending line 3
		{"{\n  \"version\": 1,\n  \"name\": \"x\n\"}", 3, 13, "control character U+000A"},
		// an extra '}' after the document
		{"{\"a\":1}}", 1, 8, "expected end of input"},
		// a lone character
		{"@", 1, 1, "invalid literal"},
		// truncated documents: the position just past the end
		{"", 1, 1, "unexpected end of input"},
		{"{", 1, 2, "unexpected end of input"},
		{"{\"a\":1,\n\"b\":2,\n", 3, 1, "unexpected end of input"},
	};
	for (const auto& c : cases) {
		SCOPED_TRACE(c.text);
		auto r = parse_policy_text(c.text, kFile);
		EXPECT_FALSE(r.ok());
		ASSERT_EQ(errors_in(r).size(), 1u);
		const PolicyError& e = errors_in(r)[0];
		EXPECT_EQ(e.file, "p.json:" + std::to_string(c.line) + ":" + std::to_string(c.col));
		EXPECT_EQ(e.path, "(root)");
		EXPECT_EQ(e.message.rfind("invalid JSON: ", 0), 0u) << e.message;
		EXPECT_NE(e.message.find(c.reason_has), std::string::npos) << e.message;
		// The reason is nlohmann's, without its "[json.exception...] parse
		// error at line L, column C: " preamble, and on one line.
		EXPECT_EQ(e.message.find("json.exception"), std::string::npos) << e.message;
		EXPECT_EQ(e.message.find("parse error at"), std::string::npos) << e.message;
		EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
		std::string prefix = "p.json:" + std::to_string(c.line) + ":" + std::to_string(c.col) +
				     ": (root): invalid JSON: ";
		EXPECT_EQ(e.str().rfind(prefix, 0), 0u) << e.str();
	}
}

TEST(PolicyJsonSyntax, ExactMessageForAStrayComma)
{
	auto errs = errors_of("{\n  \"version\": 1,\n  \"name\": \"x\",\n  \"rules\": [,]\n}\n");
	EXPECT_EQ(errs,
		  (std::vector<std::string>{"p.json:4:13: (root): invalid JSON: syntax error while parsing value - "
					    "unexpected ','; expected '[', '{', or a literal"}));
}

// ---------------------------------------------------------------------------
// What a good file turns into.

TEST(PolicyDefaults, MinimalDocument)
{
	Policy p = parse_ok(R"({"version": 1, "name": "minimal", "rules": []})");
	EXPECT_EQ(p.version, 1);
	EXPECT_EQ(p.name, "minimal");
	EXPECT_EQ(p.description, "");
	EXPECT_EQ(p.mode, Mode::Enforce);
	EXPECT_EQ(p.on_violation, OnViolation::Deny);
	EXPECT_TRUE(p.rules.empty());
	EXPECT_EQ(p.source, "p.json");
	EXPECT_TRUE(p.dns.resolvers.empty());
	EXPECT_EQ(p.dns.types, (std::vector<std::string>{"A", "AAAA", "CNAME"}));
	EXPECT_EQ(p.dns.max_name_length, 253u);
	EXPECT_EQ(p.dns.max_label_length, 63u);
	EXPECT_FALSE(p.dns.tcp);

	// An empty "dns" object keeps every default too.
	Policy q = parse_ok(with_dns("{}"));
	EXPECT_EQ(q.dns.types, (std::vector<std::string>{"A", "AAAA", "CNAME"}));
	EXPECT_EQ(q.dns.max_name_length, 253u);
	EXPECT_EQ(q.dns.max_label_length, 63u);
	EXPECT_FALSE(q.dns.tcp);
}

TEST(PolicyDefaults, RuleDefaults)
{
	Rule r = only_rule(R"({"action": "allow", "cidr": "10.0.0.0/8"})");
	EXPECT_EQ(r.index, 0u);
	EXPECT_EQ(r.action, Action::Allow);
	ASSERT_TRUE(r.cidr);
	EXPECT_FALSE(r.domain);
	EXPECT_FALSE(r.wildcard);
	EXPECT_TRUE(r.ports.empty());
	EXPECT_EQ(r.proto_mask, AL_PROTO_TCP | AL_PROTO_UDP);  // never ICMP unless asked
	EXPECT_EQ(r.comment, "");
}

TEST(PolicyFields, TopLevel)
{
	Policy p = parse_ok(R"({"version": 1, "name": "A-z_0.9", "description": "d", "mode": "audit",
		"on_violation": "kill", "rules": []})");
	EXPECT_EQ(p.name, "A-z_0.9");
	EXPECT_EQ(p.description, "d");
	EXPECT_EQ(p.mode, Mode::Audit);
	EXPECT_EQ(p.on_violation, OnViolation::Kill);
	EXPECT_EQ(parse_ok(R"({"version": 1, "name": "t", "on_violation": "freeze", "rules": []})").on_violation,
		  OnViolation::Freeze);
	EXPECT_EQ(
		parse_ok(R"({"version": 1, "name": "t", "on_violation": "deny", "mode": "enforce", "rules": []})").mode,
		Mode::Enforce);
	EXPECT_EQ(parse_ok(R"({"version": 1, "name": ")" + std::string(64, 'n') + R"(", "rules": []})").name.size(),
		  64u);
}

TEST(PolicyFields, RulesKeepTheirIndexAndFields)
{
	Policy p = parse_ok(R"({"version": 1, "name": "t", "rules": [
		{"action": "allow", "domain": "pypi.org", "ports": [443]},
		{"action": "allow", "cidr": "10.20.0.0/16", "ports": [5432, "8000-8100"], "protocol": "tcp",
		 "comment": "db"},
		{"action": "deny", "cidr": "169.254.169.254/32", "protocol": "udp"},
		{"action": "allow", "cidr": "fd00::/8", "protocol": "icmp"}
	]})");
	ASSERT_EQ(p.rules.size(), 4u);
	for (size_t i = 0; i < 4; i++)
		EXPECT_EQ(p.rules[i].index, i);
	EXPECT_EQ(p.rules[1].action, Action::Allow);
	EXPECT_EQ(p.rules[1].ports, (std::vector<PortRange>{{5432, 5432}, {8000, 8100}}));
	EXPECT_EQ(p.rules[1].proto_mask, AL_PROTO_TCP);
	EXPECT_EQ(p.rules[1].comment, "db");
	EXPECT_EQ(describe(p.rules[1]), "allow 10.20.0.0/16 ports 5432,8000-8100 tcp");
	EXPECT_EQ(p.rules[2].action, Action::Deny);
	EXPECT_EQ(p.rules[2].proto_mask, AL_PROTO_UDP);
	EXPECT_EQ(describe(p.rules[2]), "deny 169.254.169.254/32 udp");
	EXPECT_EQ(p.rules[3].proto_mask, AL_PROTO_ICMP);
	EXPECT_EQ(describe(p.rules[3]), "allow fd00::/8 icmp");
	EXPECT_EQ(describe(p.rules[0]), "allow pypi.org ports 443");
}

TEST(PolicyFields, PortBoundaries)
{
	Rule r = only_rule(
		R"({"action": "allow", "cidr": "10.0.0.0/8", "ports": [1, 65535, "1-65535", "80-80", "00080-00090"]})");
	EXPECT_EQ(r.ports, (std::vector<PortRange>{{1, 1}, {65535, 65535}, {1, 65535}, {80, 80}, {80, 90}}));
}

TEST(PolicyFields, CidrForms)
{
	auto c = [](const char* text) {
		Rule r = only_rule(std::string(R"({"action": "allow", "cidr": ")") + text + "\"}");
		return r.cidr.value_or(Cidr{});
	};
	EXPECT_EQ(format_cidr(c("10.20.0.0/16")), "10.20.0.0/16");
	EXPECT_EQ(c("10.20.0.0/16").addr.family, AL_FAMILY_IPV4);
	EXPECT_EQ(format_cidr(c("10.1.2.3")), "10.1.2.3/32");  // no prefix: one host
	EXPECT_EQ(format_cidr(c("2001:db8::1")), "2001:db8::1/128");
	EXPECT_EQ(format_cidr(c("2001:DB8::/32")), "2001:db8::/32");
	EXPECT_EQ(c("2001:db8::/32").addr.family, AL_FAMILY_IPV6);
	EXPECT_EQ(format_cidr(c("0.0.0.0/0")), "0.0.0.0/0");
	EXPECT_EQ(format_cidr(c("::/0")), "::/0");
	EXPECT_EQ(c("::/0").addr.family, AL_FAMILY_IPV6);
	EXPECT_EQ(format_cidr(c("::/96")), "::/96");  // IPv4-compatible, not mapped: stays IPv6
}

TEST(PolicyFields, V4MappedCidrIsTheIpv4Prefix)
{
	auto c = [](const char* text) {
		Rule r = only_rule(std::string(R"({"action": "allow", "cidr": ")") + text + "\"}");
		return r.cidr.value_or(Cidr{});
	};
	Cidr a = c("::ffff:10.0.0.0/104");
	EXPECT_EQ(a.addr.family, AL_FAMILY_IPV4);
	EXPECT_EQ(a.prefix_len, 8);
	EXPECT_EQ(format_cidr(a), "10.0.0.0/8");
	EXPECT_EQ(format_cidr(c("::FFFF:a00:0/104")), "10.0.0.0/8");
	EXPECT_EQ(format_cidr(c("::ffff:10.1.2.3")), "10.1.2.3/32");
	EXPECT_EQ(format_cidr(c("::ffff:10.1.2.3/128")), "10.1.2.3/32");
	EXPECT_EQ(format_cidr(c("::ffff:192.168.0.0/112")), "192.168.0.0/16");
	EXPECT_EQ(format_cidr(c("::ffff:0.0.0.0/96")), "0.0.0.0/0");
	EXPECT_EQ(format_cidr(c("::ffff:0:0/96")), "0.0.0.0/0");
	EXPECT_EQ(c("::ffff:0:0/96").addr.family, AL_FAMILY_IPV4);
}

TEST(PolicyFields, DomainCaseFoldingAndTrailingDot)
{
	Rule exact = only_rule(R"({"action": "allow", "domain": "PyPI.Org."})");
	EXPECT_EQ(exact.domain, "pypi.org");
	EXPECT_FALSE(exact.wildcard);
	EXPECT_FALSE(exact.cidr);

	Rule wild = only_rule(R"({"action": "allow", "domain": "*.PythonHosted.ORG."})");
	EXPECT_EQ(wild.domain, "pythonhosted.org");
	EXPECT_TRUE(wild.wildcard);
	EXPECT_EQ(describe(wild), "allow *.pythonhosted.org");

	EXPECT_EQ(only_rule(R"({"action": "deny", "domain": "_dmarc.Example.com"})").domain, "_dmarc.example.com");
	EXPECT_EQ(only_rule(R"({"action": "deny", "domain": "xn--bcher-kva.example"})").domain,
		  "xn--bcher-kva.example");
	EXPECT_EQ(only_rule(R"({"action": "deny", "domain": "localhost"})").domain, "localhost");
}

TEST(PolicyFields, DomainLengthLimits)
{
	const std::string label63(63, 'b');
	EXPECT_EQ(only_rule(R"({"action": "allow", "domain": ")" + label63 + R"(.com"})").domain, label63 + ".com");
	EXPECT_EQ(only_rule(R"({"action": "allow", "domain": ")" + kName253 + R"("})").domain, kName253);
	// The trailing dot and the "*." are not counted.
	EXPECT_EQ(only_rule(R"({"action": "allow", "domain": ")" + kName253 + R"(."})").domain, kName253);
	Rule w = only_rule(R"({"action": "allow", "domain": "*.)" + kName253 + R"("})");
	EXPECT_EQ(w.domain, kName253);
	EXPECT_TRUE(w.wildcard);
}

TEST(PolicyFields, Dns)
{
	Policy p = parse_ok(with_dns(R"({"resolvers": ["10.0.0.2", "2001:db8::53", "::ffff:10.0.0.3"],
		"types": ["a", "aaaa", "A", "Mx", "https"], "max_name_length": 120, "max_label_length": 40, "tcp": true})"));
	ASSERT_EQ(p.dns.resolvers.size(), 3u);
	EXPECT_EQ(format_address(p.dns.resolvers[0]), "10.0.0.2");
	EXPECT_EQ(format_address(p.dns.resolvers[1]), "2001:db8::53");
	EXPECT_EQ(p.dns.resolvers[2].family, AL_FAMILY_IPV4);  // mapped resolver is IPv4
	EXPECT_EQ(format_address(p.dns.resolvers[2]), "10.0.0.3");
	// Upper-cased, duplicates dropped, order kept; given types replace the defaults.
	EXPECT_EQ(p.dns.types, (std::vector<std::string>{"A", "AAAA", "MX", "HTTPS"}));
	EXPECT_EQ(p.dns.max_name_length, 120u);
	EXPECT_EQ(p.dns.max_label_length, 40u);
	EXPECT_TRUE(p.dns.tcp);

	Policy limits = parse_ok(with_dns(R"({"max_name_length": 1, "max_label_length": 63, "types": []})"));
	EXPECT_EQ(limits.dns.max_name_length, 1u);
	EXPECT_EQ(limits.dns.max_label_length, 63u);
	EXPECT_TRUE(limits.dns.types.empty());
	EXPECT_EQ(parse_ok(with_dns(R"({"max_name_length": 253, "max_label_length": 1})")).dns.max_label_length, 1u);
}

// ---------------------------------------------------------------------------
// Files.

TEST(PolicyFile, MissingFile)
{
	const std::string path = "/nonexistent-airlock-dir/missing.json";
	auto r = parse_policy_file(path);
	EXPECT_FALSE(r.ok());
	ASSERT_EQ(errors_in(r).size(), 1u);
	EXPECT_EQ(errors_in(r)[0].str(), path + ": (root): cannot read: No such file or directory");
}

TEST(PolicyFile, ErrorsNameThePath)
{
	const std::string path = std::string(AIRLOCK_SOURCE_DIR) + "/policies/default.json";
	auto r = parse_policy_file(path);
	ASSERT_TRUE(r.ok());
	EXPECT_EQ(r->source, path);
}

TEST(PolicyFile, EveryBundledPolicyParsesAndCompiles)
{
	namespace fs = std::filesystem;
	const fs::path dir = fs::path(AIRLOCK_SOURCE_DIR) / "policies";
	ASSERT_TRUE(fs::is_directory(dir)) << dir;
	size_t seen = 0;
	uint32_t id = 1;
	for (const auto& entry : fs::directory_iterator(dir)) {
		if (entry.path().extension() != ".json")
			continue;
		seen++;
		SCOPED_TRACE(entry.path().string());
		auto r = parse_policy_file(entry.path().string());
		for (const auto& e : errors_in(r))
			ADD_FAILURE() << e.str();
		ASSERT_TRUE(r.ok());
		EXPECT_FALSE(r->rules.empty());
		auto c = compile_policy(*r, id++);
		for (const auto& e : errors_in(c))
			ADD_FAILURE() << e.str();
		EXPECT_TRUE(c.ok());
	}
	EXPECT_GE(seen, 2u);
}

}  // namespace
}  // namespace airlock
