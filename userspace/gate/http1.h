#pragma once
// HTTP/1.1 as the gate reads it from a sandbox and writes it to an origin
// (docs/gate.md, "What is refused"). The gate is a proxy between two
// parsers: where they could read one message two ways (request smuggling)
// it refuses, with 400 and nothing upstream. So the reading is strict:
//
// - the request line: METHOD SP TARGET SP HTTP/1.1 (or 1.0) CRLF, the
//   target origin-form or absolute-form (its authority then the Host's);
//   CONNECT, the asterisk form and HTTP/2's preface refused;
// - each header NAME ":" OWS VALUE OWS CRLF: a token name, no space before
//   the colon, no control byte in the value, no line folded (obs-fold), no
//   CR without LF nor LF without CR anywhere;
// - exactly one Host; at most one Content-Length (digits only) or one
//   Transfer-Encoding, which is "chunked", never both; no h2c upgrade.
//
// What goes upstream is written from what was read, never copied: the
// request line with the canonical target, Host, the client's end-to-end
// headers (hop-by-hop ones dropped, injected ones replaced), the body's
// length as a Content-Length.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace airlock::gate {

inline constexpr size_t kMaxHeadBytes = 16 * 1024;
inline constexpr size_t kMaxHeaders = 100;

struct Header {
	std::string name, value;
	bool operator==(const Header&) const = default;
};

// Why a message is not read (400 unless status says otherwise).
struct HttpProblem {
	unsigned status = 400;
	std::string message;
	const std::string& first() const { return message; }
};

struct RequestHead {
	std::string method;
	std::string target;  // origin-form ("/path?query"): an absolute-form's path
	bool http10 = false;
	std::vector<Header> headers;   // as read, in order (Host among them)
	std::string host;              // the Host's name: lower case, no trailing dot, no port
	std::optional<uint16_t> port;  // the Host's port, if it names one
	enum class Body { None, Length, Chunked } body = Body::None;
	uint64_t length = 0;           // Body::Length
	bool expect_continue = false;  // Expect: 100-continue
	bool close = false;            // Connection: close, or HTTP/1.0 without keep-alive
	bool websocket = false;        // Upgrade: websocket
	// The value of the first header of this name (any case), or nullopt.
	std::optional<std::string_view> header(std::string_view name) const;
};

// Where a head ends in bytes read so far: the offset after its blank line,
// 0 when more is needed, or a problem (too long; a bare LF or CR).
// Empty lines before a request line (after a body, some clients send one)
// are skipped and counted in the head.
Result<size_t, HttpProblem> head_end(std::string_view bytes);

// A whole head (head_end's bytes) read strictly.
Result<RequestHead, HttpProblem> read_request_head(std::string_view head);

// A chunked body, decoded as it arrives: chunk sizes in hex (no sign, no
// space, at most 16 digits), no chunk extension, no trailer field.
class ChunkedReader {
public:
	enum class State { More, Done };
	// Appends the body's bytes to out; the bytes of `in` it used (after
	// Done, what follows belongs to the next request).
	Result<size_t, HttpProblem> feed(std::string_view in, std::string& out);
	bool done() const { return stage_ == Stage::Done; }

private:
	enum class Stage { Size, SizeLf, Data, DataCr, DataLf, TrailerCr, TrailerLf, Done };
	Stage stage_ = Stage::Size;
	uint64_t left_ = 0;
	unsigned digits_ = 0;
};

// The head that goes upstream for a judged request: its method, the
// canonical target, Host (the name, and the port unless it is the
// scheme's), the client's end-to-end headers but those in `replaced`
// (lower case: what inject sets), then `added`, then a WebSocket's
// upgrade (Connection: Upgrade, Upgrade: websocket) when the request
// asked for one, then Content-Length when there is a body (or the method
// sends one). Hop-by-hop headers (those
// Connection names too), Proxy-*, Expect and Keep-Alive never pass.
std::string upstream_head(const RequestHead&, std::string_view canonical_target, std::string_view host, uint16_t port,
			  bool tls, const std::vector<Header>& added, uint64_t body_bytes);

// The lower-case names of the client's headers that `inject` replaces,
// in the client's order (an audit line says which were replaced).
std::vector<std::string> replaced_headers(const RequestHead&, const std::vector<Header>& added);

}  // namespace airlock::gate
