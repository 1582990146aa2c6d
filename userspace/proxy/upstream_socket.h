#pragma once
// The socket to an origin that the agent opened for a gate (SNI or HTTP),
// its connect under way: taken into the connection's socket and waited
// for. One way for both gates to learn whether the origin answered.
#include <airlock/abi.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/ip/tcp.hpp>

namespace airlock::proxy {

// Adopts fd into s (closing fd if it cannot) and, once the connect is
// over, calls then(nullopt) when it succeeded, or then(why) with why it
// did not. s must outlive the wait (the caller's then keeps it alive).
template <class Then>
void await_upstream(boost::asio::ip::tcp::socket& s, int fd, uint8_t family, Then then)
{
	using tcp = boost::asio::ip::tcp;
	boost::system::error_code ec;
	s.assign(family == AL_FAMILY_IPV4 ? tcp::v4() : tcp::v6(), fd, ec);
	if (ec) {
		::close(fd);
		return then(std::optional<std::string>(ec.message()));
	}
	s.async_wait(tcp::socket::wait_write, [&s, then = std::move(then)](const boost::system::error_code& e) mutable {
		if (e)
			return then(std::optional<std::string>(e.message()));
		int err = 0;
		socklen_t len = sizeof(err);
		if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		then(err ? std::optional<std::string>(std::strerror(err)) : std::nullopt);
	});
}

}  // namespace airlock::proxy
