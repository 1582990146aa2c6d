#pragma once
// `airlock policy suggest`: a policy that allows exactly what an audit-mode
// run used, learned from its audit log. An address that a DNS answer gave
// the sandbox before it connected becomes a domain rule for that answer's
// name (the latest, for an address several names share); the rest, CIDR
// rules.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace airlock {

struct SuggestOptions {
	std::string sandbox;  // only this sandbox's lines ("" = every line)
	std::string name = "suggested";
};

struct Suggestion {
	nlohmann::ordered_json policy;
	size_t flows = 0;                // distinct destinations (address or name, port, protocol)
	size_t names = 0;                // distinct names queried
	std::vector<std::string> notes;  // what could not be turned into a rule
};

Suggestion suggest_policy(const std::vector<nlohmann::json>& audit_lines, const SuggestOptions& o);

}  // namespace airlock
