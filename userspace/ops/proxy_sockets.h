#pragma once
// The proxy's sockets, made by the agent and handed over (ops/proxy.h):
// listeners and datagram sockets on loopback, bound to lo; and the SNI
// gate's addresses. And the sealed memfds its secrets travel in.
#include <sys/socket.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "net/address.h"
#include "util/fd.h"

namespace airlock::ops {

// A listener on the loopback address of family (AF_INET, AF_INET6) and
// port, in netns (not valid: this process's); invalid when it cannot be had.
Fd listener(const Fd& netns, int family, uint16_t port);
// A UDP socket on the same.
Fd datagram_socket(const Fd& netns, int family, uint16_t port);
// A listener on 127.0.0.1 in netns, on a port of this process's range
// (each pick kept in `held` until the caller is done).
Fd fresh_listener(const Fd& netns, std::vector<Fd>& held);
// The port a listener is bound to.
uint16_t port_of(int fd);
// The sockaddr of an address and port; its length.
socklen_t to_sockaddr(const Address& a, uint16_t port, sockaddr_storage& ss);
// A memfd holding bytes, sealed against any change (invalid, errno set,
// when it cannot be had): how the agent hands the proxy a secret.
Fd sealed_memfd(const char* name, std::string_view bytes);
// One message on the proxy's channel, a descriptor with it (SCM_RIGHTS)
// unless fd < 0; without blocking. What sendmsg returns.
ssize_t send_with_fd(int channel, const void* msg, size_t len, int fd);

}  // namespace airlock::ops
