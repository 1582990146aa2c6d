#include "daemon/declared.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "sandbox/cgroup.h"

namespace airlock {

DeclaredSandboxes::DeclaredSandboxes(const Paths& paths, std::string config_file, std::vector<DeclaredSandbox> declared,
				     Make make)
    : paths_(paths), config_file_(std::move(config_file)), declared_(std::move(declared)), make_(std::move(make))
{
}

void DeclaredSandboxes::ensure()
{
	for (const auto& d : declared_) {
		if (load_record(paths_, d.name))
			continue;
		Request q;
		q.cmd = d.cgroup.empty() ? Request::Cmd::Create : Request::Cmd::Attach;
		q.name = d.name;
		q.policy = d.policy;
		q.audit_log = d.audit_log;
		q.log_allowed = d.log_allowed;
		q.cgroup = d.cgroup;
		std::string error;
		try {
			auto r = make_(q);
			if (r) {
				spdlog::info("{} (declared)", r->value("message", ""));
				errors_.erase(d.name);
				continue;
			}
			error = r.rejection().first();
		} catch (const std::exception& e) {
			error = e.what();
		}
		std::string& last = errors_[d.name];
		if (last != error)
			spdlog::error("declared sandbox {}: {}", d.name, error);
		last = error;
	}
}

void DeclaredSandboxes::reread()
{
	if (config_file_.empty())
		return;
	auto loaded = load_daemon_config(config_file_);
	if (loaded) {
		declared_ = loaded->sandboxes;
		return;
	}
	for (const auto& l : loaded.rejection().lines)
		spdlog::error("{}", l);
	spdlog::error("{}: rejected; the sandboxes it declared before stay", config_file_);
}

void DeclaredSandboxes::notify_when_enforcing(const std::function<bool(const std::string&)>& supervised,
					      size_t supervising)
{
	if (ready_)
		return;
	std::vector<std::string> missing;
	for (const auto& d : declared_) {
		if (supervised(d.name))
			continue;
		// A cgroup to attach that does not exist yet is made by what
		// starts after the daemon (a unit, a container): it is attached
		// when it appears, and does not hold readiness back.
		std::error_code ec;
		std::string cg = d.cgroup.empty() || d.cgroup.front() == '/' ? d.cgroup : cgroup::path_of(d.cgroup);
		if (!cg.empty() && !std::filesystem::exists(cg + "/cgroup.procs", ec))
			continue;
		auto error = errors_.find(d.name);
		missing.push_back(d.name + (error != errors_.end() ? ": " + error->second : ""));
	}
	if (!missing.empty()) {
		std::string status = fmt::format("STATUS=waiting for declared sandboxes: {}", fmt::join(missing, "; "));
		if (status != last_status_)
			::sd_notify(0, status.c_str());
		last_status_ = status;
		return;
	}
	ready_ = true;
	::sd_notifyf(0, "READY=1\nSTATUS=enforcing %zu sandboxes", supervising);
	spdlog::info("airlock daemon: enforcing {} sandboxes{}", supervising,
		     declared_.empty() ? "" : fmt::format(", the {} declared ones included", declared_.size()));
}

bool DeclaredSandboxes::declares(const std::string& name) const
{
	return std::any_of(declared_.begin(), declared_.end(),
			   [&](const DeclaredSandbox& d) { return d.name == name; });
}

}  // namespace airlock
