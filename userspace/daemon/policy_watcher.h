#pragma once
// Policy files, watched: the directories that hold the policy files of
// supervised sandboxes (and the daemon's policy directory) through inotify.
// A file written in place or moved there is reported by its path; what a
// change means (a reload, a check) is the daemon's to decide.
#include <functional>
#include <map>
#include <string>

#include "daemon/event_loop.h"
#include "util/fd.h"

namespace airlock {

class PolicyWatcher {
public:
	using Changed = std::function<void(const std::string& dir, const std::string& path)>;

	// Throws if inotify cannot be had.
	PolicyWatcher(EventLoop& loop, Changed changed);
	~PolicyWatcher();
	PolicyWatcher(const PolicyWatcher&) = delete;
	PolicyWatcher& operator=(const PolicyWatcher&) = delete;

	// Watches the directory of file; a failure is logged, not thrown (the
	// sandbox still runs, only its policy file is not followed).
	void watch_file(const std::string& file);
	void watch_dir(const std::string& dir);

	// NAME.json, not hidden: a policy file by its name alone.
	static bool is_policy_name(const std::string& filename);

private:
	void read_events();

	EventLoop& loop_;
	Changed changed_;
	Fd ino_;
	std::map<int, std::string> dirs_;  // inotify wd -> directory
};

}  // namespace airlock
