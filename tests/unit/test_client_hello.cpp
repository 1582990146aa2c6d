// The SNI gate's reading of a ClientHello: real ones from OpenSSL's client
// (what curl, Python and Node send), every prefix, every way of cutting it
// into records, and each malformation with its exact reason; an OpenSSL
// server reads the same bytes as an independent judge.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../common/openssl_hello.h"
#include "proxy/client_hello.h"

namespace airlock::proxy {
namespace {

using Status = ClientHello::Status;
using test::openssl_client_hello;
using test::openssl_server_view;

// The ClientHello body of one record, re-framed with new extensions: for
// hand-made malformations of a real message.
struct Parts {
	std::string before_exts;  // legacy_version .. compression methods
	std::string exts;         // the extensions' bytes (without their length)
};

uint16_t u16(std::string_view b, size_t at)
{
	return static_cast<uint16_t>((static_cast<uint8_t>(b[at]) << 8) | static_cast<uint8_t>(b[at + 1]));
}

std::string be16(size_t v)
{
	return {static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
}

std::string be24(size_t v)
{
	return {static_cast<char>(v >> 16), static_cast<char>((v >> 8) & 0xff), static_cast<char>(v & 0xff)};
}

Parts split(const std::string& records)
{
	// One record: header 5, handshake header 4.
	std::string body = records.substr(9);
	size_t at = 2 + 32;
	at += 1 + static_cast<uint8_t>(body[at]);
	at += 2 + u16(body, at);
	at += 1 + static_cast<uint8_t>(body[at]);
	return {body.substr(0, at), body.substr(at + 2)};
}

std::string frame(const std::string& before, const std::string& exts)
{
	std::string body = before + be16(exts.size()) + exts;
	std::string hs = std::string(1, '\x01') + be24(body.size()) + body;
	return std::string("\x16\x03\x01", 3) + be16(hs.size()) + hs;
}

std::string ext(uint16_t type, const std::string& data)
{
	return be16(type) + be16(data.size()) + data;
}

std::string sni_ext(const std::string& name, uint8_t type = 0)
{
	std::string entry = std::string(1, static_cast<char>(type)) + be16(name.size()) + name;
	return ext(0, be16(entry.size()) + entry);
}

// The extensions of a real hello without its server_name.
std::string exts_without_sni(const std::string& exts)
{
	std::string out;
	for (size_t at = 0; at + 4 <= exts.size();) {
		uint16_t type = u16(exts, at), len = u16(exts, at + 2);
		if (type != 0)
			out += exts.substr(at, 4 + len);
		at += 4 + len;
	}
	return out;
}

TEST(ClientHello, ARealOneNamesItsServerInLowerCase)
{
	std::string hello = openssl_client_hello({"Example.COM", {"h2", "http/1.1"}});
	ClientHello h = parse_client_hello(hello);
	ASSERT_EQ(h.status, Status::Ok) << h.error;
	EXPECT_TRUE(h.has_server_name);
	EXPECT_EQ(h.server_name, "example.com");
	EXPECT_EQ(h.consumed, hello.size());
	EXPECT_EQ(h.legacy_version, 0x0303);
	EXPECT_EQ(h.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
	EXPECT_FALSE(h.encrypted_client_hello);
	// The same extensions, in the same order, as OpenSSL's server read.
	auto view = openssl_server_view(hello);
	ASSERT_TRUE(view.parsed);
	EXPECT_EQ(std::vector<int>(h.extensions.begin(), h.extensions.end()), view.extensions);

	ClientHello tls12 = parse_client_hello(openssl_client_hello({"a.example", {}, TLS1_2_VERSION}));
	ASSERT_EQ(tls12.status, Status::Ok) << tls12.error;
	EXPECT_EQ(tls12.server_name, "a.example");
}

// First flights captured from real clients on loopback (the fuzz target's
// seeds): curl 7.88, Python 3.11's ssl, Node 20's tls.
TEST(ClientHello, TheCapturedHellosOfCurlPythonAndNode)
{
	const std::string dir = std::string(AIRLOCK_SOURCE_DIR) + "/tests/fuzz/corpus/fuzz_client_hello/";
	for (auto [file, name] : {std::pair{"curl-sni", "curl.example"}, std::pair{"python-sni", "py.example"},
				  std::pair{"node-sni", "node.example"}}) {
		std::ifstream in(dir + file, std::ios::binary);
		std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
		ASSERT_FALSE(bytes.empty()) << file;
		ClientHello h = parse_client_hello(bytes);
		ASSERT_EQ(h.status, Status::Ok) << file << ": " << h.error;
		EXPECT_EQ(h.server_name, name) << file;
		EXPECT_EQ(h.consumed, bytes.size()) << file;
		EXPECT_TRUE(openssl_server_view(bytes).parsed) << file;
	}
}

TEST(ClientHello, WithoutServerNameItIsWellFormedAndNamesNone)
{
	ClientHello h = parse_client_hello(openssl_client_hello({}));
	ASSERT_EQ(h.status, Status::Ok) << h.error;
	EXPECT_FALSE(h.has_server_name);
	EXPECT_EQ(h.server_name, "");
}

TEST(ClientHello, EveryPrefixNeedsMoreAndSaysHowMuchWhenItCan)
{
	std::string hello = openssl_client_hello({"prefix.example", {"h2"}});
	for (size_t n = 0; n < hello.size(); n++) {
		ClientHello h = parse_client_hello(std::string_view(hello).substr(0, n));
		ASSERT_EQ(h.status, Status::NeedMore) << n;
		EXPECT_GT(h.need, n) << n;
		EXPECT_LE(h.need, hello.size()) << n;
	}
	// What follows the ClientHello (early data) is not its business.
	ClientHello h = parse_client_hello(hello + std::string("\x17\x03\x03\x00\x01x", 6));
	ASSERT_EQ(h.status, Status::Ok);
	EXPECT_EQ(h.consumed, hello.size());
}

TEST(ClientHello, CutIntoRecordsOfAnySizeItReadsTheSame)
{
	std::string hello = openssl_client_hello({"records.example", {"http/1.1"}});
	std::string message = hello.substr(5);
	for (size_t size : {1, 2, 3, 4, 5, 7, 64, 100, 511}) {
		std::string records;
		for (size_t at = 0; at < message.size(); at += size) {
			std::string frag = message.substr(at, size);
			records += std::string("\x16\x03\x01", 3) + be16(frag.size()) + frag;
		}
		ClientHello h = parse_client_hello(records);
		ASSERT_EQ(h.status, Status::Ok) << size << ": " << h.error;
		EXPECT_EQ(h.server_name, "records.example") << size;
		EXPECT_EQ(h.consumed, records.size()) << size;
		EXPECT_TRUE(openssl_server_view(records).parsed) << size;
	}
}

TEST(ClientHello, WhatIsNotTlsIsSaidFromTheFirstByte)
{
	for (std::string not_tls :
	     {std::string("GET / HTTP/1.1\r\n"), std::string("\x80\x2e\x01\x03\x01", 5), std::string("\x16\x02\x00", 3),
	      std::string("\x16\x03\x05", 3), std::string(1, '\x17')}) {
		ClientHello h = parse_client_hello(not_tls);
		EXPECT_EQ(h.status, Status::NotTls) << not_tls;
		EXPECT_FALSE(h.error.empty());
	}
	EXPECT_EQ(parse_client_hello("G").error, "the first byte (47) is not a TLS handshake record's (16)");
}

TEST(ClientHello, EachMalformationIsNamed)
{
	Parts p = split(openssl_client_hello({"m.example", {}}));
	std::string rest = exts_without_sni(p.exts);
	auto error_of = [](const std::string& bytes) {
		ClientHello h = parse_client_hello(bytes);
		EXPECT_EQ(h.status, Status::Malformed) << h.error;
		return h.error;
	};
	EXPECT_EQ(error_of(frame(p.before_exts, sni_ext("a.example") + rest + sni_ext("b.example"))),
		  "extension 0 appears twice");
	EXPECT_EQ(error_of(frame(p.before_exts, sni_ext("a.example.") + rest)),
		  "server_name: the name ends with a dot");
	EXPECT_EQ(error_of(frame(p.before_exts, sni_ext("192.0.2.1") + rest)), "server_name: an address, not a name");
	EXPECT_EQ(error_of(frame(p.before_exts, sni_ext("a..example") + rest)),
		  "server_name: the name has an empty label");
	EXPECT_EQ(error_of(frame(p.before_exts, sni_ext(std::string("a\0b.example", 11)) + rest)),
		  "server_name: byte 0x00 is not a letter, digit, '-' or '_'");
	EXPECT_EQ(error_of(frame(p.before_exts, sni_ext("-a.example") + rest)),
		  "server_name: a label starts or ends with '-'");
	EXPECT_EQ(error_of(frame(p.before_exts, sni_ext(std::string(64, 'a') + ".example") + rest)),
		  "server_name: a label is 64 bytes long (at most 63)");
	EXPECT_EQ(error_of(frame(p.before_exts, sni_ext("a.example", 1) + rest)),
		  "server_name: name type 1 is not host_name (0)");
	std::string two = std::string(1, '\0') + be16(1) + "a" + std::string(1, '\0') + be16(1) + "b";
	EXPECT_EQ(error_of(frame(p.before_exts, ext(0, be16(two.size()) + two) + rest)),
		  "server_name: more than one name");
	EXPECT_EQ(error_of(frame(p.before_exts, ext(0, "") + rest)),
		  "server_name: its list's length is not the extension's");
	EXPECT_EQ(error_of(frame(p.before_exts, ext(16, be16(3) + std::string(1, '\0') + "ab") + rest)),
		  "application_layer_protocol_negotiation: an empty or cut protocol name");
	EXPECT_EQ(error_of(frame(p.before_exts, rest + std::string("\x00\x2b\x00\x05\x04", 5))),
		  "an extension is cut short");

	// The frame around a well-formed message.
	std::string good = frame(p.before_exts, sni_ext("a.example") + rest);
	ASSERT_EQ(parse_client_hello(good).status, Status::Ok);
	std::string zero = std::string("\x16\x03\x01\x00\x00", 5) + good;
	EXPECT_EQ(error_of(zero), "a handshake record of 0 bytes (1-16384)");
	std::string big = good;
	big[3] = '\x40';
	big[4] = '\x01';
	EXPECT_EQ(error_of(big), "a handshake record of 16385 bytes (1-16384)");
	std::string not_hello = good;
	not_hello[5] = '\x02';
	EXPECT_EQ(error_of(not_hello), "handshake message type 2 is not client_hello (1)");
	std::string trailing = good.substr(0, 3) + be16(u16(good, 3) + 4) + good.substr(5) +
			       std::string("\x01\x00\x00\x00", 4);
	EXPECT_EQ(error_of(trailing), "handshake bytes follow the ClientHello in its records");
	std::string huge = std::string("\x16\x03\x01\x00\x04\x01", 6) + be24(kMaxClientHello);
	EXPECT_EQ(error_of(huge), "a ClientHello of 65540 bytes (at most 65536)");
	std::string interleaved = good.substr(0, 5 + 10);
	interleaved[3] = 0;
	interleaved[4] = 10;
	interleaved += std::string("\x17\x03\x03\x00\x01x", 6);
	EXPECT_EQ(error_of(interleaved), "a record of type 23 before the ClientHello is whole");
}

TEST(ClientHello, EncryptedClientHelloIsSeen)
{
	Parts p = split(openssl_client_hello({"public.example", {}}));
	ClientHello h = parse_client_hello(frame(p.before_exts, p.exts + ext(0xfe0d, std::string(8, '\x01'))));
	ASSERT_EQ(h.status, Status::Ok) << h.error;
	EXPECT_TRUE(h.encrypted_client_hello);
	EXPECT_EQ(h.server_name, "public.example");
}

// Single-byte changes of a real hello: whatever the parser accepts, an
// OpenSSL server parses too, with the same extensions and the same name.
TEST(ClientHello, WhatItAcceptsOpenSslParsesTheSame)
{
	std::string hello = openssl_client_hello({"mutant.example", {"h2"}});
	std::mt19937 rng(12345);
	size_t accepted = 0, extension_judged = 0;
	for (int i = 0; i < 3000; i++) {
		std::string m = hello;
		m[rng() % m.size()] = static_cast<char>(rng() & 0xff);
		ClientHello h = parse_client_hello(m);
		if (h.status != Status::Ok)
			continue;
		accepted++;
		auto view = openssl_server_view(m);
		// OpenSSL also judges a known extension's place (one a
		// ClientHello may not carry): the gate reads structure only.
		if (!view.parsed && view.error_reason == SSL_R_BAD_EXTENSION) {
			extension_judged++;
			continue;
		}
		ASSERT_TRUE(view.parsed) << "accepted, OpenSSL did not parse (reason " << view.error_reason
					 << "): mutation " << i;
		// OpenSSL lists the extensions it knows: in the same order among ours.
		std::vector<int> known;
		for (uint16_t t : h.extensions)
			if (std::find(view.extensions.begin(), view.extensions.end(), t) != view.extensions.end())
				known.push_back(t);
		EXPECT_EQ(known, view.extensions) << i;
		ASSERT_EQ(h.has_server_name, view.has_server_name) << i;
		if (h.has_server_name) {
			// Its raw extension: list length, type 0, name length, name.
			const std::string& raw = view.server_name_ext;
			ASSERT_GE(raw.size(), 5u) << i;
			std::string name = raw.substr(5);
			std::transform(name.begin(), name.end(), name.begin(),
				       [](unsigned char c) { return std::tolower(c); });
			EXPECT_EQ(h.server_name, name) << i;
		}
	}
	EXPECT_GT(accepted, 1000u) << "most single-byte changes (the random, the key share) keep it well-formed";
	EXPECT_LT(extension_judged, 20u);
}

}  // namespace
}  // namespace airlock::proxy
