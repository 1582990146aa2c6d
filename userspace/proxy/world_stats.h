#pragma once
// What a proxy counts, from its start: the recorder's connections,
// datagrams and records, the SNI gate's and the HTTP gate's verdicts. The proxy reports
// them to the agent over its channel (proxy/agent_channel.h).
#include <cstdint>
#include <optional>
#include <string>

namespace airlock::proxy {

struct WorldStats {
	uint64_t connections = 0;      // accepted, all of them (unknown and busy included)
	uint64_t unknown = 0;          // closed (a datagram: dropped): the lookup knew no origin
	uint64_t refused_busy = 0;     // closed: max_connections were open
	uint64_t http_requests = 0;    // requests read (whole, or their header whole)
	uint64_t tcp_streams = 0;      // streams recorded as "tcp"
	uint64_t datagrams = 0;        // received, all of them (unknown included)
	uint64_t dns_queries = 0;      // answered by the world's DNS (UDP and TCP)
	uint64_t records_written = 0;  // http and tcp lines in the file (not the records-full line)
	uint64_t records_dropped = 0;  // lines not written: the cap, or a failed write
	uint64_t bytes_in = 0;         // read from every connection
	uint64_t sni_passed = 0;       // connections the SNI gate passed
	uint64_t sni_denied = 0;       // ... and denied (each a violation)
	uint64_t http_passed = 0;      // requests the HTTP gate sent to their origin
	uint64_t http_denied = 0;      // ... and answered itself (each a violation)
	uint64_t secrets_refused = 0;  // requests refused for carrying a secret (the gate's and the world's)
	uint64_t gate_reloads = 0;     // new gate inputs a reload handed over, taken without a restart

	bool operator==(const WorldStats&) const = default;
};

// Each count's name where it is written down (the agent's
// STATE_DIR/world/SANDBOX.stats.json, `status --json`).
struct StatsField {
	const char* name;
	uint64_t WorldStats::*member;
};

inline constexpr StatsField kStatsFields[] = {
	{"connections", &WorldStats::connections},         {"unknown", &WorldStats::unknown},
	{"refused_busy", &WorldStats::refused_busy},       {"http_requests", &WorldStats::http_requests},
	{"tcp_streams", &WorldStats::tcp_streams},         {"datagrams", &WorldStats::datagrams},
	{"dns_queries", &WorldStats::dns_queries},         {"records_written", &WorldStats::records_written},
	{"records_dropped", &WorldStats::records_dropped}, {"bytes_in", &WorldStats::bytes_in},
	{"sni_passed", &WorldStats::sni_passed},           {"sni_denied", &WorldStats::sni_denied},
	{"http_passed", &WorldStats::http_passed},         {"http_denied", &WorldStats::http_denied},
	{"secrets_refused", &WorldStats::secrets_refused}, {"gate_reloads", &WorldStats::gate_reloads},
};

// What the agent writes down: the counts, over every start of the proxy,
// and how many starts.
struct ProxyCounts {
	uint64_t starts = 0;
	WorldStats stats;
};
std::string proxy_counts_json(const ProxyCounts&);
// The file's text back, or nothing: not a JSON object, or a count missing
// or not an unsigned number.
std::optional<ProxyCounts> parse_proxy_counts(const std::string& text);

}  // namespace airlock::proxy
