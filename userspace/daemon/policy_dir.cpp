#include "daemon/policy_dir.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/policy_watcher.h"
#include "sandbox/sandbox.h"
#include "util/error.h"

namespace airlock {

std::string PolicyDir::resolve(const std::string& arg) const
{
	std::error_code ec;
	if (!dir_.empty() && !arg.empty() && arg.find('/') == std::string::npos) {
		for (const std::string& f : {dir_ + "/" + arg + ".json", dir_ + "/" + arg})
			if (std::filesystem::is_regular_file(f, ec))
				return f;
		fail("no policy named '{}' in {}", arg, dir_);
	}
	if (arg.empty() || arg.front() != '/')
		fail("policy '{}': give an absolute path{}", arg, dir_.empty() ? "" : " or a name in " + dir_);
	return std::filesystem::path(arg).lexically_normal().string();
}

// A policy that no sandbox uses yet: checked, so that a mistake shows
// before a sandbox asks for it.
void PolicyDir::check(const std::string& path)
{
	try {
		auto p = load_policy(path);
		if (p) {
			spdlog::info("policy {} ('{}'): ok", path, p->name);
			return;
		}
		for (const auto& l : p.rejection().lines)
			spdlog::error("{}", l);
		spdlog::error("policy {}: rejected; a sandbox cannot use it until it is fixed", path);
	} catch (const std::exception& e) {
		spdlog::error("policy {}: {}", path, e.what());
	}
}

void PolicyDir::check_all() const
{
	std::error_code ec;
	std::vector<std::string> files;
	for (const auto& ent : std::filesystem::directory_iterator(dir_, ec))
		if (PolicyWatcher::is_policy_name(ent.path().filename()))
			files.push_back(ent.path());
	std::sort(files.begin(), files.end());
	for (const auto& f : files)
		check(f);
}

void PolicyDir::changed(const std::string& dir, const std::string& path) const
{
	if (dir == dir_ && PolicyWatcher::is_policy_name(path.substr(path.rfind('/') + 1)))
		check(path);
}

}  // namespace airlock
