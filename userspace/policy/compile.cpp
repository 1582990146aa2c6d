#include "policy/compile.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace airlock {

namespace {

// Precedence: longer prefix first, then deny, then rule order.
bool precedes(const Rule* a, const Rule* b)
{
	if (a->cidr->prefix_len != b->cidr->prefix_len)
		return a->cidr->prefix_len > b->cidr->prefix_len;
	if (a->action != b->action)
		return a->action == Action::Deny;
	return a->index < b->index;
}

bool port_matches(const Rule& r, uint16_t port)
{
	if (r.ports.empty())
		return true;
	return std::any_of(r.ports.begin(), r.ports.end(),
			   [&](const PortRange& pr) { return pr.lo <= port && port <= pr.hi; });
}

// A range that an earlier one covers entirely can never be the first match.
bool shadowed(const std::vector<al_range>& earlier, const al_range& r)
{
	return std::any_of(earlier.begin(), earlier.end(), [&](const al_range& e) {
		return e.port_lo <= r.port_lo && r.port_hi <= e.port_hi && (r.proto_mask & ~e.proto_mask) == 0;
	});
}

}  // namespace

CompileResult compile_policy(const Policy& p, uint32_t policy_id)
{
	CompileResult res;
	CompiledPolicy c;
	if (p.mode == Mode::Audit)
		c.sandbox_flags |= AL_SB_AUDIT;
	switch (p.on_violation) {
	case OnViolation::Deny: c.on_violation = AL_ON_VIOLATION_DENY; break;
	case OnViolation::Freeze: c.on_violation = AL_ON_VIOLATION_FREEZE; break;
	case OnViolation::Kill: c.on_violation = AL_ON_VIOLATION_KILL; break;
	}

	std::vector<const Rule*> cidr_rules;
	for (const auto& r : p.rules) {
		// A ping socket may exist if any destination, by address or by name, may be pinged.
		if (r.action == Action::Allow && (r.proto_mask & AL_PROTO_ICMP))
			c.sandbox_flags |= AL_SB_ALLOW_ICMP;
		if (r.cidr)
			cidr_rules.push_back(&r);  // domain rules open addresses when DNS answers are learned
	}

	// Rules by prefix. Every prefix that contains a given one is one of its
	// masks, so the covering rules are found by walking the lengths down
	// instead of testing every rule against every prefix: a blocklist of
	// thousands of /32s compiles in milliseconds, not minutes.
	std::map<std::pair<uint8_t, Address>, std::vector<const Rule*>> by_prefix;
	std::vector<Cidr> prefixes;  // in first-seen order, as the entries are emitted
	for (const Rule* r : cidr_rules) {
		auto& rules = by_prefix[{r->cidr->prefix_len, r->cidr->addr}];
		if (rules.empty())
			prefixes.push_back(*r->cidr);
		rules.push_back(r);
	}

	for (const Cidr& prefix : prefixes) {
		std::vector<const Rule*> covering;
		for (int len = prefix.prefix_len; len >= 0; len--) {
			auto it = by_prefix.find({static_cast<uint8_t>(len), mask(prefix.addr, len)});
			if (it != by_prefix.end())
				covering.insert(covering.end(), it->second.begin(), it->second.end());
		}
		std::sort(covering.begin(), covering.end(), precedes);

		std::vector<al_range> ranges;
		for (const Rule* r : covering) {
			std::vector<PortRange> ports = r->ports;
			if (ports.empty())
				ports.push_back({0, 65535});
			for (const auto& pr : ports) {
				al_range range{};
				range.port_lo = pr.lo;
				range.port_hi = pr.hi;
				range.proto_mask = r->proto_mask;
				range.action = r->action == Action::Allow ? AL_ACTION_ALLOW : AL_ACTION_DENY;
				range.rule = static_cast<uint16_t>(r->index);
				if (!shadowed(ranges, range))
					ranges.push_back(range);
			}
		}
		if (ranges.size() > AL_MAX_RANGES) {
			res.errors.push_back({p.source, "rules",
					      fmt::format("{} needs {} port ranges once less specific rules are folded in; "
							  "the kernel holds {}",
							  format_cidr(prefix), ranges.size(), AL_MAX_RANGES)});
			continue;
		}
		CompiledPrefix e{};
		e.key.prefixlen = AL_LPM_FIXED_BITS + prefix.prefix_len;
		e.key.policy_id = policy_id;
		e.key.family = prefix.addr.family;
		std::copy(prefix.addr.bytes.begin(), prefix.addr.bytes.end(), e.key.addr);
		e.value.count = static_cast<uint32_t>(ranges.size());
		std::copy(ranges.begin(), ranges.end(), e.value.ranges);
		c.prefixes.push_back(e);
	}
	if (p.rules.size() >= AL_RULE_NONE)
		res.errors.push_back({p.source, "rules", fmt::format("{} rules; at most {}", p.rules.size(), AL_RULE_NONE - 1)});
	if (c.prefixes.size() > AL_MAX_PREFIXES / 4)
		res.errors.push_back({p.source, "rules",
				      fmt::format("{} distinct prefixes; one sandbox may use at most {}", c.prefixes.size(),
						  AL_MAX_PREFIXES / 4)});
	if (res.errors.empty())
		res.compiled = std::move(c);
	return res;
}

KernelDecision kernel_lookup(const CompiledPolicy& c, uint32_t policy_id, const Address& dst, uint16_t port,
			     uint8_t proto_bit)
{
	Address a = normalise(dst);
	const CompiledPrefix* best = nullptr;
	for (const auto& e : c.prefixes) {
		if (e.key.policy_id != policy_id || e.key.family != a.family)
			continue;
		Cidr cidr{from_raw(static_cast<uint8_t>(e.key.family), e.key.addr),
			  static_cast<uint8_t>(e.key.prefixlen - AL_LPM_FIXED_BITS)};
		if (contains(cidr, a) && (!best || e.key.prefixlen > best->key.prefixlen))
			best = &e;
	}
	if (!best)
		return {};
	for (uint32_t i = 0; i < best->value.count && i < AL_MAX_RANGES; i++) {
		const al_range& r = best->value.ranges[i];
		if (!(r.proto_mask & proto_bit) || port < r.port_lo || port > r.port_hi)
			continue;
		return {r.action == AL_ACTION_ALLOW, r.rule};
	}
	return {};
}

KernelDecision reference_decision(const Policy& p, const Address& dst, uint16_t port, uint8_t proto_bit)
{
	Address a = normalise(dst);
	const Rule* best = nullptr;
	for (const auto& r : p.rules) {
		if (!r.cidr || !contains(*r.cidr, a) || !(r.proto_mask & proto_bit) || !port_matches(r, port))
			continue;
		if (!best || precedes(&r, best))
			best = &r;
	}
	if (!best)
		return {};
	return {best->action == Action::Allow, static_cast<uint16_t>(best->index)};
}

}  // namespace airlock
