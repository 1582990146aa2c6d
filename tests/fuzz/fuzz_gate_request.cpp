// One request through the whole of the HTTP gate's reading, from arbitrary
// bytes: the head and body read strictly (gate/http1.h), the target put in
// canonical form (net/url.h), the bytes scanned for a secret
// (gate/never_send.h), the entries' verdict (gate/judge.h), and, when it
// allows, the message that would go upstream (gate::upstream_head), read
// back by a second parser (Boost.Beast) and by the gate itself.
//
// Properties:
//  - a secret the input carries as it is, or percent-encoded, is found;
//  - an allowed request's deciding entry matches it on its own;
//  - upstream, Beast reads exactly one message, of the judged method, the
//    canonical target, HTTP/1.1, one Host (the judged name and port), no
//    Transfer-Encoding, a Content-Length equal to the body's size and the
//    body's bytes; the injected header once, with its value, and none of
//    the client's of that name; nothing after the message;
//  - the gate reads the upstream head back to the same method, canonical
//    target and Host (the form is a fixed point), unless what it added
//    took the head past the bounds it sets a client's (431);
//  - every refusal says why on one line.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "fuzz_check.h"
#include "gate/http1.h"
#include "gate/judge.h"
#include "gate/never_send.h"
#include "net/url.h"
#include "policy/policy.h"

using namespace airlock;
using airlock::fuzz::broken;
using airlock::fuzz::check;
namespace http = boost::beast::http;

namespace {

constexpr std::string_view kSecret = "s3cr3t-f0r-the-fuzzer";
constexpr std::string_view kToken = "injected-token-value";
constexpr uint16_t kPort = 443;

const HttpGate& gate_rule()
{
	static const HttpGate g = [] {
		auto p = parse_policy_text(R"({"version": 1, "name": "f", "rules": [{"action": "allow",
		    "domain": "wiki.example.org", "protocol": "tcp", "http": [
		      {"methods": ["GET", "HEAD"], "path": "/wiki/*"},
		      {"methods": ["GET"], "path": "/w/index.php", "query": {"action": ["view", "raw"]}},
		      {"methods": ["POST"], "path": "/api/mail/send", "json": {"/to": "*@example.org"},
		       "max_body_bytes": 2048}
		    ]}]})",
					   "fuzz");
		if (!p)
			broken("the fuzz policy reads", p.rejection().first());
		return *p->rules.at(0).http;
	}();
	return g;
}

const gate::NeverSend& never_send()
{
	static const gate::NeverSend n({{"env/KEY", std::string(kSecret)}});
	return n;
}

void one_line(const std::string& why)
{
	check(!why.empty() && fuzz::one_line(why), "a refusal says why, on one line", why);
}

std::string lower(std::string s)
{
	std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
	return s;
}

std::string percent_encoded(std::string_view s)
{
	static const char* hex = "0123456789ABCDEF";
	std::string out;
	for (unsigned char c : s) {
		out += '%';
		out += hex[c >> 4];
		out += hex[c & 15];
	}
	return out;
}

