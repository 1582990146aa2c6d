#pragma once
// Network namespaces: a socket made in one other than this process's, and
// a namespace's identity.
#include <cstdint>

#include "util/fd.h"

namespace airlock {

// A socket of the network namespace netns (not valid: this process's).
// setns(2) moves the calling thread alone: a thread of its own makes the
// socket, which stays in the namespace it was made in. Invalid, with
// errno set, when either fails.
Fd socket_in(const Fd& netns, int domain, int type, int protocol = 0);

// The namespace's inode (not valid: this process's); 0 when unknown.
uint64_t netns_inode_of(const Fd& netns);

}  // namespace airlock
