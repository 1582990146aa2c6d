// `airlock policy check`, `show` and `suggest`: policy files judged and
// explained without a kernel.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "net/address.h"
#include "policy/compile.h"
#include "policy/dnsname.h"
#include "policy/policy.h"
#include "policy/suggest.h"

namespace airlock {

namespace {

// An entry's port ranges, in the order the kernel tries them.
void print_ranges(const al_rule_set& rs)
{
	for (uint32_t i = 0; i < rs.count && i < AL_MAX_RANGES; i++) {
		const al_range& r = rs.ranges[i];
		std::string protos;
		if (r.proto_mask & AL_PROTO_TCP)
			protos += "tcp ";
		if (r.proto_mask & AL_PROTO_UDP)
			protos += "udp ";
		if (r.proto_mask & AL_PROTO_ICMP)
			protos += "icmp ";
		fmt::print("    {} ports {}-{} {}(rule {})\n",
			   r.action == AL_ACTION_ALLOW      ? "allow   "
			   : r.action == AL_ACTION_REDIRECT ? "redirect"
							    : "deny    ",
			   r.port_lo, r.port_hi, protos, r.rule);
	}
}

int cmd_policy_check(const std::vector<std::string>& files)
{
	int bad = 0;
	for (const auto& f : files) {
		auto res = parse_policy_file(f);
		std::vector<PolicyError> errors = res ? std::vector<PolicyError>{} : res.rejection().errors;
		if (res) {
			auto c = compile_policy(*res, 1);
			if (!c)
				errors = c.rejection().errors;
		}
		for (const auto& e : errors)
			fmt::print(stderr, "{}\n", e.str());
		if (errors.empty())
			fmt::print("{}: ok ({} rules)\n", f, res->rules.size());
		else
			bad++;
	}
	return bad ? kExitFailure : kExitOk;
}

int cmd_policy_show(const std::string& file)
{
	auto res = parse_policy_file(file);
	if (!res) {
		for (const auto& e : res.rejection().errors)
			fmt::print(stderr, "{}\n", e.str());
		return kExitFailure;
	}
	auto c = compile_policy(*res, 1);
	if (!c) {
		for (const auto& e : c.rejection().errors)
			fmt::print(stderr, "{}\n", e.str());
		return kExitFailure;
	}
	const Policy& p = *res;
	fmt::print("policy {} mode {} on_violation {}\n", p.name, to_string(p.mode), to_string(p.on_violation));
	// Where each rule is decided: in the kernel alone, or (redirects, the
	// SNI gate) by the proxy the kernel hands the connection to.
	for (const auto& r : p.rules)
		fmt::print("  rule {}: {} [{}{}]\n", r.index, describe(r),
			   r.through_proxy() ? "proxy"
			   : r.to_target()   ? "kernel, the connect rewritten to the target"
					     : "kernel",
			   r.budget_egress_bytes ? ", budget counted in the kernel" : "");
	if (p.world) {
		fmt::print(
			"world: records {}/SANDBOX.jsonl, request bodies up to {} bytes, dns {}, {} canned response{}\n",
			p.world->records_dir, p.world->max_body_bytes,
			p.world->synthesize_dns ? "synthesized (198.18.0.0/15, nothing leaves)" : "to the resolvers",
			p.world->responses.size(), p.world->responses.size() == 1 ? "" : "s");
	}
	fmt::print("kernel entries ({}), first matching range decides:\n", c->prefixes.size());
	for (const auto& e : c->prefixes) {
		Address a = from_raw(static_cast<uint8_t>(e.key.family), e.key.addr);
		fmt::print("  {}/{}\n", format_address(a), e.key.prefixlen - AL_LPM_FIXED_BITS);
		print_ranges(e.value);
	}
	fmt::print("name entries ({}), the most specific name decides, then the first matching range:\n",
		   c->names.size());
	for (const auto& e : c->names) {
		auto name = name_from_key(e.key.name, e.value.name_len);
		bool wildcard = e.value.flags & AL_RS_WILDCARD;
		fmt::print("  {}{}{}\n", wildcard ? "*." : "", name ? *name : "?",
			   (e.value.flags & AL_RS_QUERY) ? "" : " (queries denied)");
		print_ranges(e.value);
	}
	fmt::print("unix entries ({}), an exact path, else the longest prefix; none: deny{}:\n", c->unix_rules.size(),
		   allows_outside_abstract(p) ? ""
					      : " (abstract names: the sandbox's own, where Landlock scopes them)");
	for (const auto& e : c->unix_rules) {
		const char* action = e.value.action == AL_ACTION_ALLOW    ? "allow"
				     : e.value.action == AL_ACTION_REFUSE ? "refuse"
									  : "deny";
		bool abstract = (e.prefix ? e.prefix_key.kind : e.exact_key.kind) == AL_UNIX_ABSTRACT;
		const uint8_t* bytes = e.prefix ? e.prefix_key.path : e.exact_key.path;
		size_t len = e.prefix ? (e.prefix_key.prefixlen - AL_UNIX_KEY_FIXED_BITS) / 8 : e.exact_key.len;
		UnixTarget u{abstract, e.prefix, std::string(reinterpret_cast<const char*>(bytes), len)};
		fmt::print("  {} {} ({})\n", action, format_unix(u),
			   e.value.rule == AL_RULE_NONE ? std::string("built in: a probe, not a violation")
							: fmt::format("rule {}", e.value.rule));
	}
	const DnsPolicy& d = p.dns;
	if (p.world && p.world->synthesize_dns) {
		fmt::print(
			"dns: every query (port 53, UDP and TCP, any address) answered by the world's recorder; none leaves\n");
		return kExitOk;
	}
	std::string resolvers;
	for (const auto& a : d.resolvers)
		resolvers += (resolvers.empty() ? "" : ", ") + format_address(a);
	std::string types;
	for (const auto& t : d.types)
		types += (types.empty() ? "" : ", ") + t;
	fmt::print("dns: resolvers [{}] types [{}] tcp {} names <= {} labels <= {} budget {}/s burst {} ttl {}-{} s\n",
		   resolvers, types, d.tcp ? "on" : "off", d.max_name_length, d.max_label_length, d.queries_per_second,
		   d.query_burst, d.min_ttl, d.max_ttl);
	if (!d.edns) {
		fmt::print("dns edns: off (no OPT record)\n");
	} else {
		std::string opts, sizes;
		for (const auto& o : d.edns_options)
			opts += fmt::format("{}{} <= {} bytes", opts.empty() ? "" : ", ", o.code, o.max_length);
		for (auto sz : d.edns_udp_sizes)
			sizes += fmt::format("{}{}", sizes.empty() ? "" : ", ", sz);
		fmt::print("dns edns: options [{}] udp sizes [{}] DO {}\n", opts, sizes,
			   d.edns_dnssec_ok ? "allowed" : "refused");
	}
	return kExitOk;
}

int cmd_policy_suggest(const std::string& audit_log, const SuggestOptions& o)
{
	std::ifstream in(audit_log);
	if (!in) {
		fmt::print(stderr, "{}: cannot read\n", audit_log);
		return kExitFailure;
	}
	std::vector<nlohmann::json> lines;
	std::string line;
	size_t bad = 0;
	while (std::getline(in, line)) {
		auto j = nlohmann::json::parse(line, nullptr, false);
		if (j.is_discarded())
			bad++;
		else
			lines.push_back(std::move(j));
	}
	Suggestion s = suggest_policy(lines, o);
	if (bad)
		fmt::print(stderr, "{}: {} lines are not JSON and were skipped\n", audit_log, bad);
	for (const auto& n : s.notes)
		fmt::print(stderr, "{}: {}\n", audit_log, n);
	if (s.policy["rules"].empty() && s.names == 0)
		fmt::print(stderr, "{}: no flows{} in the log; was the run in mode audit?\n", audit_log,
			   o.sandbox.empty() ? "" : " of sandbox " + o.sandbox);
	fmt::print("{}\n", s.policy.dump(2));
	return kExitOk;
}

}  // namespace

void register_policy(CLI::App& app, Globals& g)
{
	auto* policy = app.add_subcommand("policy", "Validate and inspect policy files");
	policy->require_subcommand(1);

	auto files = std::make_shared<std::vector<std::string>>();
	auto* check = policy->add_subcommand("check", "Validate policy files: exit 0, or one line per error");
	check->add_option("files", *files, "Policy files")->required();
	on_parsed(check, g, [files] { return cmd_policy_check(*files); });

	auto file = std::make_shared<std::string>();
	auto* show = policy->add_subcommand("show", "Print the rules and the kernel entries a policy compiles to");
	show->add_option("file", *file, "Policy file")->required();
	on_parsed(show, g, [file] { return cmd_policy_show(*file); });

	auto log = std::make_shared<std::string>();
	auto o = std::make_shared<SuggestOptions>();
	auto* suggest = policy->add_subcommand(
		"suggest", "Print a policy that allows exactly what an audit-mode run used (from its audit log)");
	suggest->add_option("audit_log", *log, "Audit log of the run")->required();
	suggest->add_option("--sandbox", o->sandbox, "Only this sandbox's lines");
	suggest->add_option("--name", o->name, "Name of the suggested policy")->capture_default_str();
	on_parsed(suggest, g, [log, o] { return cmd_policy_suggest(*log, *o); });
}

}  // namespace airlock
