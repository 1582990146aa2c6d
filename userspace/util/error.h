#pragma once
// Fatal errors of one command. They reach the user as one line, with the
// object and errno that failed; recoverable conditions are return values.
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace airlock {

class Error : public std::runtime_error {
public:
	using std::runtime_error::runtime_error;
};

// "what: strerror(err)" as an Error; err defaults to errno.
[[noreturn]] inline void fail_errno(const std::string& what, int err = errno)
{
	throw Error(fmt::format("{}: {}", what, std::strerror(err)));
}

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args)
{
	throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace airlock
