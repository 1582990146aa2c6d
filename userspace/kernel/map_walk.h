#pragma once
// What kernel.cpp and tables.cpp both do to maps: find the inner map an
// array of maps holds, walk a map's keys.
#include <bpf/bpf.h>

#include <cstdint>
#include <vector>

#include "util/fd.h"

namespace airlock::kernel {

// The inner map an array-of-maps holds at slot, or an invalid Fd.
inline Fd inner_map(int outer, uint32_t slot)
{
	uint32_t id = 0;
	if (bpf_map_lookup_elem(outer, &slot, &id) != 0 || id == 0)
		return Fd();
	int fd = bpf_map_get_fd_by_id(id);
	return Fd(fd < 0 ? -1 : fd);
}

// Every key of a map, collected first so that f may delete as it goes.
template <typename Key, typename F>
void for_each_key(int fd, F&& f)
{
	Key key{}, next{};
	void* prev = nullptr;
	std::vector<Key> keys;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		keys.push_back(next);
		key = next;
		prev = &key;
	}
	for (auto& k : keys)
		f(k);
}

}  // namespace airlock::kernel
