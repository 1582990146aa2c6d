#include "daemon/policy_watcher.h"

#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "util/error.h"

namespace airlock {

PolicyWatcher::PolicyWatcher(EventLoop& loop, Changed changed)
    : loop_(loop), changed_(std::move(changed)), ino_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
{
	if (!ino_.valid())
		fail_errno("watch policy files: inotify_init1");
	loop_.add(ino_.get(), EPOLLIN, [this](uint32_t) { read_events(); });
}

PolicyWatcher::~PolicyWatcher()
{
	loop_.remove(ino_.get());
}

bool PolicyWatcher::is_policy_name(const std::string& f)
{
	return f.size() > 5 && f.compare(f.size() - 5, 5, ".json") == 0 && f[0] != '.';
}

void PolicyWatcher::watch_file(const std::string& file)
{
	auto slash = file.rfind('/');
	if (slash == std::string::npos || slash == 0)
		return;
	watch_dir(file.substr(0, slash));
}

void PolicyWatcher::watch_dir(const std::string& dir)
{
	int wd = ::inotify_add_watch(ino_.get(), dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO);
	if (wd < 0)
		spdlog::warn("cannot watch {} for policy changes: {}", dir, std::strerror(errno));
	else
		dirs_[wd] = dir;
}

void PolicyWatcher::read_events()
{
	alignas(struct inotify_event) char buf[8192];
	for (;;) {
		ssize_t n = ::read(ino_.get(), buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n;) {
			auto* ev = reinterpret_cast<struct inotify_event*>(buf + off);
			off += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
			auto dir = dirs_.find(ev->wd);
			if (dir == dirs_.end() || ev->len == 0)
				continue;
			changed_(dir->second, dir->second + "/" + ev->name);
		}
	}
}

}  // namespace airlock
