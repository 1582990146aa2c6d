// The control socket's request parser (daemon/request.h), from arbitrary
// bytes: one line as the daemon reads it off a connection.
//
// Written against the parser being extracted from the daemon's loop:
//   std::variant<Request, std::string /* error */> parse_request(std::string_view line);
// It is not built yet (tests/fuzz/CMakeLists.txt says how to enable it).
//
// Beyond "no crash, no leak, no undefined behaviour": no exception escapes;
// an error is one non-empty line (it goes back to the client as the
// "error" of a JSON answer and into the daemon's log); a request is only
// ever made from one JSON object with a string "cmd" (the protocol,
// docs/architecture.md); and the same line always gives the same outcome.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "daemon/request.h"
#include "fuzz_check.h"

using namespace airlock;
using airlock::fuzz::broken;
using airlock::fuzz::check;
using airlock::fuzz::one_line;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	std::string_view line(reinterpret_cast<const char*>(data), size);
	auto parsed = parse_request(line);
	if (const auto* error = std::get_if<std::string>(&parsed)) {
		if (error->empty() || !one_line(*error))
			broken("an error is one non-empty line", *error);
	} else {
		auto j = nlohmann::json::parse(line, nullptr, false);
		bool protocol = !j.is_discarded() && j.is_object() && j.contains("cmd") && j["cmd"].is_string();
		check(protocol, "a request is one JSON object with a string \"cmd\"", line);
	}
	check(parse_request(line).index() == parsed.index(), "the same line, the same outcome", line);
	return 0;
}
