// Policy files from arbitrary bytes: parse, and compile what parses.
//
// Beyond "no crash, no leak, no undefined behaviour":
//  - a parse gives a policy or errors, never both, never neither; the same
//    for a compile; neither throws (their headers document no exception);
//  - every error is one line that names the file, a JSON path and a message;
//  - a compiled policy decides as its rules say: the kernel models of
//    compile.h (one LPM lookup and a range scan, the two name lookups, the
//    unix lookups) agree with the rule-by-rule definitions on destinations
//    taken from the rules themselves and their edges.
#include <airlock/abi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "policy/compile.h"
#include "policy/dnsname.h"
#include "policy/policy.h"

using namespace airlock;
using airlock::fuzz::broken;
using airlock::fuzz::check;
using airlock::fuzz::one_line;

namespace {

constexpr const char* kFile = "fuzz.json";
constexpr uint32_t kPolicyId = 7;
// Rules probed per compiled policy: enough to reach every kind of rule,
// few enough to keep the target fast on policies of thousands of rules.
constexpr size_t kProbedRules = 8;
constexpr uint8_t kProtos[] = {AL_PROTO_TCP, AL_PROTO_UDP, AL_PROTO_ICMP};

void check_errors(const std::vector<PolicyError>& errors)
{
	for (const auto& e : errors) {
		std::string line = e.str();
		if (!one_line(line))
			broken("an error is one line", line);
		if (e.file.rfind(kFile, 0) != 0 || e.path.empty() || e.message.empty())
			broken("an error names the file, a JSON path and what is wrong", line);
	}
}

// Ports at the edges of a rule's ranges, and the two ends of the space.
std::vector<uint16_t> edge_ports(const Rule& r)
{
	std::vector<uint16_t> out = {0, 1, 65535};
	for (size_t i = 0; i < r.ports.size() && i < 4; i++) {
		const PortRange& p = r.ports[i];
		for (int v : {p.lo - 1, int(p.lo), int(p.hi), p.hi + 1})
			if (v >= 0 && v <= 65535)
				out.push_back(static_cast<uint16_t>(v));
	}
	return out;
}

// The first range of a rule set that matches, as the kernel scans it.
KernelDecision scan(const al_rule_set& rs, uint16_t port, uint8_t proto)
{
	for (uint32_t i = 0; i < rs.count && i < AL_MAX_RANGES; i++) {
		const al_range& r = rs.ranges[i];
		if ((r.proto_mask & proto) && port >= r.port_lo && port <= r.port_hi)
			return {r.action == AL_ACTION_ALLOW, r.rule, r.action == AL_ACTION_REDIRECT};
	}
	return {};
}

std::string show(const KernelDecision& d)
{
	return std::string(d.allowed      ? "allow"
			   : d.redirected ? "redirect"
					  : "deny") +
	       " by rule " + std::to_string(d.rule);
}

std::string show(const std::optional<KernelDecision>& d)
{
	return d ? show(*d) : "no rule";
}

// What a probe was and how the two sides decided it.
template <typename Decision>
std::string where(const Rule& r, const std::string& dst, uint16_t port, uint8_t proto, const Decision& kernel,
		  const Decision& reference)
{
	return describe(r) + " | dst " + dst + " port " + std::to_string(port) + " proto " + std::to_string(proto) +
	       " | compiled: " + show(kernel) + ", rules: " + show(reference);
}

void probe_cidr(const Policy& p, const CompiledPolicy& c, const Rule& r)
{
	// The prefix's first and last address, and the addresses just outside.
	Address first = r.cidr->addr;
	Address last = first;
	int bits = first.bits();
	for (int b = r.cidr->prefix_len; b < bits; b++)
		last.bytes[b / 8] |= static_cast<uint8_t>(0x80 >> (b % 8));
	Address before = first, after = last;
	for (int i = bits / 8 - 1; i >= 0 && before.bytes[i]-- == 0; i--) {
	}
	for (int i = bits / 8 - 1; i >= 0 && ++after.bytes[i] == 0; i--) {
	}
	for (const Address& a : {first, last, before, after})
		for (uint16_t port : edge_ports(r))
			for (uint8_t proto : kProtos) {
				KernelDecision got = kernel_lookup(c, kPolicyId, a, port, proto);
				KernelDecision want = reference_decision(p, a, port, proto);
				if (got != want)
					broken("the compiled prefixes decide as the rules",
					       where(r, format_address(a), port, proto, got, want));
			}
}

void probe_domain(const Policy& p, const CompiledPolicy& c, const Rule& r)
{
	const std::string& d = *r.domain;
	std::vector<std::string> names = {d, "x." + d, "x.y." + d};
	if (auto dot = d.find('.'); dot != std::string::npos)
		names.push_back(d.substr(dot + 1));
	for (const auto& name : names) {
		const al_rule_set* rs = kernel_name_lookup(c, name);
		if (rs) {
			// A query may leave exactly when some range allows, or
			// redirects other than to a world that answers it.
			bool may_leave = false;
			for (uint32_t i = 0; i < rs->count && i < AL_MAX_RANGES; i++) {
				const al_range& rg = rs->ranges[i];
				bool to_answering_world = rg.action == AL_ACTION_REDIRECT && rg.rule < p.rules.size() &&
							  p.rules[rg.rule].redirect &&
							  p.rules[rg.rule].redirect->world && p.world &&
							  p.world->synthesize_dns;
				may_leave |= rg.action == AL_ACTION_ALLOW ||
					     (rg.action == AL_ACTION_REDIRECT && !to_answering_world);
			}
			if (bool(rs->flags & AL_RS_QUERY) != may_leave)
				broken("a name may be queried exactly when some range allows or redirects to where queries go",
				       describe(r) + " | " + name);
		}
		for (uint16_t port : edge_ports(r))
			for (uint8_t proto : kProtos) {
				KernelDecision got = rs ? scan(*rs, port, proto) : KernelDecision{};
				KernelDecision want = reference_name_decision(p, name, port, proto);
				if (got != want)
					broken("the compiled names decide as the rules",
					       where(r, name, port, proto, got, want));
			}
	}
}

void probe_unix(const Policy& p, const CompiledPolicy& c, const Rule& r)
{
	const UnixTarget& u = *r.unix_target;
	std::vector<std::string> targets = {u.bytes, u.bytes + "x", u.bytes + "/x"};
	if (!u.bytes.empty())
		targets.push_back(u.bytes.substr(0, u.bytes.size() - 1));
	for (const auto& t : targets) {
		auto got = kernel_unix_lookup(c, u.abstract, t);
		auto want = reference_unix_decision(p, u.abstract, t);
		if (got != want)
			broken("the compiled unix rules decide as the rules", where(r, t, 0, 0, got, want));
	}
}

void check_compiled(const Policy& p, const CompiledPolicy& c)
{
	for (const auto& n : c.names) {
		check(n.value.name_len + 1u <= AL_DNS_NAME_BYTES, "a name key has room for its end mark");
		auto back = name_from_key(n.key.name, n.value.name_len);
		check(back.has_value(), "a compiled name key holds whole labels");
		bool named = std::any_of(p.rules.begin(), p.rules.end(), [&](const Rule& r) {
			return r.domain && *r.domain == *back && r.wildcard == bool(n.value.flags & AL_RS_WILDCARD);
		});
		check(named, "a compiled name is a rule's name", *back);
	}
	size_t probed = 0;
	for (const auto& r : p.rules) {
		if (probed++ == kProbedRules)
			break;
		if (r.cidr)
			probe_cidr(p, c, r);
		else if (r.domain)
			probe_domain(p, c, r);
		else if (r.unix_target)
			probe_unix(p, c, r);
	}
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	std::string_view text(reinterpret_cast<const char*>(data), size);
	auto parsed = parse_policy_text(text, kFile);
	check(parsed.ok() || !parsed.rejection().errors.empty(), "a parse gives a policy or errors");
	if (!parsed.ok()) {
		check_errors(parsed.rejection().errors);
		return 0;
	}
	const Policy& p = *parsed;
	check(p.source == kFile, "a policy knows its file", p.source);
	for (size_t i = 0; i < p.rules.size(); i++) {
		check(p.rules[i].index == i, "rules keep their index");
		if (std::string d = describe(p.rules[i]); !one_line(d))
			broken("a rule is described in one line", d);
	}
	auto compiled = compile_policy(p, kPolicyId);
	check(compiled.ok() || !compiled.rejection().errors.empty(), "a compile gives entries or errors");
	if (compiled.ok())
		check_compiled(p, *compiled);
	else
		check_errors(compiled.rejection().errors);
	return 0;
}
