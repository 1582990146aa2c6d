#include "bpf_harness.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "airlock_test_bpf.skel.h"
#include "events/audit.h"
#include "policy/compile.h"
#include "policy/dnsname.h"
#include "sandbox/cgroup.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/files.h"

namespace bpft {

namespace fs = std::filesystem;
using airlock::fail;
using airlock::fail_errno;
using airlock::Fd;

namespace {

constexpr const char* kCgroupPrefix = "airlock-bpf-tests.";

// Leftovers of runs that were killed: empty cgroups named after a process
// that is gone.
void remove_stale_cgroups(const std::string& home)
{
	std::error_code ec;
	for (const auto& e : fs::directory_iterator(home, ec)) {
		std::string name = e.path().filename();
		if (name.rfind(kCgroupPrefix, 0) != 0)
			continue;
		pid_t pid = std::atoi(name.c_str() + std::strlen(kCgroupPrefix));
		if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH)
			::rmdir(e.path().c_str());
	}
}

// The name the kernel keeps for a map: BPF_OBJ_NAME_LEN - 1 characters.
std::string kernel_map_name(const std::string& name)
{
	return name.substr(0, BPF_OBJ_NAME_LEN - 1);
}

// Every map a loaded program uses, by name, as descriptors of their own.
void maps_of(int prog_fd, std::vector<std::pair<std::string, Fd>>& out)
{
	uint32_t ids[64] = {};
	bpf_prog_info info{};
	info.nr_map_ids = 64;
	info.map_ids = reinterpret_cast<uint64_t>(ids);
	uint32_t len = sizeof(info);
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
		fail_errno("read the maps of a loaded program");
	for (uint32_t i = 0; i < std::min<uint32_t>(info.nr_map_ids, 64); i++) {
		Fd fd(bpf_map_get_fd_by_id(ids[i]));
		if (!fd.valid())
			fail_errno(fmt::format("open map id {}", ids[i]));
		bpf_map_info mi{};
		uint32_t mlen = sizeof(mi);
		if (bpf_obj_get_info_by_fd(fd.get(), &mi, &mlen) != 0)
			fail_errno("read map info");
		std::string name = mi.name;
		bool known = false;
		for (const auto& [n, f] : out)
			known |= n == name;
		if (!known)
			out.emplace_back(name, std::move(fd));
	}
}

Fd inner_map(int outer, uint32_t slot)
{
	uint32_t id = 0;
	if (bpf_map_lookup_elem(outer, &slot, &id) != 0 || id == 0)
		fail("slot {} has no inner map", slot);
	Fd fd(bpf_map_get_fd_by_id(id));
	if (!fd.valid())
		fail_errno(fmt::format("open inner map id {}", id));
	return fd;
}

}  // namespace

OwnCgroup::OwnCgroup()
{
	namespace cg = airlock::cgroup;
	home_ = cg::of_pid(getpid());
	remove_stale_cgroups(home_);
	path_ = home_ + "/" + kCgroupPrefix + std::to_string(getpid());
	cg::create(path_);
	airlock::write_control(path_ + "/cgroup.procs", std::to_string(getpid()));
	id_ = cg::id_of(path_);
	level_ = cg::level_of(path_);
	if (level_ <= 0 || level_ >= AL_MAX_LEVELS)
		fail("cgroup {} is at depth {}; a sandbox sits at 1 to {}", path_, level_, AL_MAX_LEVELS - 1);
}

OwnCgroup::~OwnCgroup()
{
	// Every process of the cgroup goes back with this one: a child it
	// started may outlive it (the symbolizer a sanitizer starts to name
	// new functions, which waits for this process's end), and a cgroup
	// with a process in it cannot be removed.
	for (int round = 0; round < 3; round++) {
		std::string procs = airlock::read_file(path_ + "/cgroup.procs").value_or("");
		if (procs.empty())
			break;
		std::istringstream in(procs);
		for (std::string pid; std::getline(in, pid);) {
			try {
				airlock::write_control(home_ + "/cgroup.procs", pid);
			} catch (const std::exception& e) {
				// Gone since it was listed: nothing to move.
				if (::kill(std::atoi(pid.c_str()), 0) == 0)
					fmt::print(stderr, "bpf tests: move {} back to {}: {}\n", pid, home_, e.what());
			}
		}
	}
	// A thread that was exiting when the process moved back stays behind
	// (a migration skips it) until it is gone, which under a sanitizer
	// took more than a second: up to 10 s.
	for (int i = 0; ::rmdir(path_.c_str()) != 0; i++) {
		if (errno != EBUSY || i == 1000) {
			fmt::print(stderr, "bpf tests: remove {}: {} (processes: {})\n", path_, std::strerror(errno),
				   airlock::read_file(path_ + "/cgroup.procs").value_or("?"));
			break;
		}
		::usleep(10000);
	}
}

