#include "proxyd/origins.h"

#include <netinet/in.h>

#include <cstring>

#include "net/address.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

namespace airlock::proxyd {

std::optional<al_origin_key> origin_key_of(int fd, const sockaddr* from, uint8_t protocol)
{
	al_origin_key key{};
	key.protocol = protocol;
	socklen_t clen = sizeof(key.netns_cookie);
	if (::getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &key.netns_cookie, &clen) != 0)
		return std::nullopt;
	if (from->sa_family == AF_INET) {
		const auto* a = reinterpret_cast<const sockaddr_in*>(from);
		key.family = AL_FAMILY_IPV4;
		key.port = ntohs(a->sin_port);
		std::memcpy(key.addr, &a->sin_addr, 4);
	} else if (from->sa_family == AF_INET6) {
		const auto* a = reinterpret_cast<const sockaddr_in6*>(from);
		Address addr = normalise(from_raw(AL_FAMILY_IPV6, a->sin6_addr.s6_addr));
		key.family = addr.family;
		key.port = ntohs(a->sin6_port);
		std::memcpy(key.addr, addr.bytes.data(), sizeof(key.addr));
	} else {
		return std::nullopt;
	}
	return key;
}

std::optional<al_origin_key> connection_key_of(int fd)
{
	sockaddr_storage peer{};
	socklen_t len = sizeof(peer);
	if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0)
		return std::nullopt;
	return origin_key_of(fd, reinterpret_cast<const sockaddr*>(&peer), IPPROTO_TCP);
}

std::optional<proxy::Origin> Origins::lookup(int fd, const sockaddr* from, uint8_t protocol) const
{
	auto key = origin_key_of(fd, from, protocol);
	if (!key)
		return std::nullopt;
	auto v = table_.find(*key);
	if (!v || v->slot != slot_ || v->protocol != protocol)
		return std::nullopt;
	proxy::Origin o;
	o.addr = from_raw(v->family, v->addr);
	o.port = v->port;
	o.protocol = v->protocol;
	o.rule = v->rule;
	return o;
}

std::optional<proxy::Origin> Origins::of_datagram(int fd, const sockaddr* from) const
{
	return lookup(fd, from, IPPROTO_UDP);
}

std::optional<proxy::Origin> Origins::of_connection(int fd) const
{
	sockaddr_storage peer{};
	socklen_t len = sizeof(peer);
	if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0)
		return std::nullopt;
	return lookup(fd, reinterpret_cast<const sockaddr*>(&peer), IPPROTO_TCP);
}

}  // namespace airlock::proxyd
