// A policy document: its header, its rules and blocks, the rule the
// world's DNS adds; and where a policy file comes from.
#include "policy/parser.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace airlock::policy_parse {

void Parser::header(const json& doc, Policy& p)
{
	if (!doc.contains("version"))
		error("version", "missing");
	else if (const json& v = doc["version"];
		 expect(v, "version", v.is_number_integer() || v.is_number_unsigned(), "an integer")) {
		if (!(v.is_number_unsigned() ? v.get<uint64_t>() == 1 : v.get<int64_t>() == 1))
			error("version", fmt::format("{} is not a supported version (1)", v.dump()));
	}
	if (!doc.contains("name")) {
		error("name", "missing");
	} else if (const json& n = doc["name"]; expect(n, "name", n.is_string(), "a string")) {
		p.name = n.get<std::string>();
		bool ok = !p.name.empty() && p.name.size() <= 64 &&
			  std::all_of(p.name.begin(), p.name.end(), [](unsigned char c) {
				  return std::isalnum(c) || c == '.' || c == '_' || c == '-';
			  });
		if (!ok)
			error("name",
			      fmt::format("'{}' is not a policy name (1-64 of A-Z a-z 0-9 . _ -)", printable(p.name)));
	}
	if (doc.contains("description")) {
		const json& d = doc["description"];
		if (expect(d, "description", d.is_string(), "a string"))
			p.description = d.get<std::string>();
	}
	if (doc.contains("mode")) {
		const json& m = doc["mode"];
		if (expect(m, "mode", m.is_string(), "a string")) {
			std::string s = m.get<std::string>();
			if (s == "enforce")
				p.mode = Mode::Enforce;
			else if (s == "audit")
				p.mode = Mode::Audit;
			else
				error("mode", fmt::format("'{}' is not one of enforce, audit", printable(s)));
		}
	}
	if (doc.contains("on_violation")) {
		const json& o = doc["on_violation"];
		if (expect(o, "on_violation", o.is_string(), "a string")) {
			std::string s = o.get<std::string>();
			if (s == "deny")
				p.on_violation = OnViolation::Deny;
			else if (s == "freeze")
				p.on_violation = OnViolation::Freeze;
			else if (s == "kill")
				p.on_violation = OnViolation::Kill;
			else
				error("on_violation",
				      fmt::format("'{}' is not one of deny, freeze, kill", printable(s)));
		}
	}
}

Result<Policy, PolicyRejection> Parser::document(std::string_view text)
{
	auto parsed = parse_json_checked(text, file_, errors_);
	if (!parsed)
		return PolicyRejection{errors_};
	json doc = std::move(*parsed);
	if (!doc.is_object()) {
		error("", fmt::format("expected an object, got {}", json_type_name(doc)));
		return PolicyRejection{errors_};
	}
	Policy p;
	p.source = file_;
	unknown_keys(doc, "",
		     {"version", "name", "description", "mode", "on_violation", "rules", "dns", "families", "io_uring",
		      "world", "secrets"});
	header(doc, p);
	if (!doc.contains("rules")) {
		error("rules", "missing");
	} else if (const json& rs = doc["rules"]; expect(rs, "rules", rs.is_array(), "an array")) {
		for (size_t i = 0; i < rs.size(); i++)
			if (auto r = rule(rs[i], "rules/" + std::to_string(i), i))
				p.rules.push_back(*r);
	}
	if (doc.contains("dns"))
		dns(doc["dns"], "dns", p.dns);
	if (doc.contains("secrets"))
		secrets(doc["secrets"], "secrets", p.secrets);
	check_injects(p);
	bool to_world = std::any_of(p.rules.begin(), p.rules.end(),
				    [](const Rule& r) { return r.redirect && r.redirect->world; });
	if (doc.contains("world")) {
		WorldPolicy w;
		world(doc["world"], "world", w);
		if (!to_world)
			error("world", "no rule redirects to \"world\"");
		p.world = std::move(w);
	} else if (to_world) {
		p.world = WorldPolicy{};
	}
	if (p.world && p.world->synthesize_dns) {
		if (!p.dns.resolvers.empty())
			error("dns/resolvers",
			      "not used: world.dns is \"synthesize\" (the world answers every query); remove them, "
			      "or set world.dns to \"resolvers\"");
		// The addresses the world's answers give are the world's: a
		// rule of their own, after the file's (which keep their indices).
		Rule r;
		r.index = p.rules.size();
		r.action = Action::Redirect;
		r.cidr = Cidr{*parse_address(kWorldDnsNet), kWorldDnsPrefix};
		r.proto_mask = AL_PROTO_TCP | AL_PROTO_UDP;
		r.redirect = RedirectTarget{};
		r.comment = "world.dns: the addresses of the world's answers";
		p.rules.push_back(std::move(r));
	}
	if (doc.contains("families"))
		families(doc["families"], "families", p.families);
	if (doc.contains("io_uring")) {
		const json& u = doc["io_uring"];
		if (expect(u, "io_uring", u.is_boolean(), "a boolean"))
			p.io_uring = u.get<bool>();
	}
	if (!errors_.empty())
		return PolicyRejection{errors_};
	return p;
}

}  // namespace airlock::policy_parse

namespace airlock {

using policy_parse::Parser;

Result<Policy, PolicyRejection> parse_policy_text(std::string_view text, const std::string& file_label)
{
	return Parser(file_label).document(text);
}

Result<Policy, PolicyRejection> parse_policy_file(const std::string& path)
{
	std::error_code ec;
	if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
		return PolicyRejection{{{path, "(root)", "is not a regular file"}}};
	std::ifstream in(path, std::ios::binary);
	if (!in)
		return PolicyRejection{{{path, "(root)", fmt::format("cannot read: {}", std::strerror(errno))}}};
	std::ostringstream ss;
	ss << in.rdbuf();
	return parse_policy_text(ss.str(), path);
}

}  // namespace airlock
