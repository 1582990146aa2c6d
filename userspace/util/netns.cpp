#include "util/netns.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <system_error>
#include <thread>

namespace airlock {

Fd socket_in(const Fd& netns, int domain, int type, int protocol)
{
	if (!netns.valid())
		return Fd(::socket(domain, type, protocol));
	int fd = -1, error = 0;
	try {
		std::thread t([&] {
			if (::setns(netns.get(), CLONE_NEWNET) != 0) {
				error = errno;
				return;
			}
			fd = ::socket(domain, type, protocol);
			error = errno;
		});
		t.join();
	} catch (const std::system_error& e) {
		error = e.code().value() ? e.code().value() : EAGAIN;  // no thread: no socket
	}
	errno = error;
	return Fd(fd);
}

uint64_t netns_inode_of(const Fd& netns)
{
	struct stat st {};
	int rc = netns.valid() ? ::fstat(netns.get(), &st) : ::stat("/proc/self/ns/net", &st);
	return rc == 0 ? st.st_ino : 0;
}

}  // namespace airlock
