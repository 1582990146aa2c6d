#include "policy/compile.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "policy/dnsname.h"

namespace airlock {

namespace {

// At equal specificity the safer action wins: deny, then redirect (the
// traffic stays on the machine), then allow.
int action_rank(Action a)
{
	return a == Action::Deny ? 2 : a == Action::Redirect ? 1 : 0;
}

// Precedence: longer prefix first, then the action's rank, then rule order.
bool precedes(const Rule* a, const Rule* b)
{
	if (a->cidr->prefix_len != b->cidr->prefix_len)
		return a->cidr->prefix_len > b->cidr->prefix_len;
	if (action_rank(a->action) != action_rank(b->action))
		return action_rank(a->action) > action_rank(b->action);
	return a->index < b->index;
}

// An allow rule with a gate (SNI or HTTP) is a redirect to the kernel:
// its connects go to the proxy, which reads the ClientHello or the requests
// before it opens the way to the destination (its UDP, TCP-only rules, is
// refused).
uint8_t kernel_action(const Rule& r)
{
	if (r.action == Action::Allow && r.gated())
		return AL_ACTION_REDIRECT;
	return r.action == Action::Allow      ? AL_ACTION_ALLOW
	       : r.action == Action::Redirect ? AL_ACTION_REDIRECT
					      : AL_ACTION_DENY;
}

KernelDecision decision_of(uint8_t action, uint16_t rule)
{
	return KernelDecision{action == AL_ACTION_ALLOW, rule, action == AL_ACTION_REDIRECT};
}

KernelDecision decision_of(const Rule& r)
{
	return decision_of(kernel_action(r), static_cast<uint16_t>(r.index));
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

// Specificity of a domain rule: an exact name beats a wildcard, a longer
// wildcard a shorter one.
size_t name_rank(const Rule* r)
{
	return r->domain->size() * 2 + (r->wildcard ? 0 : 1);
}

bool name_precedes(const Rule* a, const Rule* b)
{
	if (name_rank(a) != name_rank(b))
		return name_rank(a) > name_rank(b);
	if (action_rank(a->action) != action_rank(b->action))
		return action_rank(a->action) > action_rank(b->action);
	return a->index < b->index;
}

// The ranges of rules already in precedence order, without those an
// earlier range covers entirely.
std::vector<al_range> ranges_of(const std::vector<const Rule*>& rules)
{
	std::vector<al_range> ranges;
	for (const Rule* r : rules) {
		std::vector<PortRange> ports = r->ports;
		if (ports.empty())
			ports.push_back({0, 65535});
		for (const auto& pr : ports) {
			al_range range{};
			range.port_lo = pr.lo;
			range.port_hi = pr.hi;
			range.proto_mask = r->proto_mask;
			range.action = kernel_action(*r);
			range.rule = static_cast<uint16_t>(r->index);
			if (!shadowed(ranges, range))
				ranges.push_back(range);
		}
	}
	return ranges;
}

// The names strictly above NAME: "a.b.c" -> "b.c", "c".
std::vector<std::string> parents_of(const std::string& name)
{
	std::vector<std::string> out;
	for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
		out.push_back(name.substr(dot + 1));
	return out;
}

void compile_names(const Policy& p, uint32_t policy_id, CompiledPolicy& c, std::vector<PolicyError>& errors)
{
	// Every rule that can cover a name sits at one of its parents: walk
	// those instead of testing every rule.
	std::map<std::pair<std::string, bool>, std::vector<const Rule*>> by_name;
	std::vector<std::pair<std::string, bool>> order;
	for (const auto& r : p.rules) {
		if (!r.domain)
			continue;
		if (r.domain->size() > AL_DNS_NAME_MAX) {
			errors.push_back({p.source, fmt::format("rules/{}/domain", r.index),
					  fmt::format("{} characters; the kernel matches names of at most {}",
						      r.domain->size(), AL_DNS_NAME_MAX)});
			continue;
		}
		auto& v = by_name[{*r.domain, r.wildcard}];
		if (v.empty())
			order.emplace_back(*r.domain, r.wildcard);
		v.push_back(&r);
	}
	for (const auto& [name, wildcard] : order) {
		std::vector<const Rule*> covering = by_name[{name, wildcard}];
		for (const auto& parent : parents_of(name)) {
			auto it = by_name.find({parent, true});
			if (it != by_name.end())
				covering.insert(covering.end(), it->second.begin(), it->second.end());
		}
		std::sort(covering.begin(), covering.end(), name_precedes);
		std::vector<al_range> ranges = ranges_of(covering);
		std::string shown = (wildcard ? "*." : "") + name;
		if (ranges.size() > AL_MAX_RANGES) {
			errors.push_back({p.source, "rules",
					  fmt::format("{} needs {} port ranges once less specific rules are folded in; "
						      "the kernel holds {}",
						      shown, ranges.size(), AL_MAX_RANGES)});
			continue;
		}
		auto bytes = name_key_bytes(name);
		CompiledName e{};
		e.key.prefixlen = AL_NAME_KEY_FIXED_BITS + 8 * static_cast<uint32_t>(bytes.size()) + (wildcard ? 0 : 1);
		e.key.policy_id = static_cast<uint16_t>(policy_id);
		std::copy(bytes.begin(), bytes.end(), e.key.name);
		if (!wildcard)
			e.key.name[bytes.size()] = AL_NAME_END;
		e.value.count = static_cast<uint32_t>(ranges.size());
		e.value.name_len = static_cast<uint16_t>(bytes.size());
		e.value.flags = wildcard ? AL_RS_WILDCARD : 0;
		// A query may leave for a name some range allows, or redirects
		// to a simulator (or to the world when its DNS goes to the
		// resolvers); a world that synthesizes answers keeps it in.
		bool world_answers = p.world && p.world->synthesize_dns;
		for (const auto& r : ranges) {
			bool world = r.action == AL_ACTION_REDIRECT && r.rule < p.rules.size() &&
				     p.rules[r.rule].redirect && p.rules[r.rule].redirect->world;
			if (r.action == AL_ACTION_ALLOW ||
			    (r.action == AL_ACTION_REDIRECT && !(world && world_answers)))
				e.value.flags |= AL_RS_QUERY;
		}
		std::copy(ranges.begin(), ranges.end(), e.value.ranges);
		c.names.push_back(e);
	}
	if (c.names.size() > AL_MAX_NAMES / 4)
		errors.push_back({p.source, "rules",
				  fmt::format("{} distinct domain names; one sandbox may use at most {}",
					      c.names.size(), AL_MAX_NAMES / 4)});
}

void compile_dns(const Policy& p, CompiledPolicy& c, std::vector<PolicyError>& errors)
{
	const DnsPolicy& d = p.dns;
	al_dns_policy& k = c.dns;
	k.flags = (d.tcp ? AL_DNS_TCP : 0) | (d.edns ? AL_DNS_EDNS : 0) |
		  (d.edns && d.edns_dnssec_ok ? AL_DNS_EDNS_DO : 0) |
		  (p.world && p.world->synthesize_dns ? AL_DNS_WORLD : 0);
	k.max_name_len = static_cast<uint16_t>(std::min<unsigned>(d.max_name_length, AL_DNS_NAME_MAX));
	k.max_label_len = static_cast<uint8_t>(d.max_label_length);
	k.min_ttl = d.min_ttl;
	k.max_ttl = d.max_ttl;
	k.query_interval_ns = 1000000000ull / d.queries_per_second;
	k.query_burst_ns = (d.query_burst - 1) * k.query_interval_ns;
	if (d.resolvers.size() > AL_DNS_MAX_RESOLVERS)
		errors.push_back({p.source, "dns/resolvers",
				  fmt::format("{} resolvers; at most {}", d.resolvers.size(), AL_DNS_MAX_RESOLVERS)});
	for (const auto& r : d.resolvers) {
		if (k.nresolvers >= AL_DNS_MAX_RESOLVERS)
			break;
		Address a = normalise(r);
		auto& slot = k.resolvers[k.nresolvers++];
		slot.family = a.family;
		std::copy(a.bytes.begin(), a.bytes.end(), slot.addr);
	}
	if (d.types.size() > AL_DNS_MAX_TYPES)
		errors.push_back(
			{p.source, "dns/types", fmt::format("{} types; at most {}", d.types.size(), AL_DNS_MAX_TYPES)});
	for (const auto& t : d.types) {
		auto num = dns_type_number(t);
		if (num && k.ntypes < AL_DNS_MAX_TYPES)
			k.types[k.ntypes++] = *num;
	}
	if (!d.edns)
		return;
	if (d.edns_options.size() > AL_DNS_MAX_EDNS_OPTS)
		errors.push_back({p.source, "dns/edns/options",
				  fmt::format("{} options; at most {}", d.edns_options.size(), AL_DNS_MAX_EDNS_OPTS)});
	for (const auto& o : d.edns_options)
		if (k.nedns_opts < AL_DNS_MAX_EDNS_OPTS)
			k.edns_opts[k.nedns_opts++] = {o.code, o.max_length};
	if (d.edns_udp_sizes.size() > AL_DNS_MAX_UDP_SIZES)
		errors.push_back({p.source, "dns/edns/udp_sizes",
				  fmt::format("{} sizes; at most {}", d.edns_udp_sizes.size(), AL_DNS_MAX_UDP_SIZES)});
	for (auto size : d.edns_udp_sizes)
		if (k.nudp_sizes < AL_DNS_MAX_UDP_SIZES)
			k.udp_sizes[k.nudp_sizes++] = size;
}

}  // namespace

namespace {

// At equal specificity: deny, then refuse, then allow.
int unix_action_rank(Action a)
{
	return a == Action::Deny ? 2 : a == Action::Refuse ? 1 : 0;
}

uint8_t unix_action(Action a)
{
	return a == Action::Allow ? AL_ACTION_ALLOW : a == Action::Refuse ? AL_ACTION_REFUSE : AL_ACTION_DENY;
}

// The built-in refusals as rules of their own (index AL_RULE_NONE), for
// the targets no rule of the policy names exactly as written.
std::vector<Rule> builtin_refusals(const Policy& p)
{
	std::vector<Rule> out;
	for (const auto& b : kBuiltinUnixRefusals) {
		std::string t = b.target;
		UnixTarget u{false, t.back() == '*', t.back() == '*' ? t.substr(0, t.size() - 1) : t};
		bool named = false;
		for (const auto& r : p.rules)
			named = named || (r.unix_target && *r.unix_target == u);
		if (named)
			continue;
		Rule r;
		r.index = AL_RULE_NONE;
		r.action = Action::Refuse;
		r.unix_target = u;
		out.push_back(r);
	}
	return out;
}

// One entry per distinct target: the first rule in precedence order (deny
// before allow, then the lower index) decides it.
void compile_unix(const Policy& p, uint32_t policy_id, CompiledPolicy& c, std::vector<PolicyError>& errors)
{
	std::map<std::tuple<bool, bool, std::string>, const Rule*> by_target;
	std::vector<std::tuple<bool, bool, std::string>> order;
	std::vector<Rule> builtins = builtin_refusals(p);
	std::vector<const Rule*> all;
	for (const auto& r : p.rules)
		all.push_back(&r);
	for (const auto& r : builtins)
		all.push_back(&r);
	for (const Rule* rp : all) {
		const Rule& r = *rp;
		if (!r.unix_target)
			continue;
		auto key = std::make_tuple(r.unix_target->abstract, r.unix_target->prefix, r.unix_target->bytes);
		auto [it, fresh] = by_target.try_emplace(key, &r);
		if (fresh)
			order.push_back(key);
		else if (unix_action_rank(r.action) > unix_action_rank(it->second->action))
			it->second = &r;
	}
	for (const auto& key : order) {
		const Rule* r = by_target[key];
		const UnixTarget& u = *r->unix_target;
		CompiledUnix e;
		e.prefix = u.prefix;
		e.value.rule = static_cast<uint16_t>(r->index);
		e.value.action = unix_action(r->action);
		uint8_t kind = u.abstract ? AL_UNIX_ABSTRACT : AL_UNIX_NAMED;
		if (u.prefix) {
			e.prefix_key.prefixlen = AL_UNIX_KEY_FIXED_BITS + 8 * static_cast<uint32_t>(u.bytes.size());
			e.prefix_key.policy_id = policy_id;
			e.prefix_key.kind = kind;
			std::copy(u.bytes.begin(), u.bytes.end(), e.prefix_key.path);
		} else {
			e.exact_key.policy_id = policy_id;
			e.exact_key.kind = kind;
			e.exact_key.len = static_cast<uint8_t>(u.bytes.size());
			std::copy(u.bytes.begin(), u.bytes.end(), e.exact_key.path);
		}
		c.unix_rules.push_back(e);
	}
	if (c.unix_rules.size() > AL_MAX_UNIX_RULES / 4)
		errors.push_back({p.source, "rules",
				  fmt::format("{} distinct unix targets; one sandbox may use at most {}",
					      c.unix_rules.size(), AL_MAX_UNIX_RULES / 4)});
}

}  // namespace

std::optional<KernelDecision> kernel_unix_lookup(const CompiledPolicy& c, bool abstract, const std::string& bytes)
{
	uint8_t kind = abstract ? AL_UNIX_ABSTRACT : AL_UNIX_NAMED;
	// Compared as the kernel compares them: bytes, not (signed) chars.
	const auto* name = reinterpret_cast<const uint8_t*>(bytes.data());
	const CompiledUnix* best = nullptr;
	uint32_t best_len = 0;
	for (const auto& e : c.unix_rules) {
		if (!e.prefix) {
			if (e.exact_key.kind == kind && e.exact_key.len == bytes.size() &&
			    std::equal(name, name + bytes.size(), e.exact_key.path))
				return KernelDecision{e.value.action == AL_ACTION_ALLOW, e.value.rule};
			continue;
		}
		uint32_t len = (e.prefix_key.prefixlen - AL_UNIX_KEY_FIXED_BITS) / 8;
		if (e.prefix_key.kind == kind && len <= bytes.size() &&
		    std::equal(name, name + len, e.prefix_key.path) && (!best || len > best_len)) {
			best = &e;
			best_len = len;
		}
	}
	if (!best)
		return std::nullopt;
	return KernelDecision{best->value.action == AL_ACTION_ALLOW, best->value.rule};
}

std::optional<KernelDecision> reference_unix_decision(const Policy& p, bool abstract, const std::string& bytes)
{
	const Rule* best = nullptr;
	auto rank = [](const Rule& r) {
		// Exact beats any prefix; a longer prefix beats a shorter one.
		return r.unix_target->prefix ? static_cast<long>(r.unix_target->bytes.size()) : 1000L;
	};
	std::vector<Rule> all = p.rules;
	for (auto& r : builtin_refusals(p))
		all.push_back(r);
	for (const auto& r : all) {
		if (!r.unix_target || r.unix_target->abstract != abstract)
			continue;
		const auto& t = r.unix_target->bytes;
		bool match = r.unix_target->prefix ? bytes.compare(0, t.size(), t) == 0 && bytes.size() >= t.size()
						   : bytes == t;
		if (!match)
			continue;
		if (!best || rank(r) > rank(*best) ||
		    (rank(r) == rank(*best) && unix_action_rank(r.action) > unix_action_rank(best->action)))
			best = &r;
	}
	if (!best)
		return std::nullopt;
	return KernelDecision{best->action == Action::Allow, static_cast<uint16_t>(best->index)};
}

Result<CompiledPolicy, PolicyRejection> compile_policy(const Policy& p, uint32_t policy_id)
{
	std::vector<PolicyError> errors;
	CompiledPolicy c;
	if (p.mode == Mode::Audit)
		c.sandbox_flags |= AL_SB_AUDIT;
	switch (p.on_violation) {
	case OnViolation::Deny:
		c.on_violation = AL_ON_VIOLATION_DENY;
		break;
	case OnViolation::Freeze:
		c.on_violation = AL_ON_VIOLATION_FREEZE;
		break;
	case OnViolation::Kill:
		c.on_violation = AL_ON_VIOLATION_KILL;
		break;
	}
	c.families = p.families;

	std::vector<const Rule*> cidr_rules;
	for (const auto& r : p.rules) {
		// A ping socket may exist if any destination, by address or by name, may be pinged.
		if (r.action == Action::Allow && (r.proto_mask & AL_PROTO_ICMP))
			c.sandbox_flags |= AL_SB_ALLOW_ICMP;
		if (r.action == Action::Allow && r.budget_egress_bytes) {
			c.budgets.emplace_back(static_cast<uint16_t>(r.index), *r.budget_egress_bytes);
			c.sandbox_flags |= AL_SB_BUDGETS;
		}
		if (r.action == Action::Redirect && r.redirect && !r.redirect->world) {
			al_target t{};
			t.family = r.redirect->address.family;
			t.port = r.redirect->port;
			std::copy(r.redirect->address.bytes.begin(), r.redirect->address.bytes.end(), t.addr);
			c.targets.emplace_back(static_cast<uint16_t>(r.index), t);
			c.sandbox_flags |= AL_SB_TARGETS;
		}
		if (r.cidr)
			cidr_rules.push_back(&r);  // domain rules: compile_names
	}
	if (c.targets.size() > AL_TARGETS_MAX / (2 * 4))
		errors.push_back({p.source, "rules",
				  fmt::format("{} redirects to HOST:PORT; a policy may have at most {}",
					      c.targets.size(), AL_TARGETS_MAX / (2 * 4))});

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

		std::vector<al_range> ranges = ranges_of(covering);
		if (ranges.size() > AL_MAX_RANGES) {
			errors.push_back({p.source, "rules",
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
		errors.push_back(
			{p.source, "rules", fmt::format("{} rules; at most {}", p.rules.size(), AL_RULE_NONE - 1)});
	if (c.prefixes.size() > AL_MAX_PREFIXES / 4)
		errors.push_back({p.source, "rules",
				  fmt::format("{} distinct prefixes; one sandbox may use at most {}", c.prefixes.size(),
					      AL_MAX_PREFIXES / 4)});
	compile_names(p, policy_id, c, errors);
	compile_unix(p, policy_id, c, errors);
	compile_dns(p, c, errors);
	if (!errors.empty())
		return PolicyRejection{std::move(errors)};
	return c;
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
		return decision_of(r.action, r.rule);
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
	return decision_of(*best);
}

const al_rule_set* kernel_name_lookup(const CompiledPolicy& c, const std::string& name)
{
	auto bytes = name_key_bytes(name);
	const CompiledName* best = nullptr;
	for (const auto& e : c.names) {
		bool wildcard = e.value.flags & AL_RS_WILDCARD;
		size_t len = e.value.name_len;
		// The kernel's two lookups: the exact entry, else the longest
		// wildcard strictly shorter than the name.
		if (len > bytes.size() || (wildcard && len == bytes.size()) || (!wildcard && len != bytes.size()))
			continue;
		if (!std::equal(bytes.begin(), bytes.begin() + len, e.key.name))
			continue;
		if (!best || e.key.prefixlen > best->key.prefixlen)
			best = &e;
	}
	return best ? &best->value : nullptr;
}

KernelDecision reference_name_decision(const Policy& p, const std::string& name, uint16_t port, uint8_t proto_bit)
{
	const Rule* best = nullptr;
	for (const auto& r : p.rules) {
		if (!r.domain || !domain_covers(*r.domain, r.wildcard, name) || !(r.proto_mask & proto_bit) ||
		    !port_matches(r, port))
			continue;
		if (!best || name_precedes(&r, best))
			best = &r;
	}
	if (!best)
		return {};
	return decision_of(*best);
}

}  // namespace airlock
