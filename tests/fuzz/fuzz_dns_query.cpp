// The world's DNS (proxy/dns.h) on arbitrary bytes:
//  - it never reads past its input and throws nothing; a message is
//    ignored exactly when it is shorter than a header or a response;
//  - every answer is a response to that query: its ID, QR set, the opcode
//    and RD copied, one question (the query's bytes, exactly) when it was
//    read, else none; at most one answer record, and never more than 512
//    bytes for a question it read (an answer fits a plain UDP message);
//  - the name it reports is the question's name: written back to wire
//    form from its escapes it is the question's bytes, and it is printable
//    ASCII (no byte a terminal or a log would act on);
//  - an A answer is an address of 198.18.0.0/15 that the table gives back
//    the name for, and the same name (in any case) gets the same address
//    while it is bound; the table never holds more than its capacity.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "fuzz_check.h"
#include "proxy/dns.h"

using airlock::fuzz::check;
using namespace airlock::proxy;

namespace {

uint16_t be16(std::string_view s, size_t at)
{
	return static_cast<uint16_t>((static_cast<uint8_t>(s[at]) << 8) | static_cast<uint8_t>(s[at + 1]));
}

// Presentation form back to labels on the wire (the escapes of RFC 4343).
std::string to_wire(std::string_view name)
{
	if (name == ".")
		return std::string(1, '\0');
	std::string out, label;
	for (size_t i = 0; i < name.size(); i++) {
		char c = name[i];
		if (c == '\\') {
			check(i + 1 < name.size(), "an escape is whole", name);
			if (std::isdigit(static_cast<unsigned char>(name[i + 1]))) {
				check(i + 3 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 2])) &&
					      std::isdigit(static_cast<unsigned char>(name[i + 3])),
				      "a \\DDD escape is whole", name);
				label.push_back(static_cast<char>(std::stoi(std::string(name.substr(i + 1, 3)))));
				i += 3;
			} else {
				label.push_back(name[++i]);
			}
		} else if (c == '.') {
			out.push_back(static_cast<char>(label.size()));
			out += label;
			label.clear();
		} else {
			label.push_back(c);
		}
	}
	out.push_back(static_cast<char>(label.size()));
	out += label;
	out.push_back('\0');
	return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	static NameTable table(8);  // small: binding past it evicts
	std::string_view in(reinterpret_cast<const char*>(data), size);
	DnsQuery q = parse_dns_query(in);
	bool response = size >= 2 + 2 && (static_cast<uint8_t>(in[2]) & 0x80);
	check(q.ignore == (size < 12 || response), "ignored exactly when short or a response");
	if (q.ignore)
		return 0;
	DnsAnswer a = answer_dns_query(q, table);
	const std::string& w = a.wire;
	check(w.size() >= 12, "an answer has a header");
	check(be16(w, 0) == be16(in, 0), "the answer has the query's ID");
	uint16_t flags = be16(w, 2);
	check(flags & 0x8000, "the answer is a response");
	check((flags & 0x7800) == (be16(in, 2) & 0x7800), "the opcode is copied");
	check((flags & 0x0100) == (be16(in, 2) & 0x0100), "RD is copied");
	check((flags & 0xf) == static_cast<unsigned>(a.rcode), "the rcode is the one reported");
	uint16_t qd = be16(w, 4), an = be16(w, 6);
	check(be16(w, 8) == 0 && be16(w, 10) == 0, "no authority or additional records");
	check(an <= 1, "at most one answer");
	if (q.problem != DnsRcode::NoError) {
		check(qd == 0 && an == 0 && w.size() == 12, "a query that was not read gets a bare header");
		return 0;
	}
	check(qd == 1, "one question");
	check(w.compare(12, q.question.size(), q.question) == 0, "the question is the query's, byte for byte");
	check(w.size() <= 512, "an answer fits 512 bytes", fmt::format("{}", w.size()));
	for (unsigned char c : q.name)
		check(c > 0x20 && c < 0x7f, "the name is printable ASCII", q.name);
	std::string wire_name = to_wire(q.name);
	check(q.question.substr(0, q.question.size() - 4) == wire_name, "the name is the question's", q.name);
	if (!a.answer.empty() && (q.qtype == 1 || q.qtype == 255)) {
		auto addr = airlock::parse_address(a.answer);
		check(addr && addr->family == AL_FAMILY_IPV4 && addr->bytes[0] == 198 && (addr->bytes[1] & 0xfe) == 18,
		      "an A answer is in 198.18.0.0/15", a.answer);
		std::string bound = table.name_of(*addr);
		check(bound.size() == q.name.size(), "the table names the address", bound + " vs " + q.name);
		for (size_t i = 0; i < bound.size(); i++)
			check(std::tolower(static_cast<unsigned char>(bound[i])) ==
				      std::tolower(static_cast<unsigned char>(q.name[i])),
			      "the table names the address", bound + " vs " + q.name);
		check(airlock::format_address(table.bind(q.name)) == a.answer, "the same name, the same address");
	}
	check(table.size() <= 8, "the table holds at most its capacity");
	return 0;
}
