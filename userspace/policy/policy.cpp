#include "policy/policy.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "util/text.h"

namespace airlock {

std::string PolicyError::str() const
{
	return fmt::format("{}: {}: {}", file, path, message);
}

Rejection PolicyRejection::lines() const
{
	Rejection r;
	for (const auto& e : errors)
		r.lines.push_back(e.str());
	return r;
}

const char* to_string(Mode m)
{
	return m == Mode::Enforce ? "enforce" : "audit";
}
const char* to_string(OnViolation v)
{
	switch (v) {
	case OnViolation::Deny:
		return "deny";
	case OnViolation::Freeze:
		return "freeze";
	case OnViolation::Kill:
		return "kill";
	}
	return "?";
}
const char* to_string(Action a)
{
	switch (a) {
	case Action::Allow:
		return "allow";
	case Action::Deny:
		return "deny";
	case Action::Refuse:
		return "refuse";
	case Action::Redirect:
		return "redirect";
	}
	return "?";
}

const BuiltinUnixRefusal kBuiltinUnixRefusals[3] = {
	{"/var/run/nscd/socket"},
	{"/run/nscd/socket"},
	{"/run/systemd/userdb/*"},
};

std::optional<uint16_t> edns_option_code(const std::string& name)
{
	static const std::map<std::string, uint16_t> names = {
		{"NSID", 3},           {"CLIENT-SUBNET", 8}, {"EXPIRE", 9}, {"COOKIE", 10},
		{"TCP-KEEPALIVE", 11}, {"PADDING", 12},      {"CHAIN", 13}, {"KEY-TAG", 14},
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
	nullptr,   "unix",    "inet",    "ax25",   "ipx",        "appletalk", "netrom",   "bridge",
	"atmpvc",  "x25",     "inet6",   "rose",   "decnet",     "netbeui",   "security", "key",
	"netlink", "packet",  "ash",     "econet", "atmsvc",     "rds",       "sna",      "irda",
	"pppox",   "wanpipe", "llc",     "ib",     "mpls",       "can",       "tipc",     "bluetooth",
	"iucv",    "rxrpc",   "isdn",    "phonet", "ieee802154", "caif",      "alg",      "nfc",
	"vsock",   "kcm",     "qipcrtr", "smc",    "xdp",        "mctp",
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
	if (r.http)
		s += fmt::format(" http-gate ({} entr{})", r.http->entries.size(),
				 r.http->entries.size() == 1 ? "y" : "ies");
	if (r.budget_egress_bytes)
		s += fmt::format(" budget {} bytes", *r.budget_egress_bytes);
	return s;
}

}  // namespace airlock