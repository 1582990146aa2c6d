#include "dns_ref.h"

#include <algorithm>

namespace dnsref {

namespace {

constexpr size_t kHeaderSize = 12;      // RFC 1035 4.1.1
constexpr size_t kUdpMessageMax = 512;  // RFC 1035 4.2.1: larger messages are truncated
// docs/dns.md: the kernel matches names of at most 252 characters (without
// the trailing dot); RFC 1035 2.3.4 allows 255 octets.
constexpr size_t kNameCharsMax = 252;
constexpr uint16_t kTypeOpt = 41;  // RFC 6891 6.1.1
constexpr uint16_t kClassIn = 1;
constexpr uint16_t kOptionPadding = 12;  // RFC 7830: its bytes carry nothing
constexpr size_t kOptionBytesMax = 128;  // docs/dns.md: an OPT record's rdata, at most

// The header's second 16 bits (RFC 1035 4.1.1; AD and CD, RFC 4035 3.2).
constexpr uint16_t kQr = 0x8000;
constexpr unsigned kOpcodeShift = 11;
constexpr uint16_t kRd = 0x0100, kAd = 0x0020, kCd = 0x0010;
// The OPT record's TTL field, low 16 bits: DO, then Z (RFC 6891 6.1.4).
constexpr uint16_t kDo = 0x8000;

// Reads big-endian fields off the front of a message; every read fails,
// and takes nothing, when the message has too few octets left.
class Reader {
public:
	Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
	size_t left() const { return n_ - at_; }
	bool u8(uint8_t& v)
	{
		if (left() < 1)
			return false;
		v = p_[at_++];
		return true;
	}
	bool u16(uint16_t& v)
	{
		if (left() < 2)
			return false;
		v = static_cast<uint16_t>((p_[at_] << 8) | p_[at_ + 1]);
		at_ += 2;
		return true;
	}
	bool bytes(size_t count, std::string& out)
	{
		if (left() < count)
			return false;
		out.assign(reinterpret_cast<const char*>(p_ + at_), count);
		at_ += count;
		return true;
	}

private:
	const uint8_t* p_;
	size_t n_;
	size_t at_ = 0;
};

std::string fold_case(std::string s)
{
	for (char& c : s)
		if (c >= 'A' && c <= 'Z')
			c = static_cast<char>(c - 'A' + 'a');
	return s;
}

enum class NameRead { Ok, Malformed, TooLong };

// RFC 1035 3.1 and 4.1.4: length-prefixed labels up to the zero-length
// root label. The two high bits of a length octet: 00 a label of 0-63
// octets, 11 a compression pointer (a question has nothing earlier to point
// to: refused), 01 and 10 reserved. A reader stops once the name is longer
// than a name may be.
NameRead read_name(Reader& r, std::vector<std::string>& labels)
{
	size_t chars = 0;  // the labels and the dots between them
	for (;;) {
		uint8_t length;
		if (!r.u8(length))
			return NameRead::Malformed;
		if (length == 0)
			return NameRead::Ok;
		if (length >> 6)
			return NameRead::Malformed;
		std::string label;
		if (!r.bytes(length, label))
			return NameRead::Malformed;
		chars += (labels.empty() ? 0 : 1) + length;
		labels.push_back(fold_case(label));
		if (chars > kNameCharsMax)
			return NameRead::TooLong;
	}
}

// RFC 6891 6.1.2 and 6.1.3, and what docs/dns.md lets a query carry: the
// root as owner, type OPT, a listed UDP payload size as the class,
// extended RCODE 0, version 0, no flag but DO (and DO only if allowed),
// then exactly the rest of the message as options, each listed, within its
// length, at most once; padding all zero.
bool opt_record_allowed(Reader& r, const Policy& p)
{
	uint8_t owner, ext_rcode, version;
	uint16_t type, udp_size, flags, rdlength;
	if (!p.edns || !r.u8(owner) || owner != 0 || !r.u16(type) || type != kTypeOpt || !r.u16(udp_size) ||
	    !r.u8(ext_rcode) || !r.u8(version) || !r.u16(flags) || !r.u16(rdlength))
		return false;
	if (std::find(p.udp_sizes.begin(), p.udp_sizes.end(), udp_size) == p.udp_sizes.end())
		return false;
	if (ext_rcode != 0 || version != 0 || (flags & ~(p.dnssec_ok ? kDo : 0)) != 0)
		return false;
	if (rdlength > kOptionBytesMax || rdlength != r.left())
		return false;
	std::vector<uint16_t> seen;
	while (r.left() > 0) {
		uint16_t code, length;
		std::string data;
		if (!r.u16(code) || !r.u16(length) || !r.bytes(length, data))
			return false;
		auto listed = std::find_if(p.edns_options.begin(), p.edns_options.end(),
					   [&](const EdnsOption& o) { return o.code == code; });
		if (listed == p.edns_options.end() || length > listed->max_length)
			return false;
		if (std::find(seen.begin(), seen.end(), code) != seen.end())
			return false;
		seen.push_back(code);
		if (code == kOptionPadding && data.find_first_not_of('\0') != std::string::npos)
			return false;
	}
	return true;
}

}  // namespace

const char* verdict_name(Verdict v)
{
	switch (v) {
	case Verdict::Ok:
		return "ok";
	case Verdict::Name:
		return "name";
	case Verdict::Type:
		return "type";
	case Verdict::Length:
		return "length";
	case Verdict::Edns:
		return "edns";
	case Verdict::Malformed:
		return "malformed";
	}
	return "?";
}

Result judge_query(const uint8_t* msg, size_t size, const Policy& p)
{
	Result res;
	if (size < kHeaderSize || size > kUdpMessageMax)
		return res;
	Reader r(msg, size);
	uint16_t flags, qdcount, ancount, nscount, arcount;
	r.u16(res.id);
	r.u16(flags);
	r.u16(qdcount);
	r.u16(ancount);
	r.u16(nscount);
	r.u16(arcount);
	res.have_id = true;
	// A standard query (QR 0, opcode 0) asking one question and nothing
	// else; of the other bits only RD, AD and CD.
	if ((flags & kQr) || (flags >> kOpcodeShift) & 0xf || (flags & ~(kRd | kAd | kCd)) != 0)
		return res;
	if (qdcount != 1 || ancount != 0 || nscount != 0)
		return res;

	switch (read_name(r, res.labels)) {
	case NameRead::Ok:
		break;
	case NameRead::TooLong:
		res.verdict = Verdict::Length;
		return res;
	case NameRead::Malformed:
		return res;
	}
	uint16_t qclass;
	if (!r.u16(res.qtype) || !r.u16(qclass))
		return res;
	res.have_question = true;

	if (arcount > 1) {
		res.verdict = Verdict::Edns;
		return res;
	}
	if (arcount == 1 && !opt_record_allowed(r, p)) {
		res.verdict = Verdict::Edns;
		return res;
	}
	if (r.left() != 0)
		return res;  // octets after the question

	size_t chars = 0, longest = 0;  // the name as written with dots, its longest label
	for (size_t i = 0; i < res.labels.size(); i++) {
		chars += (i ? 1 : 0) + res.labels[i].size();
		longest = std::max(longest, res.labels[i].size());
	}
	if (chars > p.max_name_length || longest > p.max_label_length)
		res.verdict = Verdict::Length;
	else if (std::find(p.types.begin(), p.types.end(), res.qtype) == p.types.end() || qclass != kClassIn)
		res.verdict = Verdict::Type;
	else if (res.labels.empty() || res.labels.back() != fold_case(p.allowed_zone))
		res.verdict = Verdict::Name;
	else
		res.verdict = Verdict::Ok;
	return res;
}

}  // namespace dnsref
