// The HTTP gate's part of a policy file: a rule's "http" entries, its
// "inject" headers and "tls": {"upstream_ca"}, and the policy's "secrets"
// (docs/gate.md).
#include <set>

#include <nlohmann/json.hpp>

#include "net/url.h"
#include "policy/parser.h"

namespace airlock::policy_parse {

namespace {

// Headers the gate writes itself, or that frame the message: an entry
// may not inject them.
const std::set<std::string> kFramingHeaders = {
	"host",    "content-length", "transfer-encoding", "connection",          "upgrade", "te",
	"trailer", "keep-alive",     "proxy-connection",  "proxy-authorization", "expect",  "http2-settings",
};

bool secret_name(std::string_view s)
{
	return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
		return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
	});
}

constexpr uint64_t kMaxBodyLimit = 64ull << 20;

}  // namespace

std::optional<HttpRate> Parser::http_rate(const json& v, const std::string& path)
{
	if (!expect(v, path, v.is_string(), "a string"))
		return std::nullopt;
	std::string s = v.get<std::string>();
	auto bad = [&] {
		error(path, fmt::format("'{}' is not N/s, N/m or N/h (N from 1 to 1000000)", printable(s)));
		return std::nullopt;
	};
	size_t slash = s.find('/');
	if (slash == std::string::npos || slash == 0 || slash > 7 || slash + 2 != s.size())
		return bad();
	if (!std::all_of(s.begin(), s.begin() + static_cast<long>(slash),
			 [](unsigned char c) { return std::isdigit(c); }))
		return bad();
	unsigned long n = std::stoul(s.substr(0, slash));
	HttpRate r;
	switch (s.back()) {
	case 's':
		r.per_seconds = 1;
		break;
	case 'm':
		r.per_seconds = 60;
		break;
	case 'h':
		r.per_seconds = 3600;
		break;
	default:
		return bad();
	}
	if (n < 1 || n > 1000000)
		return bad();
	r.count = static_cast<uint32_t>(n);
	return r;
}

void Parser::http_methods(const json& v, const std::string& path, HttpEntry& e)
{
	if (!expect(v, path, v.is_array(), "an array"))
		return;
	if (v.empty())
		error(path, "is empty (name each method the entry allows)");
	for (size_t i = 0; i < v.size(); i++) {
		std::string mp = join(path, std::to_string(i));
		if (!expect(v[i], mp, v[i].is_string(), "a string"))
			continue;
		std::string m = v[i].get<std::string>();
		if (!url::is_token(m) || m.size() > 24 || !std::all_of(m.begin(), m.end(), [](unsigned char c) {
			    return std::isupper(c) || c == '-' || c == '_';
		    }))
			error(mp, fmt::format("'{}' is not a method (upper case letters, as sent: GET, POST, ...)",
					      printable(m)));
		else if (m == "CONNECT")
			error(mp, "CONNECT is refused inside the gate (it would open a tunnel the gate cannot read)");
		else if (std::find(e.methods.begin(), e.methods.end(), m) != e.methods.end())
			error(mp, fmt::format("'{}' is listed twice", m));
		else
			e.methods.push_back(m);
	}
}

void Parser::http_path(const json& v, const std::string& path, HttpEntry& e)
{
	if (!expect(v, path, v.is_string(), "a string"))
		return;
	std::string p = v.get<std::string>();
	if (p == "/*") {
		e.path = "/";
		e.prefix = true;
		return;
	}
	bool prefix = p.size() >= 2 && p.compare(p.size() - 2, 2, "/*") == 0;
	std::string body = prefix ? p.substr(0, p.size() - 1) : p;
	if (p.find('?') != std::string::npos) {
		error(path, fmt::format("'{}' has a '?': the query is matched apart, with \"query\"", printable(p)));
		return;
	}
	// The path as the gate writes a request's: a policy path that is not
	// canonical could never match one.
	auto canon = url::canonical_target(body);
	if (!canon) {
		error(path, fmt::format("'{}': {}", printable(p), canon.rejection().message));
		return;
	}
	if (body.find('*') != std::string::npos) {
		error(path, fmt::format("'{}': '*' only ends a prefix, as the whole last segment (\"/wiki/*\")",
					printable(p)));
		return;
	}
	if (canon->path != body) {
		error(path, fmt::format("'{}' is not in canonical form: write '{}{}'", printable(p), canon->path,
					prefix ? "*" : ""));
		return;
	}
	e.path = body;
	e.prefix = prefix;
}

