#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "util/error.h"
#include "util/mountinfo.h"
#include "util/files.h"

namespace airlock::cgroup {

namespace fs = std::filesystem;

namespace {

std::string find_mount()
{
	for (const auto& m : read_mountinfo())
		if (m.fstype == "cgroup2" && m.root == "/")
			return m.point;
	fail("no cgroup2 filesystem in /proc/self/mountinfo (airlock needs cgroup v2)");
}

}  // namespace

const std::string& mount_point()
{
	static const std::string m = find_mount();
	return m;
}

std::string path_of(const std::string& relative)
{
	std::string r = relative;
	while (!r.empty() && r.front() == '/')
		r.erase(0, 1);
	return r.empty() ? mount_point() : mount_point() + "/" + r;
}

std::string of_pid(int pid)
{
	auto content = read_file("/proc/" + std::to_string(pid) + "/cgroup");
	if (!content)
		fail_errno("read /proc/" + std::to_string(pid) + "/cgroup");
	std::istringstream in(*content);
	std::string line;
	while (std::getline(in, line)) {
		if (line.rfind("0::", 0) == 0)
			return path_of(line.substr(3));
	}
	fail("process {} has no cgroup v2 membership", pid);
}

uint64_t id_of(const std::string& path)
{
	struct stat st;
	if (::stat(path.c_str(), &st) != 0)
		fail_errno("stat " + path);
	return st.st_ino;
}

int level_of(const std::string& path)
{
	fs::path rel = fs::path(path).lexically_relative(mount_point());
	int level = 0;
	for (const auto& part : rel) {
		if (part == "..")
			fail("{} is not under the cgroup2 mount {}", path, mount_point());
		if (part != "." && !part.empty())
			level++;
	}
	return level;
}

namespace {

Events parse_events(const std::string& text)
{
	Events ev;
	std::istringstream in(text);
	std::string key;
	int value;
	while (in >> key >> value) {
		if (key == "populated")
			ev.populated = value != 0;
		else if (key == "frozen")
			ev.frozen = value != 0;
	}
	return ev;
}

}  // namespace

std::optional<Events> events(const std::string& path)
{
	auto content = read_file(path + "/cgroup.events");
	if (!content)
		return std::nullopt;
	return parse_events(*content);
}

void freeze(const std::string& path)
{
	write_control(path + "/cgroup.freeze", "1");
}
void kill(const std::string& path)
{
	write_control(path + "/cgroup.kill", "1");
}

namespace {

bool inside(const std::string& cg, const std::string& root)
{
	return cg == root || cg.rfind(root + "/", 0) == 0;
}

// The cgroup and each descendant's directory, until fn returns false.
void for_each_within(const std::string& path, const std::function<bool(const std::string&)>& fn)
{
	if (!fn(path))
		return;
	std::error_code ec;
	for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
	     it.increment(ec))
		if (it->is_directory(ec) && !it->is_symlink(ec) && !fn(it->path().string()))
			return;
}

}  // namespace

std::vector<int> pids_within(const std::string& path, size_t max)
{
	std::vector<int> pids;
	auto read = [&](const std::string& dir) {
		std::istringstream in(read_file(dir + "/cgroup.procs").value_or(""));
		for (int pid; pids.size() < max && in >> pid;)
			pids.push_back(pid);
	};
	for_each_within(path, [&](const std::string& dir) {
		read(dir);
		return pids.size() < max;
	});
	return pids;
}

std::set<uint64_t> ids_within(const std::string& path)
{
	std::set<uint64_t> ids;
	for_each_within(path, [&](const std::string& dir) {
		struct stat st;
		if (::stat(dir.c_str(), &st) == 0)
			ids.insert(st.st_ino);
		return true;
	});
	return ids;
}

