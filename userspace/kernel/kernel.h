#pragma once
// The agent's view of the kernel side: the pinned maps and programs, and
// typed operations on them. Everything here works on file descriptors, so
// it does the same whether this process loaded the programs or adopted the
// pins of an earlier one.
#include <airlock/abi.h>
#include <linux/bpf.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/compile.h"
#include "util/fd.h"

namespace airlock::kernel {

// The programs attached to each sandbox's cgroup, in one list: X(Enumerator,
// NAME, attach type) is the BPF function al_NAME, pinned as progs/al_NAME.
// The Prog enum, kProgs and the loader's copies are made from it.
// clang-format off
#define AL_CGROUP_PROGS(X) \
	X(SockCreate, sock_create, BPF_CGROUP_INET_SOCK_CREATE) \
	X(Connect4, connect4, BPF_CGROUP_INET4_CONNECT) \
	X(Connect6, connect6, BPF_CGROUP_INET6_CONNECT) \
	X(Sendmsg4, sendmsg4, BPF_CGROUP_UDP4_SENDMSG) \
	X(Sendmsg6, sendmsg6, BPF_CGROUP_UDP6_SENDMSG) \
	X(Egress, egress, BPF_CGROUP_INET_EGRESS) \
	X(Ingress, ingress, BPF_CGROUP_INET_INGRESS) \
	X(Getpeername4, getpeername4, BPF_CGROUP_INET4_GETPEERNAME) \
	X(Getpeername6, getpeername6, BPF_CGROUP_INET6_GETPEERNAME) \
	X(SockOps, sockops, BPF_CGROUP_SOCK_OPS) \
	X(Recvmsg4, recvmsg4, BPF_CGROUP_UDP4_RECVMSG) \
	X(Recvmsg6, recvmsg6, BPF_CGROUP_UDP6_RECVMSG) \
	/* Values of Linux 6.7's uapi, newer than the headers this builds with. */ \
	X(ConnectUnix, connect_unix, static_cast<bpf_attach_type>(49)) /* BPF_CGROUP_UNIX_CONNECT */ \
	X(SendmsgUnix, sendmsg_unix, static_cast<bpf_attach_type>(50)) /* BPF_CGROUP_UNIX_SENDMSG */

enum Prog {
#define AL_PROG_ENUMERATOR(e, name, attach) e,
	AL_CGROUP_PROGS(AL_PROG_ENUMERATOR)
#undef AL_PROG_ENUMERATOR
	ProgCount
};
// clang-format on

// Programs this kernel may lack: loaded, pinned and attached where it has them.
inline bool prog_optional(int p)
{
	return p == ConnectUnix || p == SendmsgUnix;
}

// Does the running kernel have the cgroup unix-socket hooks (Linux 6.7+)?
bool kernel_has_unix_hooks();

struct ProgSpec {
	const char* name;  // pin name and BPF function name
	bpf_attach_type attach;
};
extern const std::array<ProgSpec, ProgCount> kProgs;
// The getsockopt program that answers SO_ORIGINAL_DST in a target's cgroup.
inline constexpr const char* kOriginalDst = "al_original_dst";

// The pinned maps (AL_PINNED_MAPS in airlock/abi.h), a field each.
struct Maps {
#define AL_MAP_FIELD(name) Fd name;
	AL_PINNED_MAPS(AL_MAP_FIELD)
#undef AL_MAP_FIELD
};

// Pin name (al_NAME) and field of each pinned map.
struct MapPin {
	const char* name;
	Fd Maps::*field;
};
inline constexpr size_t kMapPinCount = 0 AL_PINNED_MAPS(AL_COUNT_ONE);
extern const std::array<MapPin, kMapPinCount> kMapPins;

class Kernel {
public:
	// Adopts what is pinned under bpf_dir or loads the embedded object and
	// pins it. Pins of another build (or ABI) are replaced when no sandbox
	// uses them (idle), adopted with a warning otherwise, or refused if the
	// ABI differs. Callers hold the state lock.
	static Kernel load_or_adopt(const std::string& bpf_dir, bool idle);
	// Opens what is pinned; fails if nothing is.
	static Kernel adopt(const std::string& bpf_dir);
	// Loads the embedded object as load_or_adopt would, for this process
	// alone: nothing is pinned, nothing attached (the BPF unit tests run its
	// programs with BPF_PROG_TEST_RUN). Gone with the last descriptor.
	static Kernel load_unpinned();

	bool adopted() const { return adopted_; }
	const std::string& bpf_dir() const { return bpf_dir_; }
	int prog_fd(Prog p) const { return progs_[p].get(); }
	// al_sk_held, for sock_diag to show each socket's value.
	int sk_held_fd() const { return maps_.sk_held.get(); }
	bool has_prog(Prog p) const { return progs_[p].valid(); }
	uint32_t prog_id(Prog p) const;

	// Sandboxes.
	void put_sandbox(uint64_t cgroup_id, const al_sandbox& sb);
	std::optional<al_sandbox> sandbox(uint64_t cgroup_id) const;
	void delete_sandbox(uint64_t cgroup_id);
	void set_level_mask(uint32_t mask);
	al_config config() const;

