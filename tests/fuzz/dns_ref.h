#pragma once
// A reference judge of DNS queries, written from RFC 1035 (the message
// format), RFC 6891 (the OPT record) and what docs/dns.md says a query may
// be, independently of the kernel's parser (bpf/dns_query.bpf.h): the
// differential fuzz target holds the two to the same verdict.
//
// It reads a message as a parser of the RFC would: the header, the
// question, then the additional section; the policy's limits, types and
// names are judged once the message has been read.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dnsref {

enum class Verdict {
	Ok,         // a query the policy lets out
	Name,       // read whole; no rule lets its name be queried
	Type,       // read whole; its type is not listed, or its class is not IN
	Length,     // the name is over a limit
	Edns,       // the additional section is not one OPT record the policy allows
	Malformed,  // not a query this judge can read to its end
};
const char* verdict_name(Verdict v);

struct EdnsOption {
	uint16_t code;
	uint16_t max_length;
};

struct Policy {
	size_t max_name_length = 253;  // characters, without the trailing dot
	size_t max_label_length = 63;
	std::vector<uint16_t> types;
	bool edns = true;
	std::vector<EdnsOption> edns_options;
	std::vector<uint16_t> udp_sizes;
	bool dnssec_ok = true;
	// Names whose last label is this one (case-insensitively) may be asked.
	std::string allowed_zone;
};

struct Result {
	Verdict verdict = Verdict::Malformed;
	bool have_id = false;  // the header was read
	uint16_t id = 0;
	bool have_question = false;       // the name, type and class were read
	std::vector<std::string> labels;  // as sent, A-Z folded to a-z
	uint16_t qtype = 0;
};

// The verdict on a message sent to a resolver over UDP.
Result judge_query(const uint8_t* msg, size_t size, const Policy& policy);

}  // namespace dnsref
