#include "policy/suggest.h"

#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "net/address.h"
#include "policy/policy.h"

namespace airlock {

using nlohmann::json;

namespace {

std::string str(const json& j, const char* key)
{
	auto it = j.find(key);
	return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_connect_hook(const std::string& hook)
{
	return hook == "connect4" || hook == "connect6" || hook == "sendmsg4" || hook == "sendmsg6";
}

// Ports as a policy writes them: single ports and "lo-hi" runs.
nlohmann::ordered_json ports_json(const std::set<int>& ports)
{
	nlohmann::ordered_json out = nlohmann::ordered_json::array();
	for (auto it = ports.begin(); it != ports.end();) {
		int lo = *it, hi = lo;
		auto next = std::next(it);
		while (next != ports.end() && *next == hi + 1) {
			hi = *next;
			++next;
		}
		if (lo == hi)
			out.push_back(lo);
		else
			out.push_back(fmt::format("{}-{}", lo, hi));
		it = next;
	}
	return out;
}

bool is_unix_hook(const std::string& hook)
{
	return hook == "connect_unix" || hook == "sendmsg_unix";
}

// The audit log writes a unix address with every byte that is not printable
// ASCII, and the backslash itself, as \xNN; this gives the bytes back, or
// nullopt for a string the log would not have written.
std::optional<std::string> unix_bytes(const std::string& logged)
{
	std::string out;
	for (size_t i = 0; i < logged.size(); i++) {
		if (logged[i] != '\\') {
			out += logged[i];
			continue;
		}
		if (i + 3 >= logged.size() || logged[i + 1] != 'x')
			return std::nullopt;
		unsigned v = 0;
		for (size_t k = i + 2; k < i + 4; k++) {
			char c = logged[k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0)
				return std::nullopt;
			v = v * 16 + static_cast<unsigned>(d);
		}
		out += static_cast<char>(v);
		i += 3;
	}
	return out;
}

// What an audit log shows a sandbox did, line by line.
struct Seen {
	std::set<std::string> resolvers, types;
	// address -> the name whose answer gave it last: the kernel judges a
	// shared address by that name's rules, and so does the suggestion.
	std::map<std::string, std::string> name_of;
	std::set<std::string> queried;  // names let out (or that would have been)
	// (name or address, protocol) -> ports
	std::map<std::pair<std::string, std::string>, std::set<int>> by_name, by_addr;
	std::set<std::tuple<std::string, std::string, int>> flows;
	std::set<std::string> unix_targets;  // "/path" or "@name", as bytes
	uint64_t families = kDefaultFamilies;
	std::vector<std::string> notes;  // what was not turned into a rule

	void read(const json& j)
	{
		std::string event = str(j, "event");
		if (event == "dns-answer") {
			if (j.value("dropped", false))
				return;
			std::string name = str(j, "qname"), addr = str(j, "addr");
			if (!name.empty() && !addr.empty())
				name_of[addr] = name;
			return;
		}
		if (event != "decision")
			return;
		std::string verdict = str(j, "verdict");
		if (str(j, "hook") == "socket" && verdict != "allow") {
			// A socket of a family the policy does not list: the
			// processes airlock starts are refused it even in audit
			// mode (seccomp), so the record is all there is.
			int af = j.contains("socket_family") && j["socket_family"].is_string()
					 ? family_number(j["socket_family"].get<std::string>())
					 : -1;
			if (af < 0)
				notes.emplace_back(
					"a socket of a family airlock has no name for was not turned into a rule");
			else
				families |= 1ull << af;
			return;
		}
		if (verdict != "audit" && verdict != "allow")
			return;
		if (is_unix_hook(str(j, "hook"))) {
			auto bytes = unix_bytes(str(j, "dst"));
			if (str(j, "dst").empty() || !bytes)
				notes.emplace_back(
					"a unix socket whose address could not be read was not turned into a rule");
			else if (bytes->size() > 1 && bytes->back() == '*')
				notes.emplace_back(
					fmt::format("unix socket {}: an address ending in '*' reads as a prefix "
						    "in a rule; write its rule by hand",
						    str(j, "dst")));
			else
				unix_targets.insert(*bytes);
			return;
		}
		if (j.contains("qname")) {
			// A DNS query: its resolver, its type, its name.
			if (j["qname"].is_string()) {
				queried.insert(j["qname"].get<std::string>());
				if (j["qtype"].is_string())
					types.insert(j["qtype"].get<std::string>());
				if (!str(j, "dst").empty())
					resolvers.insert(str(j, "dst"));
			} else {
				notes.emplace_back("a DNS query that could not be parsed was not turned into a rule");
			}
			return;
		}
		std::string hook = str(j, "hook"), dst = str(j, "dst"), proto = str(j, "protocol");
		int port = j.value("port", 0);
		if (!is_connect_hook(hook) || dst.empty() || (proto != "tcp" && proto != "udp"))
			return;
		if (port == 53) {
			resolvers.insert(dst);  // a socket to the resolver
			return;
		}
		auto answered = name_of.find(dst);
		if (answered != name_of.end()) {
			by_name[{answered->second, proto}].insert(port);
			flows.insert({answered->second, proto, port});
		} else {
			by_addr[{dst, proto}].insert(port);
			flows.insert({dst, proto, port});
		}
	}
};

// The allow rules that let out what was seen: names, then names only
// queried, then addresses, then unix sockets.
nlohmann::ordered_json rules_for(const Seen& seen)
{
	using ojson = nlohmann::ordered_json;
	ojson rules = ojson::array();
	std::set<std::string> named;
	for (const auto& [key, ports] : seen.by_name) {
		named.insert(key.first);
		rules.push_back(ojson{{"action", "allow"},
				      {"domain", key.first},
				      {"ports", ports_json(ports)},
				      {"protocol", key.second}});
	}
	for (const auto& n : seen.queried) {
		if (named.count(n) || n.empty())
			continue;
		// Resolved but never connected to: let its queries out and open
		// nothing (port 53 belongs to the DNS policy, never to a name).
		rules.push_back(ojson{{"action", "allow"},
				      {"domain", n},
				      {"ports", ojson::array({53})},
				      {"protocol", "udp"},
				      {"comment", "resolved, never connected to: lets the query out, opens nothing"}});
	}
	for (const auto& [key, ports] : seen.by_addr) {
		auto a = parse_address(key.first);
		std::string cidr = a ? format_cidr(
					       Cidr{*a, static_cast<uint8_t>(a->family == AL_FAMILY_IPV4 ? 32 : 128)})
				     : key.first;
		rules.push_back(ojson{
			{"action", "allow"}, {"cidr", cidr}, {"ports", ports_json(ports)}, {"protocol", key.second}});
	}
	for (const auto& u : seen.unix_targets)
		rules.push_back(ojson{{"action", "allow"}, {"unix", u}});
	return rules;
}

}  // namespace

Suggestion suggest_policy(const std::vector<json>& lines, const SuggestOptions& o)
{
	Seen seen;
	for (const auto& j : lines)
		if (j.is_object() && (o.sandbox.empty() || str(j, "sandbox") == o.sandbox))
			seen.read(j);

	using ojson = nlohmann::ordered_json;
	Suggestion s;
	s.notes = std::move(seen.notes);
	ojson rules = rules_for(seen);
	ojson dns = ojson::object();
	dns["resolvers"] = json(std::vector<std::string>(seen.resolvers.begin(), seen.resolvers.end()));
	std::vector<std::string> t(seen.types.begin(), seen.types.end());
	if (t.empty())
		t = {"A", "AAAA"};
	dns["types"] = t;

	s.policy = ojson{{"version", 1},
			 {"name", o.name},
			 {"description", "Suggested from an audit log: allows what that run used, nothing else."},
			 {"mode", "enforce"},
			 {"on_violation", "deny"},
			 {"rules", rules},
			 {"dns", dns}};
	if (seen.families != kDefaultFamilies)
		s.policy["families"] = family_names(seen.families);
	s.flows = seen.flows.size() + seen.unix_targets.size();
	s.names = seen.queried.size();
	return s;
}

}  // namespace airlock
