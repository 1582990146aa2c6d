#include "policy/parser.h"

#include <set>

namespace airlock::policy_parse {

namespace {

const std::set<std::string> kDnsTypes = {"A",  "AAAA", "CNAME", "MX",   "TXT", "SRV",  "PTR",
					 "NS", "SOA",  "HTTPS", "SVCB", "CAA", "NULL", "ANY"};

}  // namespace

void Parser::world(const json& v, const std::string& path, WorldPolicy& w)
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

std::optional<WorldResponse> Parser::world_response(const json& v, const std::string& path)
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
	if (!r.method.empty() &&
	    !std::all_of(r.method.begin(), r.method.end(), [](unsigned char c) { return std::isupper(c) != 0; }))
		error(join(path, "method"),
		      fmt::format("'{}' is not an HTTP method (GET, POST, ...)", printable(r.method)));
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
					       std::all_of(it.key().begin(), it.key().end(),
							   [](unsigned char c) { return std::isalnum(c) || c == '-'; });
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

void Parser::dns(const json& v, const std::string& path, DnsPolicy& d)
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
void Parser::edns(const json& v, const std::string& path, DnsPolicy& d)
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
					error(kp,
					      fmt::format(
						      "'{}' is not an EDNS option name airlock knows or a code (0-65535)",
						      printable(key)));
					continue;
				}
				if (!expect(n, kp, n.is_number_integer() || n.is_number_unsigned(), "an integer"))
					continue;
				if (n.get<int64_t>() < 0 || n.get<int64_t>() > AL_DNS_OPT_MAX - 4) {
					error(kp,
					      fmt::format("{} is out of range (0-{})", n.dump(), AL_DNS_OPT_MAX - 4));
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
				error(op, fmt::format("{} options; at most {}", d.edns_options.size(),
						      AL_DNS_MAX_EDNS_OPTS));
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
				if (std::find(d.edns_udp_sizes.begin(), d.edns_udp_sizes.end(), size) ==
				    d.edns_udp_sizes.end())
					d.edns_udp_sizes.push_back(size);
			}
			if (d.edns_udp_sizes.size() > AL_DNS_MAX_UDP_SIZES)
				error(up, fmt::format("{} sizes; at most {}", d.edns_udp_sizes.size(),
						      AL_DNS_MAX_UDP_SIZES));
		}
	}
	if (v.contains("dnssec_ok")) {
		const json& b = v["dnssec_ok"];
		if (expect(b, join(path, "dnssec_ok"), b.is_boolean(), "a boolean"))
			d.edns_dnssec_ok = b.get<bool>();
	}
}

// The list replaces the default: what is not named is refused.
void Parser::families(const json& v, const std::string& path, uint64_t& mask)
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
			error(ip,
			      fmt::format("{} is not a socket family airlock knows (inet, inet6, unix, netlink-route, "
					  "netlink, packet, vsock, ...)",
					  shown(v[i])));
		else
			mask |= 1ull << af;
	}
}

}  // namespace airlock::policy_parse
