#pragma once
// Addresses as the kernel side stores them: a family and 16 bytes, IPv4 in
// the first four. IPv4-mapped IPv6 is IPv4 here, because the kernel routes
// ::ffff:a.b.c.d as IPv4 and airlock must judge it the same way.
#include <airlock/abi.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace airlock {

struct Address {
	uint8_t family = AL_FAMILY_IPV4;  // al_family
	std::array<uint8_t, 16> bytes{};
	bool operator==(const Address&) const = default;
	auto operator<=>(const Address&) const = default;
	int bits() const { return family == AL_FAMILY_IPV4 ? 32 : 128; }
};

std::optional<Address> parse_address(std::string_view text);  // normalised
Address normalise(const Address& a);
std::string format_address(const Address& a);
Address from_raw(uint8_t family, const uint8_t addr[16]);
bool is_v4_mapped(const Address& a);
// An address whose meaning is this host's or its link's, or a group's:
// unspecified (0.0.0.0/8, ::), loopback (127.0.0.0/8, ::1), link-local
// (169.254.0.0/16, fe80::/10), multicast (224.0.0.0/4, ff00::/8),
// broadcast; v4-mapped forms alike.
bool is_local_scope(const Address& a);

struct Cidr {
	Address addr;  // host bits zero
	uint8_t prefix_len = 0;
	bool operator==(const Cidr&) const = default;
};

bool contains(const Cidr& cidr, const Address& a);
bool contains(const Cidr& outer, const Cidr& inner);
Address mask(const Address& a, int prefix_len);
std::string format_cidr(const Cidr& c);

}  // namespace airlock