void Parser::http_query(const json& v, const std::string& path, HttpEntry& e)
{
	if (!expect(v, path, v.is_object(), "an object"))
		return;
	for (auto it = v.begin(); it != v.end(); ++it) {
		std::string qp = join(path, it.key());
		if (it.key().empty()) {
			error(qp, "a parameter has a name");
			continue;
		}
		if (!expect(it.value(), qp, it.value().is_array(), "an array of values"))
			continue;
		HttpQueryRule q{it.key(), {}};
		if (it.value().empty())
			error(qp, "is empty (list the values the parameter may have)");
		for (size_t i = 0; i < it.value().size(); i++) {
			const json& s = it.value()[i];
			if (expect(s, join(qp, std::to_string(i)), s.is_string(), "a string"))
				q.values.push_back(s.get<std::string>());
		}
		e.query.push_back(std::move(q));
	}
}

void Parser::http_json(const json& v, const std::string& path, HttpEntry& e)
{
	if (!expect(v, path, v.is_object(), "an object"))
		return;
	for (auto it = v.begin(); it != v.end(); ++it) {
		std::string jp = join(path, it.key());
		try {
			json::json_pointer ptr(it.key());
			(void)ptr;
		} catch (const json::exception&) {
			error(jp, fmt::format("'{}' is not a JSON pointer (\"/to\", \"/items/0/name\")",
					      printable(it.key())));
			continue;
		}
		if (it.key().empty()) {
			error(jp, "the whole body is not a field: name one (\"/to\")");
			continue;
		}
		if (expect(it.value(), jp, it.value().is_string(), "a string (a glob: '*' any characters)"))
			e.json.push_back({it.key(), it.value().get<std::string>()});
	}
}

std::optional<HttpEntry> Parser::http_entry(const json& v, const std::string& path)
{
	if (!expect(v, path, v.is_object(), "an object"))
		return std::nullopt;
	unknown_keys(v, path, {"methods", "path", "query", "query_only", "json", "max_body_bytes", "rate", "then"});
	size_t before = errors_.size();
	HttpEntry e;
	if (!v.contains("methods"))
		error(join(path, "methods"), "missing (the methods the entry allows: [\"GET\", \"HEAD\"])");
	else
		http_methods(v["methods"], join(path, "methods"), e);
	if (!v.contains("path"))
		error(join(path, "path"), "missing (a path, or a prefix ending in /*)");
	else
		http_path(v["path"], join(path, "path"), e);
	if (v.contains("query"))
		http_query(v["query"], join(path, "query"), e);
	if (v.contains("query_only")) {
		const json& q = v["query_only"];
		if (expect(q, join(path, "query_only"), q.is_boolean(), "a boolean"))
			e.query_only = q.get<bool>();
	}
	if (v.contains("json"))
		http_json(v["json"], join(path, "json"), e);
	if (v.contains("max_body_bytes")) {
		const json& n = v["max_body_bytes"];
		std::string np = join(path, "max_body_bytes");
		if (expect(n, np, n.is_number_integer() || n.is_number_unsigned(), "an integer")) {
			bool negative = n.is_number_integer() && n.get<int64_t>() < 0;
			if (negative || n.get<uint64_t>() > kMaxBodyLimit)
				error(np, fmt::format("{} is out of range (0-{})", n.dump(), kMaxBodyLimit));
			else
				e.max_body_bytes = n.get<uint64_t>();
		}
	}
	if (v.contains("rate"))
		e.rate = http_rate(v["rate"], join(path, "rate"));
	if (v.contains("then"))
		error(join(path, "then"), "is reserved and not supported yet");
	if (errors_.size() != before)
		return std::nullopt;
	return e;
}

std::optional<InjectHeader> Parser::inject_header(const std::string& name, const json& v, const std::string& path)
{
	if (!url::is_token(name)) {
		error(path, fmt::format("'{}' is not a header name", printable(name)));
		return std::nullopt;
	}
	if (kFramingHeaders.count(ascii_lower(name)) != 0) {
		error(path, fmt::format("'{}' frames the message or routes it: the gate writes it itself", name));
		return std::nullopt;
	}
	if (!expect(v, path, v.is_string(), "a string"))
		return std::nullopt;
	std::string s = v.get<std::string>();
	InjectHeader h{name, {}};
	size_t at = 0;
	while (at < s.size()) {
		size_t open = s.find("${", at);
		if (open == std::string::npos) {
			h.value.push_back({false, s.substr(at)});
			break;
		}
		if (open > at)
			h.value.push_back({false, s.substr(at, open - at)});
		size_t close = s.find('}', open);
		std::string ref = close == std::string::npos ? "" : s.substr(open + 2, close - open - 2);
		if (ref.rfind("secret:", 0) != 0 || !secret_name(ref.substr(7))) {
			error(path, fmt::format("'{}': '${{' starts a reference, ${{secret:NAME}}", printable(s)));
			return std::nullopt;
		}
		h.value.push_back({true, ref.substr(7)});
		at = close + 1;
	}
	// A value a server reads as two headers, or a header cut short.
	for (const InjectPart& part : h.value)
		if (!part.secret && part.text.find_first_of("\r\n", 0) != std::string::npos) {
			error(path, "a header value has no CR or LF");
			return std::nullopt;
		}
	return h;
}

