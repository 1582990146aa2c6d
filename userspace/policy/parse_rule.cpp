// Rules: what they match (a CIDR, a domain, a unix socket; ports and
// protocols) and what they do (allow, deny, refuse, redirect; the SNI gate
// and byte budgets of an allow rule).
#include "policy/parser.h"

#include <cctype>

namespace airlock::policy_parse {

std::optional<Cidr> Parser::cidr(const json& v, const std::string& path)
{
	if (!expect(v, path, v.is_string(), "a string"))
		return std::nullopt;
	std::string s = v.get<std::string>();
	auto slash = s.find('/');
	std::string addr_text = s.substr(0, slash);
	Address raw;
	bool v6 = addr_text.find(':') != std::string::npos;
	auto parsed = parse_address(addr_text);
	if (!parsed) {
		error(path, fmt::format("'{}' is not a CIDR", printable(s)));
		return std::nullopt;
	}
	int max = v6 ? 128 : 32;
	int len = max;
	if (slash != std::string::npos) {
		std::string lt = s.substr(slash + 1);
		if (lt.empty() || lt.size() > 3 || !std::all_of(lt.begin(), lt.end(), ::isdigit) ||
		    std::stoi(lt) > max) {
			error(path, fmt::format("'{}' is not a CIDR", printable(s)));
			return std::nullopt;
		}
		len = std::stoi(lt);
	}
	if (v6 && parsed->family == AL_FAMILY_IPV4) {
		// Written as ::ffff:a.b.c.d/N: the IPv4 prefix it means.
		if (len < 96) {
			error(path, fmt::format("'{}' spans IPv4-mapped and other IPv6 addresses; write the IPv4 "
						"and IPv6 parts as separate rules",
						printable(s)));
			return std::nullopt;
		}
		len -= 96;
	}
	raw = *parsed;
	Cidr c{mask(raw, len), static_cast<uint8_t>(len)};
	if (!(c.addr == raw)) {
		error(path, fmt::format("'{}' has host bits set; did you mean '{}'?", printable(s), format_cidr(c)));
		return std::nullopt;
	}
	return c;
}

bool Parser::domain(const json& v, const std::string& path, Rule& r)
{
	if (!expect(v, path, v.is_string(), "a string"))
		return false;
	std::string original = v.get<std::string>();
	std::string s = original;
	std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
	if (!s.empty() && s.back() == '.')
		s.pop_back();
	if (s.rfind("*.", 0) == 0) {
		r.wildcard = true;
		s = s.substr(2);
	}
	auto bad = [&](const std::string& why) {
		error(path, fmt::format("'{}' is not a domain name: {}", printable(original), why));
		return false;
	};
	if (s.empty())
		return bad(r.wildcard ? "no name follows '*.'" : "it is empty");
	if (s == "*")
		return bad("no name follows '*'; write '*.example.com'");
	if (s.find('*') != std::string::npos)
		return bad("'*' may only stand alone as the first label ('*.example.com')");
	// A prefix too: whoever wrote "10.0.0.0/8" wants 'cidr', not a label error.
	if (parse_address(s.substr(0, s.find('/'))))
		return bad("it is an address (use 'cidr' for addresses)");
	if (s.size() > 253)
		return bad(fmt::format("{} characters, the limit is 253", s.size()));
	size_t start = 0;
	while (true) {
		size_t dot = s.find('.', start);
		std::string label = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
		if (label.empty())
			return bad("empty label");
		if (label.size() > 63)
			return bad(fmt::format("label '{}' is longer than 63 characters",
					       printable(label.substr(0, 20)) + "..."));
		for (char c : label)
			if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
				return bad(fmt::format("'{}' is not allowed in a label (letters, digits, '-', '_'; "
						       "write names in their ASCII form)",
						       printable(c)));
		if (label.front() == '-' || label.back() == '-')
			return bad(fmt::format("label '{}' starts or ends with '-'", label));
		if (dot == std::string::npos)
			break;
		start = dot + 1;
	}
	r.domain = s;
	return true;
}

std::optional<PortRange> Parser::port(const json& v, const std::string& path)
{
	if (v.is_number_integer() || v.is_number_unsigned()) {
		// Unsigned first: values past INT64_MAX must not wrap into range.
		bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= 65535
						       : v.get<int64_t>() >= 1 && v.get<int64_t>() <= 65535;
		if (!in_range) {
			error(path, fmt::format("{} is not a port (1-65535)", v.dump()));
			return std::nullopt;
		}
		auto n = static_cast<uint16_t>(v.get<int64_t>());
		return PortRange{n, n};
	}
	if (v.is_string()) {
		std::string s = v.get<std::string>();
		auto dash = s.find('-');
		auto num = [](const std::string& t) -> long {
			if (t.empty() || t.size() > 5 || !std::all_of(t.begin(), t.end(), ::isdigit))
				return -1;
			return std::stol(t);
		};
		long lo = dash == std::string::npos ? -1 : num(s.substr(0, dash));
		long hi = dash == std::string::npos ? -1 : num(s.substr(dash + 1));
		if (lo < 1 || hi < 1 || lo > 65535 || hi > 65535 || lo > hi) {
			error(path, fmt::format("'{}' is not a port range (\"LO-HI\", 1 <= LO <= HI <= 65535)",
						printable(s)));
			return std::nullopt;
		}
		return PortRange{static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)};
	}
	error(path, fmt::format("expected a port number or a \"LO-HI\" string, got {}", json_type_name(v)));
	return std::nullopt;
}

