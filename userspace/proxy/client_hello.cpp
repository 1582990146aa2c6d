#include "proxy/client_hello.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace airlock::proxy {

namespace {

constexpr uint8_t kHandshake = 22;
constexpr uint8_t kClientHelloType = 1;
constexpr size_t kRecordHeader = 5;
constexpr size_t kMaxFragment = 16384;  // TLSPlaintext.length
constexpr uint16_t kServerName = 0;
constexpr uint16_t kAlpn = 16;
constexpr uint16_t kEncryptedClientHello = 0xfe0d;

// Reads big-endian fields from a span it never leaves; a read past its end
// fails (returns nullopt) and is remembered.
class Reader {
public:
	explicit Reader(std::string_view b) : b_(b) {}
	size_t left() const { return b_.size() - pos_; }
	std::optional<uint32_t> uint(size_t n)
	{
		if (left() < n)
			return std::nullopt;
		uint32_t v = 0;
		for (size_t i = 0; i < n; i++)
			v = (v << 8) | static_cast<uint8_t>(b_[pos_ + i]);
		pos_ += n;
		return v;
	}
	std::optional<std::string_view> bytes(size_t n)
	{
		if (left() < n)
			return std::nullopt;
		std::string_view v = b_.substr(pos_, n);
		pos_ += n;
		return v;
	}
	// A vector with a length prefix of n bytes: its body.
	std::optional<std::string_view> vec(size_t n)
	{
		auto len = uint(n);
		if (!len)
			return std::nullopt;
		return bytes(*len);
	}

private:
	std::string_view b_;
	size_t pos_ = 0;
};

ClientHello malformed(std::string why)
{
	ClientHello h;
	h.status = ClientHello::Status::Malformed;
	h.error = std::move(why);
	return h;
}

// The body of the server_name extension: exactly one host_name.
std::optional<std::string> server_name(std::string_view data, std::string& why)
{
	Reader r(data);
	auto list = r.vec(2);
	if (!list || r.left() != 0) {
		why = "server_name: its list's length is not the extension's";
		return std::nullopt;
	}
	Reader l(*list);
	auto type = l.uint(1);
	auto name = l.vec(2);
	if (!type || !name) {
		why = "server_name: an entry is cut short";
		return std::nullopt;
	}
	if (*type != 0) {
		why = fmt::format("server_name: name type {} is not host_name (0)", *type);
		return std::nullopt;
	}
	if (l.left() != 0) {
		why = "server_name: more than one name";
		return std::nullopt;
	}
	if (std::string p = host_name_problem(*name); !p.empty()) {
		why = "server_name: " + p;
		return std::nullopt;
	}
	std::string out(*name);
	std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
	return out;
}

std::optional<std::vector<std::string>> alpn(std::string_view data, std::string& why)
{
	Reader r(data);
	auto list = r.vec(2);
	if (!list || r.left() != 0 || list->size() < 2) {
		why = "application_layer_protocol_negotiation: its list's length is not the extension's";
		return std::nullopt;
	}
	std::vector<std::string> out;
	Reader l(*list);
	while (l.left()) {
		auto p = l.vec(1);
		if (!p || p->empty()) {
			why = "application_layer_protocol_negotiation: an empty or cut protocol name";
			return std::nullopt;
		}
		out.emplace_back(*p);
	}
	return out;
}

// The ClientHello message body (after its 4-byte handshake header).
ClientHello parse_body(std::string_view body)
{
	ClientHello h;
	Reader r(body);
	auto version = r.uint(2);
	if (!version || (*version >> 8) != 3)
		return malformed("legacy_version is not 3.x");
	h.legacy_version = static_cast<uint16_t>(*version);
	if (!r.bytes(32))
		return malformed("cut in random");
	auto session = r.vec(1);
	if (!session || session->size() > 32)
		return malformed("legacy_session_id is cut or over 32 bytes");
	auto suites = r.vec(2);
	if (!suites || suites->size() < 2 || suites->size() % 2)
		return malformed("cipher_suites is cut, empty or of an odd length");
	auto compression = r.vec(1);
	if (!compression || compression->empty())
		return malformed("legacy_compression_methods is cut or empty");
	if (r.left() == 0) {
		h.status = ClientHello::Status::Ok;  // no extensions (TLS 1.2 and older may)
		return h;
	}
	auto exts = r.vec(2);
	if (!exts || r.left() != 0)
		return malformed("the extensions' length is not what follows them");
	Reader e(*exts);
	while (e.left()) {
		auto type = e.uint(2);
		auto data = type ? e.vec(2) : std::nullopt;
		if (!type || !data)
			return malformed("an extension is cut short");
		uint16_t t = static_cast<uint16_t>(*type);
		if (std::find(h.extensions.begin(), h.extensions.end(), t) != h.extensions.end())
			return malformed(fmt::format("extension {} appears twice", t));
		h.extensions.push_back(t);
		std::string why;
		if (t == kServerName) {
			auto name = server_name(*data, why);
			if (!name)
				return malformed(why);
			h.server_name = *name;
			h.has_server_name = true;
		} else if (t == kAlpn) {
			auto protos = alpn(*data, why);
			if (!protos)
				return malformed(why);
			h.alpn = *protos;
		} else if (t == kEncryptedClientHello) {
			h.encrypted_client_hello = true;
		}
	}
	h.status = ClientHello::Status::Ok;
	return h;
}

}  // namespace

