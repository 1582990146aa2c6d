#pragma once
// Text from outside (a file, a request, a packet) as it appears in a
// message: printable ASCII as itself, every other byte as \xNN, so that a
// message stays one line and a terminal sees no control sequence.
#include <string>
#include <string_view>

namespace airlock {

std::string printable(char c);
std::string printable(std::string_view s);

// A-Z as a-z, every other byte as it is.
std::string ascii_lower(std::string_view s);

}  // namespace airlock
