#pragma once
// A policy result's errors as a list, empty when it holds a value: for
// tests that report every error whatever the outcome.
#include <vector>

#include "policy/policy.h"

namespace airlock {

template <typename T>
const std::vector<PolicyError>& errors_in(const Result<T, PolicyRejection>& r)
{
	static const std::vector<PolicyError> none;
	return r ? none : r.rejection().errors;
}

}  // namespace airlock