// The upstream message, read by Beast and by the gate.
void check_upstream(const gate::RequestHead& head, const url::Target& target, const std::string& body)
{
	std::vector<gate::Header> added{{"Authorization", "Bearer " + std::string(kToken)}};
	std::string up = gate::upstream_head(head, target.serialized(), head.host, kPort, true, added, body.size());
	std::string msg = up + body;
	std::string shown = msg.substr(0, 512);

	http::request_parser<http::string_body> p;
	p.eager(true);
	p.header_limit(64 * 1024);
	p.body_limit(1 << 20);
	boost::system::error_code ec;
	size_t used = p.put(boost::asio::buffer(msg), ec);
	if (!ec && !p.is_done() && head.body == gate::RequestHead::Body::None && body.empty())
		p.put_eof(ec);
	check(!ec, "Beast reads what goes upstream", shown + " / " + ec.message());
	check(p.is_done(), "Beast reads a whole message upstream", shown);
	check(used == msg.size(), "nothing follows the message upstream", shown);
	const auto& req = p.get();
	check(std::string(req.method_string()) == head.method, "upstream: the judged method", shown);
	check(std::string(req.target()) == target.serialized(), "upstream: the canonical target", shown);
	check(req.version() == 11, "upstream: HTTP/1.1", shown);
	check(req.count(http::field::host) == 1, "upstream: one Host", shown);
	std::string host = head.host + (kPort == 443 ? "" : ":" + std::to_string(kPort));
	check(lower(std::string(req[http::field::host])) == host, "upstream: the judged Host", shown);
	check(req.count(http::field::transfer_encoding) == 0, "upstream: no Transfer-Encoding", shown);
	check(req.body() == body, "upstream: the body's bytes", shown);
	if (!body.empty())
		check(req[http::field::content_length] == std::to_string(body.size()),
		      "upstream: Content-Length is the body's size", shown);
	check(req.count(http::field::authorization) == 1 &&
		      req[http::field::authorization] == "Bearer " + std::string(kToken),
	      "upstream: the injected header once, with its value", shown);

	auto again = gate::read_request_head(up);
	// The gate's own bounds on a client's head (431) are not the
	// origin's: what the gate adds may take a head at them past them.
	if (!again && again.rejection().status == 431)
		return;
	check(static_cast<bool>(again), "the gate reads the upstream head", again ? "" : again.rejection().message);
	check(again->method == head.method, "read back: the same method", shown);
	check(again->host == head.host, "read back: the same Host", shown);
	auto t2 = url::canonical_target(again->target);
	check(static_cast<bool>(t2) && *t2 == target, "read back: the same canonical target", shown);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	std::string_view in(reinterpret_cast<const char*>(data), size);
	auto end = gate::head_end(in);
	if (!end) {
		one_line(end.rejection().message);
		return 0;
	}
	if (*end == 0)
		return 0;
	std::string_view head_bytes = in.substr(0, *end);
	auto head = gate::read_request_head(head_bytes);
	if (!head) {
		one_line(head.rejection().message);
		return 0;
	}
	std::string body;
	std::string_view after = in.substr(*end);
	if (head->body == gate::RequestHead::Body::Chunked) {
		gate::ChunkedReader c;
		auto used = c.feed(after, body);
		if (!used) {
			one_line(used.rejection().message);
			return 0;
		}
		if (!c.done())
			return 0;
		after = after.substr(0, *used);
	} else if (head->body == gate::RequestHead::Body::Length) {
		if (after.size() < head->length)
			return 0;
		after = after.substr(0, head->length);
		body = std::string(after);
	} else {
		after = {};
	}
	std::string_view message = in.substr(0, *end + after.size());

	// Never-send, over the request as the client wrote it.
	gate::NeverSend::Scan scan(never_send());
	scan.feed(head_bytes);
	scan.feed(body);
	bool carries = message.find(kSecret) != std::string_view::npos ||
		       message.find(percent_encoded(kSecret)) != std::string_view::npos ||
		       body.find(kSecret) != std::string::npos;
	if (carries)
		check(scan.found().has_value(), "a secret the request carries is found",
		      std::string(message.substr(0, 512)));

	auto target = url::canonical_target(head->target);
	if (!target) {
		one_line(target.rejection().message);
		return 0;
	}
	if (scan.found())
		return 0;  // refused: nothing goes upstream
	auto ct = head->header("content-type");
	std::string media = ct ? lower(std::string(ct->substr(0, ct->find(';')))) : "";
	while (!media.empty() && (media.back() == ' ' || media.back() == '\t'))
		media.pop_back();
	gate::Request req{head->method, head->host, *target, media, body};
	gate::RateTable rates;
	gate::Verdict v = gate::judge(gate_rule(), 0, req, rates, gate::RateTable::Clock::now());
	if (v.kind != gate::Verdict::Allow) {
		one_line(v.detail);
		return 0;
	}
	check(v.entry.has_value() && *v.entry < gate_rule().entries.size(), "an allowed request names its entry");
	auto why = gate::entry_mismatch(gate_rule().entries[*v.entry], req);
	check(!why, "the deciding entry matches the request on its own", why.value_or(""));
	check_upstream(*head, *target, body);
	return 0;
}
