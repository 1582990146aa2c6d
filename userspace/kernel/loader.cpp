// The one translation unit that includes the generated skeleton: it loads
// the embedded object and hands its descriptors to Kernel.
#include <bpf/libbpf.h>
#include <fcntl.h>

#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "airlock_bpf.skel.h"
#include "kernel/kernel.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock::kernel {

struct Loader {
	// pinned: the tracepoint programs are attached and their links pinned
	// under bpf_dir (the agent); otherwise nothing is attached or pinned and
	// the descriptors are this process's alone (the BPF unit tests).
	static Kernel load(const std::string& bpf_dir, bool pinned)
	{
		libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
		airlock_bpf* skel = airlock_bpf__open();
		if (!skel)
			fail_errno("open embedded BPF object");
		// Task helpers in cgroup_skb came after 6.1: probe, or egress events
		// would keep this kernel from loading anything.
		skel->rodata->al_skb_task_info =
			libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SKB, BPF_FUNC_get_current_pid_tgid, nullptr) == 1 &&
			libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SKB, BPF_FUNC_get_current_comm, nullptr) == 1;
		// The unix hooks: their attach types where the kernel has them,
		// otherwise not loaded at all.
		for (auto [prog, p] : {std::pair{skel->progs.al_connect_unix, ConnectUnix},
				       std::pair{skel->progs.al_sendmsg_unix, SendmsgUnix}}) {
			if (kernel_has_unix_hooks())
				bpf_program__set_expected_attach_type(prog, kProgs[p].attach);
			else
				bpf_program__set_autoload(prog, false);
		}
		// bind(2) of abstract names, for the unix hooks to tell the
		// sandbox's own sockets: attached once, for every sandbox.
		// socket(2)/socketpair(2) of unlisted families: on every kernel
		// with tracefs.
		bool tracefs = !pinned || ensure_tracefs();
		bool bind_tracker = kernel_has_unix_hooks() && tracefs;
		std::vector<std::pair<bpf_program*, bool>> tracepoints = {
			{skel->progs.al_bind_enter_tp, bind_tracker},
			{skel->progs.al_bind_exit_tp, bind_tracker},
			{skel->progs.al_socket_exit_tp, tracefs},
			{skel->progs.al_socketpair_exit_tp, tracefs},
		};
		for (auto [prog, on] : tracepoints)
			if (!on)
				bpf_program__set_autoload(prog, false);
		// Stopping the violating task in its call needs bpf_send_signal in
		// sock_addr (Linux 6.16+) and sock_create programs: probe, or the
		// older verifier would refuse the programs.
		skel->rodata->al_signal_sock_addr = can_stop_in_call();
		skel->rodata->al_signal_sock_create =
			libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SOCK, BPF_FUNC_send_signal, nullptr) == 1;
		spdlog::info("loading programs; stopping a violating task inside its connect/sendmsg: {}",
			     skel->rodata->al_signal_sock_addr
				     ? "yes (SIGSTOP or SIGKILL in the call)"
				     : "no, this kernel lacks bpf_send_signal in sock_addr programs (Linux 6.16+); the "
				       "cgroup freeze stops it");
		int err = airlock_bpf__load(skel);
		if (err) {
			airlock_bpf__destroy(skel);
			fail_errno("load BPF programs (is this kernel 6.1+ with BTF, and are you root?)", -err);
		}
		Kernel k;
		k.bpf_dir_ = bpf_dir;
		auto dup = [](int fd) {
			int n = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
			if (n < 0)
				fail_errno("dup BPF fd");
			return Fd(n);
		};
		k.maps_.config = dup(bpf_map__fd(skel->maps.al_config));
		k.maps_.sandboxes = dup(bpf_map__fd(skel->maps.al_sandboxes));
		k.maps_.rules = dup(bpf_map__fd(skel->maps.al_rules));
		k.maps_.latch = dup(bpf_map__fd(skel->maps.al_latch));
		k.maps_.counters = dup(bpf_map__fd(skel->maps.al_counters));
		k.maps_.flood = dup(bpf_map__fd(skel->maps.al_flood));
		k.maps_.rings = dup(bpf_map__fd(skel->maps.al_rings));
		k.maps_.rcu_sync = dup(bpf_map__fd(skel->maps.al_rcu_sync));
		k.maps_.rcu_inner = dup(bpf_map__fd(skel->maps.al_rcu_inner));
		k.maps_.names = dup(bpf_map__fd(skel->maps.al_names));
		k.maps_.dns = dup(bpf_map__fd(skel->maps.al_dns));
		k.maps_.dns_state = dup(bpf_map__fd(skel->maps.al_dns_state));
		k.maps_.pending = dup(bpf_map__fd(skel->maps.al_pending));
		k.maps_.learned = dup(bpf_map__fd(skel->maps.al_learned));
		k.maps_.unix_exact = dup(bpf_map__fd(skel->maps.al_unix_exact));
		k.maps_.unix_prefix = dup(bpf_map__fd(skel->maps.al_unix_prefix));
		k.maps_.unix_bound = dup(bpf_map__fd(skel->maps.al_unix_bound));
		k.maps_.unix_binding = dup(bpf_map__fd(skel->maps.al_unix_binding));
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
				if (err) {
					airlock_bpf__destroy(skel);
					fail_errno("attach and pin " + pin, -err);
				}
			}
		}
		k.progs_[SockCreate] = dup(bpf_program__fd(skel->progs.al_sock_create));
		k.progs_[Connect4] = dup(bpf_program__fd(skel->progs.al_connect4));
		k.progs_[Connect6] = dup(bpf_program__fd(skel->progs.al_connect6));
		k.progs_[Sendmsg4] = dup(bpf_program__fd(skel->progs.al_sendmsg4));
		k.progs_[Sendmsg6] = dup(bpf_program__fd(skel->progs.al_sendmsg6));
		k.progs_[Egress] = dup(bpf_program__fd(skel->progs.al_egress));
		k.progs_[Ingress] = dup(bpf_program__fd(skel->progs.al_ingress));
		if (kernel_has_unix_hooks()) {
			k.progs_[ConnectUnix] = dup(bpf_program__fd(skel->progs.al_connect_unix));
			k.progs_[SendmsgUnix] = dup(bpf_program__fd(skel->progs.al_sendmsg_unix));
		}
		airlock_bpf__destroy(skel);
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
