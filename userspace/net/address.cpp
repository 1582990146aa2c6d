#include "net/address.h"

#include <arpa/inet.h>

#include <algorithm>

namespace airlock {

bool is_v4_mapped(const Address& a)
{
	if (a.family != AL_FAMILY_IPV6)
		return false;
	return std::all_of(a.bytes.begin(), a.bytes.begin() + 10, [](uint8_t b) { return b == 0; }) &&
	       a.bytes[10] == 0xff && a.bytes[11] == 0xff;
}

Address normalise(const Address& a)
{
	if (!is_v4_mapped(a))
		return a;
	Address v4;
	v4.family = AL_FAMILY_IPV4;
	std::copy(a.bytes.begin() + 12, a.bytes.end(), v4.bytes.begin());
	return v4;
}

bool is_local_scope(const Address& raw)
{
	Address a = normalise(raw);
	const auto& b = a.bytes;
	if (a.family == AL_FAMILY_IPV4)
		return b[0] == 0 || b[0] == 127 || (b[0] == 169 && b[1] == 254) || (b[0] & 0xf0) == 224 ||
		       (b[0] == 255 && b[1] == 255 && b[2] == 255 && b[3] == 255);
	bool zero15 = std::all_of(b.begin(), b.begin() + 15, [](uint8_t x) { return x == 0; });
	return (zero15 && (b[15] == 0 || b[15] == 1)) || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || b[0] == 0xff;
}

std::optional<Address> parse_address(std::string_view text)
{
	// inet_pton reads a C string: text after a NUL would be ignored.
	if (text.find('\0') != std::string_view::npos)
		return std::nullopt;
	std::string s(text);
	Address a;
	if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
		a.family = AL_FAMILY_IPV4;
		return a;
	}
	if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
		a.family = AL_FAMILY_IPV6;
		return normalise(a);
	}
	return std::nullopt;
}

std::string format_address(const Address& a)
{
	char buf[INET6_ADDRSTRLEN];
	if (!inet_ntop(a.family == AL_FAMILY_IPV4 ? AF_INET : AF_INET6, a.bytes.data(), buf, sizeof(buf)))
		return "?";
	return buf;
}

Address from_raw(uint8_t family, const uint8_t addr[16])
{
	Address a;
	a.family = family;
	std::copy(addr, addr + 16, a.bytes.begin());
	if (family == AL_FAMILY_IPV4)
		std::fill(a.bytes.begin() + 4, a.bytes.end(), 0);
	return a;
}

Address mask(const Address& a, int prefix_len)
{
	Address m = a;
	for (int bit = prefix_len; bit < 128; bit++)
		m.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
	return m;
}

bool contains(const Cidr& cidr, const Address& a)
{
	return cidr.addr.family == a.family && mask(a, cidr.prefix_len) == cidr.addr;
}

bool contains(const Cidr& outer, const Cidr& inner)
{
	return outer.addr.family == inner.addr.family && outer.prefix_len <= inner.prefix_len &&
	       mask(inner.addr, outer.prefix_len) == outer.addr;
}

std::string format_cidr(const Cidr& c)
{
	return format_address(c.addr) + "/" + std::to_string(c.prefix_len);
}

}  // namespace airlock
