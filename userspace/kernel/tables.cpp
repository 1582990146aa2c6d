// A slot's own tables, each an inner map of an array of maps: made from
// the template pinned with the object for a new sandbox (so that nothing
// of the last owner of the slot is left), removed with it; read-only
// descriptors of some for the proxy.
#include "kernel/kernel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <fmt/format.h>

#include "kernel/map_walk.h"
#include "util/error.h"

namespace airlock::kernel {

namespace {

// A new map of the template's shape: type, key and value sizes, entries,
// flags, and its BTF types if it has any.
Fd create_like(int tmpl, const char* name, const std::string& what)
{
	bpf_map_info info{};
	uint32_t len = sizeof(info);
	if (bpf_obj_get_info_by_fd(tmpl, &info, &len) != 0)
		fail_errno("read the template of " + what);
	Fd btf;
	if (info.btf_key_type_id || info.btf_value_type_id) {
		int fd = bpf_btf_get_fd_by_id(info.btf_id);
		if (fd < 0)
			fail_errno("read the BTF of the template of " + what);
		btf = Fd(fd);
	}
	LIBBPF_OPTS(bpf_map_create_opts, opts, .btf_fd = static_cast<uint32_t>(btf.valid() ? btf.get() : 0),
		    .btf_key_type_id = info.btf_key_type_id, .btf_value_type_id = info.btf_value_type_id,
		    .map_flags = info.map_flags, .map_extra = info.map_extra);
	int fd = bpf_map_create(static_cast<bpf_map_type>(info.type), name, info.key_size, info.value_size,
				info.max_entries, &opts);
	if (fd < 0)
		fail_errno("create " + what);
	return Fd(fd);
}

// Puts an inner map at slot of an array of maps.
void install(int outer, uint32_t slot, const Fd& inner, const std::string& what)
{
	int fd = inner.get();
	if (bpf_map_update_elem(outer, &slot, &fd, BPF_ANY) != 0)
		fail_errno("install " + what);
}

}  // namespace

Fd Kernel::create_ring(uint32_t slot)
{
	std::string what = fmt::format("ring buffer for slot {}", slot);
	Fd ring = create_like(maps_.ring_template.get(), "al_ring", what);
	install(maps_.rings.get(), slot, ring, what);
	return ring;
}

Fd Kernel::ring(uint32_t slot) const
{
	return inner_map(maps_.rings.get(), slot);
}

void Kernel::delete_ring(uint32_t slot)
{
	if (bpf_map_delete_elem(maps_.rings.get(), &slot) != 0 && errno != ENOENT)
		fail_errno(fmt::format("remove ring buffer of slot {}", slot));
}

void Kernel::create_dns_tables(uint32_t slot)
{
	std::string pending_what = fmt::format("the pending-query table of slot {}", slot);
	std::string learned_what = fmt::format("the learned-address table of slot {}", slot);
	Fd pending = create_like(maps_.pending_template.get(), "al_pend", pending_what);
	Fd learned = create_like(maps_.learned_template.get(), "al_learn", learned_what);
	install(maps_.pending.get(), slot, pending, pending_what);
	install(maps_.learned.get(), slot, learned, learned_what);
	al_dns_state st{};
	if (bpf_map_update_elem(maps_.dns_state.get(), &slot, &st, BPF_ANY) != 0)
		fail_errno(fmt::format("reset the query budget of slot {}", slot));
}

void Kernel::create_unix_table(uint32_t slot)
{
	std::string what = fmt::format("the bound-name table of slot {}", slot);
	install(maps_.unix_bound.get(), slot, create_like(maps_.unix_bound_template.get(), "al_ubound", what), what);
}

void Kernel::create_origin_table(uint32_t slot)
{
	std::string what = fmt::format("the origin table of slot {}", slot);
	install(maps_.origin.get(), slot, create_like(maps_.origin_template.get(), "al_origin", what), what);
}

void Kernel::delete_origin_table(uint32_t slot)
{
	if (bpf_map_delete_elem(maps_.origin.get(), &slot) != 0 && errno != ENOENT)
		fail_errno(fmt::format("remove the origin table of slot {}", slot));
}

void Kernel::create_target_origin_table(uint32_t slot)
{
	std::string what = fmt::format("the target origin table of slot {}", slot);
	install(maps_.target_origin.get(), slot, create_like(maps_.target_origin_template.get(), "al_torigin", what),
		what);
}

bool Kernel::has_target_origin_table(uint32_t slot) const
{
	return inner_map(maps_.target_origin.get(), slot).valid();
}

void Kernel::delete_target_origin_table(uint32_t slot)
{
	if (bpf_map_delete_elem(maps_.target_origin.get(), &slot) != 0 && errno != ENOENT)
		fail_errno(fmt::format("remove the target origin table of slot {}", slot));
}

namespace {

// A slot's inner table of an array of maps, opened read-only.
Fd inner_readonly(int outer, uint32_t slot, const char* what)
{
	uint32_t id = 0;
	if (bpf_map_lookup_elem(outer, &slot, &id) != 0 || id == 0)
		fail_errno(fmt::format("find the {} of slot {}", what, slot));
	LIBBPF_OPTS(bpf_get_fd_by_id_opts, opts, .open_flags = BPF_F_RDONLY);
	int fd = bpf_map_get_fd_by_id_opts(id, &opts);
	if (fd < 0)
		fail_errno(fmt::format("open the {} of slot {} read-only", what, slot));
	return Fd(fd);
}

}  // namespace

Fd Kernel::origin_table_readonly(uint32_t slot) const
{
	return inner_readonly(maps_.origin.get(), slot, "origin table");
}

Fd Kernel::learned_table_readonly(uint32_t slot) const
{
	return inner_readonly(maps_.learned.get(), slot, "learned-address table");
}

void Kernel::delete_unix_table(uint32_t slot)
{
	if (bpf_map_delete_elem(maps_.unix_bound.get(), &slot) != 0 && errno != ENOENT)
		fail_errno(fmt::format("remove the bound-name table of slot {}", slot));
}

void Kernel::delete_dns_tables(uint32_t slot)
{
	if (bpf_map_delete_elem(maps_.pending.get(), &slot) != 0 && errno != ENOENT)
		fail_errno(fmt::format("remove the pending-query table of slot {}", slot));
	if (bpf_map_delete_elem(maps_.learned.get(), &slot) != 0 && errno != ENOENT)
		fail_errno(fmt::format("remove the learned-address table of slot {}", slot));
}

namespace {

// Each entry of a slot's learned table, with the table's descriptor.
template <typename F>
void for_each_learned(int outer, uint32_t slot, F&& f)
{
	Fd t = inner_map(outer, slot);
	if (!t.valid())
		return;
	for_each_key<al_learned_key>(t.get(), [&](const al_learned_key& k) {
		al_learned v{};
		if (bpf_map_lookup_elem(t.get(), &k, &v) == 0)
			f(t.get(), k, v);
	});
}

}  // namespace

std::vector<Kernel::Learned> Kernel::learned(uint32_t slot) const
{
	std::vector<Learned> out;
	for_each_learned(maps_.learned.get(), slot, [&](int, const al_learned_key& k, const al_learned& v) {
		out.push_back({k, v});
	});
	return out;
}

size_t Kernel::sweep_learned(uint32_t slot, uint64_t before_ns)
{
	size_t n = 0;
	for_each_learned(maps_.learned.get(), slot, [&](int fd, const al_learned_key& k, const al_learned& v) {
		if (v.expires_ns < before_ns && bpf_map_delete_elem(fd, &k) == 0)
			n++;
	});
	return n;
}

}  // namespace airlock::kernel
