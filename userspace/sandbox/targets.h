#pragma once
// Redirects to a target of the operator's ("to": "HOST:PORT"): the kernel
// rewrites the connect to the target, and the target, a transparent proxy
// or a simulator, asks getsockopt(SO_ORIGINAL_DST) where it was meant to
// go, as it would under netfilter. al_original_dst answers that in the
// cgroup of the socket that listens on the target, found here.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel.h"
#include "net/address.h"
#include "policy/policy.h"
#include "sandbox/state.h"
#include "util/fd.h"

namespace airlock {

// The cgroups (their ids) of the TCP sockets that take a connection to
// addr:port in this process's network namespace: listeners on that address
// if there are any, else on the unspecified address of its family (an IPv6
// one that is not v6-only takes IPv4 too). Empty when nothing listens.
std::vector<uint64_t> tcp_listener_cgroups(const Address& addr, uint16_t port);

// The cgroup with this id, opened by its handle, and its path.
std::optional<std::pair<Fd, std::string>> open_cgroup_by_id(uint64_t id);

// Where the links of al_original_dst are pinned: BPF_DIR/targets.
std::string targets_dir(const std::string& bpf_dir);

// For a sandbox whose policy redirects to targets: its target-origin table
// (made if missing), and al_original_dst attached to the cgroup of each
// TCP target's listener, once per cgroup for all sandboxes (pinned as
// targets/al_original_dst_<cgroup id>). Not to the root cgroup nor to a
// sandbox's: a warning says so. A target nothing listens on yet is said in
// one warning: its connects are refused until something does, and that
// gets no answer to SO_ORIGINAL_DST until the next reload. Nothing here
// fails the sandbox: the redirect holds whatever the target is told.
void prepare_targets(kernel::Kernel&, const Paths&, const SandboxRecord&, const Policy&);

// Once no sandbox is left: the links of al_original_dst are removed.
void forget_targets(const Paths&);

}  // namespace airlock
