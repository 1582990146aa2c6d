#pragma once
// One shape for "it failed, here is why", by who can cause it:
//
// - What a user can cause (a policy or configuration with mistakes, a
//   request the daemon refuses, a name that is no sandbox's) is an outcome
//   the caller must expect: a Result, the value or a Rejection saying why
//   not, one line per reason. Returned, never thrown.
// - What the environment causes (a syscall or a file that fails, a kernel
//   without a feature) and bugs stop the command: an Error (util/error.h),
//   thrown, with the object and the errno.
// - Never a std::string where "" means OK, nor a bool beside an error
//   string: a caller cannot forget to look at a Result.
//
// A rejection with more to it than lines (a policy's errors, each with its
// file and JSON path: PolicyRejection in policy/policy.h) is Result's second
// parameter; like Rejection it has first(), the line value_or_fail throws.
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "util/error.h"

namespace airlock {

struct Rejection {
	std::vector<std::string> lines;  // never empty
	const std::string& first() const { return lines.front(); }
};

template <typename T, typename Why = Rejection>
class [[nodiscard]] Result {
public:
	Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
	Result(Why why) : v_(std::in_place_index<1>, std::move(why))
	{
		if constexpr (std::is_same_v<Why, Rejection>)
			if (std::get<1>(v_).lines.empty())
				std::get<1>(v_).lines.push_back("rejected");
	}

	bool ok() const { return v_.index() == 0; }
	explicit operator bool() const { return ok(); }
	T& operator*() { return std::get<0>(v_); }
	const T& operator*() const { return std::get<0>(v_); }
	T* operator->() { return &std::get<0>(v_); }
	const T* operator->() const { return &std::get<0>(v_); }
	const Why& rejection() const { return std::get<1>(v_); }

	// The value, or an Error of the rejection's first line: for a caller
	// to whom a rejection is fatal.
	T& value_or_fail()
	{
		if (!ok())
			throw Error(std::string(rejection().first()));
		return **this;
	}

private:
	std::variant<T, Why> v_;
};

}  // namespace airlock
