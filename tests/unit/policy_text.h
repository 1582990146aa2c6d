#pragma once
// Policy text in, errors or a policy out: what the policy tests share.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/policy.h"
#include "policy_errors.h"

namespace airlock::policy_test {

inline const char* kFile = "p.json";

// Every error as the user reads it ("p.json: PATH: MESSAGE").
inline std::vector<std::string> errors_of(const std::string& text)
{
	auto r = parse_policy_text(text, kFile);
	std::vector<std::string> out;
	for (const auto& e : errors_in(r))
		out.push_back(e.str());
	// A result is either a policy or errors, never both or neither.
	EXPECT_EQ(r.ok(), out.empty()) << text;
	return out;
}

inline Policy parse_ok(const std::string& text)
{
	auto r = parse_policy_text(text, kFile);
	for (const auto& e : errors_in(r))
		ADD_FAILURE() << e.str();
	EXPECT_TRUE(r.ok()) << text;
	return r ? *r : Policy{};
}

}  // namespace airlock::policy_test
