#pragma once
// The capabilities airlock takes from what it starts: the sandboxed
// command (sandbox/launch) and the proxy (proxyd/). One list, so that what
// is dropped and what `--keep-caps` says it keeps are the same.
#include <span>
#include <string>

namespace airlock::confine {

struct Capability {
	int number;        // CAP_*
	const char* name;  // "CAP_NET_RAW"
};

// What a sandboxed process could use to step around cgroup hooks (AF_PACKET
// needs CAP_NET_RAW), to undo them (bpf, cgroup moves, ptrace of the agent),
// or to reach files outside its mounts by handle (open_by_handle_at).
std::span<const Capability> dropped_capabilities();

// Their names, ", " between: "CAP_NET_RAW, CAP_NET_ADMIN, ...".
std::string capability_names(std::span<const Capability>);

// Drops the list from the bounding, inheritable, effective and permitted
// sets, and clears the ambient set; the rest stays. Async-signal-safe (a
// child between clone and exec calls it); best effort, as each call is
// refused only for what the caller does not hold anyway.
void drop_capabilities(std::span<const Capability>);

}  // namespace airlock::confine
