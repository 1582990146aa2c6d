// HTTP/1.1 as the gate reads it (gate/http1.h): the heads it accepts and
// what it reads of them, the 40-odd ways to make two parsers read one
// message differently, each refused with its status and reason; chunked
// bodies; the head written upstream.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gate/http1.h"

namespace airlock::gate {
namespace {

// "STATUS: why", or "ok".
std::string verdict(const std::string& head)
{
	auto end = head_end(head);
	if (!end)
		return std::to_string(end.rejection().status) + ": " + end.rejection().message;
	if (*end == 0)
		return "incomplete";
	auto r = read_request_head(std::string_view(head).substr(0, *end));
	if (!r)
		return std::to_string(r.rejection().status) + ": " + r.rejection().message;
	return "ok";
}

const std::string H = "Host: wiki.example.org\r\n";

TEST(Http1, AHeadIsReadWhole)
{
	std::string head = "\r\nPOST /api/mail/send?x=1 HTTP/1.1\r\n" + H +
			   "Content-Type: application/json\r\nContent-Length: 42\r\nX-Empty:\r\n"
			   "Accept:  */*  \r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\nBODY";
	auto end = head_end(head);
	ASSERT_TRUE(end);
	EXPECT_EQ(*end, head.size() - 4);
	auto r = read_request_head(std::string_view(head).substr(0, *end));
	ASSERT_TRUE(r) << r.rejection().message;
	EXPECT_EQ(r->method, "POST");
	EXPECT_EQ(r->target, "/api/mail/send?x=1");
	EXPECT_FALSE(r->http10);
	EXPECT_EQ(r->host, "wiki.example.org");
	EXPECT_EQ(r->port, std::nullopt);
	EXPECT_EQ(r->body, RequestHead::Body::Length);
	EXPECT_EQ(r->length, 42u);
	EXPECT_TRUE(r->expect_continue);
	EXPECT_FALSE(r->close);
	EXPECT_EQ(r->header("accept"), "*/*");
	EXPECT_EQ(r->header("x-empty"), "");
	EXPECT_EQ(r->headers.size(), 7u);
	auto partial = head_end("GET / HTTP/1.1\r\nHost: a\r\n");
	ASSERT_TRUE(partial);
	EXPECT_EQ(*partial, 0u) << "more is needed";
}

TEST(Http1, TheTargetAndHostAreReadOneWay)
{
	auto read = [](const std::string& head) { return read_request_head(head); };
	auto abs = read("GET https://Wiki.Example.org./w?x HTTP/1.1\r\nHost: wiki.example.org\r\n\r\n");
	ASSERT_TRUE(abs) << abs.rejection().message;
	EXPECT_EQ(abs->target, "/w?x");
	auto bare = read("GET http://wiki.example.org?q=1 HTTP/1.1\r\nHost: WIKI.example.org\r\n\r\n");
	ASSERT_TRUE(bare);
	EXPECT_EQ(bare->target, "/?q=1");
	auto port = read("GET / HTTP/1.1\r\nHost: wiki.example.org:8443\r\n\r\n");
	ASSERT_TRUE(port);
	EXPECT_EQ(port->port, 8443);
	auto v6 = read("GET / HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n");
	ASSERT_TRUE(v6);
	EXPECT_EQ(v6->host, "2001:db8::1");
	auto old = read("GET / HTTP/1.0\r\nHost: a\r\n\r\n");
	ASSERT_TRUE(old);
	EXPECT_TRUE(old->close) << "HTTP/1.0 closes unless it keeps alive";
	auto chunked = read("PUT /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\nConnection: Close\r\n\r\n");
	ASSERT_TRUE(chunked);
	EXPECT_EQ(chunked->body, RequestHead::Body::Chunked);
	EXPECT_TRUE(chunked->close);
	auto ws = read("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
	ASSERT_TRUE(ws);
	EXPECT_TRUE(ws->websocket);
}

TEST(Http1, EveryAmbiguousHeadIsRefusedWithItsReason)
{
	const std::vector<std::pair<std::string, std::string>> cases = {
		// Framing: two readings of where the body ends.
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
		 "400: both Content-Length and Transfer-Encoding"},
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
		 "400: both Content-Length and Transfer-Encoding"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: 5\r\nContent-Length: 5\r\n\r\n",
		 "400: Content-Length is given more than once"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
		 "400: Content-Length is given more than once"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: 5, 5\r\n\r\n",
		 "400: Content-Length '5, 5' is not a number of bytes"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: +5\r\n\r\n",
		 "400: Content-Length '+5' is not a number of bytes"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: -1\r\n\r\n",
		 "400: Content-Length '-1' is not a number of bytes"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: 0x10\r\n\r\n",
		 "400: Content-Length '0x10' is not a number of bytes"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: 99999999999999999999\r\n\r\n",
		 "400: Content-Length '99999999999999999999' is not a number of bytes"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length:\r\n\r\n",
		 "400: Content-Length '' is not a number of bytes"},
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		 "400: Transfer-Encoding is given more than once"},
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: gzip, chunked\r\n\r\n",
		 "400: Transfer-Encoding 'gzip, chunked' is not chunked"},
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked, chunked\r\n\r\n",
		 "400: Transfer-Encoding 'chunked, chunked' is not chunked"},
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: identity\r\n\r\n",
		 "400: Transfer-Encoding 'identity' is not chunked"},
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: xchunked\r\n\r\n",
		 "400: Transfer-Encoding 'xchunked' is not chunked"},
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: \"chunked\"\r\n\r\n",
		 "400: Transfer-Encoding '\"chunked\"' is not chunked"},
		{"POST / HTTP/1.0\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n",
		 "400: Transfer-Encoding in an HTTP/1.0 request"},
		// Header syntax: one parser's header is another's body or nothing.
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding : chunked\r\n\r\n",
		 "400: the header 'Transfer-Encoding' has white space before its ':'"},
		{"POST / HTTP/1.1\r\n" + H + "Transfer-Encoding\t: chunked\r\n\r\n",
		 "400: the header 'Transfer-Encoding' has white space before its ':'"},
		{"POST / HTTP/1.1\r\n" + H + "X: a\r\n Transfer-Encoding: chunked\r\n\r\n",
		 "400: a header line is folded (obs-fold)"},
		{"POST / HTTP/1.1\r\n" + H + "X: a\r\n\tb\r\n\r\n", "400: a header line is folded (obs-fold)"},
		{"POST / HTTP/1.1\r\n" + H + "Content-Length: 5\nTransfer-Encoding: chunked\r\n\r\n",
		 "400: a line ends with LF alone"},
		{"POST / HTTP/1.1\n" + H + "\r\n", "400: a line ends with LF alone"},
		{"GET / HTTP/1.1\r\n" + H + "\n", "400: a line ends with LF alone"},
		{"POST / HTTP/1.1\r\n" + H + "X: a\rTransfer-Encoding: chunked\r\n\r\n",
		 "400: a CR is not followed by LF"},
		{"POST / HTTP/1.1\r\n" + H + std::string("X: a\0b\r\n\r\n", 11),
		 "400: the header 'X' holds a control byte"},
		{"POST / HTTP/1.1\r\n" + H +
			 "X: a\x0b"
			 "b\r\n\r\n",
		 "400: the header 'X' holds a control byte"},
		{"POST / HTTP/1.1\r\n" + H + "X: a\x7f\r\n\r\n", "400: the header 'X' holds a control byte"},
		{"POST / HTTP/1.1\r\n" + H + "Bad Name: x\r\n\r\n", "400: 'Bad Name' is not a header name"},
		{"POST / HTTP/1.1\r\n" + H + ": x\r\n\r\n", "400: '' is not a header name"},
		{"POST / HTTP/1.1\r\n" + H + "NoColon\r\n\r\n", "400: the header line 'NoColon' has no ':'"},
		{"POST / HTTP/1.1\r\n" + H + "X\x01Y: 1\r\n\r\n", "400: 'X\\x01Y' is not a header name"},
		// Host: which origin the request is for.
		{"GET / HTTP/1.1\r\n\r\n", "400: no Host"},
		{"GET / HTTP/1.1\r\n" + H + H + "\r\n", "400: Host is given more than once"},
		{"GET / HTTP/1.1\r\nHost: a.test\r\nhost: b.test\r\n\r\n", "400: Host is given more than once"},
		{"GET / HTTP/1.1\r\nHost:\r\n\r\n", "400: Host '' is not a host"},
		{"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "400: Host 'a b' is not a host"},
		{"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", "400: Host 'a..b' is not a host"},
		{"GET / HTTP/1.1\r\nHost: .a.test\r\n\r\n", "400: Host '.a.test' is not a host"},
		{"GET / HTTP/1.1\r\nHost: a.test..\r\n\r\n", "400: Host 'a.test..' is not a host"},
		{"GET / HTTP/1.1\r\nHost: user@a.test\r\n\r\n", "400: Host 'user@a.test' is not a host"},
		{"GET / HTTP/1.1\r\nHost: a.test:0\r\n\r\n", "400: Host 'a.test:0' has no port 1-65535 after its ':'"},
		{"GET / HTTP/1.1\r\nHost: a.test:99999\r\n\r\n",
		 "400: Host 'a.test:99999' has no port 1-65535 after its ':'"},
		{"GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n", "400: Host 'a.test:' has no port 1-65535 after its ':'"},
		{"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", "400: Host '[::1' is not a host"},
		{"GET http://evil.test/ HTTP/1.1\r\n" + H + "\r\n",
		 "400: the target names 'evil.test', the Host 'wiki.example.org'"},
		{"GET http://wiki.example.org:8080/ HTTP/1.1\r\n" + H + "\r\n",
		 "400: the target names 'wiki.example.org', the Host 'wiki.example.org'"},
		{"GET http://u:p@wiki.example.org/ HTTP/1.1\r\n" + H + "\r\n",
		 "400: the target's authority has user information"},
		// The request line.
		{"CONNECT wiki.example.org:443 HTTP/1.1\r\n" + H + "\r\n",
		 "400: CONNECT inside the gate would open a tunnel it cannot read"},
		{"OPTIONS * HTTP/1.1\r\n" + H + "\r\n", "400: the asterisk form (OPTIONS *) is not judged"},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "400: HTTP/2 over cleartext (h2c) is refused"},
		{"GET / HTTP/1.1\r\n" + H +
			 "Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
		 "400: HTTP/2 over cleartext (h2c) is refused"},
		{"GET / HTTP/1.1\r\n" + H + "Upgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
		 "400: HTTP/2 over cleartext (h2c) is refused"},
		{"GET / HTTP/1.1\r\n" + H + "Upgrade: websocket\r\n\r\n",
		 "400: Upgrade 'websocket' is not a WebSocket's (GET, Connection: upgrade)"},
		{"POST / HTTP/1.1\r\n" + H + "Upgrade: websocket\r\nConnection: upgrade\r\n\r\n",
		 "400: Upgrade 'websocket' is not a WebSocket's (GET, Connection: upgrade)"},
		{"GET / HTTP/1.1\r\n" + H + "Upgrade: tls/1.2\r\nConnection: upgrade\r\n\r\n",
		 "400: Upgrade 'tls/1.2' is not a WebSocket's (GET, Connection: upgrade)"},
		{"GET / HTTP/1.2\r\n" + H + "\r\n", "505: version 'HTTP/1.2' is not HTTP/1.1 or HTTP/1.0"},
		{"GET / http/1.1\r\n" + H + "\r\n", "505: version 'http/1.1' is not HTTP/1.1 or HTTP/1.0"},
		{"GET /  HTTP/1.1\r\n" + H + "\r\n", "400: the request line is not METHOD SP TARGET SP VERSION"},
		{"GET\t/ HTTP/1.1\r\n" + H + "\r\n", "400: the request line is not METHOD SP TARGET SP VERSION"},
		{"GET / HTTP/1.1 \r\n" + H + "\r\n", "400: the request line is not METHOD SP TARGET SP VERSION"},
		{"GET /a\tb HTTP/1.1\r\n" + H + "\r\n", "400: the target holds a control byte"},
		{"G(T / HTTP/1.1\r\n" + H + "\r\n", "400: 'G(T' is not a method"},
		{"GET wiki/x HTTP/1.1\r\n" + H + "\r\n",
		 "400: the target 'wiki/x' is neither a path nor an http(s) URL"},
		{"GET ftp://wiki.example.org/ HTTP/1.1\r\n" + H + "\r\n",
		 "400: the target 'ftp://wiki.example.org/' is neither a path nor an http(s) URL"},
		{"POST / HTTP/1.1\r\n" + H + "Expect: 200-ok\r\n\r\n", "417: Expect '200-ok' is not 100-continue"},
		{"GET / HTTP/1.0\r\n" + H + "Connection: kee -alive\r\n\r\n",
		 "400: Connection 'kee -alive' is not a list of tokens"},
		{"GET / HTTP/1.1\r\n" + H + "Connection: close;x\r\n\r\n",
		 "400: Connection 'close;x' is not a list of tokens"},
		{"GET / HTTP/1.1\r\n" + H + "Connection:\r\n\r\n", "400: Connection '' is not a list of tokens"},
		// Size.
		{"GET /" + std::string(kMaxHeadBytes, 'a') + " HTTP/1.1\r\n" + H + "\r\n",
		 "431: the head is longer than 16384 bytes"},
		{"GET /" + std::string(kMaxHeadBytes, 'a'), "431: the head is longer than 16384 bytes"},
		{"GET / HTTP/1.1\r\n" + H +
			 [] {
				 std::string s;
				 for (size_t i = 0; i < kMaxHeaders; i++)
					 s += "X-" + std::to_string(i) + ": 1\r\n";
				 return s;
			 }() +
			 "\r\n",
		 "431: more than 100 headers"},
	};
	EXPECT_GE(cases.size(), 40u);
	for (const auto& [head, want] : cases)
		EXPECT_EQ(verdict(head), want) << head;
}

