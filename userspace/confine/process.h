#pragma once
// Process attributes that outlast an exec or a change of user: the signal
// a process gets when its parent dies, no_new_privs.
#include <sys/types.h>

namespace airlock::confine {

// Sets the signal this process gets when its parent dies, then checks
// that its parent is still `parent` (one that died before the call sends
// nothing). 0, ESRCH when the parent is gone, or prctl's errno.
// Async-signal-safe. A change of user clears it: set it again after.
int die_with_parent(pid_t parent, int sig);

// No exec gains privileges again (setuid bits, file capabilities).
void set_no_new_privs();

}  // namespace airlock::confine
