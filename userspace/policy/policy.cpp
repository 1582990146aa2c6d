#include "policy/policy.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/text.h"

namespace airlock {

using nlohmann::json;

std::string PolicyError::str() const
{
	return fmt::format("{}: {}: {}", file, path, message);
}

const char* to_string(Mode m) { return m == Mode::Enforce ? "enforce" : "audit"; }
const char* to_string(OnViolation v)
{
	switch (v) {
	case OnViolation::Deny: return "deny";
	case OnViolation::Freeze: return "freeze";
	case OnViolation::Kill: return "kill";
	}
	return "?";
}
const char* to_string(Action a)
{
	switch (a) {
	case Action::Allow: return "allow";
	case Action::Deny: return "deny";
	case Action::Refuse: return "refuse";
	case Action::Redirect: return "redirect";
	}
	return "?";
}

const BuiltinUnixRefusal kBuiltinUnixRefusals[3] = {
	{"/var/run/nscd/socket"},
	{"/run/nscd/socket"},
	{"/run/systemd/userdb/*"},
};

namespace {

const std::set<std::string> kDnsTypes = {"A",  "AAAA", "CNAME", "MX",    "TXT", "SRV",  "PTR",
					 "NS", "SOA",  "HTTPS", "SVCB", "CAA", "NULL", "ANY"};

// A value as it appears in a message: strings quoted, the rest as JSON.
std::string shown(const json& v)
{
	if (v.is_string())
		return "'" + printable(v.get<std::string>()) + "'";
	std::string s = v.dump();
	return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string type_name(const json& v)
{
	if (v.is_string()) return "a string";
	if (v.is_boolean()) return "a boolean";
	if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
	if (v.is_number()) return "a number";
	if (v.is_array()) return "an array";
	if (v.is_object()) return "an object";
	return "null";
}

// nlohmann keeps the last of two equal keys without a word. In a policy that
// would let a second "action" or "mode" quietly override the first, so a
// SAX pass follows where it is and notes every repeated key. (Not a parse
// callback: nlohmann's callback parser scans the enclosing array after each
// element, quadratic in the number of rules.)
class DuplicateKeys : public nlohmann::json_sax<json> {
public:
	struct Duplicate {
		std::string path, key;  // path of the object holding the key
	};

	bool start_object(std::size_t) override
	{
		stack_.push_back({true});
		return true;
	}
	bool start_array(std::size_t) override
	{
		stack_.push_back({false});
		return true;
	}
	bool key(string_t& k) override
	{
		Frame& top = stack_.back();
		top.key = k;
		if (!top.keys.insert(top.key).second)
			found.push_back({path_of_top(), top.key});
		return true;
	}
	bool end_object() override { return end(); }
	bool end_array() override { return end(); }
	bool null() override { return element_done(); }
	bool boolean(bool) override { return element_done(); }
	bool number_integer(number_integer_t) override { return element_done(); }
	bool number_unsigned(number_unsigned_t) override { return element_done(); }
	bool number_float(number_float_t, const string_t&) override { return element_done(); }
	bool string(string_t&) override { return element_done(); }
	bool binary(binary_t&) override { return element_done(); }
	// Where the text stops being JSON: a syntax error, or a number out of
	// range (which json::parse throws as out_of_range, without a position).
	bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception& e) override
	{
		error_byte = byte;
		error = e.what();
		return false;
	}

	std::vector<Duplicate> found;
	size_t error_byte = 0;
	std::string error;  // "[json.exception...] ..."

private:
	struct Frame {
		bool object;
		std::set<std::string> keys{};
		std::string key{};  // object: the key whose value is being read
		size_t index = 0;   // array: elements read so far
	};

	bool element_done()
	{
		if (!stack_.empty() && !stack_.back().object)
			stack_.back().index++;
		return true;
	}

	bool end()
	{
		stack_.pop_back();
		return element_done();
	}

	std::string path_of_top() const
	{
		std::string p;
		for (size_t i = 0; i + 1 < stack_.size(); i++) {
			const Frame& f = stack_[i];
			std::string part = f.object ? printable(f.key) : std::to_string(f.index);
			if (!p.empty())
				p += '/';
			p += part;
		}
		return p;
	}

	std::vector<Frame> stack_;
};

class Parser {
public:
	explicit Parser(std::string file) : file_(std::move(file)) {}