std::string dechunk(const std::vector<std::string>& pieces, std::string* rest = nullptr)
{
	ChunkedReader c;
	std::string out;
	for (const std::string& p : pieces) {
		auto n = c.feed(p, out);
		if (!n)
			return "error: " + n.rejection().message;
		if (c.done() && rest)
			*rest = p.substr(*n);
	}
	return c.done() ? out : "incomplete: " + out;
}

TEST(Http1, ChunkedBodiesAreDecodedStrictly)
{
	EXPECT_EQ(dechunk({"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"}), "hello world");
	EXPECT_EQ(dechunk({"A\r\n0123456789\r\n0\r\n\r\n"}), "0123456789");
	std::string rest;
	EXPECT_EQ(dechunk({"3\r\nab", "c\r", "\n0\r\n", "\r\nGET / HTTP/1.1"}, &rest), "abc");
	EXPECT_EQ(rest, "GET / HTTP/1.1") << "what follows is the next request's";
	EXPECT_EQ(dechunk({"5\r\nhel"}), "incomplete: hel");
	EXPECT_EQ(dechunk({"5;ext=1\r\nhello\r\n0\r\n\r\n"}), "error: a chunk extension is refused");
	EXPECT_EQ(dechunk({"5 \r\nhello\r\n0\r\n\r\n"}), "error: a chunk size is not hex digits and CRLF");
	EXPECT_EQ(dechunk({"+5\r\nhello\r\n0\r\n\r\n"}), "error: a chunk size is not hex digits and CRLF");
	EXPECT_EQ(dechunk({"0x5\r\nhello\r\n0\r\n\r\n"}), "error: a chunk size is not hex digits and CRLF");
	EXPECT_EQ(dechunk({"\r\nhello\r\n0\r\n\r\n"}), "error: a chunk size is not hex digits and CRLF");
	EXPECT_EQ(dechunk({"5\nhello\r\n0\r\n\r\n"}), "error: a chunk size is not hex digits and CRLF");
	EXPECT_EQ(dechunk({"10000000000000000\r\n"}), "error: a chunk size has more than 16 digits");
	EXPECT_EQ(dechunk({"3\r\nhello\r\n0\r\n\r\n"}), "error: a chunk is longer than its size");
	EXPECT_EQ(dechunk({"5\r\nhello\n0\r\n\r\n"}), "error: a chunk is longer than its size");
	EXPECT_EQ(dechunk({"5\r\nhello\r0\r\n\r\n"}), "error: a chunk is not followed by CRLF");
	EXPECT_EQ(dechunk({"0\r\nX-Trailer: 1\r\n\r\n"}), "error: a trailer field is refused");
}

