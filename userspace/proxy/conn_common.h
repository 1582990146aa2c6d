#pragma once
// What the recorder's streams and the SNI gate's connections share: the
// size of one read, how long an exchange took, and ASCII case (names and
// header fields compare without it).
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::proxy {

using Clock = std::chrono::steady_clock;

inline constexpr size_t kReadChunk = 16 * 1024;

inline uint64_t ms_since(Clock::time_point t)
{
	return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

inline std::string lower(std::string_view s)
{
	std::string out(s);
	for (char& c : out)
		c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
	return out;
}

inline bool iequal(std::string_view a, std::string_view b)
{
	return a.size() == b.size() && lower(a) == lower(b);
}

}  // namespace airlock::proxy
