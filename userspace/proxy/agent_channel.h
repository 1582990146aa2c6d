#pragma once
// The channel between the proxy and the agent that started it: one end of
// a SOCK_SEQPACKET pair each, one message per packet, the first field its
// type.
//
// The SNI gate: the proxy makes no socket and connects nowhere. For a
// connection it passed, it asks the agent for a socket to the destination,
// naming the connection as the kernel filed it (its origin key). The agent
// looks the origin up itself, checks that the rule that redirected it is
// gated in the policy it enforces, starts the connect and hands the socket
// over (SCM_RIGHTS). What a proxy taken over could obtain this way is what
// the kernel already redirected for that sandbox under a gated rule,
// nothing else. A denied connection is reported the same way, and the
// agent takes the sandbox's on_violation.
//
// A reload that changes only what the HTTP gate reads (its rules'
// entries, inject, upstream roots, the secrets): the agent hands the
// proxy the new policy's text, its secrets and roots (gate/inputs.h) in a
// sealed memfd, and the proxy judges its next requests under them; its
// connections stay open. Anything else it reads (the world, the SNI
// gate's rules) changing starts the proxy again.
//
// The proxy's counts: at most once a second while they change, and once
// more as it stops. The agent keeps the latest for metrics and `status`;
// they are figures the proxy claims, never a verdict.
#include <cstdint>

#include <airlock/abi.h>

#include "proxy/world_stats.h"

namespace airlock::proxy {

enum : uint32_t {
	kGateConnect = 1,    // a socket to the origin of `key`, please
	kGateViolation = 2,  // the gate denied the connection of `key`: sni, reason
	kProxyStats = 3,     // StatsReport: the proxy's counts since it started
	kGateInputs = 4,     // agent to proxy: GateInputs, a sealed memfd with it (SCM_RIGHTS)
};

inline constexpr size_t kGateTextBytes = 256;

struct GateRequest {
	uint32_t type = 0;
	uint32_t id = 0;                   // kGateConnect: echoed in the reply
	al_origin_key key{};               // the redirected connection (its client's address, as filed)
	char sni[kGateTextBytes] = {};     // kGateViolation: NUL-terminated
	char reason[kGateTextBytes] = {};  // kGateViolation: NUL-terminated, cut
};

struct GateReply {
	uint32_t id = 0;
	int32_t error = 0;  // 0: the socket comes with it (one descriptor, SCM_RIGHTS); else an errno
};

// Its size tells it from a GateReply, the agent's only other message.
struct GateInputs {
	uint32_t type = kGateInputs;
	uint32_t reserved = 0;
	uint64_t bytes = 0;  // the memfd's
};
static_assert(sizeof(GateInputs) != sizeof(GateReply));

struct StatsReport {
	uint32_t type = kProxyStats;
	uint32_t reserved = 0;
	WorldStats stats;
};

}  // namespace airlock::proxy
