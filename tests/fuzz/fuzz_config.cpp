// The daemon's configuration file (ops/config.h) from arbitrary bytes,
// through parse_daemon_config: what load_daemon_config does once it has read
// the file.
//
// Beyond "no crash, no leak, no undefined behaviour": nothing is thrown; a
// rejection has at least one line, each "FILE: PATH: MESSAGE" on one line;
// an accepted configuration holds what config.h promises: sandbox names
// valid and distinct, each with a policy that is an absolute path or a name
// with "policy_dir" set, absolute paths where paths are asked for, an audit
// bound within its limits.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "events/audit_bound.h"
#include "fuzz_check.h"
#include "ops/config.h"
#include "sandbox/sandbox.h"
#include "sandbox/state.h"

using namespace airlock;
using airlock::fuzz::broken;
using airlock::fuzz::check;
using airlock::fuzz::one_line;

namespace {

const std::string kFile = "/etc/airlock/airlock.json";

bool absolute_or_empty(const std::string& p)
{
	return p.empty() || p.front() == '/';
}

void check_accepted(const DaemonConfig& c)
{
	check(absolute_or_empty(c.policy_dir) && absolute_or_empty(c.audit_log), "paths are absolute", c.policy_dir);
	if (c.audit_bound.keep)
		check(*c.audit_bound.keep <= 1000, "audit_log_keep is at most 1000");
	if (c.audit_bound.max_bytes)
		check(*c.audit_bound.max_bytes == 0 || *c.audit_bound.max_bytes >= AuditBound::kMinMaxBytes,
		      "audit_log_max_bytes is 0 or at least kMinMaxBytes");
	std::set<std::string> names;
	for (const auto& s : c.sandboxes) {
		check(valid_sandbox_name(s.name), "a declared sandbox has a valid name", s.name);
		check(names.insert(s.name).second, "declared sandboxes have distinct names", s.name);
		check(!s.policy.empty(), "a declared sandbox has a policy", s.name);
		bool is_name = s.policy.find('/') == std::string::npos;
		check(s.policy.front() == '/' || (is_name && !c.policy_dir.empty()),
		      "a policy is an absolute path, or a name with policy_dir", s.policy);
		check(absolute_or_empty(s.audit_log), "a sandbox's audit log is an absolute path", s.audit_log);
	}
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	auto config = parse_daemon_config(std::string(reinterpret_cast<const char*>(data), size), kFile);
	if (config) {
		check_accepted(*config);
		return 0;
	}
	check(!config.rejection().lines.empty(), "a rejection has at least one line");
	for (const auto& line : config.rejection().lines) {
		if (!one_line(line))
			broken("an error is one line", line);
		// "FILE: PATH: ...", or "FILE:LINE:COLUMN: ..." for JSON that does not parse.
		if (line.rfind(kFile + ":", 0) != 0)
			broken("an error names the file", line);
	}
	return 0;
}
