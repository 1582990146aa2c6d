// The SNI gate's ClientHello parser (proxy/client_hello.h) on arbitrary
// bytes, against OpenSSL's server as an independent judge:
//  - it never reads past its input, throws nothing, and answers: NeedMore
//    only for fewer bytes than it says it needs (and every shorter prefix of
//    an accepted input needs more); an error is one line;
//  - what it accepts, an OpenSSL server parses as a ClientHello too (or
//    rejects a known extension in a place OpenSSL does not allow: the gate
//    reads structure, not each extension's meaning), with the extensions
//    OpenSSL knows in the same order, and the same server name;
//  - the name it reports is the RFC 6066 host name it checked: lowercase
//    letters, digits, '-', '_' and dots, never empty with has_server_name;
//  - cut into records of any size, an accepted input reads the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "../common/openssl_hello.h"
#include "fuzz_check.h"
#include "proxy/client_hello.h"

using airlock::fuzz::check;
using airlock::fuzz::one_line;
using airlock::proxy::ClientHello;
using airlock::proxy::host_name_problem;
using airlock::proxy::parse_client_hello;

namespace {

std::string be16(size_t v)
{
	return {static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	std::string_view in(reinterpret_cast<const char*>(data), size);
	ClientHello h = parse_client_hello(in);
	if (h.status == ClientHello::Status::NeedMore) {
		check(h.need == 0 || h.need > size, "NeedMore asks for more than it has",
		      fmt::format("{} {}", h.need, size));
		return 0;
	}
	if (h.status != ClientHello::Status::Ok) {
		check(!h.error.empty() && one_line(h.error), "an error is one line", h.error);
		return 0;
	}
	check(h.consumed >= 9 && h.consumed <= size, "consumed lies within the input", fmt::format("{}", h.consumed));
	check(h.has_server_name == !h.server_name.empty(), "a server name is reported exactly when present");
	if (h.has_server_name) {
		check(host_name_problem(h.server_name).empty(), "the name is a host name", h.server_name);
		for (unsigned char c : h.server_name)
			check(!(c >= 'A' && c <= 'Z'), "the name is lowercase", h.server_name);
	}
	std::string_view hello = in.substr(0, h.consumed);
	for (size_t n : {size_t(0), h.consumed / 2, h.consumed - 1})
		check(parse_client_hello(hello.substr(0, n)).status == ClientHello::Status::NeedMore,
		      "a prefix of an accepted ClientHello needs more", fmt::format("{}", n));

	auto view = airlock::test::openssl_server_view(hello);
	if (!view.parsed) {
		check(view.error_reason == SSL_R_BAD_EXTENSION, "what the gate accepts, OpenSSL parses",
		      fmt::format("OpenSSL reason {}", view.error_reason));
	} else {
		std::vector<int> known;
		for (uint16_t t : h.extensions)
			for (int v : view.extensions)
				if (v == t)
					known.push_back(t);
		check(known == view.extensions, "the extensions OpenSSL knows, in the same order");
		check(h.has_server_name == view.has_server_name, "server_name present for both or neither");
		if (h.has_server_name) {
			std::string name = view.server_name_ext.size() >= 5 ? view.server_name_ext.substr(5) : "";
			for (auto& c : name)
				c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
			check(name == h.server_name, "the same server name as OpenSSL's",
			      name + " vs " + h.server_name);
		}
	}

	// The same message in records of another size reads the same.
	size_t piece = 1 + data[0] % 97;
	std::string message;
	for (size_t off = 0; off < h.consumed;) {
		size_t len = (static_cast<uint8_t>(in[off + 3]) << 8) | static_cast<uint8_t>(in[off + 4]);
		message.append(in.substr(off + 5, len));
		off += 5 + len;
	}
	std::string records;
	for (size_t at = 0; at < message.size(); at += piece) {
		std::string frag = message.substr(at, piece);
		records += std::string(in.substr(0, 3)) + be16(frag.size()) + frag;
	}
	ClientHello again = parse_client_hello(records);
	check(again.status == ClientHello::Status::Ok && again.server_name == h.server_name &&
		      again.extensions == h.extensions && again.consumed == records.size(),
	      "cut into other records it reads the same", again.error);
	return 0;
}