struct Programs::TestObject {
	airlock_test_bpf* skel = nullptr;
	~TestObject() { airlock_test_bpf__destroy(skel); }
};

Programs& Programs::get()
{
	static Programs p;
	return p;
}

Programs::Programs() : kernel_(airlock::kernel::Kernel::load_unpinned())
{
	skb_task_info_ = libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SKB, BPF_FUNC_get_current_pid_tgid, nullptr) == 1;
	maps_of(egress(), maps_);
	maps_of(ingress(), maps_);

	// The test object: its programs run on the production maps.
	test_ = new TestObject;
	test_->skel = airlock_test_bpf__open();
	if (!test_->skel)
		fail_errno("open the test BPF object");
	bpf_object* obj = test_->skel->obj;
	bpf_program* prog;
	bpf_object__for_each_program(prog, obj)
	{
		std::string name = bpf_program__name(prog);
		bpf_program__set_autoload(prog,
					  name == "al_egress" || name == "al_ingress" || name == "al_test_sock_addr");
	}
	// airlock's maps only: the objects' own .rodata (knobs), .data and .bss
	// stay apart (their names can be alike, "airlock_.rodata").
	bpf_map* map;
	bpf_object__for_each_map(map, obj)
	{
		std::string name = bpf_map__name(map);
		if (name.rfind("al_", 0) != 0)
			continue;
		int fd = map_fd(kernel_map_name(name));
		if (fd >= 0 && bpf_map__reuse_fd(map, fd) != 0)
			fail_errno(std::string("share map ") + bpf_map__name(map));
	}
	test_->skel->rodata->al_skb_task_info = skb_task_info_;
	int err = airlock_test_bpf__load(test_->skel);
	if (err)
		fail_errno("load the test BPF object", -err);
	auto dup = [](bpf_program* p) { return Fd(::fcntl(bpf_program__fd(p), F_DUPFD_CLOEXEC, 3)); };
	seam_egress_ = dup(test_->skel->progs.al_egress);
	seam_ingress_ = dup(test_->skel->progs.al_ingress);
	sock_addr_ = dup(test_->skel->progs.al_test_sock_addr);
	fail_site_ = &test_->skel->data->al_test_fail_site;
	fail_at(AL_ERR_SITE_MAX);
}

void Programs::fail_at(unsigned site)
{
	*fail_site_ = site;
}

void Programs::hold_scratch(bool held)
{
	int fd = map_fd("al_scratch");
	bpf_map_info info{};
	uint32_t len = sizeof(info);
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
		fail_errno("read al_scratch");
	size_t stride = (info.value_size + 7) / 8 * 8;
	int ncpus = libbpf_num_possible_cpus();
	for (uint32_t k = 0; k < info.max_entries; k++) {
		std::vector<uint8_t> values(stride * ncpus);
		if (bpf_map_lookup_elem(fd, &k, values.data()) != 0)
			fail_errno("read al_scratch");
		for (int cpu = 0; cpu < ncpus; cpu++) {
			uint32_t busy = held ? 1 : 0;  // al_scratch.busy, its first field
			std::memcpy(values.data() + cpu * stride, &busy, sizeof(busy));
		}
		if (bpf_map_update_elem(fd, &k, values.data(), BPF_ANY) != 0)
			fail_errno("write al_scratch");
	}
}

int Programs::map_fd(const std::string& name) const
{
	for (const auto& [n, fd] : maps_)
		if (n == kernel_map_name(name))
			return fd.get();
	return -1;
}

int run_skb(int prog_fd, const std::string& ip_packet)
{
	std::string frame(14, '\0');
	frame[0] = 0x02;
	frame[6] = 0x02;
	bool v6 = !ip_packet.empty() && (static_cast<uint8_t>(ip_packet[0]) >> 4) == 6;
	frame[12] = v6 ? '\x86' : '\x08';
	frame[13] = v6 ? '\xdd' : '\x00';
	frame += ip_packet;
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
		    .data_size_in = static_cast<uint32_t>(frame.size()), .repeat = 1);
	if (bpf_prog_test_run_opts(prog_fd, &opts) != 0)
		fail_errno(fmt::format("BPF_PROG_TEST_RUN of a {}-byte packet", ip_packet.size()));
	return static_cast<int>(opts.retval);
}

