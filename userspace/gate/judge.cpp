#include "gate/judge.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/text.h"

namespace airlock::gate {

using nlohmann::json;

bool glob_match(std::string_view g, std::string_view s)
{
	// Iterative, with one backtrack point: the last '*' seen.
	size_t gi = 0, si = 0, star = std::string_view::npos, mark = 0;
	while (si < s.size()) {
		if (gi < g.size() && g[gi] == '*') {
			star = gi++;
			mark = si;
		} else if (gi < g.size() && g[gi] == s[si]) {
			gi++;
			si++;
		} else if (star != std::string_view::npos) {
			gi = star + 1;
			si = ++mark;
		} else {
			return false;
		}
	}
	while (gi < g.size() && g[gi] == '*')
		gi++;
	return gi == g.size();
}

bool RateTable::take(size_t rule, size_t entry, const HttpRate& rate, Clock::time_point now)
{
	auto [it, fresh] = buckets_.try_emplace({rule, entry});
	Bucket& b = it->second;
	if (fresh || !(b.rate == rate)) {
		b.rate = rate;
		b.tokens = rate.count;
		b.at = now;
	}
	double per_token = static_cast<double>(rate.per_seconds) / rate.count;  // seconds
	double elapsed = std::chrono::duration<double>(now - b.at).count();
	b.tokens = std::min<double>(rate.count, b.tokens + std::max(0.0, elapsed) / per_token);
	b.at = now;
	if (b.tokens < 1.0)
		return false;
	b.tokens -= 1.0;
	return true;
}

namespace {

bool path_matches(const HttpEntry& e, const std::string& path)
{
	if (!e.prefix)
		return path == e.path;
	return path.size() >= e.path.size() && path.compare(0, e.path.size(), e.path) == 0;
}

std::optional<std::string> query_mismatch(const HttpEntry& e, const url::Target& t)
{
	for (const HttpQueryRule& q : e.query) {
		bool seen = false;
		for (const url::QueryParam& p : t.query) {
			if (p.name != q.name)
				continue;
			seen = true;
			if (std::find(q.values.begin(), q.values.end(), p.value) == q.values.end())
				return fmt::format("query parameter '{}' is '{}', not one of the entry's",
						   printable(q.name), printable(p.value));
		}
		if (!seen)
			return fmt::format("query parameter '{}' is missing", printable(q.name));
	}
	if (e.query_only)
		for (const url::QueryParam& p : t.query)
			if (std::none_of(e.query.begin(), e.query.end(),
					 [&](const HttpQueryRule& q) { return q.name == p.name; }))
				return fmt::format("query parameter '{}' is not one the entry names",
						   printable(p.name));
	return std::nullopt;
}

// A string a field may be: no control byte (a server in C reads a NUL as
// its end).
bool plain_string(const json& v)
{
	if (!v.is_string())
		return false;
	const auto& s = v.get_ref<const std::string&>();
	return std::none_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

std::optional<std::string> field_mismatch(const HttpJsonRule& r, const json& doc)
{
	json::json_pointer ptr(r.pointer);
	if (!doc.contains(ptr))
		return fmt::format("body field {} is missing", r.pointer);
	const json& v = doc.at(ptr);
	auto matches = [&](const json& x) {
		return plain_string(x) && glob_match(r.glob, x.get_ref<const std::string&>());
	};
	if (v.is_array()) {
		for (const json& x : v)
			if (!matches(x))
				return fmt::format("body field {} has {}, which is not '{}'", r.pointer,
						   printable(x.dump(-1, ' ', true)), printable(r.glob));
		return std::nullopt;
	}
	if (!matches(v))
		return fmt::format("body field {} is {}, which is not '{}'", r.pointer,
				   printable(v.dump(-1, ' ', true)), printable(r.glob));
	return std::nullopt;
}

// The body as JSON, once per request: a repeated key, invalid UTF-8 or a
// media type that is not JSON (a server would read it as something else)
// and no entry with "json" matches.
struct Body {
	explicit Body(const Request& r) : req(r) {}
	const Request& req;
	bool tried = false;
	std::optional<json> doc;
	std::string problem;

	const json* get()
	{
		if (tried)
			return doc ? &*doc : nullptr;
		tried = true;
		const std::string& ct = req.content_type;
		bool json_type = ct == "application/json" ||
				 (ct.size() > 5 && ct.compare(ct.size() - 5, 5, "+json") == 0 &&
				  ct.rfind("application/", 0) == 0);
		if (!json_type) {
			problem = fmt::format("the body's type is '{}', not application/json", printable(ct));
			return nullptr;
		}
		std::vector<PolicyError> errors;
		auto parsed = parse_json_checked(req.body, "body", errors);
		if (!parsed || !errors.empty()) {
			problem = "the body is not JSON: " +
				  (errors.empty() ? std::string("invalid") : errors.front().message);
			return nullptr;
		}
		doc = std::move(parsed);
		return &*doc;
	}
};

std::optional<std::string> mismatch(const HttpEntry& e, const Request& r, Body& body)
{
	if (std::find(e.methods.begin(), e.methods.end(), r.method) == e.methods.end())
		return fmt::format("method {} is not one of the entry's", printable(r.method));
	if (!path_matches(e, r.target.path))
		return fmt::format("path {} is not {}{}", printable(r.target.path), e.path, e.prefix ? "*" : "");
	if (auto q = query_mismatch(e, r.target))
		return q;
	if (e.max_body_bytes && r.body.size() > *e.max_body_bytes)
		return fmt::format("the body's {} bytes are more than the entry's {}", r.body.size(),
				   *e.max_body_bytes);
	if (e.json.empty())
		return std::nullopt;
	const json* doc = body.get();
	if (!doc)
		return body.problem;
	for (const HttpJsonRule& j : e.json)
		if (auto m = field_mismatch(j, *doc))
			return m;
	return std::nullopt;
}

}  // namespace

std::optional<std::string> entry_mismatch(const HttpEntry& e, const Request& r)
{
	Body body(r);
	return mismatch(e, r, body);
}

Verdict judge(const HttpGate& g, size_t rule, const Request& r, RateTable& rates, RateTable::Clock::time_point now)
{
	Body body(r);
	// The first entry with the request's method and path that did not
	// match: the nearest miss, named in the denial.
	std::optional<std::pair<size_t, std::string>> near;
	for (size_t i = 0; i < g.entries.size(); i++) {
		const HttpEntry& e = g.entries[i];
		auto m = mismatch(e, r, body);
		if (!m) {
			Verdict v;
			v.entry = i;
			if (e.rate && !rates.take(rule, i, *e.rate, now)) {
				v.kind = Verdict::Limited;
				v.reason = "http-rate";
				v.detail = fmt::format("entry {}: more than {} requests per {}", i, e.rate->count,
						       e.rate->per_seconds == 1    ? "second"
						       : e.rate->per_seconds == 60 ? "minute"
										   : "hour");
				return v;
			}
			v.kind = Verdict::Allow;
			return v;
		}
		bool method_path = std::find(e.methods.begin(), e.methods.end(), r.method) != e.methods.end() &&
				   path_matches(e, r.target.path);
		if (method_path && !near)
			near.emplace(i, std::move(*m));
	}
	Verdict v;
	v.kind = Verdict::Deny;
	v.reason = "http-deny";
	v.detail = near ? fmt::format("entry {}: {}", near->first, near->second)
			: fmt::format("no entry allows {} {}", printable(r.method), printable(r.target.path));
	return v;
}

}  // namespace airlock::gate
