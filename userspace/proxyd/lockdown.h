#pragma once
// The proxy's security boundary. It starts as root with its descriptors in
// place (records, the origin table read-only, the listeners); before it
// reads a byte of a sandbox's it becomes an unprivileged user with no
// capabilities, under a seccomp filter that leaves it no way to open a
// file, make a socket or connect anywhere.
#include <string>
#include <vector>

namespace airlock::proxyd {

// uid 0 to the proxy's user (this name if it exists, else nobody): groups,
// gid, uid, and no way back (no new privileges, an empty bounding set, no
// capabilities left).
void drop_privileges(const std::string& user);

// What the recorder needs and nothing more: its sockets, its clock, its
// memory, lookups in the origin map. sendto names an address only on the
// UDP sockets (an answer to a DNS query), which are bound to lo.
void install_seccomp(const std::vector<int>& udp_fds);

}  // namespace airlock::proxyd
