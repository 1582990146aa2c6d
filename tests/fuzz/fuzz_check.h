#pragma once
// What the fuzz targets assert beyond "no crash": a broken property is
// reported with the value that broke it, then abort() (libFuzzer saves the
// input as a crash).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace airlock::fuzz {

[[noreturn]] inline void broken(const char* what, std::string_view detail)
{
	std::fprintf(stderr, "property broken: %s\n  value: %.*s\n", what, static_cast<int>(detail.size()),
		     detail.data());
	std::abort();
}

inline void check(bool ok, const char* what, std::string_view detail = {})
{
	if (!ok)
		broken(what, detail);
}

// An error reaches the user as one line of a terminal, a log or a JSON
// answer: valid UTF-8 (a JSON string must be), and no control character, C0
// (line feed, carriage return, escape ...), DEL or C1 (U+0085 ends a line too).
inline bool one_line(std::string_view s)
{
	for (size_t i = 0; i < s.size();) {
		unsigned char c = static_cast<unsigned char>(s[i]);
		if (c < 0x80) {
			if (c < 0x20 || c == 0x7f)
				return false;
			i++;
			continue;
		}
		size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
		if (n == 0 || c > 0xf4 || i + n > s.size())
			return false;
		uint32_t cp = c & (0x7f >> n);
		for (size_t k = 1; k < n; k++) {
			unsigned char d = static_cast<unsigned char>(s[i + k]);
			if ((d & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (d & 0x3f);
		}
		bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
		if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
			return false;
		i += n;
	}
	return true;
}

}  // namespace airlock::fuzz
