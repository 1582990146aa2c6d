#pragma once
// What the BPF unit tests share on top of bpf_harness.h: addresses, DNS
// messages, and exact expectations on events.
#include <gtest/gtest.h>

#include <memory>

#include "bpf_harness.h"

namespace bpft {

constexpr const char* kSandbox4 = "10.77.0.1";
constexpr const char* kSandbox6 = "fd77::1";
constexpr const char* kResolver4 = "10.77.0.53";
constexpr const char* kResolver6 = "fd77::53";
constexpr unsigned kClientPort = 40000;
constexpr unsigned kQid = 0x1234;

constexpr unsigned kTypeA = 1, kTypeCname = 5, kTypeNull = 10, kTypeTxt = 16, kTypeAaaa = 28, kTypeOpt = 41;
constexpr unsigned kRd = 0x0100;

// A DNS header (RFC 1035 4.1.1): flags RD unless given.
Wire dns_header(unsigned id, unsigned flags = kRd, unsigned qd = 1, unsigned an = 0, unsigned ns = 0, unsigned ar = 0);
// A whole query: its header (RD, one question) and the question, class IN.
std::string query(const std::string& name, unsigned type = kTypeA, unsigned id = kQid);
// An EDNS OPT record (RFC 6891): root owner, the UDP size as its class,
// extended RCODE 0, version 0, flags, then the options.
std::string opt_record(const std::string& options, unsigned udp_size = 1232, unsigned flags = 0);
std::string edns_option(unsigned code, const std::string& data);
// A resource record (of an answer): owner as wire bytes (a name or a
// pointer), class IN.
std::string rr(const std::string& owner, unsigned type, uint32_t ttl, const std::string& rdata);

// The expected content of an event; cgroup, slot, policy id, time and
// task are checked by event_differs from the sandbox and the caller.
struct Want {
	uint8_t kind = AL_EVENT_DECISION;
	uint8_t hook = AL_HOOK_EGRESS;
	uint8_t verdict = AL_VERDICT_DENY;
	uint8_t reason = 0;
	uint16_t rule = AL_RULE_NONE;
	uint8_t family = 0;
	uint8_t protocol = 0;
	uint16_t port = 0;
	std::string addr{};  // 4 or 16 bytes (addr4, addr6); empty: zero
	uint8_t latched = 0;
	// DNS events:
	std::string qname{};  // empty: no name was parsed
	uint16_t qtype = 0;
	uint16_t qid = 0;
	uint8_t learned = 0;
	uint32_t ttl = 0;
};

// An event about a destination (IPv4 or IPv6 text), denied for reason
// unless the caller says otherwise.
Want to(const std::string& addr, unsigned protocol, unsigned port, uint8_t reason = 0);

// "" if e is exactly w, as the sandbox's (or with unknown, the unknown
// slot's) event; otherwise each field that differs.
std::string event_differs(const Event& e, const Want& w, bool unknown = false);

// The counters of n decisions of a hook, as a starting point of an
// expectation: a denial or an audit counts its reason and a violation (a
// quarantined call is none).
al_counters decided(uint8_t hook, uint8_t verdict, uint8_t reason = 0, uint64_t n = 1);
// ... of n packets let out or dropped at egress (bytes: their total).
al_counters egress_allowed(uint64_t bytes, uint64_t n = 1);
al_counters egress_denied(uint8_t reason, uint64_t bytes, uint64_t n = 1);

// A test with one sandbox for the process's cgroup (use() replaces it). At
// its end, no program may have run without finding it, unless the test
// says so (unknown_used).
class SandboxTest : public ::testing::Test {
protected:
	void TearDown() override;
	void use(const std::string& policy, uint32_t flags = 0);
	// Exactly these events in the sandbox's ring (unknown: the unknown
	// slot's) since the last look.
	void expect_events(const std::vector<Want>& want, bool unknown = false);
	void expect_one_event(const Want& w, bool unknown = false) { expect_events({w}, unknown); }

	std::unique_ptr<Sandbox> sb_;
	bool unknown_used = false;
};

}  // namespace bpft
