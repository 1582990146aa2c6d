#include "net/url.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace airlock::url {

namespace {

bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
	       c == '_' || c == '~';
}

// A byte a path may carry unencoded (RFC 3986 pchar, and '/').
bool path_char(unsigned char c)
{
	if (unreserved(c))
		return true;
	switch (c) {
	case '!':
	case '$':
	case '&':
	case '\'':
	case '(':
	case ')':
	case '*':
	case '+':
	case ',':
	case ';':
	case '=':
	case ':':
	case '@':
	case '/':
		return true;
	default:
		return false;
	}
}

// The byte of "%XX" at s[i] (s[i] == '%'), or -1.
int escaped(std::string_view s, size_t i)
{
	if (i + 2 >= s.size())
		return -1;
	int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
	return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// What a byte is called in a refusal, when a path may not carry it
// encoded (once: '/', '\\', NUL; twice, also '.' and '%').
const char* forbidden_encoded(int byte, bool twice)
{
	switch (byte) {
	case '/':
		return "'/'";
	case '\\':
		return "'\\'";
	case 0:
		return "NUL";
	case '.':
		return twice ? "'.'" : nullptr;
	case '%':
		return twice ? "'%'" : nullptr;
	default:
		return nullptr;
	}
}

void append_escape(std::string& out, unsigned char c)
{
	static constexpr char kHex[] = "0123456789ABCDEF";
	out += '%';
	out += kHex[c >> 4];
	out += kHex[c & 15];
}

TargetProblem refused(std::string message)
{
	return TargetProblem{TargetProblem::Path, std::move(message)};
}

// The path's bytes in canonical form (segments not yet looked at).
Result<std::string, TargetProblem> canonical_bytes(std::string_view p)
{
	std::string out;
	out.reserve(p.size());
	for (size_t i = 0; i < p.size(); i++) {
		auto c = static_cast<unsigned char>(p[i]);
		if (c == '%') {
			int b = escaped(p, i);
			if (b < 0)
				return TargetProblem{TargetProblem::Malformed, "a '%' not followed by two hex digits"};
			i += 2;
			if (unreserved(static_cast<unsigned char>(b)))
				out += static_cast<char>(b);
			else if (const char* name = forbidden_encoded(b, false))
				return refused(fmt::format("an encoded {} (%{:02X})", name, b));
			else
				append_escape(out, static_cast<unsigned char>(b));
			continue;
		}
		if (c == '\\')
			return refused("a '\\' (servers differ on whether it separates segments)");
		if (c == '#')
			return TargetProblem{TargetProblem::Malformed, "a '#' (a fragment is never sent)"};
		if (c < 0x20 || c == 0x7f)
			return TargetProblem{TargetProblem::Malformed, fmt::format("a control byte (0x{:02X})", c)};
		if (path_char(c))
			out += static_cast<char>(c);
		else
			append_escape(out, c);
	}
	// "%25" and two hex digits in what goes upstream: a second decoding
	// (a framework's, a proxy's behind the origin) makes them one byte.
	for (size_t j = out.find("%25"); j != std::string::npos; j = out.find("%25", j + 1)) {
		int inner = -1;
		if (j + 4 < out.size()) {
			int hi = hex_value(out[j + 3]), lo = hex_value(out[j + 4]);
			inner = hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
		}
		if (const char* name = forbidden_encoded(inner, true))
			return refused(fmt::format("a double-encoded {}", name));
	}
	return out;
}

}  // namespace

int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool is_token_char(unsigned char c)
{
	static constexpr std::string_view kExtra = "!#$%&'*+-.^_`|~";
	return std::isalnum(c) != 0 || kExtra.find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s)
{
	return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return is_token_char(c); });
}

std::optional<std::string> path_problem(std::string_view path)
{
	if (path.empty() || path.front() != '/')
		return "it does not start with '/'";
	size_t start = 1;
	for (size_t i = 1; i <= path.size(); i++) {
		if (i < path.size() && path[i] != '/')
			continue;
		std::string_view seg = path.substr(start, i - start);
		std::string_view bare = seg.substr(0, seg.find(';'));
		if (bare == "." || bare == "..")
			return fmt::format("a '{}' segment", bare);
		if (seg.empty() && i < path.size())
			return std::string("an empty segment ('//')");
		start = i + 1;
	}
	return std::nullopt;
}

std::string encode_component(std::string_view bytes)
{
	std::string out;
	out.reserve(bytes.size());
	for (unsigned char c : bytes) {
		if (unreserved(c))
			out += static_cast<char>(c);
		else
			append_escape(out, c);
	}
	return out;
}

std::string Target::serialized() const
{
	std::string s = path;
	if (!has_query)
		return s;
	s += '?';
	for (size_t i = 0; i < query.size(); i++) {
		if (i > 0)
			s += '&';
		s += encode_component(query[i].name);
		if (query[i].has_value) {
			s += '=';
			s += encode_component(query[i].value);
		}
	}
	return s;
}

namespace {

// A query component, '+' a space and every %XX decoded.
Result<std::string, TargetProblem> decode_component(std::string_view s)
{
	std::string out;
	out.reserve(s.size());
	for (size_t i = 0; i < s.size(); i++) {
		if (s[i] == '+') {
			out += ' ';
		} else if (s[i] == '%') {
			int b = escaped(s, i);
			if (b < 0)
				return TargetProblem{TargetProblem::Malformed,
						     "a '%' not followed by two hex digits in the query"};
			if (b == 0)
				return refused("an encoded NUL (%00) in the query");
			out += static_cast<char>(b);
			i += 2;
		} else if (auto c = static_cast<unsigned char>(s[i]); c < 0x20 || c == 0x7f) {
			return TargetProblem{TargetProblem::Malformed,
					     fmt::format("a control byte (0x{:02X}) in the query", c)};
		} else {
			out += s[i];
		}
	}
	return out;
}

}  // namespace

Result<Target, TargetProblem> canonical_target(std::string_view t)
{
	if (t.empty() || t.front() != '/')
		return TargetProblem{TargetProblem::Malformed, "the target is not a path starting with '/'"};
	Target out;
	size_t q = t.find('?');
	auto path = canonical_bytes(t.substr(0, q));
	if (!path)
		return path.rejection();
	if (auto problem = path_problem(*path))
		return refused(*problem);
	out.path = std::move(*path);
	if (q == std::string_view::npos)
		return out;
	out.has_query = true;
	std::string_view query = t.substr(q + 1);
	if (query.find('#') != std::string_view::npos)
		return TargetProblem{TargetProblem::Malformed, "a '#' (a fragment is never sent)"};
	size_t start = 0;
	while (start <= query.size()) {
		size_t end = query.find('&', start);
		if (end == std::string_view::npos)
			end = query.size();
		std::string_view piece = query.substr(start, end - start);
		start = end + 1;
		if (piece.empty())
			continue;
		size_t eq = piece.find('=');
		auto name = decode_component(piece.substr(0, eq));
		if (!name)
			return name.rejection();
		QueryParam p;
		p.name = std::move(*name);
		p.has_value = eq != std::string_view::npos;
		if (p.has_value) {
			auto value = decode_component(piece.substr(eq + 1));
			if (!value)
				return value.rejection();
			p.value = std::move(*value);
		}
		out.query.push_back(std::move(p));
	}
	return out;
}

}  // namespace airlock::url
