#pragma once
// Where a redirected client meant to go, as the proxy finds it: the key the
// kernel filed its flow under (its address and port as the proxy sees
// them, and the network namespace), looked up in the slot's origin table.
#include <sys/socket.h>

#include <cstdint>
#include <optional>

#include <airlock/abi.h>

#include "kernel/views.h"
#include "proxy/records.h"  // Origin

namespace airlock::proxyd {

// The key of a flow from `from` to the socket fd (TCP or UDP, `protocol`).
std::optional<al_origin_key> origin_key_of(int fd, const sockaddr* from, uint8_t protocol);
// The key of an accepted TCP connection, from its peer.
std::optional<al_origin_key> connection_key_of(int fd);

// A slot's origins, read through the proxy's read-only descriptor.
class Origins {
public:
	Origins(int origin_fd, uint32_t slot) : table_(origin_fd), slot_(slot) {}
	// A datagram's, or a connection's: nullopt when the kernel filed none
	// for this slot and protocol.
	std::optional<proxy::Origin> of_datagram(int fd, const sockaddr* from) const;
	std::optional<proxy::Origin> of_connection(int fd) const;

private:
	std::optional<proxy::Origin> lookup(int fd, const sockaddr* from, uint8_t protocol) const;

	kernel::OriginView table_;
	uint32_t slot_;
};

}  // namespace airlock::proxyd
