#pragma once
// The first bytes a client sends on a TLS connection, read as the SNI gate
// reads them: one ClientHello (RFC 8446 4.1.2, RFC 5246 7.4.1.2) in one or
// more handshake records, every length checked against what encloses it,
// and the server name (RFC 6066 3) it carries.
//
// The bytes are hostile: nothing here trusts a length it has not checked,
// reads past what it was given, or allocates more than the bytes it holds.
// What is not a well-formed ClientHello is never "no name": it is Malformed
// (or NotTls), and the gate treats both as a violation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::proxy {

// A ClientHello larger than this (its handshake message, reassembled from
// its records) is refused: real ones are under 2 KiB, 16 KiB with the
// largest key shares.
inline constexpr size_t kMaxClientHello = 64 * 1024;

struct ClientHello {
	enum class Status {
		NeedMore,   // a prefix of a ClientHello: read more bytes (at most `need` in all)
		NotTls,     // the first record is not a TLS handshake record
		Malformed,  // a handshake record, but not a well-formed ClientHello (`error` says where)
		Ok,
	};
	Status status = Status::NeedMore;
	std::string error;    // Malformed, NotTls: what is wrong, one line
	size_t need = 0;      // NeedMore: the bytes of records to read, when known (0: at least one more)
	size_t consumed = 0;  // Ok: bytes of the records that hold the ClientHello
	uint16_t legacy_version = 0;
	// The host_name of the server_name extension, lowercased; empty when
	// the extension is absent (a client that names no server).
	std::string server_name;
	bool has_server_name = false;
	// encrypted_client_hello (0xfe0d): the real name is hidden from the
	// gate, server_name is only the outer, public one.
	bool encrypted_client_hello = false;
	std::vector<std::string> alpn;     // application_layer_protocol_negotiation, in order
	std::vector<uint16_t> extensions;  // every extension type, in order
};

// Reads a ClientHello from the start of bytes (what the client sent so far).
ClientHello parse_client_hello(std::string_view bytes);

// What RFC 6066 allows as a host_name, as the gate requires it: ASCII
// letters, digits, '-' (not first or last in a label), labels of 1-63
// separated by single dots, at most 253 in all, no trailing dot, not an IPv4
// literal. Returns "" or what is wrong.
std::string host_name_problem(std::string_view name);

const char* to_string(ClientHello::Status);

}  // namespace airlock::proxy
