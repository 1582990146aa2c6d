#pragma once
// Compiling a policy into what the kernel looks up: one LPM entry per
// distinct prefix, each holding, in precedence order, the port ranges of its
// own rules and of every less specific rule that contains it. The kernel
// then needs one longest-prefix lookup and a first-match scan.
#include <airlock/abi.h>

#include <optional>
#include <vector>

#include "policy/policy.h"

namespace airlock {

struct CompiledPrefix {
	al_lpm_key key;
	al_rule_set value;
};

struct CompiledName {
	al_name_key key;
	al_rule_set value;
};

// A unix rule: an exact path (al_unix_exact) or a prefix (al_unix_prefix).
struct CompiledUnix {
	bool prefix = false;
	al_unix_exact_key exact_key{};
	al_unix_prefix_key prefix_key{};
	al_unix_rule value{};
};

struct CompiledPolicy {
	std::vector<CompiledPrefix> prefixes;
	std::vector<CompiledName> names;       // domain rules, one entry per distinct name and kind
	std::vector<CompiledUnix> unix_rules;  // one entry per distinct target
	al_dns_policy dns{};                   // the "dns" block, keyed by the policy id
	uint32_t sandbox_flags = 0;            // al_sandbox_flag (AL_SB_LOG_ALLOWED is the runner's)
	uint8_t on_violation = AL_ON_VIOLATION_DENY;
	uint64_t families = 0;  // al_sandbox.families
	// Allow rules' egress byte budgets: (rule index, bytes).
	std::vector<std::pair<uint16_t, uint64_t>> budgets;
	// Redirect rules to a target of the operator's ("to": "HOST:PORT"):
	// (rule index, where); the others go to the proxy.
	std::vector<std::pair<uint16_t, al_target>> targets;
};

// Entries for the kernel, or every reason the policy does not fit in them
// (too many port ranges for a prefix, a name too long for a key, ...).
Result<CompiledPolicy, PolicyRejection> compile_policy(const Policy& p, uint32_t policy_id);

struct KernelDecision {
	bool allowed = false;
	uint16_t rule = AL_RULE_NONE;
	bool redirected = false;  // a redirect rule decided: to the proxy
	bool operator==(const KernelDecision&) const = default;
};

// What the kernel decides with the compiled entries (a model of
// al_rules_decide in bpf/verdict.bpf.h), for tests and explanations.
KernelDecision kernel_lookup(const CompiledPolicy& c, uint32_t policy_id, const Address& dst, uint16_t port,
			     uint8_t proto_bit);

// What the kernel decides for a DNS name (a model of al_name_match in
// bpf/names.bpf.h): the entry's rules, or nullptr. name: lowercase, dotted.
const al_rule_set* kernel_name_lookup(const CompiledPolicy& c, const std::string& name);

// The definition for names, rule by rule: the most specific domain rule
// (an exact name, then the longest wildcard) that matches the name, the
// port and the protocol; at equal specificity deny, then redirect, then the
// lower index.
KernelDecision reference_name_decision(const Policy& p, const std::string& name, uint16_t port, uint8_t proto_bit);

// What the kernel decides for a unix address (a model of al_unix_rules in
// bpf/unix.bpf.h): the rule's index and action, or nullopt (no rule).
std::optional<KernelDecision> kernel_unix_lookup(const CompiledPolicy& c, bool abstract, const std::string& bytes);

// The definition for unix addresses, rule by rule: an exact rule, else the
// longest matching prefix; at equal specificity deny, then the lower index.
std::optional<KernelDecision> reference_unix_decision(const Policy& p, bool abstract, const std::string& bytes);

// The definition, rule by rule: among matching rules the longest prefix
// wins, then at equal length deny, then redirect, then allow, then the
// lower index.
KernelDecision reference_decision(const Policy& p, const Address& dst, uint16_t port, uint8_t proto_bit);

}  // namespace airlock
