#include "confine/process.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.h"

namespace airlock::confine {

int die_with_parent(pid_t parent, int sig)
{
	if (::prctl(PR_SET_PDEATHSIG, sig) != 0)
		return errno;
	return ::getppid() == parent ? 0 : ESRCH;
}

void set_no_new_privs()
{
	if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		fail_errno("no_new_privs");
}

}  // namespace airlock::confine
