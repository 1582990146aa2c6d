#pragma once
// The world's records: one JSON object per line, what a sandbox tried
// through a redirect (an HTTP request, or the bytes of any other TCP
// stream), written whole or not at all into a file that never grows past
// its cap; and the same lines read back as a table (`airlock world show`).
//
// Everything in a record came from the sandbox and is hostile: strings
// that are not UTF-8 are replaced when dumped (U+FFFD), bodies that are
// not are written as base64, and the table prints every byte a terminal
// could act on as \xNN.
#include <chrono>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/address.h"
#include "util/fd.h"

namespace airlock::proxy {

// Where the sandbox meant to go, found by the kernel.
struct Origin {
	Address addr;          // the original destination
	uint16_t port = 0;     // host order
	uint8_t protocol = 6;  // IPPROTO_TCP
	uint16_t rule = 0;     // index of the policy rule that redirected it
	std::string name;      // the DNS name bound to addr for this sandbox, "" if none known
};

// One HTTP request as the recorder read it.
struct HttpRecord {
	std::chrono::system_clock::time_point time;  // its first byte was read (the accept, for a connection's first)
	bool tls = false;                            // it came inside a TLS connection the recorder ended
	std::string sni;                             // that connection's server_name, "" none
	std::string method;
	std::string host;  // the Host header as sent, "" if none
	std::string path;  // the request target as sent
	// As sent, in order; a name repeated (in any case) is one entry, its
	// values joined with ", " under the first spelling.
	std::vector<std::pair<std::string, std::string>> headers;
	std::string body;         // its first max_body_bytes bytes (decoded from chunks)
	uint64_t body_bytes = 0;  // every body byte it sent
	bool body_truncated = false;
	unsigned status = 0;  // what the recorder answered; 0: nothing (the client went before its request was whole)
	// The policy's secret it carried ("" none): the request was refused,
	// and is recorded without its query, headers and body.
	std::string secret;
	uint64_t duration_ms = 0;
};

// Any other TCP stream (or what followed a request that did not parse).
struct TcpRecord {
	std::chrono::system_clock::time_point time;
	bool tls = false;  // its first bytes are a well-formed TLS ClientHello
	std::string sni;   // the ClientHello's server_name, "" none
	// The recorder ended the TLS connection: bytes_in and head are what it
	// carried (decrypted); tls_error: the handshake failed, why.
	bool decrypted = false;
	std::string tls_error;
	uint64_t bytes_in = 0;
	std::string head;        // the first bytes, at most kHeadBytes
	bool truncated = false;  // the connection reached max_connection_bytes
	uint64_t duration_ms = 0;
};

// A datagram.
struct UdpRecord {
	std::chrono::system_clock::time_point time;  // received
	uint64_t bytes_in = 0;
	std::string head;  // the first bytes, at most kHeadBytes
};

// A DNS query the world answered (world.dns "synthesize").
struct DnsRecord {
	std::chrono::system_clock::time_point time;  // received
	uint64_t bytes_in = 0;
	std::string query;   // the question's name, presentation form, "" none read
	std::string qtype;   // "A", "AAAA", ..., "" none read
	std::string rcode;   // what was answered: "NOERROR", "NXDOMAIN", ...; "" nothing (not a query)
	std::string answer;  // the address (or, for PTR, the name) answered, "" none
	std::string head;    // the first bytes (at most kHeadBytes) of what was not a query, or a malformed one
};

// A connection the SNI gate read: passed (its bytes spliced to the
// destination, untouched) or denied (a violation, nothing sent on).
struct SniRecord {
	std::chrono::system_clock::time_point time;  // accepted
	bool passed = false;
	std::string sni;             // the ClientHello's server_name, "" none read
	std::string reason;          // denied: why, one line; passed: ""
	std::string upstream_error;  // passed the gate, but the destination could not be reached: why
	uint64_t bytes_out = 0;      // sent on to the destination (the ClientHello included)
	uint64_t bytes_back = 0;     // the destination's answer, passed back
	uint64_t duration_ms = 0;
};

// One request as the gate decided it: an audit line, never a secret's
// value, never the query's values.
struct GateRequestRecord {
	std::chrono::system_clock::time_point
		time;      // the request's head was read (the connection's end, when none was)
	bool tls = false;  // inside TLS the gate ended
	std::string method;
	std::string host;
	std::string path;             // the canonical path, without the query
	std::optional<size_t> entry;  // the entry that decided
	// "" allowed; else http-malformed, http-host, http-path, http-deny,
	// http-rate, http-body-size, secret, secret-missing, tls-name (the
	// server name refused), tls (the handshake failed)
	std::string reason;
	std::string detail;                 // why, one line
	std::string secret;                 // reason "secret": the secret's name
	std::vector<std::string> replaced;  // the client's headers inject replaced (lower case)
	unsigned status = 0;                // what the sandbox got (the origin's, or the gate's)
	uint64_t body_bytes = 0;            // the request's body, sent upstream or not
};

inline constexpr size_t kHeadBytes = 64;

// 2026-01-02T03:04:05.123Z (UTC, milliseconds; always 24 characters).
std::string rfc3339_ms(std::chrono::system_clock::time_point);

// The record lines, '\n' included, fields in the documented order
// (docs/world.md).
std::string http_record_line(const std::string& sandbox, const Origin&, const HttpRecord&);
std::string tcp_record_line(const std::string& sandbox, const Origin&, const TcpRecord&);
std::string udp_record_line(const std::string& sandbox, const Origin&, const UdpRecord&);
std::string dns_record_line(const std::string& sandbox, const Origin&, const DnsRecord&);
std::string sni_record_line(const std::string& sandbox, const Origin&, const SniRecord&);
std::string gate_request_line(const std::string& sandbox, const Origin&, const GateRequestRecord&);
std::string records_full_line(const std::string& sandbox, uint64_t max_records_bytes,
			      std::chrono::system_clock::time_point);

// One line of JSON, invalid UTF-8 replaced, with its '\n'.
std::string dump_line(const nlohmann::ordered_json&);
bool valid_utf8(std::string_view);
std::string base64(std::string_view);
std::string hex(std::string_view);

// The records file: appends whole lines, each with one write(2), and
// never lets the file grow past max_bytes. Room for the records-full line
// is kept: the first line that does not fit is dropped (counted) and that
// line written instead, once.
class RecordsWriter {
public:
	// fd: opened O_WRONLY|O_APPEND, owned from here; its size is where the
	// count starts. fd -1: every line is dropped.
	RecordsWriter(int fd, uint64_t max_bytes, std::string sandbox);