int Programs::run_sock_addr(al_test_sock_addr& t)
{
	al_test_sock_addr& in = test_->skel->bss->al_test_in;
	in = t;
	in.ret = -1;
	run_skb(sock_addr(), udp4("10.255.255.1", "10.255.255.2", 9, 9, ""));
	t.ret = in.ret;
	return t.ret;
}

int run_sock_addr(al_test_sock_addr t)
{
	return Programs::get().run_sock_addr(t);
}

std::string Event::qname() const
{
	if (!dns)
		return "";
	auto n = airlock::dns_qname(*dns);
	return n ? *n : "";
}

std::string Event::describe() const
{
	const al_event& e = base;
	std::string s = fmt::format(
		"kind {} hook {} verdict {} reason {} rule {} family {} protocol {} port {} latched {}", e.kind,
		airlock::hook_name(e.hook), airlock::verdict_name(e.verdict), airlock::reason_name(e.reason), e.rule,
		e.family, e.protocol, e.port, e.latched);
	if (dns)
		s += fmt::format(" qname '{}' qtype {} qid {:#x} learned {} ttl {}", qname(), dns->qtype, dns->qid,
				 dns->learned, dns->ttl);
	return s;
}

namespace {

// Every counter of al_counters with its name, in layout order.
std::vector<std::pair<std::string, uint64_t>> named(const al_counters& c)
{
	using airlock::hook_name, airlock::reason_name, airlock::verdict_name, airlock::err_site_name;
	std::vector<std::pair<std::string, uint64_t>> v;
	for (unsigned h = 0; h < AL_HOOK_MAX; h++)
		for (unsigned x = 0; x < AL_VERDICT_MAX; x++)
			v.emplace_back(fmt::format("decisions[{}][{}]", hook_name(h), verdict_name(x)),
				       c.decisions[h][x]);
	for (unsigned r = 0; r < AL_REASON_MAX; r++)
		v.emplace_back(fmt::format("reasons[{}]", reason_name(r)), c.reasons[r]);
	using Field = __u64 al_counters::*;
	static const std::pair<const char*, Field> kScalars[] = {
		{"egress_packets", &al_counters::egress_packets},
		{"egress_bytes", &al_counters::egress_bytes},
		{"denied_packets", &al_counters::denied_packets},
		{"denied_bytes", &al_counters::denied_bytes},
		{"violations", &al_counters::violations},
		{"events_lost", &al_counters::events_lost},
		{"dns_queries_allowed", &al_counters::dns_queries_allowed},
		{"dns_queries_denied", &al_counters::dns_queries_denied},
		{"dns_answers_learned", &al_counters::dns_answers_learned},
		{"dns_answers_dropped", &al_counters::dns_answers_dropped},
		{"dns_learn_full", &al_counters::dns_learn_full},
		{"dns_records_off_chain", &al_counters::dns_records_off_chain},
		{"unix_bound_full", &al_counters::unix_bound_full},
	};
	for (const auto& [name, field] : kScalars)
		v.emplace_back(name, c.*field);
	for (unsigned i = 0; i < AL_ERR_SITE_MAX; i++)
		v.emplace_back(fmt::format("helper_errors[{}]", err_site_name(i)), c.helper_errors[i]);
	for (unsigned h = 0; h < AL_HOOK_MAX; h++)
		for (unsigned r = 0; r < AL_REASON_MAX; r++)
			v.emplace_back(fmt::format("suppressed[{}][{}]", hook_name(h), reason_name(r)),
				       c.suppressed[h][r]);
	if (v.size() * 8 != sizeof(al_counters))
		fail("al_counters has {} bytes, the test names {} counters: name the new ones", sizeof(al_counters),
		     v.size());
	return v;
}

}  // namespace

al_counters sum(const al_counters& a, const al_counters& b)
{
	al_counters out{};
	auto* o = reinterpret_cast<uint64_t*>(&out);
	auto* x = reinterpret_cast<const uint64_t*>(&a);
	auto* y = reinterpret_cast<const uint64_t*>(&b);
	for (size_t i = 0; i < sizeof(al_counters) / 8; i++)
		o[i] = x[i] + y[i];
	return out;
}

std::string counters_differ(const al_counters& got, const al_counters& want)
{
	auto g = named(got), w = named(want);
	std::string out;
	for (size_t i = 0; i < g.size(); i++)
		if (g[i].second != w[i].second)
			out += fmt::format("  {}: {}, want {}\n", g[i].first, g[i].second, w[i].second);
	return out;
}

