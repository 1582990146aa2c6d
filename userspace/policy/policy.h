#pragma once
// Policy files: parsing and validation. Every error names the file and the
// JSON path; all errors are collected, not just the first.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/address.h"
#include "util/result.h"

namespace airlock {

enum class Mode { Enforce, Audit };
enum class OnViolation { Deny, Freeze, Kill };
// Refuse: unix rules only. Redirect: to the proxy (the recorder of the
// simulated world, or a simulator the operator runs) instead of the
// destination.
enum class Action { Allow, Deny, Refuse, Redirect };

struct PortRange {
	uint16_t lo = 0, hi = 0;
	bool operator==(const PortRange&) const = default;
};

// A unix socket destination: a named path ("/run/x.sock") or an abstract
// name ("@name" in policy files; bytes here without the '@'), exactly or as
// a prefix (written with a trailing '*').
struct UnixTarget {
	bool abstract = false;
	bool prefix = false;
	std::string bytes;
	bool operator==(const UnixTarget&) const = default;
};

// Where a redirect rule sends what it matches: the world (airlock's
// recorder) or a simulator at an address and port.
struct RedirectTarget {
	bool world = true;
	Address address{};
	uint16_t port = 0;
	bool operator==(const RedirectTarget&) const = default;
};

// How often an HTTP entry may decide "allow": count per seconds, for the
// sandbox; past it, 429.
struct HttpRate {
	uint32_t count = 0;
	uint32_t per_seconds = 1;  // 1, 60 or 3600
	bool operator==(const HttpRate&) const = default;
};

// A query parameter an entry requires: present, each time with one of
// the values (decoded).
struct HttpQueryRule {
	std::string name;
	std::vector<std::string> values;
	bool operator==(const HttpQueryRule&) const = default;
};

// A field of a JSON body: the string (or each string of the array) at a
// JSON pointer matches a glob ('*' any run of characters).
struct HttpJsonRule {
	std::string pointer;
	std::string glob;
	bool operator==(const HttpJsonRule&) const = default;
};

// One entry of an inspected rule's "http" list (docs/gate.md). A request
// matches when every part the entry names holds; the first entry that
// matches decides.
struct HttpEntry {
	std::vector<std::string> methods;  // exact
	std::string path;                  // canonical; with prefix, ends in '/': it and below
	bool prefix = false;               // written "/wiki/*"
	std::vector<HttpQueryRule> query;
	bool query_only = false;  // no parameter but those of query
	std::vector<HttpJsonRule> json;
	std::optional<uint64_t> max_body_bytes;
	std::optional<HttpRate> rate;
	bool operator==(const HttpEntry&) const = default;
};

// A piece of an injected header's value: text, or a secret's by name.
struct InjectPart {
	bool secret = false;
	std::string text;  // the text, or the secret's name
	bool operator==(const InjectPart&) const = default;
};

struct InjectHeader {
	std::string name;  // as written
	std::vector<InjectPart> value;
	bool operator==(const InjectHeader&) const = default;
};

// An inspected rule: the proxy ends the sandbox's TLS, judges each request
// against the entries and sends the allowed ones itself.
struct HttpGate {
	std::vector<HttpEntry> entries;
	std::vector<InjectHeader> inject;
	std::string upstream_ca;  // extra roots to verify the origin by ("" the system's)
	bool operator==(const HttpGate&) const = default;
};

// A named secret (the policy's "secrets"): a value never sent, and one a
// rule may inject. file: the whole file, trimmed; env_file: each value of
// KEY=VALUE of kMinSecretBytes or more.
struct SecretSource {
	std::string name;
	bool env_file = false;
	std::string path;
	bool operator==(const SecretSource&) const = default;
};
inline constexpr size_t kMinSecretBytes = 8;

struct Rule {
	size_t index = 0;
	Action action = Action::Deny;
	std::optional<Cidr> cidr;
	std::optional<std::string> domain;  // lowercased, without "*." and trailing dot
	bool wildcard = false;              // "*.domain": names below it, not itself
	std::optional<UnixTarget> unix_target;
	std::vector<PortRange> ports;  // empty: every port
	uint8_t proto_mask = 0;        // al_proto_bit
	std::string comment;
	std::optional<RedirectTarget> redirect;       // action redirect: "to"
	bool tls_sni_require = false;                 // allow: "tls": {"sni": "require"}
	std::optional<uint64_t> budget_egress_bytes;  // allow: "budget": {"egress_bytes": N}
	std::optional<HttpGate> http;                 // allow: "http", "inject", "tls": {"upstream_ca"}
	// An allow rule whose connections the proxy judges (SNI or HTTP gate).
	bool gated() const { return tls_sni_require || http.has_value(); }
	// The rule needs the proxy (a redirect to the world, a gate) rather
	// than the kernel alone (a redirect to HOST:PORT is the kernel's: the
	// connect goes there).
	bool through_proxy() const { return (action == Action::Redirect && (!redirect || redirect->world)) || gated(); }
	bool to_target() const { return action == Action::Redirect && redirect && !redirect->world; }
};

// A canned answer of the world's recorder to an HTTP request.
struct WorldResponse {
	std::string host;    // a name, "*.name", or "*" for any
	std::string method;  // "" any
	std::string path;    // exact, or a prefix ending in '*'; "" any
	unsigned status = 200;
	std::vector<std::pair<std::string, std::string>> headers;
	std::string body;
	bool operator==(const WorldResponse&) const = default;
};

// What the world's DNS answers with (world.dns "synthesize"): one address
// of 198.18.0.0/15 (RFC 2544, never routed) per name. A policy that
// synthesizes gets a rule redirecting it to the world after its own.
inline constexpr const char* kWorldDnsNet = "198.18.0.0";
inline constexpr uint8_t kWorldDnsPrefix = 15;

// The simulated world: where records go, what DNS does, canned answers.
struct WorldPolicy {
	std::string records_dir = "/var/log/airlock/world";  // records: DIR/SANDBOX.jsonl
	uint64_t max_body_bytes = 64 * 1024;                 // of each request body, recorded
	// "synthesize": every query of the sandbox, for any name, is answered
	// by airlock with an address of 198.18.0.0/15 bound to that name, and
	// none leaves; "resolvers": queries go to the listed resolvers as for
	// any rule (for names that rules allow or redirect).
	bool synthesize_dns = true;
	std::vector<WorldResponse> responses;
	bool operator==(const WorldPolicy&) const = default;
};

// An EDNS option a query may carry, at most once, with at most max_length bytes.
struct EdnsOption {
	uint16_t code = 0;
	uint16_t max_length = 0;
	bool operator==(const EdnsOption&) const = default;
};

struct DnsPolicy {
	std::vector<Address> resolvers;
	std::vector<std::string> types = {"A", "AAAA", "CNAME"};
	unsigned max_name_length = 253;
	unsigned max_label_length = 63;
	bool tcp = false;
	unsigned queries_per_second = 50;  // the sandbox's query budget: rate,
	unsigned query_burst = 200;        // and how many may come at once
	unsigned min_ttl = 30;             // learned addresses live this long at least,
	unsigned max_ttl = 3600;           // and at most (seconds)
	// EDNS (docs/dns.md, "What a query may carry"): what the stub resolvers
	// in use send. dig: COOKIE 8 bytes, 1232, DO with +dnssec; glibc: no
	// option, 1200.
	bool edns = true;
	std::vector<EdnsOption> edns_options = {{10, 8}};
	std::vector<uint16_t> edns_udp_sizes = {512, 1200, 1220, 1232, 4096};
	bool edns_dnssec_ok = true;
};

// Socket families by AF_* number, for the "families" key: every family of
// linux/socket.h up to AF_MAX (46 on 6.18). AF_UNSPEC has no name: socket()
// refuses it anyway.
inline constexpr unsigned kFamilyMax = 46;
// The name of AF_* number af, or nullptr.
const char* family_name(unsigned af);
// The AF_* number of a name, or -1.
int family_number(std::string_view name);
// "netlink-route": AF_NETLINK with protocol NETLINK_ROUTE only, in a bit of
// its own. glibc's getaddrinfo (AI_ADDRCONFIG: Python, curl) asks the kernel
// which addresses are configured; an unprivileged rtnetlink socket can ask
// and listen, but not send to another process (as NETLINK_USERSOCK can).
inline constexpr unsigned kNetlinkRouteBit = 63;
// inet, inet6, unix, netlink-route.
inline constexpr uint64_t kDefaultFamilies = (1ull << 1) | (1ull << 2) | (1ull << 10) | (1ull << kNetlinkRouteBit);
// "inet", "inet6", "unix" for a mask, in AF_* order.
std::vector<std::string> family_names(uint64_t mask);
// "COOKIE" -> 10; a decimal code string -> that code.
std::optional<uint16_t> edns_option_code(const std::string& name);

struct Policy {
	int version = 1;
	std::string name, description;
	Mode mode = Mode::Enforce;
	OnViolation on_violation = OnViolation::Deny;
	std::vector<Rule> rules;
	DnsPolicy dns;
	// Bit N: processes airlock starts may create sockets of AF_* family N
	// (a seccomp filter on socket() and socketpair(); the rest fail EPERM).
	uint64_t families = kDefaultFamilies;
	// io_uring_setup is allowed: IORING_OP_SOCKET makes sockets of any
	// family without the socket() syscall, so it is off unless asked for.
	bool io_uring = false;
	std::optional<WorldPolicy> world;   // set when some rule redirects to the world
	std::vector<SecretSource> secrets;  // by name, sorted
	std::string source;                 // the file it came from
};

struct PolicyError {
	std::string file, path, message;
	std::string str() const;  // "FILE: PATH: MESSAGE"
};

// Why a policy was not read or not compiled: every mistake, not just the
// first (never empty), each with its file and JSON path.
struct PolicyRejection {
	std::vector<PolicyError> errors;
	std::string first() const { return errors.front().str(); }
	// "FILE: PATH: MESSAGE" each: the rejection as a command shows it.
	Rejection lines() const;
};

Result<Policy, PolicyRejection> parse_policy_text(std::string_view text, const std::string& file_label);

// JSON read as policy files are read: a syntax error is one error with its
// line and column (and nullopt), every repeated key an error of its own.
std::optional<nlohmann::json> parse_json_checked(std::string_view text, const std::string& file_label,
						 std::vector<PolicyError>& errors);
// "a string", "an integer", "an object", ... for "expected X, got Y".
std::string json_type_name(const nlohmann::json& v);
Result<Policy, PolicyRejection> parse_policy_file(const std::string& path);

// Unix sockets every program probes (glibc's nscd client, nss-systemd's
// user database): refused without a violation unless a rule names them
// exactly. Each is a way out (nscd resolves host names for its callers).
struct BuiltinUnixRefusal {
	const char* target;  // as a policy file writes it
};
extern const BuiltinUnixRefusal kBuiltinUnixRefusals[3];

// Some allow rule names an abstract unix socket (so the processes of the
// sandbox may reach abstract sockets bound outside it).
bool allows_outside_abstract(const Policy& p);

// A unix target as a policy file writes it: "/run/x.sock", "@name*".
std::string format_unix(const UnixTarget& u);

// "allow 10.20.0.0/16 ports 5432,8000-8100 tcp": for logs and `policy show`;
// "redirect 0.0.0.0/0 to world", "allow pypi.org ports 443 tcp sni-gate budget 1048576".
std::string describe(const Rule& r);

const char* to_string(Mode m);
const char* to_string(OnViolation v);
const char* to_string(Action a);

}  // namespace airlock
