#pragma once
// /proc/PID/mountinfo, parsed once for everyone who asks where a filesystem
// is mounted (cgroup2, bpffs) or what a process can see.
#include <string>
#include <vector>

namespace airlock {

struct MountEntry {
	std::string root;   // the mount's root within its filesystem, unescaped
	std::string point;  // where it is mounted, unescaped
	std::string fstype;
	std::string super_options;
};

// One entry per line that has the " - " separator; others are skipped.
std::vector<MountEntry> parse_mountinfo(const std::string& text);
// The file's entries; none if it cannot be read.
std::vector<MountEntry> read_mountinfo(const std::string& path = "/proc/self/mountinfo");

}  // namespace airlock