// "/run/x.sock", "/run/agent/*", "@name", "@prefix*". A named path
// must name one file by its characters alone, as the kernel compares it.
std::optional<UnixTarget> Parser::unix_target(const json& v, const std::string& path)
{
	if (!expect(v, path, v.is_string(), "a string"))
		return std::nullopt;
	std::string s = v.get<std::string>();
	auto bad = [&](const std::string& why) {
		error(path, fmt::format("'{}' is not a unix socket address: {}", printable(s), why));
		return std::nullopt;
	};
	UnixTarget u;
	if (s.empty() || (s[0] != '/' && s[0] != '@'))
		return bad("it starts with '/' (a path) or '@' (an abstract name)");
	u.abstract = s[0] == '@';
	std::string body = u.abstract ? s.substr(1) : s;
	if (!body.empty() && body.back() == '*') {
		u.prefix = true;
		body.pop_back();
	}
	if (!u.abstract && body.find('*') != std::string::npos)
		return bad("'*' may only end it (a prefix)");
	size_t max = u.abstract ? AL_UNIX_PATH_MAX - 1 : AL_UNIX_PATH_MAX;
	if (body.size() > max)
		return bad(fmt::format("longer than {} bytes", max));
	if (u.abstract && !u.prefix && body.empty())
		return bad("an abstract name has at least one byte ('@*' means every abstract name)");
	if (!u.abstract) {
		if (body.find('\0') != std::string::npos)
			return bad("a path has no NUL byte");
		// Components as the kernel walks them: no empty, "." or ".."
		// one, so that no other spelling reaches another file. A
		// prefix may end in '/', an exact path may not.
		std::string walk = u.prefix && body.back() == '/' ? body.substr(0, body.size() - 1) : body;
		size_t start = 1;
		for (size_t i = 1; i <= walk.size(); i++) {
			if (i < walk.size() && walk[i] != '/')
				continue;
			std::string comp = walk.substr(start, i - start);
			if ((comp.empty() && !(walk.empty() && u.prefix)) || comp == "." || comp == "..")
				return bad("it has an empty, '.' or '..' component (write the path as it is)");
			start = i + 1;
		}
	} else if (u.prefix && body.find('\0') != std::string::npos) {
		return bad("a prefix has no NUL byte");
	}
	u.bytes = body;
	return u;
}

