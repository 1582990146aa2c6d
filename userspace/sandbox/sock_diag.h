#pragma once
// The kernel's TCP sockets through sock_diag (NETLINK_SOCK_DIAG): listed
// with their cgroups, and ended (SOCK_DESTROY, as `ss -K` does).
#include <linux/inet_diag.h>

#include <cstdint>
#include <set>
#include <vector>

#include "util/fd.h"

namespace airlock {

// The kernel's TCP states (include/net/tcp_states.h).
enum TcpState : uint8_t {
	kTcpEstablished = 1,
	kTcpTimeWait = 6,
	kTcpClose = 7,
	kTcpListen = 10,
	kTcpNewSynRecv = 12,
};

struct TcpSocket {
	uint8_t family = 0;     // AF_INET or AF_INET6
	uint8_t state = 0;      // a TcpState
	inet_diag_sockid id{};  // addresses, ports, interface and cookie
	uint64_t cgroup = 0;    // the id of its cgroup (v2)
	bool v6only = false;
	// Its value in the socket-storage map asked for (tcp_sockets'
	// storage_map), the first 8 bytes: 0 when it has none.
	uint64_t stored = 0;
};

// A sock_diag socket of the network namespace netns (not valid: this
// process's); throws when it cannot be made.
Fd sock_diag_socket(const Fd& netns);

// The TCP sockets of one family in the states of the mask (bit 1 << state)
// whose local port is sport (0: any), in the namespace of the sock_diag
// socket; with each its value in the socket-storage map storage_map (a
// descriptor, -1: none). Throws, naming what, when the kernel does not
// answer the dump (inet_diag is a module some kernels have not loaded).
std::vector<TcpSocket> tcp_sockets(const Fd& diag, int family, uint32_t states, uint16_t sport, int storage_map = -1);

// Ends the socket: it sends a reset if its state calls for one, and its
// queues are dropped. 0, or the kernel's errno (ENOENT: gone already;
// EOPNOTSUPP: a kernel without CONFIG_INET_DIAG_DESTROY).
int destroy_tcp_socket(const Fd& diag, const TcpSocket&);

struct Ended {
	size_t ended = 0;  // sockets destroyed
	size_t left = 0;   // seen still there after the last pass
	int error = 0;     // the first errno other than ENOENT, 0 when none
};

// Ends every TCP socket whose cgroup is one of `cgroups`, or whose value
// in the socket-storage map storage_map (a descriptor of a map whose
// values start with a u64; -1: none) is `stored`, in the namespace of the
// sock_diag socket, but those in TIME-WAIT (nothing left to send):
// lists and ends them until a listing finds none, at most three times
// (then `left` counts the last listing's), or until the kernel refuses to
// end one (`error`). Throws when the kernel does not list them.
Ended end_tcp_sockets(const Fd& diag, const std::set<uint64_t>& cgroups, int storage_map = -1, uint64_t stored = 0);

}  // namespace airlock
