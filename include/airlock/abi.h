/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The only contract between airlock's BPF programs and its agent: map keys and
 * values, event records, enums and limits. Both sides include this file and
 * neither redefines anything in it. Plain C, fixed-width types, explicit
 * padding; every struct's size is asserted below.
 *
 * Bump AL_ABI_VERSION on any change to a layout or a meaning here: an agent
 * refuses to adopt pinned programs and maps of another version.
 */
#ifndef AIRLOCK_ABI_H
#define AIRLOCK_ABI_H

#include <linux/types.h>

#define AL_ABI_VERSION 2

/* Limits. */
#define AL_MAX_SANDBOXES 1024      /* slots; slot AL_MAX_SANDBOXES counts the unknown */
#define AL_SLOT_UNKNOWN AL_MAX_SANDBOXES
#define AL_MAX_LEVELS 32           /* cgroup depth the sandbox lookup walks */
#define AL_MAX_RANGES 32           /* port ranges in one compiled prefix entry */
#define AL_MAX_PREFIXES 65536      /* LPM entries, all sandboxes and banks */
#define AL_RING_BYTES (1u << 18)     /* events ring of one sandbox */
#define AL_RULE_NONE 0xffffu       /* al_event.rule when no rule matched */
#define AL_COMM_LEN 16

/* Address families as stored in keys and events (not AF_* values). */
enum al_family {
	AL_FAMILY_IPV4 = 4,
	AL_FAMILY_IPV6 = 6,
};

/* Protocol bits of a compiled range. */
enum al_proto_bit {
	AL_PROTO_TCP = 1u << 0,
	AL_PROTO_UDP = 1u << 1,
	AL_PROTO_ICMP = 1u << 2, /* ICMP for IPv4, ICMPv6 for IPv6 */
};

enum al_action {
	AL_ACTION_ALLOW = 0,
	AL_ACTION_DENY = 1,
};

enum al_hook {
	AL_HOOK_SOCK_CREATE = 0,
	AL_HOOK_CONNECT4 = 1,
	AL_HOOK_CONNECT6 = 2,
	AL_HOOK_SENDMSG4 = 3,
	AL_HOOK_SENDMSG6 = 4,
	AL_HOOK_EGRESS = 5,
	AL_HOOK_INGRESS = 6,
	AL_HOOK_MAX = 8,
};

enum al_verdict {
	AL_VERDICT_ALLOW = 0,
	AL_VERDICT_DENY = 1,
	AL_VERDICT_AUDIT = 2, /* would have been denied; mode audit let it through */
	AL_VERDICT_MAX = 3,
};

enum al_reason {
	AL_REASON_RULE_ALLOW = 0,    /* an allow rule matched */
	AL_REASON_NO_RULE = 1,       /* default deny */
	AL_REASON_RULE_DENY = 2,     /* a deny rule matched */
	AL_REASON_QUARANTINED = 3,   /* the sandbox's latch is set */
	AL_REASON_RAW_SOCKET = 4,
	AL_REASON_ICMP_SOCKET = 5,   /* ping socket without an ICMP rule */
	AL_REASON_SOURCE_ROUTE = 6,  /* IPv4 LSRR/SSRR option */
	AL_REASON_ROUTING_HEADER = 7,/* IPv6 routing header */
	AL_REASON_FRAGMENT = 8,      /* a fragment reached cgroup egress */
	AL_REASON_MALFORMED = 9,     /* headers the parser could not walk */
	AL_REASON_NO_SANDBOX = 10,   /* program ran, no sandbox entry: fail closed */
	AL_REASON_PROTOCOL = 11,     /* an L4 protocol no rule can name */
	AL_REASON_MAX = 12,
};

enum al_violation_action {
	AL_ON_VIOLATION_DENY = 0,
	AL_ON_VIOLATION_FREEZE = 1,
	AL_ON_VIOLATION_KILL = 2,
};

enum al_sandbox_flag {
	AL_SB_AUDIT = 1u << 0,       /* mode audit: record, let through */
	AL_SB_ALLOW_ICMP = 1u << 1,  /* some rule allows ICMP: ping sockets may exist */
	AL_SB_LOG_ALLOWED = 1u << 2, /* emit events for allowed sock_addr decisions */
};

/* Map "al_config", array of one. */
struct al_config {
	__u32 abi_version;
	__u32 level_mask; /* bit L set: some sandbox cgroup sits at level L */
	__u64 object_id;  /* hash of the BPF object that was loaded: which build */
};

/* Map "al_sandboxes", hash: cgroup id (__u64) -> al_sandbox. Replaced whole on
 * reload, so a program sees either the old or the new policy id. */
