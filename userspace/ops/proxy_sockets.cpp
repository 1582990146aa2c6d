#include "ops/proxy_sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/netns.h"

namespace airlock::ops {

namespace {

// The proxy's sockets are bound to lo, the device: whatever an attacker who
// took the proxy over sends from them (a datagram to any address, with any
// control message) cannot leave the host. A socket bound to ::1 could
// otherwise send to a routed IPv6 address (Linux refuses this only for
// 127.0.0.0/8), and without CAP_NET_RAW the proxy cannot rebind it.
bool bind_to_lo(int fd)
{
	static const char lo[] = "lo";
	return ::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, lo, sizeof(lo) - 1) == 0;
}

// Binds fd to the loopback address of its family (IPv6 only for AF_INET6)
// and port; bind's return value.
int bind_loopback(int fd, int family, uint16_t port)
{
	if (family == AF_INET) {
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_port = htons(port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
	}
	int one = 1;
	::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	sockaddr_in6 a{};
	a.sin6_family = AF_INET6;
	a.sin6_port = htons(port);
	a.sin6_addr = in6addr_loopback;
	return ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
}

}  // namespace

Fd listener(const Fd& netns, int family, uint16_t port)
{
	Fd s = socket_in(netns, family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (!s.valid() || !bind_to_lo(s.get()))
		return Fd();
	int one = 1;
	::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int rc = bind_loopback(s.get(), family, port);
	if (rc != 0 || ::listen(s.get(), 1024) != 0)
		return Fd();
	return s;
}

Fd datagram_socket(const Fd& netns, int family, uint16_t port)
{
	Fd s = socket_in(netns, family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (!s.valid() || !bind_to_lo(s.get()))
		return Fd();
	int rc = bind_loopback(s.get(), family, port);
	return rc == 0 ? std::move(s) : Fd();
}

// A listener on 127.0.0.1 in netns, on a port of this process's range:
// never one the sandbox's namespace picks, whose range its processes may
// set (a port a host service listens on would become a proxy port, and
// other sandboxes' connects to it proxy-port violations). The port is
// picked by a socket of this process's namespace, kept in `held` (each
// pick another) until the caller is done.
Fd fresh_listener(const Fd& netns, std::vector<Fd>& held)
{
	if (!netns.valid())
		return listener(netns, AF_INET, 0);
	for (int i = 0; i < 8; i++) {
		Fd pick(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		socklen_t len = sizeof(a);
		if (!pick.valid() || ::bind(pick.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
		    ::getsockname(pick.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
			return Fd();
		held.push_back(std::move(pick));
		Fd l = listener(netns, AF_INET, ntohs(a.sin_port));
		if (l.valid())
			return l;  // else taken in netns: another
	}
	return Fd();
}

uint16_t port_of(int fd)
{
	sockaddr_in a{};
	socklen_t len = sizeof(a);
	if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
		fail_errno("getsockname of the proxy's listener");
	return ntohs(a.sin_port);
}

socklen_t to_sockaddr(const Address& a, uint16_t port, sockaddr_storage& ss)
{
	if (a.family == AL_FAMILY_IPV4) {
		auto* in = reinterpret_cast<sockaddr_in*>(&ss);
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		std::memcpy(&in->sin_addr, a.bytes.data(), 4);
		return sizeof(sockaddr_in);
	}
	auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(port);
	std::memcpy(&in6->sin6_addr, a.bytes.data(), 16);
	return sizeof(sockaddr_in6);
}

ssize_t send_with_fd(int channel, const void* msg, size_t len, int fd)
{
	struct iovec iov = {const_cast<void*>(msg), len};
	alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
	struct msghdr m = {};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (fd >= 0) {
		m.msg_control = control;
		m.msg_controllen = sizeof(control);
		struct cmsghdr* c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(c), &fd, sizeof(fd));
	}
	return ::sendmsg(channel, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

Fd sealed_memfd(const char* name, std::string_view bytes)
{
	Fd m(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
	size_t done = 0;
	while (m.valid() && done < bytes.size()) {
		ssize_t n = ::write(m.get(), bytes.data() + done, bytes.size() - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			m.reset();
			errno = e;
			return m;
		}
		done += static_cast<size_t>(n);
	}
	// Its offset back at the start: the reader shares it.
	if (m.valid() &&
	    (::lseek(m.get(), 0, SEEK_SET) != 0 ||
	     ::fcntl(m.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)) {
		int e = errno;
		m.reset();
		errno = e;
	}
	return m;
}

}  // namespace airlock::ops
