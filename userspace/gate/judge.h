#pragma once
// The HTTP gate's verdict on one request (docs/gate.md): the request in its
// one canonical form (net/url.h) against the entries of the rule it came
// under. The first entry that matches decides; none matching is a denial.
// A pure function of the request, the entries and the rate table: the
// connection that read the request (proxy/) sends or refuses by it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "net/url.h"
#include "policy/policy.h"

namespace airlock::gate {

// A request as the gate judges it, read whole (its body too).
struct Request {
	std::string method;
	std::string host;  // lower case, no trailing dot, no port
	url::Target target;
	std::string content_type;  // the media type, lower case, without parameters ("" none)
	std::string_view body;
};

// How often each entry has decided "allow", per (rule, entry): token
// buckets, full at first. One per sandbox (its proxy's).
class RateTable {
public:
	using Clock = std::chrono::steady_clock;
	// Takes one request's token; false: the entry's rate is spent.
	bool take(size_t rule, size_t entry, const HttpRate&, Clock::time_point now);
	// A reload: the buckets of entries whose rate changed start full.
	void forget() { buckets_.clear(); }

private:
	struct Bucket {
		HttpRate rate;
		double tokens = 0;
		Clock::time_point at;
	};
	std::map<std::pair<size_t, size_t>, Bucket> buckets_;
};

struct Verdict {
	enum Kind { Allow, Deny, Limited };
	Kind kind = Deny;
	std::optional<size_t> entry;  // the entry that decided (Allow, Limited)
	std::string reason;           // http-path, http-deny, http-rate ("" Allow)
	std::string detail;           // one line: why, for the 403 body and the audit line
};

// The verdict of the rule's entries on a request. rule: its index (for
// the rate table).
Verdict judge(const HttpGate&, size_t rule, const Request&, RateTable&, RateTable::Clock::time_point now);

// Whether an entry matches; why not, when it does not.
std::optional<std::string> entry_mismatch(const HttpEntry&, const Request&);

// '*' matches any run of bytes (none too); every other byte itself.
bool glob_match(std::string_view glob, std::string_view s);

}  // namespace airlock::gate
