#pragma once
#include <optional>
#include <string>

namespace airlock {

std::optional<std::string> read_file(const std::string& path);
// Whole-file replace through a temporary and rename(2): readers see the old
// or the new content, never half of it.
void write_file_atomic(const std::string& path, const std::string& content, unsigned mode = 0600);
// Writes "value" to a control file (cgroup, sysfs); throws with the path.
void write_control(const std::string& path, const std::string& value);
void make_dirs(const std::string& path, unsigned mode = 0700);
// Exclusive advisory lock on PATH (created if missing) until destruction.
class FileLock {
public:
	explicit FileLock(const std::string& path);
	~FileLock();
	FileLock(const FileLock&) = delete;
	FileLock& operator=(const FileLock&) = delete;

private:
	int fd_;
};

}  // namespace airlock
