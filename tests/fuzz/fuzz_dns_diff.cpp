// Differential fuzzing of the DNS query parser: the same bytes, as the
// payload of a UDP datagram to a listed resolver, go through the kernel's
// parser (al_egress of the production object, with BPF_PROG_TEST_RUN; the
// process is its own sandbox, tests/bpf/bpf_harness.h) and through the
// reference judge written from the RFCs (dns_ref.cpp). Both must reach
// the same verdict (let out, name, type, length, EDNS, malformed) and,
// wherever the question was read, the same name and type; the query id
// wherever the header was. Any difference aborts with both sides printed.
//
// Root only (BPF_PROG_TEST_RUN, cgroups). Built with the other fuzz
// targets (tests/fuzz/CMakeLists.txt).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bpf_harness.h"
#include "dns_ref.h"

namespace {

using bpft::Programs;
using bpft::Sandbox;

constexpr const char* kSandboxIp = "10.77.0.1";
constexpr const char* kResolver = "10.77.0.53";

// Names under "test" may be asked; a handful of types; limits below the
// kernel's own; EDNS with a cookie, padding and NSID, DO not allowed.
constexpr const char* kPolicy = R"({"version": 1, "name": "fuzz-dns-diff", "on_violation": "deny",
  "rules": [{"action": "allow", "domain": "test"}, {"action": "allow", "domain": "*.test"}],
  "dns": {"resolvers": ["10.77.0.53"], "types": ["A", "AAAA", "CNAME", "MX", "TXT", "SRV", "HTTPS"],
          "max_name_length": 100, "max_label_length": 40,
          "queries_per_second": 100000, "query_burst": 100000,
          "edns": {"options": {"COOKIE": 8, "PADDING": 64, "NSID": 0}, "udp_sizes": [512, 1232, 4096],
                   "dnssec_ok": false}}})";

// The same policy, for the reference.
dnsref::Policy reference_policy()
{
	dnsref::Policy p;
	p.max_name_length = 100;
	p.max_label_length = 40;
	p.types = {1, 28, 5, 15, 16, 33, 65};
	p.edns = true;
	p.edns_options = {{10, 8}, {12, 64}, {3, 0}};
	p.udp_sizes = {512, 1232, 4096};
	p.dnssec_ok = false;
	p.allowed_zone = "test";
	return p;
}

// What the kernel's outcomes add to libFuzzer's coverage: the reason and
// how long a name it read.
__attribute__((used, section("__libfuzzer_extra_counters"))) uint8_t kernel_outcomes[AL_REASON_MAX * 16];

std::unique_ptr<Sandbox> sandbox;
dnsref::Policy policy;

bool kernel_verdict(uint8_t reason, dnsref::Verdict& v)
{
	switch (reason) {
	case AL_REASON_DNS_ALLOW:
		v = dnsref::Verdict::Ok;
		return true;
	case AL_REASON_DNS_NAME:
		v = dnsref::Verdict::Name;
		return true;
	case AL_REASON_DNS_TYPE:
		v = dnsref::Verdict::Type;
		return true;
	case AL_REASON_DNS_LENGTH:
		v = dnsref::Verdict::Length;
		return true;
	case AL_REASON_DNS_EDNS:
		v = dnsref::Verdict::Edns;
		return true;
	case AL_REASON_DNS_MALFORMED:
		v = dnsref::Verdict::Malformed;
		return true;
	}
	return false;
}

// The labels of an event's name (al_name_key form: reversed, each after
// its length), in the order they were sent.
std::vector<std::string> kernel_labels(const al_dns_event& e)
{
	std::vector<std::string> out;
	size_t n = e.name_len ? e.name_len - 1u : 0, at = 0;
	while (at < n && at < sizeof(e.name)) {
		size_t len = e.name[at];
		out.emplace(out.begin(), reinterpret_cast<const char*>(e.name + at + 1), std::min(len, n - at - 1));
		at += len + 1;
	}
	return out;
}

std::string join(const std::vector<std::string>& labels)
{
	std::string s;
	for (const auto& l : labels) {
		s += s.empty() ? "" : ".";
		for (unsigned char c : l) {
			char buf[8];
			std::snprintf(buf, sizeof(buf), c > 32 && c < 127 && c != '.' && c != '\\' ? "%c" : "\\%03u",
				      c);
			s += buf;
		}
	}
	return s;
}

[[noreturn]] void disagree(const char* what, const uint8_t* data, size_t size, const bpft::Event& e,
			   const dnsref::Result& ref)
{
	std::fprintf(
		stderr,
		"fuzz_dns_diff: %s\n  kernel: %s labels '%s'\n  reference: %s id %#x labels '%s' qtype %u\n  input:",
		what, e.describe().c_str(), join(kernel_labels(*e.dns)).c_str(), dnsref::verdict_name(ref.verdict),
		ref.id, join(ref.labels).c_str(), ref.qtype);
	for (size_t i = 0; i < size; i++)
		std::fprintf(stderr, " %02x", data[i]);
	std::fprintf(stderr, "\n");
	std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
	Programs::get();
	sandbox = std::make_unique<Sandbox>(kPolicy, AL_SB_LOG_ALLOWED);
	// Gone before the programs are (registered after them, run before).
	std::atexit([] { sandbox.reset(); });
	policy = reference_policy();
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	if (size > 1400)
		return -1;  // one datagram on an ordinary link; the kernel refuses over 512 anyway
	// Every input is the sandbox's first query of its kind: the event rate
	// limit would hold reports back.
	Programs::get().kernel().reset_counters(Sandbox::kSlot);
	std::string payload(reinterpret_cast<const char*>(data), size);
	int ret = bpft::run_skb(Programs::get().egress(), bpft::udp4(kSandboxIp, kResolver, 40000, 53, payload));
	auto events = sandbox->events();
	dnsref::Result ref = dnsref::judge_query(data, size, policy);
	if (events.size() != 1 || !events[0].dns) {
		std::fprintf(stderr, "fuzz_dns_diff: %zu events for one query\n", events.size());
		std::abort();
	}
	const bpft::Event& e = events[0];
	dnsref::Verdict kernel;
	if (!kernel_verdict(e.base.reason, kernel))
		disagree("the kernel gave a reason no parse can", data, size, e, ref);
	kernel_outcomes[e.base.reason * 16 + std::min<unsigned>(e.dns->name_len / 16, 15)]++;
	if (ret != (kernel == dnsref::Verdict::Ok ? 1 : 0))
		disagree("the kernel's return value is not its reason's", data, size, e, ref);
	if (kernel != ref.verdict)
		disagree("verdicts differ", data, size, e, ref);
	if (ref.have_id && e.dns->qid != ref.id)
		disagree("ids differ", data, size, e, ref);
	bool question_read = ref.verdict == dnsref::Verdict::Ok || ref.verdict == dnsref::Verdict::Name ||
			     ref.verdict == dnsref::Verdict::Type || ref.verdict == dnsref::Verdict::Edns;
	if (question_read && (kernel_labels(*e.dns) != ref.labels || e.dns->qtype != ref.qtype))
		disagree("questions differ", data, size, e, ref);
	return 0;
}
