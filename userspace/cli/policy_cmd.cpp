#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "net/address.h"
#include "policy/compile.h"
#include "policy/policy.h"

namespace airlock {

int cmd_policy_check(const std::vector<std::string>& files)
{
	int bad = 0;
	for (const auto& f : files) {
		auto res = parse_policy_file(f);
		std::vector<PolicyError> errors = res.errors;
		if (res.policy) {
			auto c = compile_policy(*res.policy, 1);
			errors.insert(errors.end(), c.errors.begin(), c.errors.end());
		}
		for (const auto& e : errors)
			fmt::print(stderr, "{}\n", e.str());
		if (errors.empty())
			fmt::print("{}: ok ({} rules)\n", f, res.policy->rules.size());
		else
			bad++;
	}
	return bad ? kExitFailure : kExitOk;
}

int cmd_policy_show(const std::string& file)
{
	auto res = parse_policy_file(file);
	if (!res.policy) {
		for (const auto& e : res.errors)
			fmt::print(stderr, "{}\n", e.str());
		return kExitFailure;
	}
	auto c = compile_policy(*res.policy, 1);
	if (!c.compiled) {
		for (const auto& e : c.errors)
			fmt::print(stderr, "{}\n", e.str());
		return kExitFailure;
	}
	const Policy& p = *res.policy;
	fmt::print("policy {} mode {} on_violation {}\n", p.name, to_string(p.mode), to_string(p.on_violation));
	for (const auto& r : p.rules)
		fmt::print("  rule {}: {}\n", r.index, describe(r));
	fmt::print("kernel entries ({}), first matching range decides:\n", c.compiled->prefixes.size());
	for (const auto& e : c.compiled->prefixes) {
		Address a = from_raw(static_cast<uint8_t>(e.key.family), e.key.addr);
		fmt::print("  {}/{}\n", format_address(a), e.key.prefixlen - AL_LPM_FIXED_BITS);
		for (uint32_t i = 0; i < e.value.count; i++) {
			const al_range& r = e.value.ranges[i];
			std::string protos;
			if (r.proto_mask & AL_PROTO_TCP) protos += "tcp ";
			if (r.proto_mask & AL_PROTO_UDP) protos += "udp ";
			if (r.proto_mask & AL_PROTO_ICMP) protos += "icmp ";
			fmt::print("    {} ports {}-{} {}(rule {})\n", r.action == AL_ACTION_ALLOW ? "allow" : "deny ",
				   r.port_lo, r.port_hi, protos, r.rule);
		}
	}
	return kExitOk;
}

}  // namespace airlock
