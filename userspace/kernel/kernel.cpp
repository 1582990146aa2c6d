#include "kernel/kernel.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "kernel/map_walk.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock::kernel {

Kernel load_embedded(const std::string& bpf_dir, bool pinned);  // loader.cpp
uint64_t embedded_object_id();                                  // loader.cpp

const std::array<ProgSpec, ProgCount> kProgs = {{
#define AL_PROG_SPEC(e, name, attach) {"al_" #name, attach},
	AL_CGROUP_PROGS(AL_PROG_SPEC)
#undef AL_PROG_SPEC
}};

const std::array<MapPin, kMapPinCount> kMapPins = {{
#define AL_MAP_PIN(name) {"al_" #name, &Maps::name},
	AL_PINNED_MAPS(AL_MAP_PIN)
#undef AL_MAP_PIN
}};

namespace {

bool on_bpffs(const std::string& path)
{
	struct statfs st;
	return ::statfs(path.c_str(), &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

Fd obj_get(const std::string& path)
{
	int fd = bpf_obj_get(path.c_str());
	if (fd < 0)
		fail_errno("open pinned " + path);
	return Fd(fd);
}

void obj_pin(int fd, const std::string& path)
{
	if (bpf_obj_pin(fd, path.c_str()) != 0)
		fail_errno("pin " + path);
}

int ncpus()
{
	static int n = libbpf_num_possible_cpus();
	if (n <= 0)
		fail("cannot count possible CPUs");
	return n;
}

}  // namespace

std::string maps_dir(const std::string& bpf_dir)
{
	return bpf_dir + "/maps";
}
std::string progs_dir(const std::string& bpf_dir)
{
	return bpf_dir + "/progs";
}
std::string tracepoints_dir(const std::string& bpf_dir)
{
	return bpf_dir + "/tracepoints";
}

bool ensure_tracefs()
{
	if (std::filesystem::exists("/sys/kernel/tracing/events") ||
	    std::filesystem::exists("/sys/kernel/debug/tracing/events"))
		return true;
	if (::mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0) {
		spdlog::warn("cannot mount tracefs at /sys/kernel/tracing: {}", std::strerror(errno));
		return false;
	}
	return true;
}

std::string links_dir(const std::string& bpf_dir, const std::string& sandbox)
{
	return bpf_dir + "/links/" + sandbox;
}

void ensure_bpffs(const std::string& bpf_dir)
{
	namespace fs = std::filesystem;
	fs::path p = fs::absolute(bpf_dir);
	while (!p.empty() && !fs::exists(p))
		p = p.parent_path();
	if (on_bpffs(p))
		return;
	if (p == "/sys/fs/bpf" || fs::path(bpf_dir).lexically_normal().string().rfind("/sys/fs/bpf", 0) == 0) {
		if (::mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0)
			fail_errno("mount bpffs at /sys/fs/bpf");
		return;
	}
	fail("{} is not on a bpf filesystem (mount -t bpf bpf DIR)", bpf_dir);
}

namespace {

// What a config map holds, if it is one of this layout.
std::optional<al_config> read_config(int fd)
{
	bpf_map_info info{};
	uint32_t len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || info.value_size > sizeof(al_config))
		return std::nullopt;
	al_config cfg{};
	uint32_t zero = 0;
	if (bpf_map_lookup_elem(fd, &zero, &cfg) != 0)
		return std::nullopt;
	return cfg;
}

// What the pinned config says, without the checks of open_pins.
std::optional<al_config> pinned_config(const std::string& bpf_dir)
{
	int fd = bpf_obj_get((maps_dir(bpf_dir) + "/al_config").c_str());
	if (fd < 0)
		return std::nullopt;
	Fd owned(fd);
	return read_config(fd);
}

}  // namespace

Kernel Kernel::open_pins(const std::string& bpf_dir)
{
	Kernel k;
	k.bpf_dir_ = bpf_dir;
	k.adopted_ = true;
	// The version first: the pins of another ABI need not have this one's maps.
	k.maps_.config = obj_get(maps_dir(bpf_dir) + "/al_config");
	auto cfg = read_config(k.maps_.config.get());
	if (!cfg)
		fail("cannot read the al_config pinned under {}: remove the sandboxes and the pins first", bpf_dir);
	if (cfg->abi_version != AL_ABI_VERSION)
		fail("programs pinned under {} speak ABI {}, this airlock speaks {}: remove the sandboxes and the pins first",
		     bpf_dir, cfg->abi_version, AL_ABI_VERSION);
	for (const auto& m : kMapPins)
		if (!(k.maps_.*(m.field)).valid())
			k.maps_.*(m.field) = obj_get(maps_dir(bpf_dir) + "/" + m.name);
	k.original_dst_ = obj_get(progs_dir(bpf_dir) + "/" + kOriginalDst);
	for (int i = 0; i < ProgCount; i++) {
		std::string pin = progs_dir(bpf_dir) + "/" + kProgs[i].name;
		if (prog_optional(i) && !std::filesystem::exists(pin))
			continue;  // loaded on a kernel without this hook
		k.progs_[i] = obj_get(pin);
	}
	return k;
}

Kernel Kernel::adopt(const std::string& bpf_dir)
{
	if (!std::filesystem::exists(progs_dir(bpf_dir) + "/" + kProgs[Egress].name))
		fail("nothing is pinned under {}", bpf_dir);
	return open_pins(bpf_dir);
}

Kernel Kernel::load_or_adopt(const std::string& bpf_dir, bool idle)
{
	ensure_bpffs(bpf_dir);
	if (std::filesystem::exists(progs_dir(bpf_dir) + "/" + kProgs[Egress].name)) {
		auto cfg = pinned_config(bpf_dir);
		bool same_abi = cfg && cfg->abi_version == AL_ABI_VERSION;
		bool same_build = same_abi && cfg->object_id == embedded_object_id();
		if (same_build)
			return open_pins(bpf_dir);
		if (!idle) {
			if (same_abi)
				spdlog::warn(
					"the programs pinned under {} come from another airlock build; they are adopted "
					"as sandboxes still use them, and replaced once none does",
					bpf_dir);
			return open_pins(bpf_dir);  // refuses another ABI
		}
		// Nothing uses them: replace them with this build's.
		std::error_code ec;
		std::filesystem::remove_all(progs_dir(bpf_dir), ec);
		std::filesystem::remove_all(maps_dir(bpf_dir), ec);
		std::filesystem::remove_all(bpf_dir + "/links", ec);
		std::filesystem::remove_all(tracepoints_dir(bpf_dir), ec);
		std::filesystem::remove_all(bpf_dir + "/targets", ec);
		if (ec)
			fail("remove stale pins under {}: {}", bpf_dir, ec.message());
	}
	Kernel k = load_embedded(bpf_dir, true);
	k.write_config();
	k.pin_all();
	return k;
}

Kernel Kernel::load_unpinned()
{
	Kernel k = load_embedded("", false);
	k.write_config();
	return k;
}

void Kernel::write_config()
{
	al_config cfg{AL_ABI_VERSION, 0, embedded_object_id()};
	uint32_t zero = 0;
	if (bpf_map_update_elem(maps_.config.get(), &zero, &cfg, BPF_ANY) != 0)
		fail_errno("write al_config");
}

void Kernel::pin_all()
{
	make_dirs(maps_dir(bpf_dir_));
	make_dirs(progs_dir(bpf_dir_));
	// Programs last: their presence is what marks the set as complete.
	for (const auto& m : kMapPins)
		obj_pin((maps_.*(m.field)).get(), maps_dir(bpf_dir_) + "/" + m.name);
	obj_pin(original_dst_.get(), progs_dir(bpf_dir_) + "/" + kOriginalDst);
	for (int i = 0; i < ProgCount; i++)
		if (progs_[i].valid())
			obj_pin(progs_[i].get(), progs_dir(bpf_dir_) + "/" + kProgs[i].name);
}

uint32_t Kernel::prog_id(Prog p) const
{
	bpf_prog_info info{};
	uint32_t len = sizeof(info);
	if (bpf_obj_get_info_by_fd(progs_[p].get(), &info, &len) != 0)
		fail_errno(std::string("prog info ") + kProgs[p].name);
	return info.id;
}

void Kernel::put_sandbox(uint64_t cgroup_id, const al_sandbox& sb)
{
	if (bpf_map_update_elem(maps_.sandboxes.get(), &cgroup_id, &sb, BPF_ANY) != 0)
		fail_errno(fmt::format("write sandbox entry for cgroup {}", cgroup_id));
}

std::optional<al_sandbox> Kernel::sandbox(uint64_t cgroup_id) const
{
	al_sandbox sb{};
	if (bpf_map_lookup_elem(maps_.sandboxes.get(), &cgroup_id, &sb) != 0)
		return std::nullopt;
	return sb;
}

void Kernel::delete_sandbox(uint64_t cgroup_id)
{
	if (bpf_map_delete_elem(maps_.sandboxes.get(), &cgroup_id) != 0 && errno != ENOENT)
		fail_errno(fmt::format("delete sandbox entry for cgroup {}", cgroup_id));
}

al_config Kernel::config() const
{
	uint32_t zero = 0;
	al_config cfg{};
	if (bpf_map_lookup_elem(maps_.config.get(), &zero, &cfg) != 0)
		fail_errno("read al_config");
	return cfg;
}

void Kernel::set_level_mask(uint32_t mask)
{
	uint32_t zero = 0;
	al_config cfg = config();
	cfg.level_mask = mask;
	if (bpf_map_update_elem(maps_.config.get(), &zero, &cfg, BPF_ANY) != 0)
		fail_errno("write al_config");
}

void Kernel::install_rules(const CompiledPolicy& c, uint32_t policy_id)
{
	size_t done_prefixes = 0, done_names = 0, done_unix = 0;
	auto undo = [&]() {
		for (size_t j = 0; j < done_prefixes; j++)
			bpf_map_delete_elem(maps_.rules.get(), &c.prefixes[j].key);
		for (size_t j = 0; j < done_names; j++)
			bpf_map_delete_elem(maps_.names.get(), &c.names[j].key);
		for (size_t j = 0; j < done_unix; j++) {
			const auto& u = c.unix_rules[j];
			if (u.prefix)
				bpf_map_delete_elem(maps_.unix_prefix.get(), &u.prefix_key);
			else
				bpf_map_delete_elem(maps_.unix_exact.get(), &u.exact_key);
		}
	};
	for (; done_prefixes < c.prefixes.size(); done_prefixes++) {
		const auto& e = c.prefixes[done_prefixes];
		if (bpf_map_update_elem(maps_.rules.get(), &e.key, &e.value, BPF_ANY) != 0) {
			int err = errno;
			undo();
			fail_errno(fmt::format("insert rule entry {} of {} (al_rules holds {})", done_prefixes + 1,
					       c.prefixes.size(), AL_MAX_PREFIXES),
				   err);
		}
	}
	for (; done_names < c.names.size(); done_names++) {
		const auto& e = c.names[done_names];
		if (bpf_map_update_elem(maps_.names.get(), &e.key, &e.value, BPF_ANY) != 0) {
			int err = errno;
			undo();
			fail_errno(fmt::format("insert name entry {} of {} (al_names holds {})", done_names + 1,
					       c.names.size(), AL_MAX_NAMES),
				   err);
		}
	}
	for (; done_unix < c.unix_rules.size(); done_unix++) {
		const auto& u = c.unix_rules[done_unix];
		int r = u.prefix ? bpf_map_update_elem(maps_.unix_prefix.get(), &u.prefix_key, &u.value, BPF_ANY)
				 : bpf_map_update_elem(maps_.unix_exact.get(), &u.exact_key, &u.value, BPF_ANY);
		if (r != 0) {
			int err = errno;
			undo();
			fail_errno(fmt::format("insert unix entry {} of {} (al_unix_{} holds {})", done_unix + 1,
					       c.unix_rules.size(), u.prefix ? "prefix" : "exact", AL_MAX_UNIX_RULES),
				   err);
		}
	}
	size_t done_targets = 0;
	for (; done_targets < c.targets.size(); done_targets++) {
		al_target_key key{policy_id, c.targets[done_targets].first, 0};
		if (bpf_map_update_elem(maps_.target.get(), &key, &c.targets[done_targets].second, BPF_ANY) != 0) {
			int err = errno;
			undo();
			for (size_t j = 0; j < done_targets; j++) {
				al_target_key k{policy_id, c.targets[j].first, 0};
				bpf_map_delete_elem(maps_.target.get(), &k);
			}
			fail_errno(fmt::format("insert the target of rule {} (al_target holds {})",
					       c.targets[done_targets].first, AL_TARGETS_MAX),
				   err);
		}
	}
	if (bpf_map_update_elem(maps_.dns.get(), &policy_id, &c.dns, BPF_ANY) != 0) {
		int err = errno;
		undo();
		for (const auto& [rule, t] : c.targets) {
			al_target_key k{policy_id, rule, 0};
			bpf_map_delete_elem(maps_.target.get(), &k);
		}
		fail_errno(fmt::format("insert the dns block of policy {}", policy_id), err);
	}
}

void Kernel::delete_rules(uint32_t policy_id)
{
	for_each_key<al_lpm_key>(maps_.rules.get(), [&](const al_lpm_key& k) {
		if (k.policy_id == policy_id)
			bpf_map_delete_elem(maps_.rules.get(), &k);
	});
	for_each_key<al_name_key>(maps_.names.get(), [&](const al_name_key& k) {
		if (k.policy_id == policy_id)
			bpf_map_delete_elem(maps_.names.get(), &k);
	});
	for_each_key<al_unix_exact_key>(maps_.unix_exact.get(), [&](const al_unix_exact_key& k) {
		if (k.policy_id == policy_id)
			bpf_map_delete_elem(maps_.unix_exact.get(), &k);
	});
	for_each_key<al_unix_prefix_key>(maps_.unix_prefix.get(), [&](const al_unix_prefix_key& k) {
		if (k.policy_id == policy_id)
			bpf_map_delete_elem(maps_.unix_prefix.get(), &k);
	});
	for_each_key<al_target_key>(maps_.target.get(), [&](const al_target_key& k) {
		if (k.policy_id == policy_id)
			bpf_map_delete_elem(maps_.target.get(), &k);
	});
	bpf_map_delete_elem(maps_.dns.get(), &policy_id);
}

size_t Kernel::count_rules(uint32_t policy_id) const
{
	size_t n = 0;
	for_each_key<al_lpm_key>(maps_.rules.get(), [&](const al_lpm_key& k) { n += k.policy_id == policy_id; });
	return n;
}

void Kernel::wait_for_readers()
{
	uint32_t zero = 0;
	int inner = maps_.rcu_inner.get();
	if (bpf_map_update_elem(maps_.rcu_sync.get(), &zero, &inner, BPF_ANY) != 0)
		fail_errno("wait for BPF readers (al_rcu_sync)");
}

al_latch Kernel::latch(uint32_t slot) const
{
	al_latch l{};
	if (bpf_map_lookup_elem(maps_.latch.get(), &slot, &l) != 0)
		fail_errno(fmt::format("read latch of slot {}", slot));
	return l;
}

void Kernel::clear_latch(uint32_t slot)
{
	al_latch l{};
	if (bpf_map_update_elem(maps_.latch.get(), &slot, &l, BPF_ANY) != 0)
		fail_errno(fmt::format("clear latch of slot {}", slot));
}

bool Kernel::set_proxy(uint32_t slot, const al_proxy& px)
{
	// The new port is a proxy port before redirects go to it; the old one
	// stops being one after they no longer do. A port another slot's proxy
	// holds (a listener in another network namespace, on the same number)
	// is never taken over: that sandbox's redirected packets would become
	// proxy-port violations.
	al_proxy old = proxy(slot);
	uint32_t port = px.port;
	bool claimed = false;  // by this call
	if (port != 0) {
		if (bpf_map_update_elem(maps_.proxy_port.get(), &port, &slot, BPF_NOEXIST) == 0) {
			claimed = true;
		} else {
			uint32_t owner = 0;
			if (errno != EEXIST)
				fail_errno(fmt::format("set the proxy port {} of slot {}", port, slot));
			if (bpf_map_lookup_elem(maps_.proxy_port.get(), &port, &owner) != 0 || owner != slot)
				return false;
		}
	}
	if (bpf_map_update_elem(maps_.proxy.get(), &slot, &px, BPF_ANY) != 0) {
		int e = errno;
		if (claimed)
			bpf_map_delete_elem(maps_.proxy_port.get(), &port);
		errno = e;
		fail_errno(fmt::format("set the proxy of slot {}", slot));
	}
	uint32_t was = old.port, owner = 0;
	if (was != 0 && was != port && bpf_map_lookup_elem(maps_.proxy_port.get(), &was, &owner) == 0 && owner == slot)
		bpf_map_delete_elem(maps_.proxy_port.get(), &was);
	return true;
}

al_proxy Kernel::proxy(uint32_t slot) const
{
	al_proxy px{};
	if (bpf_map_lookup_elem(maps_.proxy.get(), &slot, &px) != 0)
		fail_errno(fmt::format("read the proxy of slot {}", slot));
	return px;
}

al_counters Kernel::counters(uint32_t slot) const
{
	std::vector<al_counters> per(ncpus());
	al_counters sum{};
	if (bpf_map_lookup_elem(maps_.counters.get(), &slot, per.data()) != 0)
		fail_errno(fmt::format("read counters of slot {}", slot));
	auto* out = reinterpret_cast<uint64_t*>(&sum);
	for (auto& c : per) {
		auto* in = reinterpret_cast<const uint64_t*>(&c);
		for (size_t i = 0; i < sizeof(al_counters) / 8; i++)
			out[i] += in[i];
	}
	return sum;
}

void Kernel::reset_counters(uint32_t slot)
{
	std::vector<al_counters> zero(ncpus());
	if (bpf_map_update_elem(maps_.counters.get(), &slot, zero.data(), BPF_ANY) != 0)
		fail_errno(fmt::format("reset counters of slot {}", slot));
	al_flood fresh{};
	if (bpf_map_update_elem(maps_.flood.get(), &slot, &fresh, BPF_ANY) != 0)
		fail_errno(fmt::format("reset the event rate limit of slot {}", slot));
}

bool Kernel::set_latch(uint32_t slot, uint64_t cgroup_id)
{
	auto sb = sandbox(cgroup_id);
	if (!sb || sb->slot != slot || sb->on_violation == AL_ON_VIOLATION_DENY || latch(slot).violated_ns)
		return false;
	al_latch l{};
	l.violated_ns = monotonic_ns();
	l.cgroup_id = cgroup_id;
	if (bpf_map_update_elem(maps_.latch.get(), &slot, &l, BPF_ANY) != 0)
		fail_errno(fmt::format("set the latch of slot {}", slot));
	return true;
}

void Kernel::set_budgets(uint32_t slot, const std::vector<std::pair<uint16_t, uint64_t>>& want, bool keep)
{
	std::map<uint16_t, uint64_t> limits(want.begin(), want.end());
	for_each_key<al_budget_key>(maps_.budget.get(), [&](const al_budget_key& k) {
		if (k.slot == slot && !limits.count(k.rule))
			bpf_map_delete_elem(maps_.budget.get(), &k);
	});
	for (const auto& [rule, limit] : limits) {
		al_budget_key k{};
		k.slot = slot;
		k.rule = rule;
		al_budget v{};
		if (keep && bpf_map_lookup_elem(maps_.budget.get(), &k, &v) == 0 && v.limit == limit)
			continue;
		v = al_budget{limit, 0};
		if (bpf_map_update_elem(maps_.budget.get(), &k, &v, BPF_ANY) != 0)
			fail_errno(fmt::format("set the byte budget of rule {} of slot {}", rule, slot));
	}
}

std::vector<Kernel::Budget> Kernel::budgets(uint32_t slot) const
{
	std::vector<Budget> out;
	for_each_key<al_budget_key>(maps_.budget.get(), [&](const al_budget_key& k) {
		al_budget v{};
		if (k.slot == slot && bpf_map_lookup_elem(maps_.budget.get(), &k, &v) == 0)
			out.push_back({k.rule, v.limit, v.used});
	});
	std::sort(out.begin(), out.end(), [](const Budget& a, const Budget& b) { return a.rule < b.rule; });
	return out;
}

bool kernel_has_unix_hooks()
{
	static const bool has = [] {
		btf* vmlinux = btf__load_vmlinux_btf();
		if (!vmlinux)
			return false;
		bool found = false;
		int id = btf__find_by_name_kind(vmlinux, "bpf_attach_type", BTF_KIND_ENUM);
		if (id > 0) {
			const btf_type* t = btf__type_by_id(vmlinux, id);
			const struct btf_enum* e = btf_enum(t);
			for (int i = 0; i < btf_vlen(t); i++)
				if (std::string_view(btf__name_by_offset(vmlinux, e[i].name_off)) ==
				    "BPF_CGROUP_UNIX_CONNECT")
					found = e[i].val == kProgs[ConnectUnix].attach;
		}
		btf__free(vmlinux);
		return found;
	}();
	return has;
}

void Kernel::attach_original_dst(int cgroup_fd, const std::string& pin_path)
{
	int link = bpf_link_create(original_dst_.get(), cgroup_fd, BPF_CGROUP_GETSOCKOPT, nullptr);
	if (link < 0)
		fail_errno("attach al_original_dst", -link);
	Fd owned(link);
	obj_pin(link, pin_path);
}

void Kernel::attach_and_pin(Prog p, int cgroup_fd, const std::string& pin_path)
{
	if (!progs_[p].valid())
		return;  // a hook this kernel lacks
	int link = bpf_link_create(progs_[p].get(), cgroup_fd, kProgs[p].attach, nullptr);
	if (link < 0)
		fail_errno(std::string("attach ") + kProgs[p].name, -link);
	Fd owned(link);
	obj_pin(link, pin_path);
}

}  // namespace airlock::kernel