struct al_sandbox {
	__u32 slot;        /* index into al_latch and al_counters */
	__u32 policy_id;   /* key prefix of this sandbox's entries in al_rules */
	__u32 flags;       /* al_sandbox_flag */
	__u8 on_violation; /* al_violation_action */
	__u8 pad[3];
};

/* Map "al_rules", LPM trie. data[] is policy id, family, address: the prefix
 * length counts 64 bits for the first two, then the address bits. */
struct al_lpm_key {
	__u32 prefixlen;
	__u32 policy_id;
	__u32 family;      /* al_family */
	__u8 addr[16];     /* IPv4 in the first four bytes */
};
#define AL_LPM_FIXED_BITS 64

/* One port range of a compiled prefix, in the order the kernel tries them:
 * the first range that matches port and protocol decides. The compiler has
 * already folded in the less specific prefixes' rules, so one LPM lookup is
 * enough. */
struct al_range {
	__u16 port_lo;     /* host order; 0..65535 also covers ICMP (no port) */
	__u16 port_hi;
	__u8 proto_mask;   /* al_proto_bit */
	__u8 action;       /* al_action */
	__u16 rule;        /* index of the policy rule, for events */
};

struct al_rule_set {
	__u32 count;
	__u32 pad;
	struct al_range ranges[AL_MAX_RANGES];
};

/* Map "al_latch", array indexed by slot. Nonzero: quarantined since then. */
struct al_latch {
	__u64 violated_ns; /* bpf_ktime_get_ns() of the violation that set it */
	__u64 cgroup_id;   /* sandbox the latch was set for */
};

/* Map "al_counters", per-CPU array indexed by slot (AL_SLOT_UNKNOWN for a
 * program that ran without a sandbox entry). */
struct al_counters {
	__u64 decisions[AL_HOOK_MAX][AL_VERDICT_MAX];
	__u64 reasons[AL_REASON_MAX];   /* denials (and audit) by reason */
	__u64 egress_packets;           /* allowed at cgroup_skb/egress */
	__u64 egress_bytes;
	__u64 denied_packets;           /* dropped at cgroup_skb/egress */
	__u64 denied_bytes;
	__u64 violations;               /* denied or audited, not counting quarantined */
	__u64 events_lost;              /* ring buffer full or missing */
};

enum al_event_kind {
	AL_EVENT_DECISION = 1,
};

/* Record in a sandbox's ring buffer (map "al_rings", slot -> ring). */
struct al_event {
	__u64 ts_ns;        /* bpf_ktime_get_ns(), CLOCK_MONOTONIC */
	__u64 cgroup_id;    /* the sandbox's cgroup, not necessarily the task's */
	__u32 pid;          /* thread id; in softirq context, whoever ran */
	__u32 tgid;
	__u32 slot;
	__u32 policy_id;
	__u8 comm[AL_COMM_LEN];
	__u8 kind;          /* al_event_kind */
	__u8 hook;          /* al_hook */
	__u8 verdict;       /* al_verdict */
	__u8 reason;        /* al_reason */
	__u8 family;        /* al_family, 0 when not known (sock_create) */
	__u8 protocol;      /* IPPROTO_* */
	__u16 port;         /* destination port, host order */
	__u16 rule;         /* AL_RULE_NONE or the policy rule index */
	__u8 latched;       /* this decision set the quarantine latch */
	__u8 pad[5];
	__u8 addr[16];      /* destination, IPv4 in the first four bytes */
};

#ifdef __cplusplus
#define AL_STATIC_ASSERT static_assert
#else
#define AL_STATIC_ASSERT _Static_assert
#endif

AL_STATIC_ASSERT(sizeof(struct al_config) == 16, "al_config layout");
AL_STATIC_ASSERT(sizeof(struct al_sandbox) == 16, "al_sandbox layout");
AL_STATIC_ASSERT(sizeof(struct al_lpm_key) == 28, "al_lpm_key layout");
AL_STATIC_ASSERT(sizeof(struct al_range) == 8, "al_range layout");
AL_STATIC_ASSERT(sizeof(struct al_rule_set) == 8 + 8 * AL_MAX_RANGES, "al_rule_set layout");
AL_STATIC_ASSERT(sizeof(struct al_latch) == 16, "al_latch layout");
AL_STATIC_ASSERT(sizeof(struct al_counters) ==
			 8 * ((int)AL_HOOK_MAX * (int)AL_VERDICT_MAX + (int)AL_REASON_MAX + 6),
		 "al_counters layout");
AL_STATIC_ASSERT(sizeof(struct al_event) == 80, "al_event layout");

#endif /* AIRLOCK_ABI_H */