	void error(const std::string& path, std::string message)
	{
		errors_.push_back({file_, path.empty() ? "(root)" : path, std::move(message)});
	}

	bool expect(const json& v, const std::string& path, bool ok, const char* what)
	{
		if (!ok)
			error(path, fmt::format("expected {}, got {}", what, type_name(v)));
		return ok;
	}

	void unknown_keys(const json& obj, const std::string& path, std::initializer_list<const char*> known)
	{
		for (auto it = obj.begin(); it != obj.end(); ++it) {
			if (std::find_if(known.begin(), known.end(), [&](const char* k) { return it.key() == k; }) ==
			    known.end())
				error(path, fmt::format("unknown key '{}'", printable(it.key())));
		}
	}

	static std::string join(const std::string& path, const std::string& key)
	{
		return path.empty() ? key : path + "/" + key;
	}

	std::optional<Cidr> cidr(const json& v, const std::string& path)
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

	bool domain(const json& v, const std::string& path, Rule& r)
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
				return bad(fmt::format("label '{}' is longer than 63 characters", printable(label.substr(0, 20)) + "..."));
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

	std::optional<PortRange> port(const json& v, const std::string& path)
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
				error(path, fmt::format("'{}' is not a port range (\"LO-HI\", 1 <= LO <= HI <= 65535)", printable(s)));
				return std::nullopt;
			}
			return PortRange{static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)};
		}
		error(path, fmt::format("expected a port number or a \"LO-HI\" string, got {}", type_name(v)));
		return std::nullopt;
	}

	// "/run/x.sock", "/run/agent/*", "@name", "@prefix*". A named path
	// must name one file by its characters alone, as the kernel compares it.
	std::optional<UnixTarget> unix_target(const json& v, const std::string& path)
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

	std::optional<Rule> rule(const json& v, const std::string& path, size_t index)
	{
		if (!expect(v, path, v.is_object(), "an object"))
			return std::nullopt;
		unknown_keys(v, path, {"action", "cidr", "domain", "unix", "ports", "protocol", "comment", "to", "tls", "budget"});
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
				error(join(path, "action"), fmt::format("'{}' is reserved and not supported yet", printable(s)));
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
			for (const char* k : {"ports", "protocol", "to", "tls", "budget"})
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
					error(join(path, "protocol"), fmt::format("'{}' is not one of tcp, udp, icmp", printable(s)));
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
	void gates(const json& v, const std::string& path, Rule& r)
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
		if (v.contains("tls") && r.action == Action::Allow) {
			const json& t = v["tls"];
			std::string tp = join(path, "tls");
			if (expect(t, tp, t.is_object(), "an object")) {
				unknown_keys(t, tp, {"sni"});
				if (!t.contains("sni"))
					error(join(tp, "sni"), "missing (\"require\")");
				else if (const json& sni = t["sni"]; expect(sni, join(tp, "sni"), sni.is_string(), "a string")) {
					if (sni.get<std::string>() != "require")
						error(join(tp, "sni"), fmt::format("'{}' is not require", printable(sni.get<std::string>())));
					else
						r.tls_sni_require = true;
				}
				// The name in the ClientHello is judged against the
				// rule's name; UDP beside the gate (QUIC) would pass unread.
				if (!v.contains("domain"))
					error(tp, "applies to domain rules (the ClientHello's name is checked against the rule's)");
				if (r.proto_mask != AL_PROTO_TCP)
					error(tp, "needs \"protocol\": \"tcp\" (UDP to the same destination would pass beside "
						  "the gate: QUIC falls back to TCP when it is denied)");
			}
		}
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

	std::optional<RedirectTarget> redirect_target(const json& v, const std::string& path)
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
			       std::all_of(port_text.begin(), port_text.end(), [](unsigned char c) { return std::isdigit(c); }) &&
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
			error(path, fmt::format("'{}' is not a unicast address (a simulator listens on one address)",
						printable(s)));
			return std::nullopt;
		}
		t.address = *addr;
		t.port = static_cast<uint16_t>(std::stoul(port_text));
		return t;
	}

	void world(const json& v, const std::string& path, WorldPolicy& w)
	{
		if (!expect(v, path, v.is_object(), "an object"))
			return;
		unknown_keys(v, path, {"records", "max_body_bytes", "dns", "responses"});
		if (v.contains("records")) {
			const json& r = v["records"];
			std::string rp = join(path, "records");
			if (expect(r, rp, r.is_string(), "a string")) {
				w.records_dir = r.get<std::string>();
				if (w.records_dir.empty() || w.records_dir.front() != '/')
					error(rp, fmt::format("'{}' is not an absolute directory", printable(w.records_dir)));
			}
		}
		if (v.contains("max_body_bytes")) {
			const json& n = v["max_body_bytes"];
			std::string np = join(path, "max_body_bytes");
			if (expect(n, np, n.is_number_integer() || n.is_number_unsigned(), "an integer")) {
				bool negative = n.is_number_integer() && n.get<int64_t>() < 0;
				if (negative || n.get<uint64_t>() > (16u << 20))
					error(np, fmt::format("{} is out of range (0-{})", n.dump(), 16u << 20));
				else
					w.max_body_bytes = n.get<uint64_t>();
			}
		}
		if (v.contains("dns")) {
			const json& d = v["dns"];
			std::string dp = join(path, "dns");
			if (expect(d, dp, d.is_string(), "a string")) {
				std::string s = d.get<std::string>();
				if (s == "synthesize")
					w.synthesize_dns = true;
				else if (s == "resolvers")
					w.synthesize_dns = false;
				else
					error(dp, fmt::format("'{}' is not one of synthesize, resolvers", printable(s)));
			}
		}
		if (v.contains("responses")) {
			const json& rs = v["responses"];
			std::string rp = join(path, "responses");
			if (expect(rs, rp, rs.is_array(), "an array"))
				for (size_t i = 0; i < rs.size(); i++)
					if (auto r = world_response(rs[i], join(rp, std::to_string(i))))
						w.responses.push_back(*r);
		}
	}

	std::optional<WorldResponse> world_response(const json& v, const std::string& path)
	{
		if (!expect(v, path, v.is_object(), "an object"))
			return std::nullopt;
		unknown_keys(v, path, {"host", "method", "path", "status", "headers", "body"});
		size_t before = errors_.size();
		WorldResponse r;
		auto text = [&](const char* key, std::string& out) {
			if (v.contains(key) && expect(v[key], join(path, key), v[key].is_string(), "a string"))
				out = v[key].get<std::string>();
		};
		text("host", r.host);
		text("method", r.method);
		text("path", r.path);
		text("body", r.body);
		if (!v.contains("host"))
			error(join(path, "host"), "missing (a name, *.name, or * for any)");
		if (!r.method.empty() && !std::all_of(r.method.begin(), r.method.end(), [](unsigned char c) {
			    return std::isupper(c) != 0;
		    }))
			error(join(path, "method"), fmt::format("'{}' is not an HTTP method (GET, POST, ...)", printable(r.method)));
		if (!r.path.empty() && r.path.front() != '/')
			error(join(path, "path"), fmt::format("'{}' does not start with /", printable(r.path)));
		if (v.contains("status")) {
			const json& n = v["status"];
			std::string sp = join(path, "status");
			if (expect(n, sp, n.is_number_integer() || n.is_number_unsigned(), "an integer")) {
				if (n.get<int64_t>() < 100 || n.get<int64_t>() > 599)
					error(sp, fmt::format("{} is not an HTTP status (100-599)", n.dump()));
				else
					r.status = static_cast<unsigned>(n.get<int64_t>());
			}
		}
		if (v.contains("headers")) {
			const json& h = v["headers"];
			std::string hp = join(path, "headers");
			if (expect(h, hp, h.is_object(), "an object")) {
				for (auto it = h.begin(); it != h.end(); ++it) {
					std::string kp = join(hp, printable(it.key()));
					bool name_ok = !it.key().empty() &&
						       std::all_of(it.key().begin(), it.key().end(), [](unsigned char c) {
							       return std::isalnum(c) || c == '-';
						       });
					if (!name_ok)
						error(kp, "is not an HTTP header name");
					else if (expect(it.value(), kp, it.value().is_string(), "a string")) {
						std::string val = it.value().get<std::string>();
						if (val.find_first_of("\r\n") != std::string::npos)
							error(kp, "holds a line break");
						else
							r.headers.emplace_back(it.key(), val);
					}
				}
			}
		}
		if (errors_.size() != before)
			return std::nullopt;
		return r;
	}

	void dns(const json& v, const std::string& path, DnsPolicy& d)
	{
		if (!expect(v, path, v.is_object(), "an object"))
			return;
		unknown_keys(v, path,
			     {"resolvers", "types", "max_name_length", "max_label_length", "tcp", "queries_per_second",
			      "query_burst", "min_ttl", "max_ttl", "edns"});
		if (v.contains("resolvers")) {
			const json& rs = v["resolvers"];
			std::string rp = join(path, "resolvers");
			if (expect(rs, rp, rs.is_array(), "an array")) {
				for (size_t i = 0; i < rs.size(); i++) {
					std::string ip = join(rp, std::to_string(i));
					if (!expect(rs[i], ip, rs[i].is_string(), "a string"))
						continue;
					auto a = parse_address(rs[i].get<std::string>());
					if (!a)
						error(ip, fmt::format("{} is not an IP address", shown(rs[i])));
					else
						d.resolvers.push_back(*a);
				}
			}
		}
		if (v.contains("types")) {
			const json& ts = v["types"];
			std::string tp = join(path, "types");
			if (expect(ts, tp, ts.is_array(), "an array")) {
				d.types.clear();
				for (size_t i = 0; i < ts.size(); i++) {
					std::string ip = join(tp, std::to_string(i));
					if (!expect(ts[i], ip, ts[i].is_string(), "a string"))
						continue;
					std::string t = ts[i].get<std::string>();
					std::transform(t.begin(), t.end(), t.begin(), ::toupper);
					if (!kDnsTypes.count(t))
						error(ip, fmt::format("{} is not a DNS type airlock knows", shown(ts[i])));
					else if (std::find(d.types.begin(), d.types.end(), t) == d.types.end())
						d.types.push_back(t);
				}
			}
		}
		auto bounded = [&](const char* key, unsigned lo, unsigned hi, unsigned& out) {
			if (!v.contains(key))
				return;
			const json& n = v[key];
			std::string kp = join(path, key);
			if (!expect(n, kp, n.is_number_integer() || n.is_number_unsigned(), "an integer"))
				return;
			bool in_range = n.is_number_unsigned() ? n.get<uint64_t>() >= lo && n.get<uint64_t>() <= hi
							       : n.get<int64_t>() >= lo && n.get<int64_t>() <= hi;
			if (!in_range)
				error(kp, fmt::format("{} is out of range ({}-{})", n.dump(), lo, hi));
			else
				out = static_cast<unsigned>(n.get<int64_t>());
		};
		bounded("max_name_length", 1, 253, d.max_name_length);
		bounded("max_label_length", 1, 63, d.max_label_length);
		bounded("queries_per_second", 1, 100000, d.queries_per_second);
		bounded("query_burst", 1, 100000, d.query_burst);
		bounded("min_ttl", 0, 86400, d.min_ttl);
		bounded("max_ttl", 1, 604800, d.max_ttl);
		if (d.min_ttl > d.max_ttl)
			error(join(path, "min_ttl"), fmt::format("{} is more than max_ttl ({})", d.min_ttl, d.max_ttl));
		if (v.contains("tcp")) {
			const json& t = v["tcp"];
			if (expect(t, join(path, "tcp"), t.is_boolean(), "a boolean"))
				d.tcp = t.get<bool>();
		}
		if (v.contains("edns"))
			edns(v["edns"], join(path, "edns"), d);
	}

	// "edns": false (no OPT record), true (the defaults), or
	// {"options": {"COOKIE": 8, "65001": 4}, "udp_sizes": [1232], "dnssec_ok": false}.
	void edns(const json& v, const std::string& path, DnsPolicy& d)
	{
		if (v.is_boolean()) {
			d.edns = v.get<bool>();
			return;
		}
		if (!expect(v, path, v.is_object(), "a boolean or an object"))
			return;
		unknown_keys(v, path, {"options", "udp_sizes", "dnssec_ok"});
		d.edns = true;
		if (v.contains("options")) {
			const json& os = v["options"];
			std::string op = join(path, "options");
			if (expect(os, op, os.is_object(), "an object (option name or code -> most bytes)")) {
				d.edns_options.clear();
				for (const auto& [key, n] : os.items()) {
					std::string kp = join(op, printable(key));
					auto code = edns_option_code(key);
					if (!code) {
						error(kp, fmt::format("'{}' is not an EDNS option name airlock knows or a code (0-65535)",
								      printable(key)));
						continue;
					}
					if (!expect(n, kp, n.is_number_integer() || n.is_number_unsigned(), "an integer"))
						continue;
					if (n.get<int64_t>() < 0 || n.get<int64_t>() > AL_DNS_OPT_MAX - 4) {
						error(kp, fmt::format("{} is out of range (0-{})", n.dump(), AL_DNS_OPT_MAX - 4));
						continue;
					}
					bool dup = false;
					for (const auto& o : d.edns_options)
						dup = dup || o.code == *code;
					if (dup) {
						error(kp, fmt::format("option {} is listed twice", *code));
						continue;
					}
					d.edns_options.push_back({*code, static_cast<uint16_t>(n.get<int64_t>())});
				}
				if (d.edns_options.size() > AL_DNS_MAX_EDNS_OPTS)
					error(op, fmt::format("{} options; at most {}", d.edns_options.size(), AL_DNS_MAX_EDNS_OPTS));
			}
		}
		if (v.contains("udp_sizes")) {
			const json& us = v["udp_sizes"];
			std::string up = join(path, "udp_sizes");
			if (expect(us, up, us.is_array(), "an array")) {
				d.edns_udp_sizes.clear();
				if (us.empty())
					error(up, "is empty (a query with EDNS always states a size; use \"edns\": false)");
				for (size_t i = 0; i < us.size(); i++) {
					std::string ip = join(up, std::to_string(i));
					const json& n = us[i];
					if (!expect(n, ip, n.is_number_integer() || n.is_number_unsigned(), "an integer"))
						continue;
					if (n.get<int64_t>() < 512 || n.get<int64_t>() > 65535) {
						error(ip, fmt::format("{} is out of range (512-65535)", n.dump()));
						continue;
					}
					auto size = static_cast<uint16_t>(n.get<int64_t>());
					if (std::find(d.edns_udp_sizes.begin(), d.edns_udp_sizes.end(), size) == d.edns_udp_sizes.end())
						d.edns_udp_sizes.push_back(size);
				}
				if (d.edns_udp_sizes.size() > AL_DNS_MAX_UDP_SIZES)
					error(up, fmt::format("{} sizes; at most {}", d.edns_udp_sizes.size(), AL_DNS_MAX_UDP_SIZES));
			}
		}
		if (v.contains("dnssec_ok")) {
			const json& b = v["dnssec_ok"];
			if (expect(b, join(path, "dnssec_ok"), b.is_boolean(), "a boolean"))
				d.edns_dnssec_ok = b.get<bool>();
		}
	}

	// The list replaces the default: what is not named is refused.
	void families(const json& v, const std::string& path, uint64_t& mask)
	{
		if (!expect(v, path, v.is_array(), "an array"))
			return;
		mask = 0;
		for (size_t i = 0; i < v.size(); i++) {
			std::string ip = join(path, std::to_string(i));
			if (!expect(v[i], ip, v[i].is_string(), "a string"))
				continue;
			int af = family_number(v[i].get<std::string>());
			if (af < 0)
				error(ip, fmt::format("{} is not a socket family airlock knows (inet, inet6, unix, netlink-route, "
						      "netlink, packet, vsock, ...)",
						      shown(v[i])));
			else
				mask |= 1ull << af;
		}
	}

	ParseResult document(std::string_view text)
	{
		ParseResult res;
		auto parsed = parse_json_checked(text, file_, errors_);
		if (!parsed) {
			res.errors = errors_;
			return res;
		}
		json doc = std::move(*parsed);
		if (!doc.is_object()) {
			error("", fmt::format("expected an object, got {}", type_name(doc)));
			res.errors = errors_;
			return res;
		}
		Policy p;
		p.source = file_;
		unknown_keys(doc, "",
			     {"version", "name", "description", "mode", "on_violation", "rules", "dns", "families", "io_uring",
			      "world"});
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
				error("name", fmt::format("'{}' is not a policy name (1-64 of A-Z a-z 0-9 . _ -)", printable(p.name)));
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
					error("on_violation", fmt::format("'{}' is not one of deny, freeze, kill", printable(s)));
			}
		}
		if (!doc.contains("rules")) {
			error("rules", "missing");
		} else if (const json& rs = doc["rules"]; expect(rs, "rules", rs.is_array(), "an array")) {
			for (size_t i = 0; i < rs.size(); i++)
				if (auto r = rule(rs[i], "rules/" + std::to_string(i), i))
					p.rules.push_back(*r);
		}
		if (doc.contains("dns"))
			dns(doc["dns"], "dns", p.dns);
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
		res.errors = errors_;
		if (errors_.empty())
			res.policy = std::move(p);
		return res;
	}