namespace {

int on_event(void* ctx, void* data, size_t size)
{
	Event e;
	if (size < sizeof(al_event))
		return 0;
	std::memcpy(&e.base, data, sizeof(al_event));
	if (size == sizeof(al_dns_event)) {
		e.dns.emplace();
		std::memcpy(&*e.dns, data, sizeof(al_dns_event));
	}
	static_cast<std::vector<Event>*>(ctx)->push_back(e);
	return 0;
}

}  // namespace

Sandbox::Sandbox(const std::string& policy_json, uint32_t extra_flags)
    : k_(Programs::get().kernel()), policy_id_(airlock::policy_id_of(kSlot, 0))
{
	auto parsed = airlock::parse_policy_text(policy_json, "test-policy.json");
	if (!parsed.ok()) {
		std::string why;
		for (const auto& e : parsed.rejection().errors)
			why += "\n  " + e.str();
		fail("the test's policy does not parse:{}", why);
	}
	auto compiled = airlock::compile_policy(*parsed, policy_id_);
	if (!compiled) {
		std::string why;
		for (const auto& e : compiled.rejection().errors)
			why += "\n  " + e.str();
		fail("the test's policy does not compile:{}", why);
	}
	const auto& c = *compiled;
	for (uint32_t slot : {kSlot, static_cast<uint32_t>(AL_SLOT_UNKNOWN)})
		k_.reset_counters(slot);
	k_.clear_latch(kSlot);
	k_.delete_rules(policy_id_);
	ring_ = k_.create_ring(kSlot);
	unknown_ring_ = k_.create_ring(AL_SLOT_UNKNOWN);
	reader_ = ring_buffer__new(ring_.get(), on_event, &got_, nullptr);
	if (!reader_ || ring_buffer__add(reader_, unknown_ring_.get(), on_event, &unknown_got_) != 0)
		fail_errno("open the ring buffers");
	k_.create_dns_tables(kSlot);
	k_.install_rules(c, policy_id_);
	entry_.slot = kSlot;
	entry_.policy_id = policy_id_;
	entry_.flags = c.sandbox_flags | extra_flags;
	entry_.on_violation = c.on_violation;
	entry_.families = c.families;
	set_entry(entry_);
	k_.set_level_mask(1u << Programs::get().cgroup().level());
}

Sandbox::~Sandbox()
{
	ring_buffer__free(reader_);
	try {
		remove_entry();
		k_.delete_rules(policy_id_);
		k_.delete_dns_tables(kSlot);
		k_.delete_ring(kSlot);
		k_.delete_ring(AL_SLOT_UNKNOWN);
		k_.set_level_mask(0);
	} catch (const std::exception& e) {
		fmt::print(stderr, "bpf tests: removing the sandbox: {}\n", e.what());
	}
}

uint64_t Sandbox::cgroup_id() const
{
	return Programs::get().cgroup().id();
}

void Sandbox::set_entry(const al_sandbox& sb)
{
	entry_ = sb;
	k_.put_sandbox(cgroup_id(), sb);
	entry_present_ = true;
}

void Sandbox::remove_entry()
{
	if (entry_present_)
		k_.delete_sandbox(cgroup_id());
	entry_present_ = false;
}

al_counters Sandbox::counters() const
{
	return k_.counters(kSlot);
}

al_counters Sandbox::unknown_counters() const
{
	return k_.counters(AL_SLOT_UNKNOWN);
}

al_latch Sandbox::latch() const
{
	return k_.latch(kSlot);
}

void Sandbox::set_latch(const al_latch& l)
{
	int fd = Programs::get().map_fd("al_latch");
	uint32_t slot = kSlot;
	if (bpf_map_update_elem(fd, &slot, &l, BPF_ANY) != 0)
		fail_errno("set the latch");
}

std::vector<Event> Sandbox::events()
{
	int n = ring_buffer__consume(reader_);
	if (n < 0)
		fail_errno("read the ring buffers", -n);
	return std::exchange(got_, {});
}

std::vector<Event> Sandbox::unknown_events()
{
	int n = ring_buffer__consume(reader_);
	if (n < 0)
		fail_errno("read the ring buffers", -n);
	return std::exchange(unknown_got_, {});
}

std::vector<airlock::kernel::Kernel::Learned> Sandbox::learned() const
{
	return k_.learned(kSlot);
}

Fd Sandbox::learned_table() const
{
	return inner_map(Programs::get().map_fd("al_learned"), kSlot);
}

std::vector<std::pair<al_pending_key, al_pending>> Sandbox::pending() const
{
	Fd t = inner_map(Programs::get().map_fd("al_pending"), kSlot);
	std::vector<std::pair<al_pending_key, al_pending>> out;
	al_pending_key key{}, next{};
	void* prev = nullptr;
	while (bpf_map_get_next_key(t.get(), prev, &next) == 0) {
		al_pending v{};
		if (bpf_map_lookup_elem(t.get(), &next, &v) == 0)
			out.emplace_back(next, v);
		key = next;
		prev = &key;
	}
	return out;
}