std::optional<Rule> Parser::rule(const json& v, const std::string& path, size_t index)
{
	if (!expect(v, path, v.is_object(), "an object"))
		return std::nullopt;
	unknown_keys(v, path,
		     {"action", "cidr", "domain", "unix", "ports", "protocol", "comment", "to", "tls", "budget", "http",
		      "inject"});
	size_t before = errors_.size();
	Rule r;
	r.index = index;
	if (!v.contains("action")) {
		error(join(path, "action"), "missing");
	} else if (const json& a = v["action"]; expect(a, join(path, "action"), a.is_string(), "a string")) {
		std::string s = a.get<std::string>();
		if (s == "allow")
			r.action = Action::Allow;
		else if (s == "deny")
			r.action = Action::Deny;
		else if (s == "refuse" && v.contains("unix"))
			r.action = Action::Refuse;
		else if (s == "refuse")
			error(join(path, "action"), "'refuse' applies to unix rules only");
		else if (s == "redirect")
			r.action = Action::Redirect;
		else if (s == "hold")
			error(join(path, "action"),
			      fmt::format("'{}' is reserved and not supported yet", printable(s)));
		else
			error(join(path, "action"),
			      fmt::format("'{}' is not one of allow, deny, refuse, redirect", printable(s)));
	}
	int targets = v.contains("cidr") + v.contains("domain") + v.contains("unix");
	if (targets != 1)
		error(path, "needs exactly one of 'cidr', 'domain' or 'unix'");
	else if (v.contains("cidr"))
		r.cidr = cidr(v["cidr"], join(path, "cidr"));
	else if (v.contains("domain"))
		domain(v["domain"], join(path, "domain"), r);
	else
		r.unix_target = unix_target(v["unix"], join(path, "unix"));
	if (v.contains("unix")) {
		for (const char* k : {"ports", "protocol", "to", "tls", "budget", "http", "inject"})
			if (v.contains(k))
				error(join(path, k), "does not apply to a unix rule");
		if (r.action == Action::Redirect)
			error(join(path, "action"), "a unix socket cannot be redirected (allow, deny or refuse it)");
		if (errors_.size() != before)
			return std::nullopt;
	}

	r.proto_mask = AL_PROTO_TCP | AL_PROTO_UDP;
	if (v.contains("protocol")) {
		const json& p = v["protocol"];
		if (expect(p, join(path, "protocol"), p.is_string(), "a string")) {
			std::string s = p.get<std::string>();
			if (s == "tcp")
				r.proto_mask = AL_PROTO_TCP;
			else if (s == "udp")
				r.proto_mask = AL_PROTO_UDP;
			else if (s == "icmp")
				r.proto_mask = AL_PROTO_ICMP;
			else
				error(join(path, "protocol"),
				      fmt::format("'{}' is not one of tcp, udp, icmp", printable(s)));
		}
	}
	if (v.contains("ports")) {
		const json& ps = v["ports"];
		std::string pp = join(path, "ports");
		if (expect(ps, pp, ps.is_array(), "an array")) {
			if (ps.empty())
				error(pp, "is empty (leave 'ports' out to mean every port)");
			for (size_t i = 0; i < ps.size(); i++)
				if (auto pr = port(ps[i], join(pp, std::to_string(i))))
					r.ports.push_back(*pr);
			if (r.proto_mask == AL_PROTO_ICMP)
				error(pp, "ICMP has no ports: leave 'ports' out of an icmp rule");
		}
	}
	if (v.contains("comment")) {
		const json& c = v["comment"];
		if (expect(c, join(path, "comment"), c.is_string(), "a string"))
			r.comment = c.get<std::string>();
	}
	gates(v, path, r);
	if (errors_.size() != before)
		return std::nullopt;
	return r;
}

// "to" of a redirect; "tls" and "budget" of an allow rule.
void Parser::gates(const json& v, const std::string& path, Rule& r)
{
	if (r.action == Action::Redirect) {
		if (!v.contains("to"))
			error(join(path, "to"), "missing: \"world\", or the HOST:PORT of a simulator");
		else
			r.redirect = redirect_target(v["to"], join(path, "to"));
		if (r.proto_mask == AL_PROTO_ICMP)
			error(join(path, "protocol"), "ICMP cannot be redirected (tcp, udp, or both)");
	} else if (v.contains("to")) {
		error(join(path, "to"), "applies to redirect rules only");
	}
	for (const char* k : {"tls", "budget"})
		if (v.contains(k) && r.action != Action::Allow)
			error(join(path, k), "applies to allow rules only");
	http_gate(v, path, r);
	if (v.contains("tls") && r.action == Action::Allow)
		tls(v, path, r);
	if (v.contains("budget") && r.action == Action::Allow) {
		const json& b = v["budget"];
		std::string bp = join(path, "budget");
		if (expect(b, bp, b.is_object(), "an object")) {
			unknown_keys(b, bp, {"egress_bytes"});
			std::string ep = join(bp, "egress_bytes");
			if (!b.contains("egress_bytes")) {
				error(ep, "missing");
			} else if (const json& n = b["egress_bytes"];
				   expect(n, ep, n.is_number_integer() || n.is_number_unsigned(), "an integer")) {
				constexpr uint64_t kMax = 1ull << 50;  // 1 PiB: beyond it, no budget
				bool ok = n.is_number_unsigned() ? n.get<uint64_t>() >= 1 && n.get<uint64_t>() <= kMax
								 : n.get<int64_t>() >= 1 && n.get<uint64_t>() <= kMax;
				if (!ok)
					error(ep, fmt::format("{} is out of range (1-{})", n.dump(), kMax));
				else
					r.budget_egress_bytes = n.get<uint64_t>();
			}
			if (r.proto_mask == AL_PROTO_ICMP)
				error(bp, "ICMP carries no payload that a budget counts");
		}
	}
}