private:
	std::string file_;
	std::vector<PolicyError> errors_;
};

}  // namespace

std::optional<uint16_t> edns_option_code(const std::string& name)
{
	static const std::map<std::string, uint16_t> names = {
		{"NSID", 3},	       {"CLIENT-SUBNET", 8}, {"EXPIRE", 9}, {"COOKIE", 10},
		{"TCP-KEEPALIVE", 11}, {"PADDING", 12},	     {"CHAIN", 13}, {"KEY-TAG", 14},
	};
	std::string up = name;
	std::transform(up.begin(), up.end(), up.begin(), ::toupper);
	if (auto it = names.find(up); it != names.end())
		return it->second;
	if (name.empty() || name.size() > 5 || !std::all_of(name.begin(), name.end(), ::isdigit))
		return std::nullopt;
	long n = std::stol(name);
	if (n > 65535)
		return std::nullopt;
	return static_cast<uint16_t>(n);
}

std::optional<json> parse_json_checked(std::string_view text, const std::string& file_label,
				       std::vector<PolicyError>& errors)
{
	DuplicateKeys dups;
	if (!json::sax_parse(text, &dups)) {
		// Line and column from the byte offset nlohmann reports.
		size_t off = std::min<size_t>(dups.error_byte ? dups.error_byte - 1 : 0, text.size());
		size_t line = 1 + std::count(text.begin(), text.begin() + off, '\n');
		size_t nl = text.rfind('\n', off ? off - 1 : 0);
		size_t col = nl == std::string_view::npos || off == 0 ? off + 1 : off - nl;
		// "[json.exception...] parse error at line L, column C: REASON",
		// "[json.exception...] REASON"
		const std::string& what = dups.error;
		auto at = what.find("column ");
		auto colon = at == std::string::npos ? std::string::npos : what.find(": ", at);
		auto bracket = what.find("] ");
		std::string reason = colon != std::string::npos    ? what.substr(colon + 2)
				     : bracket != std::string::npos ? what.substr(bracket + 2)
								    : what;
		std::replace(reason.begin(), reason.end(), '\n', ' ');
		// nlohmann quotes the bytes it last read as they are: escape them.
		errors.push_back({fmt::format("{}:{}:{}", file_label, line, col), "(root)", "invalid JSON: " + printable(reason)});
		return std::nullopt;
	}
	json doc = json::parse(text);
	for (const auto& d : dups.found)
		errors.push_back({file_label, d.path.empty() ? "(root)" : d.path,
				  fmt::format("duplicate key '{}'", printable(d.key))});
	return doc;
}

