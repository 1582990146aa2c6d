#pragma once
// The world's DNS (world.dns "synthesize"): every query a sandbox sends,
// to any address, is redirected to its recorder, which answers it here.
// A name gets one address of 198.18.0.0/15 for the sandbox's life (the
// same name, the same address), so that every later record of a
// connection to that address carries the name. Nothing is resolved and
// nothing leaves.
//
// What is read of a query is its header and its one question: the
// question's name may not use compression (no query needs it), labels
// are 1-63 bytes, the name at most 255 on the wire. What follows the
// question (an EDNS OPT record) is not read, and the answer carries none
// (RFC 6891 6.1.1: a responder without EDNS answers without OPT). The
// answer is built from the question the query sent, byte for byte.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/address.h"

namespace airlock::proxy {

enum class DnsRcode : uint8_t { NoError = 0, FormErr = 1, ServFail = 2, NxDomain = 3, NotImp = 4, Refused = 5 };

struct DnsQuery {
	// Not a query to answer: shorter than a header, or a response (QR
	// set): nothing is sent back (two worlds never answer each other).
	bool ignore = false;
	uint16_t id = 0;
	uint16_t flags = 0;  // as sent (RD is copied into the answer)
	// NoError: the question was read. FormErr (a malformed question,
	// QDCOUNT not 1) or NotImp (an opcode other than QUERY): the answer
	// is that code, without the question.
	DnsRcode problem = DnsRcode::NoError;
	std::string name;  // presentation form, as sent, no trailing dot ("." for the root); escapes \. \\ \DDD
	uint16_t qtype = 0;
	uint16_t qclass = 0;
	std::string_view question;  // the question's bytes on the wire (name, type, class)
};

DnsQuery parse_dns_query(std::string_view wire);

// "A", "AAAA", ... for the usual types, else "TYPE<n>" (RFC 3597).
std::string dns_type_name(uint16_t qtype);
std::string dns_rcode_name(DnsRcode);

// Names to the world's addresses, for one sandbox: at most `capacity`
// names; past that, a new name takes the address of the oldest one,
// which is forgotten. Names compare case-insensitively (ASCII).
class NameTable {
public:
	explicit NameTable(size_t capacity = kDefaultCapacity);
	// A name is at most 1,020 characters here (255 bytes, each \DDD): at
	// most about 33 MB for the table, kept twice.
	static constexpr size_t kDefaultCapacity = 16384;
	static constexpr size_t kMaxCapacity = (size_t(1) << 17) - 2;  // 198.18.0.1 - 198.19.255.254

	Address bind(std::string_view name);  // its address (a new one for a name not bound)
	// The name bound to the address, "" if none.
	const std::string& name_of(const Address&) const;
	size_t size() const { return by_name_.size(); }

private:
	size_t capacity_;
	size_t next_ = 0;                                  // the index the next new name takes
	std::vector<std::string> by_index_;                // address index -> name ("" free)
	std::unordered_map<std::string, size_t> by_name_;  // lowercase name -> index
};

// The world's answer to a query (not one to ignore): for the question
// IN A (or ANY), the name's address from the table; IN PTR of an address
// in the table's range, its name; any other type of a name: no data
// (NOERROR, no answer: clients then ask for A); another class: REFUSED.
// What the answer says, for the record.
struct DnsAnswer {
	std::string wire;
	DnsRcode rcode = DnsRcode::NoError;
	std::string answer;  // the address or name answered, "" none
};

inline constexpr uint32_t kWorldDnsTtl = 300;
DnsAnswer answer_dns_query(const DnsQuery&, NameTable&, uint32_t ttl = kWorldDnsTtl);

}  // namespace airlock::proxy