std::string host_name_problem(std::string_view name)
{
	if (name.empty())
		return "the name is empty";
	if (name.size() > 253)
		return fmt::format("the name is {} bytes long (at most 253)", name.size());
	if (name.back() == '.')
		return "the name ends with a dot";
	bool all_numeric = true;
	size_t start = 0;
	while (start <= name.size()) {
		size_t dot = name.find('.', start);
		size_t end = dot == std::string_view::npos ? name.size() : dot;
		std::string_view label = name.substr(start, end - start);
		if (label.empty())
			return "the name has an empty label";
		if (label.size() > 63)
			return fmt::format("a label is {} bytes long (at most 63)", label.size());
		for (unsigned char c : label)
			if (!(std::isalnum(c) || c == '-' || c == '_'))
				return fmt::format("byte 0x{:02x} is not a letter, digit, '-' or '_'", c);
		if (label.front() == '-' || label.back() == '-')
			return "a label starts or ends with '-'";
		all_numeric &= std::all_of(label.begin(), label.end(), [](unsigned char c) { return std::isdigit(c); });
		if (dot == std::string_view::npos)
			break;
		start = dot + 1;
	}
	if (all_numeric)
		return "an address, not a name";
	return "";
}

ClientHello parse_client_hello(std::string_view bytes)
{
	std::string message;  // the handshake bytes, reassembled from the records
	size_t off = 0;
	// Not TLS is said as soon as the first bytes show it.
	if (!bytes.empty() && static_cast<uint8_t>(bytes[0]) != kHandshake) {
		ClientHello h;
		h.status = ClientHello::Status::NotTls;
		h.error = fmt::format("the first byte ({:02x}) is not a TLS handshake record's (16)",
				      static_cast<uint8_t>(bytes[0]));
		return h;
	}
	if ((bytes.size() >= 2 && static_cast<uint8_t>(bytes[1]) != 3) ||
	    (bytes.size() >= 3 && static_cast<uint8_t>(bytes[2]) > 4)) {
		ClientHello h;
		h.status = ClientHello::Status::NotTls;
		h.error = fmt::format("the first record's version ({}.{}) is not TLS's", static_cast<uint8_t>(bytes[1]),
				      bytes.size() >= 3 ? static_cast<uint8_t>(bytes[2]) : 0);
		return h;
	}
	for (bool first = true;; first = false) {
		if (bytes.size() - off < kRecordHeader) {
			ClientHello h;
			h.need = off + kRecordHeader;
			return h;
		}
		auto type = static_cast<uint8_t>(bytes[off]);
		auto major = static_cast<uint8_t>(bytes[off + 1]);
		auto minor = static_cast<uint8_t>(bytes[off + 2]);
		size_t len = (static_cast<uint8_t>(bytes[off + 3]) << 8) | static_cast<uint8_t>(bytes[off + 4]);
		if (first && (type != kHandshake || major != 3 || minor > 4)) {
			ClientHello h;
			h.status = ClientHello::Status::NotTls;
			h.error = fmt::format("the first bytes ({:02x} {:02x} {:02x}) are not a TLS handshake record",
					      type, major, minor);
			return h;
		}
		if (type != kHandshake)
			return malformed(fmt::format("a record of type {} before the ClientHello is whole", type));
		if (major != 3 || minor > 4)
			return malformed(fmt::format("a record of version {}.{}", major, minor));
		if (len == 0 || len > kMaxFragment)
			return malformed(fmt::format("a handshake record of {} bytes (1-{})", len, kMaxFragment));
		if (bytes.size() - off - kRecordHeader < len) {
			ClientHello h;
			h.need = off + kRecordHeader + len;
			return h;
		}
		message.append(bytes.substr(off + kRecordHeader, len));
		off += kRecordHeader + len;
		if (message.size() < 4)
			continue;
		if (static_cast<uint8_t>(message[0]) != kClientHelloType)
			return malformed(fmt::format("handshake message type {} is not client_hello (1)",
						     static_cast<uint8_t>(message[0])));
		size_t body = (static_cast<uint8_t>(message[1]) << 16) | (static_cast<uint8_t>(message[2]) << 8) |
			      static_cast<uint8_t>(message[3]);
		if (body + 4 > kMaxClientHello)
			return malformed(
				fmt::format("a ClientHello of {} bytes (at most {})", body + 4, kMaxClientHello));
		if (message.size() < body + 4)
			continue;
		if (message.size() > body + 4)
			return malformed("handshake bytes follow the ClientHello in its records");
		ClientHello h = parse_body(std::string_view(message).substr(4));
		h.consumed = off;
		return h;
	}
}

const char* to_string(ClientHello::Status s)
{
	switch (s) {
	case ClientHello::Status::NeedMore:
		return "need-more";
	case ClientHello::Status::NotTls:
		return "not-tls";
	case ClientHello::Status::Malformed:
		return "malformed";
	case ClientHello::Status::Ok:
		return "ok";
	}
	return "?";
}

}  // namespace airlock::proxy