std::string json_type_name(const json& v)
{
	return type_name(v);
}

ParseResult parse_policy_text(std::string_view text, const std::string& file_label)
{
	return Parser(file_label).document(text);
}

ParseResult parse_policy_file(const std::string& path)
{
	std::error_code ec;
	if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
		ParseResult res;
		res.errors.push_back({path, "(root)", "is not a regular file"});
		return res;
	}
	std::ifstream in(path, std::ios::binary);
	if (!in) {
		ParseResult res;
		res.errors.push_back({path, "(root)", fmt::format("cannot read: {}", std::strerror(errno))});
		return res;
	}
	std::ostringstream ss;
	ss << in.rdbuf();
	return parse_policy_text(ss.str(), path);
}

bool allows_outside_abstract(const Policy& p)
{
	for (const auto& r : p.rules)
		if (r.action == Action::Allow && r.unix_target && r.unix_target->abstract)
			return true;
	return false;
}

std::string format_unix(const UnixTarget& u)
{
	return (u.abstract ? "@" : "") + u.bytes + (u.prefix ? "*" : "");
}

namespace {

// linux/socket.h, AF_UNIX (1) to AF_MCTP (45).
constexpr const char* kFamilyNames[kFamilyMax] = {
	nullptr,     "unix",  "inet",     "ax25",     "ipx",    "appletalk", "netrom",     "bridge",
	"atmpvc",    "x25",   "inet6",    "rose",     "decnet", "netbeui",   "security",   "key",
	"netlink",   "packet", "ash",     "econet",   "atmsvc", "rds",       "sna",        "irda",
	"pppox",     "wanpipe", "llc",    "ib",       "mpls",   "can",       "tipc",       "bluetooth",
	"iucv",      "rxrpc", "isdn",     "phonet",   "ieee802154", "caif",  "alg",        "nfc",
	"vsock",     "kcm",   "qipcrtr",  "smc",      "xdp",    "mctp",
};

}  // namespace