// "tls" of an allow rule: the SNI gate ("sni": "require"), or for a rule
// with "http", the roots its origin is verified by ("upstream_ca").
void Parser::tls(const json& v, const std::string& path, Rule& r)
{
	const json& t = v["tls"];
	std::string tp = join(path, "tls");
	if (!expect(t, tp, t.is_object(), "an object"))
		return;
	unknown_keys(t, tp, {"sni", "upstream_ca"});
	if (t.contains("upstream_ca")) {
		const json& ca = t["upstream_ca"];
		std::string cp = join(tp, "upstream_ca");
		if (!v.contains("http"))
			error(cp, "applies to rules with \"http\" (the SNI gate leaves the TLS to the sandbox)");
		else if (expect(ca, cp, ca.is_string(), "a string")) {
			std::string file = ca.get<std::string>();
			if (file.empty() || file.front() != '/')
				error(cp, fmt::format("'{}' is not an absolute path", printable(file)));
			else if (r.http)
				r.http->upstream_ca = file;
		}
	}
	if (v.contains("http")) {
		if (t.contains("sni"))
			error(join(tp, "sni"), "leave it out: with \"http\" the gate ends the TLS and checks the name "
					       "itself");
		return;
	}
	if (!t.contains("sni"))
		error(join(tp, "sni"), "missing (\"require\")");
	else if (const json& sni = t["sni"]; expect(sni, join(tp, "sni"), sni.is_string(), "a string")) {
		if (sni.get<std::string>() != "require")
			error(join(tp, "sni"), fmt::format("'{}' is not require", printable(sni.get<std::string>())));
		else
			r.tls_sni_require = true;
	}
	// The name in the ClientHello is judged against the rule's name; UDP
	// beside the gate (QUIC) would pass unread.
	if (!v.contains("domain"))
		error(tp, "applies to domain rules (the ClientHello's name is checked against the rule's)");
	if (r.proto_mask != AL_PROTO_TCP)
		error(tp, "needs \"protocol\": \"tcp\" (UDP to the same destination would pass beside the gate: "
			  "QUIC falls back to TCP when it is denied)");
}

std::optional<RedirectTarget> Parser::redirect_target(const json& v, const std::string& path)
{
	if (!expect(v, path, v.is_string(), "a string"))
		return std::nullopt;
	std::string s = v.get<std::string>();
	RedirectTarget t;
	if (s == "world")
		return t;
	t.world = false;
	// HOST:PORT, or [V6]:PORT; an address, never a name (the proxy never resolves).
	std::string host, port_text;
	if (!s.empty() && s.front() == '[') {
		auto close = s.find(']');
		if (close != std::string::npos && close + 1 < s.size() && s[close + 1] == ':') {
			host = s.substr(1, close - 1);
			port_text = s.substr(close + 2);
		}
	} else if (auto colon = s.rfind(':'); colon != std::string::npos && s.find(':') == colon) {
		host = s.substr(0, colon);
		port_text = s.substr(colon + 1);
	}
	auto addr = parse_address(host);
	bool port_ok = !port_text.empty() && port_text.size() <= 5 &&
		       std::all_of(port_text.begin(), port_text.end(),
				   [](unsigned char c) { return std::isdigit(c); }) &&
		       std::stoul(port_text) >= 1 && std::stoul(port_text) <= 65535;
	if (!addr || !port_ok) {
		error(path, fmt::format("'{}' is not \"world\" nor ADDRESS:PORT ([ADDRESS]:PORT for IPv6; an address, "
					"not a name)",
					printable(s)));
		return std::nullopt;
	}
	// Somewhere one connection goes: not the unspecified address (a
	// connect takes it for loopback), not multicast nor broadcast.
	const auto& b = addr->bytes;
	bool unicast = addr->family == AL_FAMILY_IPV4
			       ? !(b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0) && b[0] < 224
			       : b[0] != 0xff && !std::all_of(b.begin(), b.end(), [](uint8_t x) { return x == 0; });
	if (!unicast) {
		error(path,
		      fmt::format("'{}' is not a unicast address (a simulator listens on one address)", printable(s)));
		return std::nullopt;
	}
	t.address = *addr;
	t.port = static_cast<uint16_t>(std::stoul(port_text));
	return t;
}

}  // namespace airlock::policy_parse
