#pragma once
// What the tests of redirects share: a policy that redirects everything to
// the world, a run with allowed decisions logged, and the records a
// sandbox's recorder writes.
#include <optional>
#include <string>
#include <vector>

#include "fixture.h"

namespace it {

// Everything redirected to the world, its records in records_dir; protocol:
// of the redirect rules, "" both.
inline json world_policy(const std::string& records_dir, const std::string& on_violation = "deny",
			 json extra_rules = json::array(), const std::string& protocol = "")
{
	json rules = std::move(extra_rules);
	for (const char* cidr : {"0.0.0.0/0", "::/0"}) {
		json r = {{"action", "redirect"}, {"cidr", cidr}, {"to", "world"}};
		if (!protocol.empty())
			r["protocol"] = protocol;
		rules.push_back(r);
	}
	return json{{"version", 1},
		    {"name", "it-world"},
		    {"mode", "enforce"},
		    {"on_violation", on_violation},
		    {"rules", rules},
		    {"world",
		     {{"records", records_dir},
		      {"max_body_bytes", 1024},
		      {"dns", "resolvers"},
		      {"responses", json::array({{{"host", "*"},
						  {"method", "GET"},
						  {"path", "/fixture"},
						  {"status", 201},
						  {"body", "from the fixture\n"}}})}}}};
}

// `airlock run` of cmd in the sandbox `name` under `policy` (written as
// NAME.json), allowed decisions logged too; cmd as `user` ("": uid 0).
inline RunResult run_logged(Env& env, const std::string& name, const std::vector<std::string>& cmd, const json& policy,
			    Ms timeout = 30s, const std::string& user = "")
{
	RunSpec s;
	s.policy = env.write_policy(name + ".json", policy);
	s.name = name;
	s.cmd = cmd;
	s.log_allowed = true;
	s.user = user;
	return env.run(s, timeout);
}

// The records in a file, waited for until `n` are there.
inline std::vector<json> wait_records(const std::string& file, size_t n, Ms timeout = 5s)
{
	std::vector<json> lines;
	wait_until(
		[&] {
			lines = read_json_lines(file);
			return lines.size() >= n;
		},
		timeout);
	return lines;
}

// The first record whose string `key` contains needle.
inline std::optional<json> record_with(const std::vector<json>& lines, const std::string& key,
				       const std::string& needle)
{
	for (const auto& j : lines)
		if (j.contains(key) && j[key].is_string() &&
		    j[key].get<std::string>().find(needle) != std::string::npos)
			return j;
	return std::nullopt;
}

}  // namespace it
