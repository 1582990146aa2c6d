#include "util/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace airlock {

std::optional<std::string> read_file(const std::string& path)
{
	std::ifstream in(path, std::ios::binary);
	if (!in)
		return std::nullopt;
	std::ostringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& content, unsigned mode)
{
	std::string tmp = path + ".tmp." + std::to_string(::getpid());
	int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		fail_errno("create " + tmp);
	const char* p = content.data();
	size_t left = content.size();
	while (left) {
		ssize_t n = ::write(fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			::close(fd);
			::unlink(tmp.c_str());
			fail_errno("write " + tmp, e);
		}
		p += n;
		left -= n;
	}
	::close(fd);
	if (::rename(tmp.c_str(), path.c_str()) != 0) {
		int e = errno;
		::unlink(tmp.c_str());
		fail_errno("rename " + path, e);
	}
}

void write_control(const std::string& path, const std::string& value)
{
	int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		fail_errno("open " + path);
	ssize_t n = ::write(fd, value.data(), value.size());
	int e = errno;
	::close(fd);
	if (n != (ssize_t)value.size())
		fail_errno("write '" + value + "' to " + path, n < 0 ? e : EIO);
}

void make_dirs(const std::string& path, unsigned mode)
{
	std::error_code ec;
	std::filesystem::create_directories(path, ec);
	if (ec)
		fail("create {}: {}", path, ec.message());
	::chmod(path.c_str(), mode);
}

FileLock::FileLock(const std::string& path)
{
	fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd_ < 0)
		fail_errno("open lock " + path);
	while (::flock(fd_, LOCK_EX) != 0) {
		if (errno != EINTR)
			fail_errno("lock " + path);
	}
}

FileLock::~FileLock()
{
	::close(fd_);
}

}  // namespace airlock