size_t resume_stopped(const std::string& path)
{
	// Every process, not only those in state T: one the freezer caught
	// before its SIGSTOP took effect still has the signal pending, and
	// SIGCONT discards it.
	size_t resumed = 0;
	for (int pid : pids_within(path)) {
		// The pidfd names one process for good; it is signalled only
		// if that process is still in the sandbox (not a reused pid).
		int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
		if (fd < 0)
			continue;
		bool ours = false;
		try {
			ours = inside(of_pid(pid), path);
		} catch (const std::exception&) {
		}
		if (ours && ::syscall(SYS_pidfd_send_signal, fd, SIGCONT, nullptr, 0) == 0)
			resumed++;
		::close(fd);
	}
	return resumed;
}

void thaw(const std::string& path)
{
	// A task stopped in its violating call (SIGSTOP from the kernel) would
	// stay stopped when the freezer lets go: thawing means it runs again
	// too. Before unfreezing, so that a SIGSTOP still pending is dropped
	// rather than taken after the scan.
	resume_stopped(path);
	write_control(path + "/cgroup.freeze", "0");
}

Fd open_events(const std::string& path)
{
	return Fd(::open((path + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC));
}

std::optional<Events> read_events(int fd)
{
	char buf[256];
	ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return std::nullopt;
	buf[n] = 0;
	return parse_events(buf);
}

namespace {

template <typename Pred>
bool wait_events(const std::string& path, Pred done, std::chrono::milliseconds timeout)
{
	auto started = std::chrono::steady_clock::now();
	auto deadline = started + timeout;
	unsigned backoff_us = 20;
	Fd events = open_events(path);
	if (!events.valid())
		return done(std::optional<Events>{});
	int fd = events.get();
	for (;;) {
		// Read through the same fd: kernfs re-arms the notification on read.
		if (done(read_events(fd)))
			return true;
		auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
										  std::chrono::steady_clock::now());
		if (left.count() <= 0)
			return false;
		// The kernel rate-limits cgroup.events notifications (10 ms apart):
		// right after a sandbox starts, the one for "frozen 1" comes up to
		// 10 ms late. So the file is read again at a short, growing interval
		// (20 us to 250 us) for the first 100 ms, notification or not; then
		// the notification alone wakes a long wait.
		auto waited = std::chrono::steady_clock::now() - started;
		struct pollfd p = {fd, POLLPRI, 0};
		if (waited < std::chrono::milliseconds(100)) {
			struct timespec ts = {0, static_cast<long>(backoff_us) * 1000};
			::ppoll(&p, 1, &ts, nullptr);
			backoff_us = std::min(backoff_us * 2, 250u);
		} else {
			::poll(&p, 1, static_cast<int>(std::min<long>(left.count(), 100)));
		}
	}
}

}  // namespace

bool wait_frozen(const std::string& path, bool frozen, std::chrono::milliseconds timeout)
{
	return wait_events(
		path, [&](const std::optional<Events>& e) { return e && (e->frozen == frozen || !e->populated); },
		timeout);
}

bool settled_frozen(const std::optional<Events>& e)
{
	return e && (e->frozen || !e->populated);
}

bool settled_empty(const std::optional<Events>& e)
{
	return !e || !e->populated;
}

bool wait_empty(const std::string& path, std::chrono::milliseconds timeout)
{
	return wait_events(path, settled_empty, timeout);
}

void create(const std::string& path)
{
	std::error_code ec;
	fs::create_directories(fs::path(path).parent_path(), ec);
	if (::mkdir(path.c_str(), 0755) != 0)
		fail_errno("create cgroup " + path);
}

void remove(const std::string& path)
{
	std::vector<fs::path> dirs;
	std::error_code ec;
	if (!fs::exists(path, ec))
		return;
	for (auto it = fs::recursive_directory_iterator(path, ec); it != fs::recursive_directory_iterator();
	     it.increment(ec)) {
		if (ec)
			break;
		if (it->is_directory(ec) && !it->is_symlink(ec))
			dirs.push_back(it->path());
	}
	// Deepest first.
	std::sort(dirs.begin(), dirs.end(),
		  [](const fs::path& a, const fs::path& b) { return a.string().size() > b.string().size(); });
	for (auto& d : dirs)
		::rmdir(d.c_str());
	if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
		fail_errno("remove cgroup " + path);
}

}  // namespace airlock::cgroup
