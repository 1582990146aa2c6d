// The one translation unit that includes the generated skeleton: it loads
// the embedded object and hands its descriptors to Kernel.
#include <bpf/libbpf.h>
#include <fcntl.h>

#include <array>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "airlock_bpf.skel.h"
#include "kernel/kernel.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock::kernel {

namespace {

// Programs attached once for all sandboxes, their links pinned under
// tracepoints/ by name: X(NAME, needs the unix hooks) is al_NAME. bind(2)
// of abstract names, for the unix hooks to tell the sandbox's own sockets;
// socket(2)/socketpair(2) of families a policy does not list.
#define AL_TRACEPOINT_PROGS(X) \
	X(bind_enter_tp, true) X(bind_exit_tp, true) X(socket_exit_tp, false) X(socketpair_exit_tp, false)

// The lists and the object agree, at compile time. Every listed map and
// program is in the skeleton:
#define AL_IN_OBJECT(kind, name) \
	static_assert(std::is_pointer_v<decltype(std::declval<airlock_bpf&>().kind.al_##name)>);
#define AL_MAP_IN_OBJECT(name) AL_IN_OBJECT(maps, name)
#define AL_PROG_IN_OBJECT(e, name, ...) AL_IN_OBJECT(progs, name)
#define AL_TRACEPOINT_IN_OBJECT(name, ...) AL_IN_OBJECT(progs, name)
AL_PINNED_MAPS(AL_MAP_IN_OBJECT)
AL_SCRATCH_MAPS(AL_MAP_IN_OBJECT)
AL_CGROUP_PROGS(AL_PROG_IN_OBJECT)
AL_TRACEPOINT_PROGS(AL_TRACEPOINT_IN_OBJECT)
#undef AL_TRACEPOINT_IN_OBJECT
#undef AL_PROG_IN_OBJECT
#undef AL_MAP_IN_OBJECT
#undef AL_IN_OBJECT

// ... and the skeleton has nothing else: as many maps as the two lists and
// the internal maps libbpf makes of global variables (.rodata, .data, .bss,
// .kconfig: the skeleton names them without the dot, only when the object
// has them), as many programs as the two lists. A map or program added to
// bpf/ without its entry fails here.
// clang-format off
template <typename Maps>
constexpr size_t internal_maps()
{
	return size_t{requires(Maps m) { m.rodata; }} + size_t{requires(Maps m) { m.data; }} +
	       size_t{requires(Maps m) { m.bss; }} + size_t{requires(Maps m) { m.kconfig; }};
}
// clang-format on
using SkelMaps = decltype(airlock_bpf::maps);
// The skeleton's map and program members are all pointers: their number is
// the struct's size over a pointer's. NOLINTNEXTLINE(bugprone-sizeof-expression)
static_assert(sizeof(SkelMaps) / sizeof(bpf_map*) ==
		      kMapPinCount + (0 AL_SCRATCH_MAPS(AL_COUNT_ONE)) + internal_maps<SkelMaps>(),
	      "a map of bpf/maps.bpf.h is in neither AL_PINNED_MAPS nor AL_SCRATCH_MAPS (airlock/abi.h)");
// NOLINTNEXTLINE(bugprone-sizeof-expression)
static_assert(sizeof(airlock_bpf::progs) / sizeof(bpf_program*) ==
		      ProgCount + (0 AL_TRACEPOINT_PROGS(AL_COUNT_ONE)) + 1 /* al_original_dst */,
	      "a program of bpf/airlock.bpf.c is in neither AL_CGROUP_PROGS (kernel.h) nor AL_TRACEPOINT_PROGS");

struct SkelDestroy {
	void operator()(airlock_bpf* skel) const { airlock_bpf__destroy(skel); }
};
using Skel = std::unique_ptr<airlock_bpf, SkelDestroy>;

Fd dup(int fd)
{
	int n = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (n < 0)
		fail_errno("dup BPF fd");
	return Fd(n);
}

}  // namespace

struct Loader {
	// pinned: the tracepoint programs are attached and their links pinned
	// under bpf_dir (the agent); otherwise nothing is attached or pinned and
	// the descriptors are this process's alone (the BPF unit tests).
	static Kernel load(const std::string& bpf_dir, bool pinned)
	{
		libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
		Skel skel(airlock_bpf__open());
		if (!skel)
			fail_errno("open embedded BPF object");
		// Task helpers in cgroup_skb came after 6.1: probe, or egress events
		// would keep this kernel from loading anything.
		skel->rodata->al_skb_task_info = libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SKB,
									 BPF_FUNC_get_current_pid_tgid, nullptr) == 1 &&
						 libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SKB,
									 BPF_FUNC_get_current_comm, nullptr) == 1;
		const std::array<bpf_program*, ProgCount> progs = {
#define AL_SKEL_PROG(e, name, ...) skel->progs.al_##name,
			AL_CGROUP_PROGS(AL_SKEL_PROG)
#undef AL_SKEL_PROG
		};
		// The unix hooks (the optional ones): their attach types where the
		// kernel has them, otherwise not loaded at all.
		for (int p = 0; p < ProgCount; p++) {
			if (!prog_optional(p))
				continue;
			if (kernel_has_unix_hooks())
				bpf_program__set_expected_attach_type(progs[p], kProgs[p].attach);
			else
				bpf_program__set_autoload(progs[p], false);
		}
		// The tracepoints need tracefs (when they are attached at all); the
		// bind tracker, the unix hooks too.
		bool tracefs = !pinned || ensure_tracefs();
		const std::vector<std::pair<bpf_program*, bool>> tracepoints = {
#define AL_SKEL_TRACEPOINT(name, unix_only) \
	{skel->progs.al_##name, tracefs && (!(unix_only) || kernel_has_unix_hooks())},
			AL_TRACEPOINT_PROGS(AL_SKEL_TRACEPOINT)
#undef AL_SKEL_TRACEPOINT
		};
		for (auto [prog, on] : tracepoints)
			if (!on)
				bpf_program__set_autoload(prog, false);
		// Stopping the violating task in its call needs bpf_send_signal in
		// sock_addr (Linux 6.16+) and sock_create programs: probe, or the
		// older verifier would refuse the programs.
		skel->rodata->al_signal_sock_addr = can_stop_in_call();
		skel->rodata->al_signal_sock_create = libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SOCK,
									      BPF_FUNC_send_signal, nullptr) == 1;
		spdlog::info("loading programs; stopping a violating task inside its connect/sendmsg: {}",
			     skel->rodata->al_signal_sock_addr
				     ? "yes (SIGSTOP or SIGKILL in the call)"
				     : "no, this kernel lacks bpf_send_signal in sock_addr programs (Linux 6.16+); the "
				       "cgroup freeze stops it");
		if (int err = airlock_bpf__load(skel.get()))
			fail_errno("load BPF programs (is this kernel 6.1+ with BTF, and are you root?)", -err);
		Kernel k;
		k.bpf_dir_ = bpf_dir;
#define AL_DUP_MAP(name) k.maps_.name = dup(bpf_map__fd(skel->maps.al_##name));
		AL_PINNED_MAPS(AL_DUP_MAP)
#undef AL_DUP_MAP
		if (pinned && tracefs) {
			make_dirs(tracepoints_dir(bpf_dir));
			for (auto [prog, on] : tracepoints) {
				if (!on)
					continue;
				bpf_link* link = bpf_program__attach(prog);
				std::string pin = tracepoints_dir(bpf_dir) + "/" + bpf_program__name(prog);
				int err = link ? bpf_link__pin(link, pin.c_str()) : -errno;
				if (link) {
					bpf_link__disconnect(link);  // the pin holds it attached
					bpf_link__destroy(link);
				}
				if (err)
					fail_errno("attach and pin " + pin, -err);
			}
		}
		for (int p = 0; p < ProgCount; p++)
			if (bpf_program__autoload(progs[p]))
				k.progs_[p] = dup(bpf_program__fd(progs[p]));
		k.original_dst_ = dup(bpf_program__fd(skel->progs.al_original_dst));
		return k;
	}
};

bool can_stop_in_call()
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_FUNC_send_signal, nullptr) == 1;
}

Kernel load_embedded(const std::string& bpf_dir, bool pinned)
{
	return Loader::load(bpf_dir, pinned);
}

uint64_t embedded_object_id()
{
	size_t size = 0;
	auto* bytes = static_cast<const unsigned char*>(airlock_bpf__elf_bytes(&size));
	uint64_t h = 1469598103934665603ull;  // FNV-1a
	for (size_t i = 0; i < size; i++)
		h = (h ^ bytes[i]) * 1099511628211ull;
	return h;
}

}  // namespace airlock::kernel