const char* family_name(unsigned af)
{
	return af < kFamilyMax ? kFamilyNames[af] : nullptr;
}

int family_number(std::string_view name)
{
	if (name == "netlink-route")
		return kNetlinkRouteBit;
	for (unsigned af = 1; af < kFamilyMax; af++)
		if (name == kFamilyNames[af])
			return static_cast<int>(af);
	return -1;
}

std::vector<std::string> family_names(uint64_t mask)
{
	std::vector<std::string> out;
	for (unsigned af = 1; af < kFamilyMax; af++)
		if (mask & (1ull << af))
			out.emplace_back(kFamilyNames[af]);
	if ((mask & (1ull << kNetlinkRouteBit)) && !(mask & (1ull << 16)))
		out.emplace_back("netlink-route");
	return out;
}

std::string describe(const Rule& r)
{
	std::string s = to_string(r.action);
	if (r.cidr)
		s += " " + format_cidr(*r.cidr);
	else if (r.domain)
		s += std::string(" ") + (r.wildcard ? "*." : "") + *r.domain;
	else if (r.unix_target)
		return s + " unix " + printable(format_unix(*r.unix_target));
	if (!r.ports.empty()) {
		s += " ports ";
		for (size_t i = 0; i < r.ports.size(); i++) {
			if (i)
				s += ",";
			s += r.ports[i].lo == r.ports[i].hi ? std::to_string(r.ports[i].lo)
							    : fmt::format("{}-{}", r.ports[i].lo, r.ports[i].hi);
		}
	}
	if (r.proto_mask == AL_PROTO_TCP)
		s += " tcp";
	else if (r.proto_mask == AL_PROTO_UDP)
		s += " udp";
	else if (r.proto_mask == AL_PROTO_ICMP)
		s += " icmp";
	if (r.redirect)
		s += " to " + (r.redirect->world ? std::string("world")
				 : r.redirect->address.family == AL_FAMILY_IPV6
					 ? fmt::format("[{}]:{}", format_address(r.redirect->address), r.redirect->port)
					 : fmt::format("{}:{}", format_address(r.redirect->address), r.redirect->port));
	if (r.tls_sni_require)
		s += " sni-gate";
	if (r.budget_egress_bytes)
		s += fmt::format(" budget {} bytes", *r.budget_egress_bytes);
	return s;
}

}  // namespace airlock