// "http" and "inject" of an allow rule, and what "tls" says for it.
void Parser::http_gate(const json& v, const std::string& path, Rule& r)
{
	for (const char* k : {"http", "inject"})
		if (v.contains(k) && r.action != Action::Allow)
			error(join(path, k), "applies to allow rules only");
	if (r.action != Action::Allow)
		return;
	if (v.contains("inject") && !v.contains("http"))
		error(join(path, "inject"), "applies to rules with \"http\" (the gate that sends the requests)");
	if (!v.contains("http"))
		return;
	HttpGate g;
	std::string hp = join(path, "http");
	const json& h = v["http"];
	if (expect(h, hp, h.is_array(), "an array")) {
		if (h.empty())
			error(hp, "is empty (an entry per kind of request the rule allows)");
		for (size_t i = 0; i < h.size(); i++)
			if (auto e = http_entry(h[i], join(hp, std::to_string(i))))
				g.entries.push_back(std::move(*e));
	}
	if (v.contains("cidr") == v.contains("domain"))
		error(hp, "applies to domain and cidr rules");
	// UDP to the same destination (QUIC) would pass beside the gate.
	if (r.proto_mask != AL_PROTO_TCP)
		error(hp, "needs \"protocol\": \"tcp\" (UDP to the same destination would pass beside the gate: QUIC "
			  "falls back to TCP when it is denied)");
	if (v.contains("inject")) {
		const json& in = v["inject"];
		std::string ip = join(path, "inject");
		if (expect(in, ip, in.is_object(), "an object"))
			for (auto it = in.begin(); it != in.end(); ++it)
				if (auto ih = inject_header(it.key(), it.value(), join(ip, it.key()))) {
					bool twice = std::any_of(g.inject.begin(), g.inject.end(),
								 [&](const InjectHeader& o) {
									 return ascii_lower(o.name) ==
										ascii_lower(ih->name);
								 });
					if (twice)
						error(join(ip, it.key()), "is named twice (header names ignore case)");
					else
						g.inject.push_back(std::move(*ih));
				}
	}
	r.http = std::move(g);
}

void Parser::secrets(const json& v, const std::string& path, std::vector<SecretSource>& out)
{
	if (!expect(v, path, v.is_object(), "an object"))
		return;
	for (auto it = v.begin(); it != v.end(); ++it) {
		// A name that is not one may hold any byte: the path prints it escaped.
		std::string sp = join(path, printable(it.key()));
		if (!secret_name(it.key())) {
			error(sp, "a secret's name is 1 to 64 of A-Z a-z 0-9 - _ .");
			continue;
		}
		const json& s = it.value();
		if (!expect(s, sp, s.is_object(), "an object"))
			continue;
		unknown_keys(s, sp, {"file", "env_file"});
		if (s.contains("file") == s.contains("env_file")) {
			error(sp, "needs exactly one of 'file' or 'env_file'");
			continue;
		}
		SecretSource src{it.key(), s.contains("env_file"), ""};
		const char* key = src.env_file ? "env_file" : "file";
		const json& f = s[key];
		if (!expect(f, join(sp, key), f.is_string(), "a string"))
			continue;
		src.path = f.get<std::string>();
		if (src.path.empty() || src.path.front() != '/')
			error(join(sp, key), fmt::format("'{}' is not an absolute path", printable(src.path)));
		else
			out.push_back(std::move(src));
	}
}

// Every ${secret:NAME} of an inject names a file secret of "secrets".
void Parser::check_injects(const Policy& p)
{
	for (const Rule& r : p.rules) {
		if (!r.http)
			continue;
		for (const InjectHeader& h : r.http->inject)
			for (const InjectPart& part : h.value) {
				if (!part.secret)
					continue;
				auto s = std::find_if(p.secrets.begin(), p.secrets.end(),
						      [&](const SecretSource& x) { return x.name == part.text; });
				std::string at = fmt::format("rules/{}/inject/{}", r.index, h.name);
				if (s == p.secrets.end())
					error(at, fmt::format("secret '{}' is not in \"secrets\"", part.text));
				else if (s->env_file)
					error(at,
					      fmt::format("secret '{}' is an env_file (values never to send); inject "
							  "takes a file secret",
							  part.text));
			}
	}
}

}  // namespace airlock::policy_parse