TEST(Http1, TheUpstreamHeadIsWrittenFromWhatWasRead)
{
	auto r = read_request_head(
		"POST http://wiki.example.org/a%2e?x HTTP/1.1\r\nHost: wiki.example.org\r\n"
		"User-Agent: curl/7.88.1\r\nAuthorization: Bearer agent-made\r\nConnection: keep-alive, X-Hop\r\n"
		"X-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: x\r\nProxy-Foo: y\r\nTE: trailers\r\n"
		"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nAccept: */*\r\n\r\n");
	ASSERT_TRUE(r) << r.rejection().message;
	std::vector<Header> inject = {{"Authorization", "Bearer wk_live_x"}};
	EXPECT_EQ(replaced_headers(*r, inject), std::vector<std::string>{"authorization"});
	EXPECT_EQ(upstream_head(*r, "/a.?x", "wiki.example.org", 443, true, inject, 11),
		  "POST /a.?x HTTP/1.1\r\nHost: wiki.example.org\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n"
		  "Authorization: Bearer wk_live_x\r\nContent-Length: 11\r\n\r\n");
	auto get = read_request_head("GET / HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n\r\n");
	ASSERT_TRUE(get);
	EXPECT_EQ(upstream_head(*get, "/", "2001:db8::1", 8443, true, {}, 0),
		  "GET / HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n\r\n");
	EXPECT_EQ(upstream_head(*get, "/", "a.test", 80, false, {}, 0), "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
	auto post = read_request_head("POST / HTTP/1.1\r\nHost: a\r\n\r\n");
	ASSERT_TRUE(post);
	EXPECT_EQ(upstream_head(*post, "/", "a", 443, true, {}, 0),
		  "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
	// A WebSocket's upgrade goes on as one, its own headers with it.
	auto ws = read_request_head(
		"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\n"
		"Upgrade: websocket\r\nSec-WebSocket-Key: k==\r\nSec-WebSocket-Version: 13\r\n\r\n");
	ASSERT_TRUE(ws) << ws.rejection().message;
	EXPECT_EQ(upstream_head(*ws, "/ws", "a", 443, true, {}, 0),
		  "GET /ws HTTP/1.1\r\nHost: a\r\nSec-WebSocket-Key: k==\r\nSec-WebSocket-Version: 13\r\n"
		  "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
}

}  // namespace
}  // namespace airlock::gate
