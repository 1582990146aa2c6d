// The HTTP gate's request path from arbitrary bytes: a request target read
// into its canonical form (net/url.h), then judged (gate/judge.h), against
// a second URL parser (Boost.URL) where one form can be read by both.
//
// Properties, for every target the gate accepts:
//  - the form is a fixed point: what goes upstream reads back to itself;
//  - Boost.URL reads what goes upstream as an origin-form target (RFC 3986)
//    with the same path, no '.' or '..' segment once decoded, no segment
//    holding a '/', '\' or NUL once decoded, and the same query parameters
//    as the gate judged (names and values, '+' a space, in order);
//  - a prefix entry allows only paths below its prefix, by whole segments;
//    an allowed request's every "action" value is one its entry lists;
//  - messages are one line.
// And for every target it refuses: a reason, of a known kind.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include "fuzz_check.h"
#include "gate/judge.h"
#include "net/url.h"
#include "policy/policy.h"

using namespace airlock;
using airlock::fuzz::broken;
using airlock::fuzz::check;

namespace {

const HttpGate& wiki_gate()
{
	static const HttpGate g = [] {
		auto p = parse_policy_text(R"({"version": 1, "name": "f", "rules": [{"action": "allow",
		    "domain": "wiki.example.org", "protocol": "tcp", "http": [
		      {"methods": ["GET"], "path": "/wiki/*"},
		      {"methods": ["GET"], "path": "/w/index.php", "query": {"action": ["view", "raw"]}},
		      {"methods": ["GET"], "path": "/api", "query": {"action": ["query"]}, "query_only": true}
		    ]}]})",
					   "fuzz");
		if (!p)
			broken("the fuzz policy reads", p.rejection().first());
		return *p->rules.at(0).http;
	}();
	return g;
}

void compare_with_boost(const url::Target& t, const std::string& upstream)
{
	auto u = boost::urls::parse_origin_form(upstream);
	check(u.has_value(), "Boost.URL reads what goes upstream", upstream);
	check(std::string(u->encoded_path()) == t.path, "Boost.URL reads the same path", upstream);
	for (auto seg : u->segments()) {
		check(seg != "." && seg != "..", "no dot segment once decoded", upstream);
		check(seg.find_first_of(std::string_view("/\\\0", 3)) == std::string::npos,
		      "no segment holds '/', '\\' or NUL once decoded", upstream);
	}
	check(u->has_query() == t.has_query, "Boost.URL sees the query the gate saw", upstream);
	if (!t.has_query)
		return;
	boost::urls::encoding_opts plus;
	plus.space_as_plus = true;
	auto params = u->params(plus);
	size_t i = 0;
	for (auto p : params) {
		// An empty query ("/x?") is one empty parameter to Boost.URL; the
		// gate writes no empty piece otherwise.
		if (p.key.empty() && !p.has_value && t.query.empty())
			continue;
		check(i < t.query.size(), "Boost.URL reads no more parameters", upstream);
		check(p.key == t.query[i].name && p.has_value == t.query[i].has_value &&
			      (!p.has_value || p.value == t.query[i].value),
		      "Boost.URL reads each parameter as the gate judged it", upstream);
		i++;
	}
	check(i == t.query.size(), "Boost.URL reads every parameter", upstream);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	std::string_view in(reinterpret_cast<const char*>(data), size);
	auto r = url::canonical_target(in);
	if (!r) {
		const url::TargetProblem& p = r.rejection();
		check(p.kind == url::TargetProblem::Malformed || p.kind == url::TargetProblem::Path, "a known kind");
		check(!p.message.empty() && fuzz::one_line(p.message), "a refusal says why, on one line", p.message);
		return 0;
	}
	const url::Target& t = *r;
	std::string upstream = t.serialized();
	auto again = url::canonical_target(upstream);
	check(again.ok(), "what goes upstream is accepted again", upstream);
	check(*again == t, "the canonical form is a fixed point", upstream);
	check(!url::path_problem(t.path), "the path is canonical", t.path);
	compare_with_boost(t, upstream);

	gate::RateTable rates;
	gate::Request req{"GET", "wiki.example.org", t, "", ""};
	gate::Verdict v = gate::judge(wiki_gate(), 0, req, rates, gate::RateTable::Clock::now());
	check(fuzz::one_line(v.detail), "a verdict's detail is one line", v.detail);
	if (v.kind != gate::Verdict::Allow)
		return 0;
	if (*v.entry == 0)
		check(t.path.rfind("/wiki/", 0) == 0, "a prefix allows only what is below it", t.path);
	else
		check(t.path == (*v.entry == 1 ? "/w/index.php" : "/api"), "an exact path is the path", t.path);
	if (*v.entry == 0)
		return 0;
	bool seen = false;
	for (const url::QueryParam& q : t.query) {
		if (q.name == "action") {
			seen = true;
			bool listed = *v.entry == 1 ? q.value == "view" || q.value == "raw" : q.value == "query";
			check(listed, "every action value is one the entry lists", q.value);
		} else {
			check(*v.entry != 2, "query_only allows no other parameter", q.name);
		}
	}
	check(seen, "a required parameter is there", upstream);
	return 0;
}
