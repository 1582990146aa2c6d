#include "proxy/dns.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "policy/policy.h"  // kWorldDnsNet

namespace airlock::proxy {

namespace {

constexpr size_t kHeader = 12;
constexpr size_t kMaxWireName = 255;
constexpr uint16_t kQr = 0x8000, kOpcode = 0x7800, kAa = 0x0400, kRd = 0x0100, kRa = 0x0080;
constexpr uint16_t kTypeA = 1, kTypePtr = 12, kTypeAny = 255, kClassIn = 1;

uint16_t be16(std::string_view s, size_t at)
{
	return static_cast<uint16_t>((static_cast<uint8_t>(s[at]) << 8) | static_cast<uint8_t>(s[at + 1]));
}

void put16(std::string& out, uint16_t v)
{
	out.push_back(static_cast<char>(v >> 8));
	out.push_back(static_cast<char>(v & 0xff));
}

void put32(std::string& out, uint32_t v)
{
	put16(out, static_cast<uint16_t>(v >> 16));
	put16(out, static_cast<uint16_t>(v & 0xffff));
}

// A label's bytes in presentation form (RFC 4343 escapes).
void present_label(std::string& out, std::string_view label)
{
	for (unsigned char c : label) {
		if (c == '.' || c == '\\')
			out += '\\', out += static_cast<char>(c);
		else if (c > 0x20 && c < 0x7f)
			out += static_cast<char>(c);
		else
			out += fmt::format("\\{:03d}", c);
	}
}

std::string lower(std::string_view s)
{
	std::string r(s);
	std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) {
		return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : static_cast<char>(c);
	});
	return r;
}

uint32_t world_base()
{
	static const uint32_t base = [] {
		Address a = *parse_address(kWorldDnsNet);
		return (uint32_t(a.bytes[0]) << 24) | (uint32_t(a.bytes[1]) << 16) | (uint32_t(a.bytes[2]) << 8) |
		       a.bytes[3];
	}();
	return base;
}

Address address_of_index(size_t i)
{
	uint32_t v = world_base() + 1 + static_cast<uint32_t>(i);
	Address a;
	a.family = AL_FAMILY_IPV4;
	a.bytes[0] = static_cast<uint8_t>(v >> 24);
	a.bytes[1] = static_cast<uint8_t>(v >> 16);
	a.bytes[2] = static_cast<uint8_t>(v >> 8);
	a.bytes[3] = static_cast<uint8_t>(v);
	return a;
}

std::optional<size_t> index_of_address(const Address& a)
{
	if (a.family != AL_FAMILY_IPV4)
		return std::nullopt;
	uint32_t v = (uint32_t(a.bytes[0]) << 24) | (uint32_t(a.bytes[1]) << 16) | (uint32_t(a.bytes[2]) << 8) |
		     a.bytes[3];
	uint32_t base = world_base();
	if (v <= base || v - base - 1 >= NameTable::kMaxCapacity)
		return std::nullopt;
	return v - base - 1;
}

// "D.C.B.A.in-addr.arpa" (any case) -> A.B.C.D; nullopt for any other name.
std::optional<Address> reverse_v4(std::string_view name)
{
	std::string n = lower(name);
	const std::string_view suffix = ".in-addr.arpa";
	if (n.size() <= suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
		return std::nullopt;
	std::string_view rest = std::string_view(n).substr(0, n.size() - suffix.size());
	std::array<unsigned, 4> parts{};
	size_t k = 0;
	while (k < 4) {
		size_t dot = rest.find('.');
		std::string_view p = rest.substr(0, dot);
		if (p.empty() || p.size() > 3 ||
		    !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; }))
			return std::nullopt;
		if (p.size() > 1 && p[0] == '0')
			return std::nullopt;
		parts[k++] = static_cast<unsigned>(std::stoul(std::string(p)));
		if (parts[k - 1] > 255)
			return std::nullopt;
		if (dot == std::string_view::npos)
			break;
		rest = rest.substr(dot + 1);
	}
	if (k != 4 || rest.find('.') != std::string_view::npos)
		return std::nullopt;
	Address a;
	a.family = AL_FAMILY_IPV4;
	for (size_t i = 0; i < 4; i++)
		a.bytes[i] = static_cast<uint8_t>(parts[3 - i]);
	return a;
}

// A name in presentation form to wire form (for a PTR's answer): the
// table's names came from questions, so their escapes are ours.
std::string wire_name(std::string_view name)
{
	std::string out, label;
	auto flush = [&] {
		out.push_back(static_cast<char>(label.size()));
		out += label;
		label.clear();
	};
	if (name == ".")
		return std::string(1, '\0');
	for (size_t i = 0; i < name.size(); i++) {
		char c = name[i];
		if (c == '\\' && i + 1 < name.size()) {
			if (i + 3 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1]))) {
				label.push_back(static_cast<char>(std::stoi(std::string(name.substr(i + 1, 3)))));
				i += 3;
			} else {
				label.push_back(name[++i]);
			}
		} else if (c == '.') {
			flush();
		} else {
			label.push_back(c);
		}
	}
	flush();
	out.push_back('\0');
	return out;
}

}  // namespace