void Sandbox::drop_pending_table()
{
	uint32_t slot = kSlot;
	if (bpf_map_delete_elem(Programs::get().map_fd("al_pending"), &slot) != 0)
		fail_errno("remove the pending-query table");
}

std::string addr4(const std::string& dotted)
{
	in_addr a{};
	if (inet_pton(AF_INET, dotted.c_str(), &a) != 1)
		fail("not an IPv4 address: {}", dotted);
	return std::string(reinterpret_cast<const char*>(&a), 4);
}

std::string addr6(const std::string& text)
{
	in6_addr a{};
	if (inet_pton(AF_INET6, text.c_str(), &a) != 1)
		fail("not an IPv6 address: {}", text);
	return std::string(reinterpret_cast<const char*>(&a), 16);
}

Wire& Wire::u8(unsigned v)
{
	b_ += static_cast<char>(v & 0xff);
	return *this;
}

Wire& Wire::u16(unsigned v)
{
	return u8(v >> 8).u8(v);
}

Wire& Wire::u32(uint32_t v)
{
	return u16(v >> 16).u16(v & 0xffff);
}

Wire& Wire::raw(const std::string& bytes)
{
	b_ += bytes;
	return *this;
}

Wire& Wire::name(const std::string& dotted)
{
	size_t start = 0;
	while (start < dotted.size()) {
		size_t dot = dotted.find('.', start);
		if (dot == std::string::npos)
			dot = dotted.size();
		u8(dot - start).raw(dotted.substr(start, dot - start));
		start = dot + 1;
	}
	return u8(0);
}

Wire& Wire::ptr(unsigned off)
{
	return u16(0xc000 | off);
}

namespace {

uint16_t checksum(const std::string& bytes)
{
	uint32_t sum = 0;
	for (size_t i = 0; i + 1 < bytes.size(); i += 2)
		sum += (static_cast<uint8_t>(bytes[i]) << 8) | static_cast<uint8_t>(bytes[i + 1]);
	if (bytes.size() % 2)
		sum += static_cast<uint8_t>(bytes.back()) << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return static_cast<uint16_t>(~sum);
}

std::string udp_header(unsigned sport, unsigned dport, const std::string& payload)
{
	return Wire().u16(sport).u16(dport).u16(8 + payload.size()).u16(0).raw(payload);
}

std::string tcp_header(unsigned sport, unsigned dport, const std::string& payload, unsigned flags)
{
	return Wire()
		.u16(sport)
		.u16(dport)
		.u32(1)
		.u32(flags & 0x10 ? 1 : 0)
		.u8(0x50)
		.u8(flags)
		.u16(64240)
		.u16(0)
		.u16(0)
		.raw(payload);
}

}  // namespace

std::string ip4(const std::string& src, const std::string& dst, unsigned protocol, const std::string& options,
		const std::string& payload, unsigned frag_off)
{
	size_t hlen = 20 + options.size();
	Wire h;
	h.u8(0x40 | (hlen / 4)).u8(0).u16(hlen + payload.size()).u16(1).u16(frag_off).u8(64).u8(protocol).u16(0);
	h.raw(addr4(src)).raw(addr4(dst)).raw(options);
	std::string hdr = h.str();
	uint16_t sum = checksum(hdr);
	hdr[10] = static_cast<char>(sum >> 8);
	hdr[11] = static_cast<char>(sum & 0xff);
	return hdr + payload;
}

std::string ip6(const std::string& src, const std::string& dst, unsigned first_next, const std::string& ext,
		const std::string& payload)
{
	return Wire()
		.u32(0x60000000)
		.u16(ext.size() + payload.size())
		.u8(first_next)
		.u8(64)
		.raw(addr6(src))
		.raw(addr6(dst))
		.raw(ext)
		.raw(payload);
}

std::string udp4(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload)
{
	return ip4(src, dst, IPPROTO_UDP, "", udp_header(sport, dport, payload));
}

std::string udp6(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload)
{
	return ip6(src, dst, IPPROTO_UDP, "", udp_header(sport, dport, payload));
}

std::string tcp4(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload, unsigned flags)
{
	return ip4(src, dst, IPPROTO_TCP, "", tcp_header(sport, dport, payload, flags));
}

std::string tcp6(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload, unsigned flags)
{
	return ip6(src, dst, IPPROTO_TCP, "", tcp_header(sport, dport, payload, flags));
}

}  // namespace bpft
