// The daemon's configuration file: the shipped example parses, and every
// mistake is one line naming the file and the JSON path.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ops/config.h"
#include "sandbox/sandbox.h"

namespace {

using airlock::DaemonConfig;
using airlock::load_daemon_config;

std::string write_temp(const std::string& text)
{
	char path[] = "/tmp/airlock-config-XXXXXX";
	int fd = mkstemp(path);
	EXPECT_GE(fd, 0);
	FILE* f = fdopen(fd, "w");
	fputs(text.c_str(), f);
	fclose(f);
	return path;
}

std::vector<std::string> errors_of(const std::string& text, std::string* file = nullptr)
{
	std::string path = write_temp(text);
	if (file)
		*file = path;
	auto c = load_daemon_config(path);
	std::remove(path.c_str());
	return c ? std::vector<std::string>{} : c.rejection().lines;
}

TEST(DaemonConfig, TheShippedExampleParses)
{
	DaemonConfig c = *load_daemon_config(AIRLOCK_SOURCE_DIR "/deploy/airlock/airlock.json");
	EXPECT_EQ(c.metrics, "127.0.0.1:9464");
	EXPECT_EQ(c.policy_dir, "/etc/airlock/policies");
	EXPECT_EQ(c.audit_log, "/var/log/airlock/audit.jsonl");
	ASSERT_EQ(c.sandboxes.size(), 2u);
	EXPECT_EQ(c.sandboxes[0].name, "coder");
	EXPECT_EQ(c.sandboxes[0].policy, "default");
	EXPECT_EQ(c.sandboxes[0].cgroup, "");
	EXPECT_FALSE(c.sandboxes[0].log_allowed);
	EXPECT_EQ(c.sandboxes[1].cgroup, "system.slice/research-agent.service");
	EXPECT_TRUE(c.sandboxes[1].log_allowed);
}

TEST(DaemonConfig, AnEmptyObjectIsAllDefaults)
{
	EXPECT_TRUE(errors_of("{}").empty());
}

TEST(DaemonConfig, EveryMistakeIsOneLineWithItsPath)
{
	std::string f;
	auto lines = errors_of(R"({
  "metrics": 9464,
  "policy_dir": "policies",
  "audit_log": "",
  "extra": 1,
  "sandboxes": [
    {"name": "a", "policy": "p"},
    {"name": "a", "policy": "p"},
    {"name": "bad/name", "policy": "rel/p.json", "log_allowed": "yes", "cgroup": 3},
    {"policy": "/abs.json", "audit_log": "x.jsonl"},
    {"name": "b", "policy": "/abs.json", "policy": "/other.json"},
    "c"
  ]
})",
			       &f);
	std::vector<std::string> want = {
		f + ": sandboxes/4: duplicate key 'policy'",
		f + ": audit_log: must not be empty",
		f + ": (root): unknown key \"extra\"",
		f + ": metrics: expected a string, got an integer",
		f + ": policy_dir: must be an absolute path",
		f + ": sandboxes/1/name: sandbox 'a' is declared twice",
		f + ": sandboxes/2/cgroup: expected a string, got an integer",
		f + ": sandboxes/2/log_allowed: expected a boolean, got a string",
		f + ": sandboxes/2/policy: a path must be absolute (or give a name in policy_dir)",
		f + ": sandboxes/2/name: 'bad/name' is not a sandbox name (1-63 of A-Z a-z 0-9 . _ -, starting with a letter or digit)",
		f + ": sandboxes/3/audit_log: must be an absolute path",
		f + ": sandboxes/3: missing key 'name'",
		f + ": sandboxes/5: expected an object, got a string",
	};
	EXPECT_EQ(lines, want);
}

TEST(DaemonConfig, TheAuditLogBoundIsReadAndChecked)
{
	std::string path = write_temp(R"({"audit_log_max_bytes": 1048576, "audit_log_keep": 2})");
	DaemonConfig c = *load_daemon_config(path);
	std::remove(path.c_str());
	EXPECT_EQ(c.audit_bound.max(), 1048576u);
	EXPECT_EQ(c.audit_bound.kept(), 2u);
	EXPECT_EQ(load_daemon_config(AIRLOCK_SOURCE_DIR "/deploy/airlock/airlock.json")->audit_bound.max_bytes,
		  std::nullopt);
	std::string f;
	auto lines = errors_of(R"({"audit_log_max_bytes": 100, "audit_log_keep": -1})", &f);
	std::vector<std::string> want = {
		f + ": audit_log_keep: expected a whole number, got -1",
		f + ": audit_log_max_bytes: at least 4096 (or 0: rotated by something else)",
	};
	EXPECT_EQ(lines, want);
}

TEST(DaemonConfig, APolicyNameNeedsAPolicyDirectory)
{
	std::string f;
	auto lines = errors_of(R"({"sandboxes": [{"name": "a", "policy": "web"}]})", &f);
	ASSERT_EQ(lines.size(), 1u);
	EXPECT_EQ(lines[0], f + ": sandboxes/0/policy: a policy name needs \"policy_dir\"; or give an absolute path");
}

// The OCI hook names the sandboxes of containers ctr-ID: a declaration may
// not take such a name (the hook's container would find it made).
TEST(DaemonConfig, NamesStartingWithCtrAreTheHooks)
{
	std::string f;
	auto lines = errors_of(R"({"policy_dir": "/p", "sandboxes": [{"name": "ctr-0123456789ab", "policy": "web"}]})",
			       &f);
	EXPECT_EQ(lines,
		  std::vector<std::string>{f + ": sandboxes/0/name: 'ctr-0123456789ab': names starting with ctr- "
					       "are the OCI hook's, for containers it attaches"});
}

TEST(DaemonConfig, InvalidJsonNamesLineAndColumn)
{
	std::string f;
	auto lines = errors_of("{\n  \"metrics\": \"x\",\n  oops\n}", &f);
	ASSERT_EQ(lines.size(), 1u);
	EXPECT_EQ(lines[0].rfind(f + ":3:3: (root): invalid JSON:", 0), 0u) << lines[0];
}

TEST(DaemonConfig, AnUnreadableFileIsOneLine)
{
	auto c = load_daemon_config("/nonexistent/airlock.json");
	ASSERT_FALSE(c.ok());
	const auto& lines = c.rejection().lines;
	ASSERT_EQ(lines.size(), 1u);
	EXPECT_EQ(lines[0], "/nonexistent/airlock.json: (root): cannot read");
}

}  // namespace
