#include "ops/request.h"

#include <array>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sandbox/state.h"
#include "util/text.h"

namespace airlock {

using nlohmann::json;

namespace {

using Cmd = Request::Cmd;

struct CmdSpec {
	Cmd cmd;
	std::string_view name;
	bool needs_name;
	std::vector<std::string_view> keys;  // besides "cmd"
};

constexpr std::string_view kSandboxKeys[] = {
	"name", "policy", "audit_log", "log_allowed", "audit_log_max_bytes", "audit_log_keep"};

const std::array<CmdSpec, 10> kCmds = {{
	{Cmd::Ping, "ping", false, {}},
	{Cmd::Status, "status", false, {}},
	{Cmd::Thaw, "thaw", true, {"name"}},
	{Cmd::Kill, "kill", true, {"name"}},
	{Cmd::Reload, "reload", true, {"name", "policy"}},
	{Cmd::Attach, "attach", false, {"cgroup", "pid", "cgroup_id"}},
	{Cmd::Create, "create", false, {"runner_pid"}},
	{Cmd::Detach, "detach", true, {"name"}},
	{Cmd::Delete, "delete", true, {"name"}},
	{Cmd::Events, "events", false, {"sandbox", "follow"}},
}};

bool allowed(const CmdSpec& c, std::string_view key)
{
	for (auto k : c.keys)
		if (k == key)
			return true;
	if (c.cmd == Cmd::Attach || c.cmd == Cmd::Create)
		for (auto k : kSandboxKeys)
			if (k == key)
				return true;
	return false;
}

struct Bad {
	std::string message;
};

[[noreturn]] void bad(std::string_view key, std::string_view what)
{
	throw Bad{fmt::format("request: {}: {}", printable(key), what)};
}

std::string string_of(const json& j, std::string_view key)
{
	if (!j.is_string())
		bad(key, "not a string");
	return j.get<std::string>();
}

bool bool_of(const json& j, std::string_view key)
{
	if (!j.is_boolean())
		bad(key, "not true or false");
	return j.get<bool>();
}

template <typename T>
T unsigned_of(const json& j, std::string_view key, T max)
{
	if (!j.is_number_unsigned() || j.get<uint64_t>() > static_cast<uint64_t>(max))
		bad(key, fmt::format("not a whole number from 0 to {}", max));
	return static_cast<T>(j.get<uint64_t>());
}

Request parse_object(const json& j)
{
	if (!j.is_object())
		bad("(root)", "not a JSON object");
	auto c = j.find("cmd");
	if (c == j.end())
		bad("cmd", "missing");
	std::string cmd = string_of(*c, "cmd");
	const CmdSpec* spec = nullptr;
	for (const auto& s : kCmds)
		if (s.name == cmd)
			spec = &s;
	if (!spec)
		bad("cmd", fmt::format("unknown request '{}'", printable(cmd)));
	Request r;
	r.cmd = spec->cmd;
	for (const auto& [key, v] : j.items()) {
		if (key == "cmd")
			continue;
		if (!allowed(*spec, key))
			bad(key, fmt::format("not a field of '{}'", cmd));
		if (key == "name") {
			r.name = string_of(v, key);
			if (!r.name.empty() && !valid_sandbox_name(r.name))
				bad(key, not_a_sandbox_name(r.name));
		} else if (key == "policy") {
			r.policy = string_of(v, key);
		} else if (key == "audit_log") {
			r.audit_log = string_of(v, key);
		} else if (key == "log_allowed") {
			r.log_allowed = bool_of(v, key);
		} else if (key == "audit_log_max_bytes") {
			r.audit_bound.max_bytes = unsigned_of<uint64_t>(v, key, std::numeric_limits<uint64_t>::max());
			if (*r.audit_bound.max_bytes && *r.audit_bound.max_bytes < AuditBound::kMinMaxBytes)
				bad(key, fmt::format("0 (never rotate) or at least {}", AuditBound::kMinMaxBytes));
		} else if (key == "audit_log_keep") {
			r.audit_bound.keep = unsigned_of<unsigned>(v, key, 1000);
		} else if (key == "cgroup") {
			r.cgroup = string_of(v, key);
		} else if (key == "pid") {
			r.pid = unsigned_of<int>(v, key, std::numeric_limits<int>::max());
		} else if (key == "cgroup_id") {
			r.cgroup_id = unsigned_of<uint64_t>(v, key, std::numeric_limits<uint64_t>::max());
		} else if (key == "runner_pid") {
			r.runner_pid = unsigned_of<int>(v, key, std::numeric_limits<int>::max());
		} else if (key == "sandbox") {
			r.sandbox = string_of(v, key);
			if (!r.sandbox.empty() && !valid_sandbox_name(r.sandbox))
				bad(key, not_a_sandbox_name(r.sandbox));
		} else if (key == "follow") {
			r.follow = bool_of(v, key);
		}
	}
	if (spec->needs_name && r.name.empty())
		bad("name", fmt::format("'{}' needs a sandbox name", cmd));
	if (r.cmd == Cmd::Reload && r.policy.empty())
		bad("policy", "'reload' needs a policy");
	return r;
}

}  // namespace

std::string_view to_string(Request::Cmd c)
{
	for (const auto& s : kCmds)
		if (s.cmd == c)
			return s.name;
	return "?";
}

Result<Request> parse_request(std::string_view line)
{
	json j = json::parse(line, nullptr, false);
	if (j.is_discarded())
		return Rejection{{"request: not one JSON object on one line"}};
	try {
		return parse_object(j);
	} catch (const Bad& b) {
		return Rejection{{b.message}};
	}
}

std::string to_line(const Request& r)
{
	json j = {{"cmd", to_string(r.cmd)}};
	const CmdSpec& spec = *std::find_if(kCmds.begin(), kCmds.end(),
					    [&](const CmdSpec& s) { return s.cmd == r.cmd; });
	auto put = [&](std::string_view key, auto value, bool set) {
		if (set && allowed(spec, key))
			j[std::string(key)] = value;
	};
	put("name", r.name, !r.name.empty());
	put("policy", r.policy, !r.policy.empty());
	put("audit_log", r.audit_log, !r.audit_log.empty());
	put("log_allowed", r.log_allowed, r.log_allowed);
	put("audit_log_max_bytes", r.audit_bound.max_bytes.value_or(0), r.audit_bound.max_bytes.has_value());
	put("audit_log_keep", r.audit_bound.keep.value_or(0), r.audit_bound.keep.has_value());
	put("cgroup", r.cgroup, !r.cgroup.empty());
	put("pid", r.pid, r.pid > 0);
	put("cgroup_id", r.cgroup_id, r.cgroup_id > 0);
	put("runner_pid", r.runner_pid, r.runner_pid > 0);
	put("sandbox", r.sandbox, !r.sandbox.empty());
	put("follow", r.follow, r.follow);
	return j.dump() + "\n";
}

}  // namespace airlock
