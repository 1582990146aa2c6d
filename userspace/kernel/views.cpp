#include "kernel/views.h"

#include <bpf/bpf.h>

#include <cstring>

#include "policy/dnsname.h"

namespace airlock::kernel {

std::optional<al_origin> OriginView::find(const al_origin_key& key) const
{
	al_origin v{};
	if (::bpf_map_lookup_elem(fd_, &key, &v) != 0)
		return std::nullopt;
	return v;
}

std::optional<std::string> LearnedNames::name_of(const Address& a) const
{
	al_learned_key key{};
	key.family = a.family;
	std::memcpy(key.addr, a.bytes.data(), sizeof(key.addr));
	al_learned v{};
	if (::bpf_map_lookup_elem(fd_, &key, &v) != 0)
		return std::nullopt;
	return learned_name(v);
}

std::optional<std::string> learned_name(const al_learned& v)
{
	size_t p = 0;
	while (p < sizeof(v.name.name) && v.name.name[p] != AL_NAME_END) {
		size_t len = v.name.name[p];
		if (len == 0 || len > 63 || p + 1 + len >= sizeof(v.name.name))
			return std::nullopt;
		p += 1 + len;
	}
	if (p >= sizeof(v.name.name))
		return std::nullopt;
	return name_from_key(v.name.name, p);
}

}  // namespace airlock::kernel
