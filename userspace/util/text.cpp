#include "util/text.h"

#include <fmt/format.h>

namespace airlock {

std::string printable(char c)
{
	unsigned char u = static_cast<unsigned char>(c);
	if (u >= 0x20 && u < 0x7f)
		return std::string(1, c);
	return fmt::format("\\x{:02x}", u);
}

std::string printable(std::string_view s)
{
	std::string out;
	out.reserve(s.size());
	for (char c : s)
		out += printable(c);
	return out;
}

std::string ascii_lower(std::string_view s)
{
	std::string out(s);
	for (char& c : out)
		if (c >= 'A' && c <= 'Z')
			c = static_cast<char>(c - 'A' + 'a');
	return out;
}

}  // namespace airlock
