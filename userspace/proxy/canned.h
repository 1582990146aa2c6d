#pragma once
// The recorder's answers to HTTP: the policy's canned responses
// (world.responses), the first that matches a request, or a plain 200.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/policy.h"

namespace airlock::proxy {

// The body of the plain 200 a request gets when no canned response matches.
inline constexpr std::string_view kDefaultBody = "airlock world: recorded\n";

// The canned response for a request: the first whose host, method and path
// match, or nullptr. host: the Host header as sent (its port, brackets and
// a trailing dot are ignored, case too); path: the request target as sent
// (matched without its query; an absolute-form target by its path).
// Patterns: host "name", "*.name" (strictly below name) or "*"; method ""
// (any) or exact; path "" (any), exact, or a prefix ending in '*'.
const WorldResponse* find_response(const std::vector<WorldResponse>&, std::string_view host, std::string_view method,
				   std::string_view target);

// An answer as it goes on the wire: the status line, the headers (a
// canned response's own, or a plain text type; never its framing, which is
// ours), the length, the connection's fate, then the body unless the
// status or a HEAD request has none. version: the request's (10 or 11).
std::string format_response(unsigned status, const std::string& body, bool keep_alive, unsigned version, bool head,
			    const std::vector<std::pair<std::string, std::string>>* headers);

}  // namespace airlock::proxy
