#pragma once
// Who a process airlock starts becomes: the command's --user, the proxy's
// unprivileged user. Resolved before a fork or clone (the child may only
// make async-signal-safe calls), taken in the child.
#include <sys/types.h>

#include <string>

namespace airlock::confine {

struct Identity {
	bool set = false;
	uid_t uid = 0;
	gid_t gid = 0;
};

// USER[:GROUP] or UID[:GID] (`--user`); empty: not set. A name that does
// not exist fails.
Identity resolve_user(const std::string& spec);

// The user's ids if it exists, else nobody's, else 65534.
Identity user_or_nobody(const std::string& user);

// The identity's group as the only group, then its gid and uid (real,
// effective, saved): 0, or the errno of the step that failed.
// Async-signal-safe.
int take_identity(const Identity&);

// For good: no supplementary groups, the identity's gid and uid, no new
// privileges, no capabilities left (and, when root, an empty bounding
// set). Fails if uid 0 could be had again.
void drop_to_user(const Identity&);

}  // namespace airlock::confine
