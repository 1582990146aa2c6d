#pragma once
// Sockets on 127.0.0.1 for the tests that drive a proxy connection over
// loopback (test_sni_gate.cpp, test_http_gate.cpp): a listener, a connect,
// and reads that end at a deadline, never hang.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "util/fd.h"

namespace airlock::loopback {

inline constexpr std::chrono::milliseconds kDeadline{10000};

inline sockaddr_in address(uint16_t port)
{
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

// A listening socket on 127.0.0.1 and its port.
inline std::pair<Fd, uint16_t> listen()
{
	Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
	sockaddr_in a = address(0);
	socklen_t len = sizeof(a);
	if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd.get(), 8) != 0 ||
	    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
		return {Fd(), 0};
	return {std::move(fd), ntohs(a.sin_port)};
}

// A socket connecting to 127.0.0.1:port (non-blocking: the connect may
// still be under way); invalid if it could not start.
inline Fd connect(uint16_t port, bool nonblocking = false)
{
	Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0));
	sockaddr_in a = address(port);
	if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS)
		return Fd();
	return fd;
}

inline bool readable_within(int fd, std::chrono::milliseconds deadline)
{
	pollfd p{fd, POLLIN, 0};
	return ::poll(&p, 1, static_cast<int>(deadline.count())) > 0;
}

inline Fd accept_within(int listener, std::chrono::milliseconds deadline = kDeadline)
{
	if (!readable_within(listener, deadline))
		return Fd();
	return Fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

inline void send_all(int fd, std::string_view b)
{
	while (!b.empty()) {
		ssize_t n = ::send(fd, b.data(), b.size(), MSG_NOSIGNAL);
		if (n <= 0)
			return;  // the other side closed: what it read is what counts
		b.remove_prefix(static_cast<size_t>(n));
	}
}

inline std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point end)
{
	return std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
}

// Exactly n bytes, or what came before EOF or the deadline.
inline std::string read_n(int fd, size_t n)
{
	std::string out;
	auto end = std::chrono::steady_clock::now() + kDeadline;
	while (out.size() < n) {
		auto left = left_until(end);
		if (left.count() <= 0 || !readable_within(fd, left))
			break;
		char buf[4096];
		ssize_t got = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
		if (got <= 0)
			break;
		out.append(buf, static_cast<size_t>(got));
	}
	return out;
}

// Everything until EOF or a reset (nullopt: the deadline came first).
inline std::optional<std::string> read_to_eof(int fd)
{
	std::string out;
	auto end = std::chrono::steady_clock::now() + kDeadline;
	for (;;) {
		auto left = left_until(end);
		if (left.count() <= 0 || !readable_within(fd, left))
			return std::nullopt;
		char buf[4096];
		ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			return out;
		out.append(buf, static_cast<size_t>(n));
	}
}

}  // namespace airlock::loopback
