#pragma once
// What the BPF unit tests (and the differential fuzz target) stand on: the
// production object loaded by the agent's own loader, for this process
// alone (nothing attached, nothing pinned); the test object next to it,
// sharing its maps; the process moved into a cgroup of its own; a sandbox
// entry for that cgroup whose rules the agent's policy compiler made; and
// BPF_PROG_TEST_RUN of a program on a crafted packet. The kernel gives a
// test packet a socket of the caller's cgroup, and a syscall program runs
// as the caller's task: both are judged as that sandbox's.
#include <airlock/abi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel.h"
#include "progs/airlock_test.h"
#include "util/fd.h"

struct ring_buffer;

namespace bpft {

// The process's own cgroup, a child of the one it started in (a sandbox
// cannot sit at the root). The process is moved in, and back out before
// it is removed.
class OwnCgroup {
public:
	OwnCgroup();
	~OwnCgroup();
	OwnCgroup(const OwnCgroup&) = delete;
	OwnCgroup& operator=(const OwnCgroup&) = delete;

	const std::string& path() const { return path_; }
	uint64_t id() const { return id_; }
	int level() const { return level_; }

private:
	std::string home_, path_;
	uint64_t id_ = 0;
	int level_ = 0;
};

// The programs under test, loaded once for the process.
class Programs {
public:
	static Programs& get();

	airlock::kernel::Kernel& kernel() { return kernel_; }
	const OwnCgroup& cgroup() const { return cgroup_; }
	// The production object's programs.
	int egress() const { return kernel_.prog_fd(airlock::kernel::Egress); }
	int ingress() const { return kernel_.prog_fd(airlock::kernel::Ingress); }
	// The test object's: the same code with the failing-load seam, and the
	// sock_addr decision on a crafted address.
	int seam_egress() const { return seam_egress_.get(); }
	int seam_ingress() const { return seam_ingress_.get(); }
	int sock_addr() const { return sock_addr_.get(); }
	// The load at this al_err_site fails in the seam programs
	// (AL_ERR_SITE_MAX: none does).
	void fail_at(unsigned site);
	// The sock_addr decision on t (al_test_sock_addr); returns t.ret.
	int run_sock_addr(al_test_sock_addr& t);
	// Every per-CPU entry of al_scratch marked busy (held) or free: what a
	// program finds when others on its CPU hold them all.
	void hold_scratch(bool held);
	// A map of the production object by name (al_scratch, ...).
	int map_fd(const std::string& name) const;
	// cgroup_skb programs may read the current task (al_skb_task_info).
	bool skb_task_info() const { return skb_task_info_; }

private:
	Programs();
	OwnCgroup cgroup_;
	airlock::kernel::Kernel kernel_;
	std::vector<std::pair<std::string, airlock::Fd>> maps_;
	airlock::Fd seam_egress_, seam_ingress_, sock_addr_;
	volatile uint32_t* fail_site_ = nullptr;
	bool skb_task_info_ = false;
	struct TestObject;
	TestObject* test_ = nullptr;  // kept loaded for the process's life
};

// BPF_PROG_TEST_RUN of a cgroup_skb program on an IP packet (an Ethernet
// header is put in front, which the kernel strips). Returns the program's
// return value; throws if the run itself fails.
int run_skb(int prog_fd, const std::string& ip_packet);
// The sock_addr decision (al_test_sock_addr) on t: 1 the call goes on, 0
// it fails with EPERM.
int run_sock_addr(al_test_sock_addr t);

// One record from a ring: the decision, and the question of a DNS one.
struct Event {
	al_event base{};
	std::optional<al_dns_event> dns;
	std::string qname() const;  // "" when no name was parsed
	std::string describe() const;
};

// Counter by counter, a + b.
al_counters sum(const al_counters& a, const al_counters& b);
// Every counter of a slot, summed over the CPUs, equal to want; otherwise
// the names of the counters that differ and their values.
std::string counters_differ(const al_counters& got, const al_counters& want);

// A sandbox for the process's cgroup in slot kSlot: the rules of a policy
// compiled by the agent's compiler (policy id of the slot's bank 0), fresh
// counters, latch, event rate limit, ring and DNS tables, as the agent
// makes them. Removed again when it goes. The slot of programs that find no
// sandbox (AL_SLOT_UNKNOWN) is fresh too.
class Sandbox {
public:
	static constexpr uint32_t kSlot = 7;

	// extra_flags: al_sandbox_flag the runner adds (AL_SB_LOG_ALLOWED).
	explicit Sandbox(const std::string& policy_json, uint32_t extra_flags = 0);
	~Sandbox();
	Sandbox(const Sandbox&) = delete;
	Sandbox& operator=(const Sandbox&) = delete;

	uint32_t policy_id() const { return policy_id_; }
	uint64_t cgroup_id() const;
	// Replaces the sandbox entry (flags, on_violation) or removes it.
	void set_entry(const al_sandbox& sb);
	const al_sandbox& entry() const { return entry_; }
	void remove_entry();

	al_counters counters() const;
	al_counters unknown_counters() const;
	al_latch latch() const;
	void set_latch(const al_latch& l);
	// Events in the slot's ring (and the unknown slot's) since the last call.
	std::vector<Event> events();
	std::vector<Event> unknown_events();
	std::vector<airlock::kernel::Kernel::Learned> learned() const;
	// The slot's learned-address table, to write entries as an answer would.
	airlock::Fd learned_table() const;
	// The slot's pending queries; removing its table (the agent never does).
	std::vector<std::pair<al_pending_key, al_pending>> pending() const;
	void drop_pending_table();

private:
	airlock::kernel::Kernel& k_;
	uint32_t policy_id_;
	al_sandbox entry_{};
	airlock::Fd ring_, unknown_ring_;
	ring_buffer* reader_ = nullptr;  // both rings, read into got_ and unknown_got_
	std::vector<Event> got_, unknown_got_;
	bool entry_present_ = false;
};

// Addresses and packets.
std::string addr4(const std::string& dotted);  // 4 bytes
std::string addr6(const std::string& text);    // 16 bytes

// Bytes in network order, built piece by piece.
class Wire {
public:
	Wire& u8(unsigned v);
	Wire& u16(unsigned v);
	Wire& u32(uint32_t v);
	Wire& raw(const std::string& bytes);
	// A name as labels (each with its length), ended by the root. Labels
	// are taken as written: "a..b" has an empty label.
	Wire& name(const std::string& dotted);
	// A compression pointer to off.
	Wire& ptr(unsigned off);
	size_t size() const { return b_.size(); }
	const std::string& str() const { return b_; }
	operator const std::string&() const { return b_; }

private:
	std::string b_;
};

// IP packets: src and dst as text, payload after the L4 header.
std::string udp4(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload);
std::string udp6(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload);
// TCP with a 20-byte header (flags PSH|ACK, or SYN with no payload).
std::string tcp4(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload, unsigned flags = 0x18);
std::string tcp6(const std::string& src, const std::string& dst, unsigned sport, unsigned dport,
		 const std::string& payload, unsigned flags = 0x18);
// An IPv4 header with the given options (padded to whole words by the
// caller), protocol and payload (the L4 header included).
std::string ip4(const std::string& src, const std::string& dst, unsigned protocol, const std::string& options,
		const std::string& payload, unsigned frag_off = 0x4000);
// An IPv6 header; ext: extension headers, first_next the first's type.
std::string ip6(const std::string& src, const std::string& dst, unsigned first_next, const std::string& ext,
		const std::string& payload);

}  // namespace bpft
