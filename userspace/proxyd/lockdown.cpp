#include "proxyd/lockdown.h"

#include <linux/bpf.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "confine/identity.h"
#include "confine/seccomp.h"
#include "util/error.h"

namespace airlock::proxyd {

void drop_privileges(const std::string& user)
{
	confine::Identity id = confine::user_or_nobody(user);
	if (id.uid == 0)
		fail("proxy user '{}' is uid 0", user);
	confine::drop_to_user(id);
}

// No open, socket, connect, bind, execve: the rest fails with EPERM.
void install_seccomp(const std::vector<int>& udp_fds)
{
	confine::SeccompFilter f(SCMP_ACT_ERRNO(EPERM));
	static const char* const allowed[] = {"read",
					      "write",
					      "readv",
					      "writev",
					      "recvfrom",
					      "recvmsg",
					      "sendmsg",
					      "accept",
					      "accept4",
					      "close",
					      "shutdown",
					      "getpeername",
					      "getsockname",
					      "getsockopt",
					      "setsockopt",
					      "fcntl",
					      "epoll_create1",
					      "epoll_ctl",
					      "epoll_wait",
					      "epoll_pwait",
					      "epoll_pwait2",
					      "eventfd2",
					      "timerfd_create",
					      "timerfd_settime",
					      "timerfd_gettime",
					      "clock_gettime",
					      "clock_nanosleep",
					      "nanosleep",
					      "gettimeofday",
					      "futex",
					      "mmap",
					      "munmap",
					      "mremap",
					      "brk",
					      "madvise",
					      "mprotect",
					      "rt_sigreturn",
					      "rt_sigprocmask",
					      "exit",
					      "exit_group",
					      "fstat",
					      "newfstatat",
					      "lseek",
					      "getrandom",
					      "sched_yield",
					      "restart_syscall",
					      "getpid",
					      "gettid",
					      "rseq",
					      "fsync",
					      "fdatasync",
					      "ftruncate",
					      "poll",
					      "ppoll",
					      "pipe2",
					      "splice"};
	f.allow(allowed);
	f.add(SCMP_ACT_ALLOW, SCMP_SYS(bpf), {SCMP_A0(SCMP_CMP_EQ, BPF_MAP_LOOKUP_ELEM)}, "bpf map lookups");
	// Sends name no address (but on the UDP sockets); ioctl only sets and reads what a socket
	// needs (not TIOCSTI on a terminal); signals only to itself.
	f.add(SCMP_ACT_ALLOW, SCMP_SYS(sendto), {SCMP_A4(SCMP_CMP_EQ, 0)}, "sendto");
	for (int fd : udp_fds)
		f.add(SCMP_ACT_ALLOW, SCMP_SYS(sendto), {SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(fd))},
		      "sendto on a UDP socket");
	for (unsigned long request : {FIONBIO, FIONREAD, SIOCATMARK})
		f.add(SCMP_ACT_ALLOW, SCMP_SYS(ioctl), {SCMP_A1(SCMP_CMP_EQ, request)}, "ioctl");
	f.add(SCMP_ACT_ALLOW, SCMP_SYS(tgkill), {SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(::getpid()))},
	      "tgkill");
	f.load();
}

}  // namespace airlock::proxyd
