#include "sandbox/state.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/files.h"
#include "util/text.h"

namespace airlock {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json to_json(const SandboxRecord& r)
{
	return json{{"name", r.name},
		    {"cgroup", r.cgroup},
		    {"cgroup_id", r.cgroup_id},
		    {"level", r.level},
		    {"slot", r.slot},
		    {"bank", r.bank},
		    {"policy_file", r.policy_file},
		    {"policy_name", r.policy_name},
		    {"runner_pid", r.runner_pid},
		    {"runner_start", r.runner_start},
		    {"audit_log", r.audit_log},
		    {"log_allowed", r.log_allowed},
		    {"created", r.created},
		    {"attached", r.attached},
		    {"managed", r.managed},
		    {"abstract_scoped", r.abstract_scoped},
		    {"audit_max_bytes", r.audit_bound.max()},
		    {"audit_keep", r.audit_bound.kept()}};
}

SandboxRecord from_json(const json& j)
{
	SandboxRecord r;
	r.name = j.at("name").get<std::string>();
	r.cgroup = j.at("cgroup").get<std::string>();
	r.cgroup_id = j.at("cgroup_id").get<uint64_t>();
	r.level = j.at("level").get<int>();
	r.slot = j.at("slot").get<uint32_t>();
	r.bank = j.at("bank").get<unsigned>();
	r.policy_file = j.value("policy_file", "");
	r.policy_name = j.value("policy_name", "");
	r.runner_pid = j.value("runner_pid", 0);
	r.runner_start = j.value("runner_start", uint64_t{0});
	r.audit_log = j.value("audit_log", "");
	r.log_allowed = j.value("log_allowed", false);
	r.audit_bound.max_bytes = j.value("audit_max_bytes", AuditBound::kDefaultMaxBytes);
	r.audit_bound.keep = j.value("audit_keep", AuditBound::kDefaultKeep);
	r.created = j.value("created", "");
	r.attached = j.value("attached", false);
	r.managed = j.value("managed", false);
	r.abstract_scoped = j.value("abstract_scoped", false);
	return r;
}

}  // namespace

void save_record(const Paths& p, const SandboxRecord& r)
{
	make_dirs(p.state_dir + "/sandboxes");
	write_file_atomic(p.record_file(r.name), to_json(r).dump(2) + "\n");
}

std::optional<SandboxRecord> load_record(const Paths& p, const std::string& name)
{
	auto content = read_file(p.record_file(name));
	if (!content)
		return std::nullopt;
	try {
		return from_json(json::parse(*content));
	} catch (const std::exception& e) {
		fail("{}: unreadable sandbox record: {}", p.record_file(name), e.what());
	}
}

std::vector<SandboxRecord> load_records(const Paths& p)
{
	std::vector<SandboxRecord> out;
	std::error_code ec;
	for (const auto& ent : fs::directory_iterator(p.state_dir + "/sandboxes", ec)) {
		std::string file = ent.path().filename();
		if (file.size() <= 5 || file.substr(file.size() - 5) != ".json" ||
		    file.find(".policy.") != std::string::npos)
			continue;
		if (auto r = load_record(p, file.substr(0, file.size() - 5)))
			out.push_back(*r);
	}
	std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
	return out;
}

void remove_record(const Paths& p, const std::string& name)
{
	std::error_code ec;
	fs::remove(p.record_file(name), ec);
	fs::remove(p.policy_copy(name, 0), ec);
	fs::remove(p.policy_copy(name, 1), ec);
	fs::remove(p.kill_marker(name), ec);
	fs::remove(p.privileged_marker(name), ec);
}

uint64_t process_start_time(int pid)
{
	auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
	if (!stat)
		return 0;
	// comm may hold spaces and parentheses: fields restart after the last ')'.
	auto close = stat->rfind(')');
	if (close == std::string::npos)
		return 0;
	std::istringstream in(stat->substr(close + 2));
	std::string field;
	for (int i = 3; i <= 22; i++) {
		if (!(in >> field))
			return 0;
		if (i == 22)
			return std::stoull(field);
	}
	return 0;
}

bool runner_alive(const SandboxRecord& r)
{
	if (r.runner_pid <= 0 || process_start_time(r.runner_pid) != r.runner_start)
		return false;
	// A killed runner that nobody has reaped yet is a zombie: it will clean up nothing.
	auto stat = read_file("/proc/" + std::to_string(r.runner_pid) + "/stat");
	auto close = stat ? stat->rfind(')') : std::string::npos;
	if (close == std::string::npos || close + 2 >= stat->size())
		return false;
	char state = (*stat)[close + 2];
	return state != 'Z' && state != 'X';
}

bool valid_sandbox_name(const std::string& name)
{
	static const std::regex re("[A-Za-z0-9][A-Za-z0-9._-]{0,62}");
	return std::regex_match(name, re);
}

std::string not_a_sandbox_name(const std::string& name)
{
	return "'" + printable(name) +
	       "' is not a sandbox name (1-63 of A-Z a-z 0-9 . _ -, starting with a letter or digit)";
}

}  // namespace airlock
