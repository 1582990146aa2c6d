#pragma once
// Outcomes a caller must expect: a value, or a Rejection saying why not,
// one line per reason (a policy that does not compile, a configuration
// with mistakes, a request the daemon refuses). They are returned, never
// thrown; exceptions are for what stops a command (util/error.h).
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "util/error.h"

namespace airlock {

struct Rejection {
	std::vector<std::string> lines;  // never empty
	const std::string& first() const { return lines.front(); }
};

template <typename T>
class [[nodiscard]] Result {
public:
	Result(T value) : v_(std::move(value)) {}
	Result(Rejection r) : v_(std::move(r)) {
		if (std::get<Rejection>(v_).lines.empty())
			std::get<Rejection>(v_).lines.push_back("rejected");
	}

	bool ok() const { return v_.index() == 0; }
	explicit operator bool() const { return ok(); }
	T& operator*() { return std::get<T>(v_); }
	const T& operator*() const { return std::get<T>(v_); }
	T* operator->() { return &std::get<T>(v_); }
	const T* operator->() const { return &std::get<T>(v_); }
	const Rejection& rejection() const { return std::get<Rejection>(v_); }

	// The value, or an Error of the rejection's first line: for a caller
	// to whom a rejection is fatal.
	T& value_or_fail()
	{
		if (!ok())
			throw Error(rejection().first());
		return **this;
	}

private:
	std::variant<T, Rejection> v_;
};

}  // namespace airlock