	// Compiled rules (addresses, names, the dns block). install_rules
	// inserts all or, on failure, none.
	void install_rules(const CompiledPolicy& c, uint32_t policy_id);
	void delete_rules(uint32_t policy_id);
	size_t count_rules(uint32_t policy_id) const;
	// Returns once no program can still hold a value read before the call.
	void wait_for_readers();

	// Per-slot state.
	al_latch latch(uint32_t slot) const;
	void clear_latch(uint32_t slot);
	al_counters counters(uint32_t slot) const;  // summed over CPUs
	// Zeroes the slot's counters and its event rate limit: a new sandbox in
	// a slot starts with the full burst, whatever its last owner did.
	void reset_counters(uint32_t slot);
	Fd create_ring(uint32_t slot);  // a fresh ring buffer installed for slot
	Fd ring(uint32_t slot) const;   // the installed one, or invalid
	void delete_ring(uint32_t slot);

	// DNS tables of a slot: pending queries and learned addresses, fresh
	// ones for a new sandbox; the query budget back to full.
	void create_dns_tables(uint32_t slot);
	void delete_dns_tables(uint32_t slot);
	// The table of abstract names a slot's processes bound: a fresh one
	// for a new sandbox.
	void create_unix_table(uint32_t slot);
	void delete_unix_table(uint32_t slot);
	struct Learned {
		al_learned_key key;
		al_learned value;
	};
	std::vector<Learned> learned(uint32_t slot) const;
	// Removes entries that expired before `before_ns` (CLOCK_MONOTONIC).
	size_t sweep_learned(uint32_t slot, uint64_t before_ns);

	// Where the slot's proxy listens (port 0: no proxy; redirects fail
	// closed). A port is one proxy's on the whole host, whatever network
	// namespace its listener is in: false, and nothing changed, when the
	// port is another slot's proxy port already.
	bool set_proxy(uint32_t slot, const al_proxy& px);
	al_proxy proxy(uint32_t slot) const;
	// The origins of a slot's redirected connections: its own table, made
	// with its proxy and removed with it; for the proxy, a read-only
	// descriptor of it.
	void create_origin_table(uint32_t slot);
	// A slot's byte budgets, (rule, limit): every other entry of the slot is
	// removed; keep: an entry whose rule has the same limit keeps its count
	// (a reload), else counts start at 0.
	void set_budgets(uint32_t slot, const std::vector<std::pair<uint16_t, uint64_t>>& budgets, bool keep);
	struct Budget {
		uint16_t rule;
		uint64_t limit, used;
	};
	std::vector<Budget> budgets(uint32_t slot) const;
	void delete_origin_table(uint32_t slot);
	Fd origin_table_readonly(uint32_t slot) const;
	// The origins of a slot's connections to targets of the operator's
	// (redirect rules with "to": "HOST:PORT"), which al_original_dst
	// answers SO_ORIGINAL_DST from: made while its policy has such rules,
	// removed with the sandbox.
	void create_target_origin_table(uint32_t slot);
	bool has_target_origin_table(uint32_t slot) const;
	void delete_target_origin_table(uint32_t slot);
	// Attaches al_original_dst (getsockopt SO_ORIGINAL_DST) to the cgroup
	// of a target's listener and pins the link.
	void attach_original_dst(int cgroup_fd, const std::string& pin_path);
	// The slot's learned-address table, read-only: what the SNI gate
	// compares a ClientHello's name with.
	Fd learned_table_readonly(uint32_t slot) const;
	// A violation found outside the kernel (the SNI gate): the latch is
	// set as a program sets it, unless it is set already or the sandbox
	// only denies. Returns whether this call set it.
	bool set_latch(uint32_t slot, uint64_t cgroup_id);

	// Attach a program to a cgroup with a bpf_link and pin the link.
	void attach_and_pin(Prog p, int cgroup_fd, const std::string& pin_path);

private:
	Kernel() = default;
	static Kernel open_pins(const std::string& bpf_dir);
	void write_config();  // this build's ABI version and object id, no level yet
	void pin_all();

	std::string bpf_dir_;
	bool adopted_ = false;
	Maps maps_;
	std::array<Fd, ProgCount> progs_;
	Fd original_dst_;  // attached to targets' cgroups, not to sandboxes'
	friend struct Loader;
};

std::string maps_dir(const std::string& bpf_dir);
std::string progs_dir(const std::string& bpf_dir);
std::string links_dir(const std::string& bpf_dir, const std::string& sandbox);

// Where the tracepoint links are pinned (global, not per sandbox).
std::string tracepoints_dir(const std::string& bpf_dir);

// Mounts tracefs at /sys/kernel/tracing if no tracefs is there; false if
// none can be had (then tracepoint programs cannot be attached).
bool ensure_tracefs();

// This kernel lets cgroup sock_addr programs call bpf_send_signal (6.16+):
// a freeze or kill violation stops or kills its task in the violating call.
bool can_stop_in_call();

// Mounts bpffs at /sys/fs/bpf when the pin root lies under it and nothing is
// mounted there yet; fails if the pin root is not on a bpffs.
void ensure_bpffs(const std::string& bpf_dir);

}  // namespace airlock::kernel
