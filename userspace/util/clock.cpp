#include "util/clock.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

namespace airlock {

std::string now_rfc3339()
{
	auto now = std::chrono::system_clock::now();
	auto secs = std::chrono::time_point_cast<std::chrono::seconds>(now);
	auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - secs).count();
	std::time_t t = std::chrono::system_clock::to_time_t(secs);
	std::tm tm;
	gmtime_r(&t, &tm);
	char buf[64];
	std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return fmt::format("{}.{:09d}Z", buf, ns);
}

}  // namespace airlock