DnsQuery parse_dns_query(std::string_view wire)
{
	DnsQuery q;
	if (wire.size() < kHeader || (be16(wire, 2) & kQr)) {
		q.ignore = true;
		return q;
	}
	q.id = be16(wire, 0);
	q.flags = be16(wire, 2);
	if (((q.flags >> 11) & 0xf) != 0) {
		q.problem = DnsRcode::NotImp;
		return q;
	}
	if (be16(wire, 4) != 1) {
		q.problem = DnsRcode::FormErr;
		return q;
	}
	size_t at = kHeader;
	std::string name;
	for (;;) {
		if (at >= wire.size() || at - kHeader >= kMaxWireName) {
			q.problem = DnsRcode::FormErr;
			return q;
		}
		size_t len = static_cast<uint8_t>(wire[at]);
		if (len == 0)
			break;
		// Compression (0xC0) and the extended label types (0x40, 0x80).
		if (len > 63 || at + 1 + len >= wire.size() || at + 1 + len - kHeader >= kMaxWireName) {
			q.problem = DnsRcode::FormErr;
			return q;
		}
		if (!name.empty())
			name += '.';
		present_label(name, wire.substr(at + 1, len));
		at += 1 + len;
	}
	at++;  // the root label
	if (at + 4 > wire.size()) {
		q.problem = DnsRcode::FormErr;
		return q;
	}
	q.name = name.empty() ? "." : name;
	q.qtype = be16(wire, at);
	q.qclass = be16(wire, at + 2);
	q.question = wire.substr(kHeader, at + 4 - kHeader);
	return q;
}

std::string dns_type_name(uint16_t t)
{
	switch (t) {
	case 1:
		return "A";
	case 2:
		return "NS";
	case 5:
		return "CNAME";
	case 6:
		return "SOA";
	case 12:
		return "PTR";
	case 15:
		return "MX";
	case 16:
		return "TXT";
	case 28:
		return "AAAA";
	case 33:
		return "SRV";
	case 64:
		return "SVCB";
	case 65:
		return "HTTPS";
	case 255:
		return "ANY";
	default:
		return fmt::format("TYPE{}", t);
	}
}

std::string dns_rcode_name(DnsRcode r)
{
	switch (r) {
	case DnsRcode::NoError:
		return "NOERROR";
	case DnsRcode::FormErr:
		return "FORMERR";
	case DnsRcode::ServFail:
		return "SERVFAIL";
	case DnsRcode::NxDomain:
		return "NXDOMAIN";
	case DnsRcode::NotImp:
		return "NOTIMP";
	case DnsRcode::Refused:
		return "REFUSED";
	}
	return "?";
}

NameTable::NameTable(size_t capacity) : capacity_(std::clamp<size_t>(capacity, 1, kMaxCapacity)) {}

Address NameTable::bind(std::string_view name)
{
	std::string key = lower(name);
	if (auto it = by_name_.find(key); it != by_name_.end())
		return address_of_index(it->second);
	size_t i = next_;
	next_ = (next_ + 1) % capacity_;
	if (i < by_index_.size()) {
		if (!by_index_[i].empty())
			by_name_.erase(lower(by_index_[i]));
		by_index_[i] = std::string(name);
	} else {
		by_index_.emplace_back(name);
	}
	by_name_.emplace(std::move(key), i);
	return address_of_index(i);
}

const std::string& NameTable::name_of(const Address& a) const
{
	static const std::string none;
	auto i = index_of_address(a);
	return i && *i < by_index_.size() ? by_index_[*i] : none;
}

DnsAnswer answer_dns_query(const DnsQuery& q, NameTable& names, uint32_t ttl)
{
	DnsAnswer a;
	a.rcode = q.problem;
	std::string rr;
	uint16_t ancount = 0;
	if (q.problem == DnsRcode::NoError) {
		if (q.qclass != kClassIn) {
			a.rcode = DnsRcode::Refused;
		} else if (q.qtype == kTypeA || q.qtype == kTypeAny) {
			Address addr = names.bind(q.name);
			a.answer = format_address(addr);
			put16(rr, 0xc000 | kHeader);  // the question's name
			put16(rr, kTypeA);
			put16(rr, kClassIn);
			put32(rr, ttl);
			put16(rr, 4);
			rr.append(reinterpret_cast<const char*>(addr.bytes.data()), 4);
			ancount = 1;
		} else if (q.qtype == kTypePtr) {
			auto addr = reverse_v4(q.name);
			const std::string& name = addr ? names.name_of(*addr) : std::string();
			if (name.empty()) {
				a.rcode = DnsRcode::NxDomain;
			} else {
				a.answer = name;
				std::string target = wire_name(name);
				put16(rr, 0xc000 | kHeader);
				put16(rr, kTypePtr);
				put16(rr, kClassIn);
				put32(rr, ttl);
				put16(rr, static_cast<uint16_t>(target.size()));
				rr += target;
				ancount = 1;
			}
		}
	}
	bool with_question = q.problem == DnsRcode::NoError;
	std::string& w = a.wire;
	put16(w, q.id);
	put16(w, static_cast<uint16_t>(kQr | (q.flags & kOpcode) | (with_question ? kAa : 0) | (q.flags & kRd) | kRa |
				       static_cast<uint16_t>(a.rcode)));
	put16(w, with_question ? 1 : 0);
	put16(w, ancount);
	put16(w, 0);
	put16(w, 0);
	if (with_question)
		w += q.question;
	w += rr;
	return a;
}

}  // namespace airlock::proxy
