#pragma once
// A request target in the HTTP gate's one canonical form (docs/gate.md,
// "One canonical form"). The gate reads a target once, here; what it judges
// and what it sends upstream are this form, never the client's bytes, so a
// server cannot read a request another way than the gate did.
//
// The path: every %XX of an unreserved character (A-Z a-z 0-9 - . _ ~) is
// decoded, once; other %XX stay, in upper case; a byte that has no place in
// a path unencoded (a control, a space, '"', '<', '{', a byte >= 0x80...)
// is encoded. Malformed: a control byte, a '#', a '%' without two hex
// digits. Refused, because servers disagree on what they mean: an
// encoded '/', '\' or NUL, the same double-encoded (%252F), a raw '\', a
// '.' or '..' segment (also "..;param"), an empty segment ("//") but the
// last, a '#'. Paths keep their case.
//
// The query: split on '&' into name and value at the first '='; '+' is a
// space and every %XX decoded (the form urlencoded reading), an encoded NUL
// refused; written back with every byte but the unreserved encoded, so that
// a server reading '+' as a plus and one reading it as a space see the same.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace airlock::url {

struct QueryParam {
	std::string name, value;  // decoded
	bool has_value = true;    // "?flag": no '='
	bool operator==(const QueryParam&) const = default;
};

struct Target {
	std::string path;  // canonical, starting with '/'
	bool has_query = false;
	std::vector<QueryParam> query;
	// Path and query as they go upstream.
	std::string serialized() const;
	bool operator==(const Target&) const = default;
};

// What is wrong with a target, for a 400 or a 403 and the audit line.
struct TargetProblem {
	enum Kind { Malformed, Path };  // Malformed: not a target (400); Path: refused (http-path)
	Kind kind = Path;
	std::string message;
	const std::string& first() const { return message; }
};

// The canonical form of an origin-form target ("/path?query"), or why not.
Result<Target, TargetProblem> canonical_target(std::string_view origin_form);

// Whether a path, as a policy writes it, is already canonical: nullopt, or
// what is not ("an encoded '/'", "a '..' segment").
std::optional<std::string> path_problem(std::string_view path);

// The value of a hex digit, or -1.
int hex_value(char c);

// RFC 9110 token characters (a method, a header name, a Connection
// option), and a whole token.
bool is_token_char(unsigned char c);
bool is_token(std::string_view s);

// Every byte but the unreserved as %XX (upper case).
std::string encode_component(std::string_view bytes);

}  // namespace airlock::url
