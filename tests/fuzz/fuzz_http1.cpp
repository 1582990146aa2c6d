// HTTP/1.1 requests as the gate reads them (gate/http1.h), from arbitrary
// bytes, against Boost.Beast's parser: where the gate accepts a head, and
// a chunked or sized body after it, Beast reads the same message: method,
// target (origin-form), version, every header's name and value in order,
// and the body's bytes. A message the two could read differently is one
// the gate must refuse. And every refusal is one line with a status.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>
#include <string>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "fuzz_check.h"
#include "gate/http1.h"

using namespace airlock;
using airlock::fuzz::check;
namespace http = boost::beast::http;

namespace {

void refused(const gate::HttpProblem& p)
{
	check(p.status == 400 || p.status == 417 || p.status == 431 || p.status == 505, "a known status",
	      std::to_string(p.status));
	check(!p.message.empty() && fuzz::one_line(p.message), "a refusal says why, on one line", p.message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	std::string_view in(reinterpret_cast<const char*>(data), size);
	auto end = gate::head_end(in);
	if (!end) {
		refused(end.rejection());
		return 0;
	}
	if (*end == 0)
		return 0;
	auto head = gate::read_request_head(in.substr(0, *end));
	if (!head) {
		refused(head.rejection());
		return 0;
	}
	// The body as the gate reads it.
	std::string body;
	std::string_view after = in.substr(*end);
	if (head->body == gate::RequestHead::Body::Chunked) {
		gate::ChunkedReader c;
		auto used = c.feed(after, body);
		if (!used) {
			refused(used.rejection());
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

	// Beast, on the same bytes (the empty lines the gate skips before a
	// request line are not Beast's to read).
	std::string_view msg = in.substr(0, *end + after.size());
	while (msg.size() >= 2 && msg[0] == '\r' && msg[1] == '\n')
		msg.remove_prefix(2);
	http::request_parser<http::string_body> p;
	p.eager(true);
	p.header_limit(64 * 1024);
	p.body_limit(1 << 20);
	boost::system::error_code ec;
	size_t used = 0;
	while (used < msg.size() && !p.is_done()) {
		size_t n = p.put(boost::asio::buffer(msg.data() + used, msg.size() - used), ec);
		if (ec)
			break;
		if (n == 0)
			break;
		used += n;
	}
	if (!p.is_done() && !ec && head->body == gate::RequestHead::Body::None) {
		p.put_eof(ec);
	}
	std::string shown(msg.substr(0, 512));
	check(!ec, "Beast reads what the gate accepts", shown + " / " + ec.message());
	check(p.is_done(), "Beast reads the whole message the gate read", shown);
	const auto& req = p.get();
	check(std::string(req.method_string()) == head->method, "the same method", shown);
	if (!head->target.empty() && head->target.front() == '/' && req.target().starts_with("/"))
		check(std::string(req.target()) == head->target, "the same target", shown);
	check(req.version() == (head->http10 ? 10 : 11), "the same version", shown);
	// Beast keeps the fields of one name together: compare by name, each
	// name's values in order.
	using Fields = std::vector<std::pair<std::string, std::string>>;
	auto by_name = [](Fields f) {
		for (auto& [n, v] : f)
			std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
		std::stable_sort(f.begin(), f.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
		return f;
	};
	Fields gate_fields, beast_fields;
	for (const gate::Header& h : head->headers)
		gate_fields.emplace_back(h.name, h.value);
	for (const auto& f : req)
		beast_fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
	check(by_name(gate_fields) == by_name(beast_fields), "the same headers, each name's values in order", shown);
	check(req.body() == body, "the same body", shown);
	return 0;
}
