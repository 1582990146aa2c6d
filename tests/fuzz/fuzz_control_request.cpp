// The control socket's request parser (ops/request.h), from arbitrary
// bytes: one line as the daemon reads it off a connection.
//
// Beyond "no crash, no leak, no undefined behaviour": no exception escapes;
// an error is one non-empty line starting "request: " (it goes back to the
// client as the "error" of a JSON answer and into the daemon's log); a
// request is only ever made from one JSON object with a string "cmd" (the
// protocol, docs/operations.md); the same line always gives the same
// outcome; and what a client writes of an accepted request (to_line) is
// accepted again and written the same: nothing is lost or changed on the
// way through the socket.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "ops/request.h"

using namespace airlock;
using airlock::fuzz::broken;
using airlock::fuzz::check;
using airlock::fuzz::one_line;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	std::string_view line(reinterpret_cast<const char*>(data), size);
	auto parsed = parse_request(line);
	if (!parsed) {
		check(parsed.rejection().lines.size() == 1, "an error is one line", line);
		const std::string& error = parsed.rejection().first();
		if (error.empty() || !one_line(error))
			broken("an error is one non-empty line", error);
		check(error.rfind("request: ", 0) == 0, "an error starts \"request: \"", error);
	} else {
		auto j = nlohmann::json::parse(line, nullptr, false);
		bool protocol = !j.is_discarded() && j.is_object() && j.contains("cmd") && j["cmd"].is_string();
		check(protocol, "a request is one JSON object with a string \"cmd\"", line);
		std::string written = to_line(*parsed);
		check(!written.empty() && written.back() == '\n' && written.find('\n') == written.size() - 1,
		      "a request is written as one line", written);
		auto again = parse_request(std::string_view(written).substr(0, written.size() - 1));
		if (!again)
			broken("a written request is accepted again", written + " -> " + again.rejection().first());
		check(to_line(*again) == written, "a written request is written the same again", written);
	}
	check(parse_request(line).ok() == parsed.ok(), "the same line, the same outcome", line);
	return 0;
}