	// true: written; false: dropped (the cap, or a write error).
	bool write(const std::string& line);
	void close() { fd_.reset(); }

	uint64_t size() const { return size_; }
	bool full() const { return full_; }  // the records-full line is behind us: every line is dropped
	uint64_t written() const { return written_; }
	uint64_t dropped() const { return dropped_; }

private:
	bool append(const std::string& line);

	Fd fd_;
	uint64_t max_bytes_;
	std::string sandbox_;
	uint64_t size_ = 0;
	size_t reserve_ = 0;  // the records-full line's length
	bool full_ = false;   // the records-full line is behind us (written or not)
	uint64_t written_ = 0;
	uint64_t dropped_ = 0;
};

// `airlock world show`: records read back.
struct ShowOptions {
	std::string sandbox;  // only this sandbox's records; "" all
	bool json = false;    // the lines as they are, not a table
};

struct ShowResult {
	std::string out;                  // what goes to standard output
	std::vector<std::string> errors;  // one line each: "SOURCE:N: ..." for a line that is not a record
};

// The table: TIME (HH:MM:SS.mmm), KIND, DESTINATION (the name when known,
// else the address, with :port), WHAT (METHOD host/path; N bytes [tls
// sni=X]; N bytes for a datagram), BODY (bytes), STATUS; columns aligned, two spaces apart.
ShowResult show_records(std::istream& in, std::string_view source, const ShowOptions&);

}  // namespace airlock::proxy
