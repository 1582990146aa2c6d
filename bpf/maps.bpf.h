/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Every map airlock's programs share. Layouts live in airlock/abi.h. */
#ifndef AIRLOCK_MAPS_BPF_H
#define AIRLOCK_MAPS_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <airlock/abi.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct al_config);
} al_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u64); /* cgroup id */
	__type(value, struct al_sandbox);
} al_sandboxes SEC(".maps");

/* Never an LRU: deny state must not be evicted. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, AL_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct al_lpm_key);
	__type(value, struct al_rule_set);
} al_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__type(value, struct al_latch);
} al_latch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AL_MAX_SANDBOXES + 1);
	__type(key, __u32);
	__type(value, struct al_counters);
} al_counters SEC(".maps");

/* One ring buffer per sandbox, created by the agent when it registers the
 * slot: a sandbox that floods its own ring cannot push another's violations
 * out. Slot AL_SLOT_UNKNOWN is for programs that found no sandbox. */
struct al_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, AL_RING_BYTES);
} al_ring_template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, AL_MAX_SANDBOXES + 1);
	__type(key, __u32);
	__array(values, struct al_ring);
} al_rings SEC(".maps");

/* Domain rules, keyed by reversed name (al_name_key). Never an LRU. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, AL_MAX_NAMES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct al_name_key);
	__type(value, struct al_rule_set);
} al_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * AL_MAX_SANDBOXES);
	__type(key, __u32); /* policy id */
	__type(value, struct al_dns_policy);
} al_dns SEC(".maps");

/* Unix socket rules: exact paths, then the longest prefix. Never an LRU. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AL_MAX_UNIX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct al_unix_exact_key);
	__type(value, struct al_unix_rule);
} al_unix_exact SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, AL_MAX_UNIX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct al_unix_prefix_key);
	__type(value, struct al_unix_rule);
} al_unix_prefix SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__type(value, struct al_dns_state);
} al_dns_state SEC(".maps");

/* Per-sandbox tables, created by the agent with the slot: one sandbox's
 * queries and answers can neither fill nor evict another's. Pending
 * queries may be evicted (an answer then teaches nothing); learned
 * addresses never are: a full table refuses new ones. */
struct al_pending_table {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AL_PENDING_PER_SANDBOX);
	/* Sizes, not types: inner-map templates carry no BTF of their own. */
	__uint(key_size, sizeof(struct al_pending_key));
	__uint(value_size, sizeof(struct al_pending));
} al_pending_template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__array(values, struct al_pending_table);
} al_pending SEC(".maps");

struct al_learned_table {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AL_LEARNED_PER_SANDBOX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(struct al_learned_key));
	__uint(value_size, sizeof(struct al_learned));
} al_learned_template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__array(values, struct al_learned_table);
} al_learned SEC(".maps");

/* Working memory too large for the stack, one set per CPU. A program takes
 * the first free entry of its map (busy 0 -> 1) and frees it on the way out:
 * a program that interrupts another on the same CPU (softirq egress during
 * a task's) finds the next one. None free means fail closed. */
#define AL_SCRATCH_ENTRIES 4
struct al_scratch {
	__u32 busy;
	__u32 len; /* bytes of msg[] loaded */
	__u16 qid; /* the question, for the event */
	__u16 qtype;
	__u32 name_bytes; /* name bytes + 1, 0 if the name was not parsed */
	/* Loop state of the parsers' bpf_loop callbacks. It lives here, not
	 * on the stack, so that the verifier sees unknown values and one
	 * look at a callback covers every iteration. */
	__u32 w_p, w_n, w_max_label, w_err, w_done;                                /* walk of a name's labels */
	__u32 r_off, r_n, r_start, r_lab, r_next;                                  /* reversed copy of a name */
	__u32 rr_p, rr_count, rr_err, rr_left, rr_in_name;                         /* walk of answer records */
	__u32 rr_owner, rr_cur, rr_type, rr_ttl, rr_rdoff, rr_rdlen, rr_off_chain; /* ... and of its CNAME chain */
	__u32 c_a, c_b, c_sa, c_sb, c_rem, c_hops, c_n; /* comparison of two names of an answer */
	__u32 e_p, e_end, e_zero, e_seen, e_err;        /* walk of a query's EDNS options */
	__u8 msg[AL_DNS_MSG_MAX];
	struct al_pending pv; /* the question */
	struct al_learned lv; /* what an answer teaches */
	struct al_learned_key answers[AL_DNS_MAX_ANSWERS];
	__u32 ttls[AL_DNS_MAX_ANSWERS];
	__u8 off_chain[AL_DNS_MAX_ANSWERS]; /* answers[i]'s owner is not on the chain: not learned */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AL_SCRATCH_ENTRIES);
	__type(key, __u32);
	__type(value, struct al_scratch);
} al_scratch SEC(".maps");

/* A name key for judging a learned address (sock_addr hooks and egress). */
struct al_keybuf {
	__u32 busy;
	__u32 pad;
	struct al_name_key key;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AL_SCRATCH_ENTRIES);
	__type(key, __u32);
	__type(value, struct al_keybuf);
} al_keybuf SEC(".maps");

struct al_unix_bound_table {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AL_UNIX_BOUND_PER_SANDBOX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(struct al_unix_bound_key));
	__uint(value_size, sizeof(__u32));
} al_unix_bound_template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__array(values, struct al_unix_bound_table);
} al_unix_bound SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AL_UNIX_BINDING_MAX);
	__type(key, __u64);
	__type(value, struct al_unix_binding);
} al_unix_binding SEC(".maps");

/* Working memory of the unix hooks (keys and the path walk), taken like
 * al_keybuf. In a map value, not on the stack, so that the verifier sees
 * the walk's state as unknown and checks its callback once. */
struct al_unix_buf {
	__u32 busy;
	__u32 plen; /* path bytes the caller gave */
	__u32 named;
	__u32 ended; /* the path ended (len is set) */
	__u32 len;
	__u32 n, c0, c1; /* the current component: length, first two bytes */
	__u32 bad;       /* an empty, "." or ".." component */
	__u32 pad;
	struct al_unix_exact_key ek;
	struct al_unix_prefix_key pk;
	struct al_unix_bound_key bk;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AL_SCRATCH_ENTRIES);
	__type(key, __u32);
	__type(value, struct al_unix_buf);
} al_unix_buf SEC(".maps");

/* Redirects (airlock/abi.h). Origins are an LRU: an entry outlives its
 * connection only if the close was missed, and an evicted entry makes the
 * proxy refuse that connection, never send it elsewhere. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__type(value, struct al_proxy);
} al_proxy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__type(value, __u32);
} al_proxy_port SEC(".maps");

/* One origin table per sandbox with a proxy: a sandbox that files many
 * origins evicts only its own. */
struct al_origin_table {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AL_ORIGINS_PER_SANDBOX);
	__uint(key_size, sizeof(struct al_origin_key));
	__uint(value_size, sizeof(struct al_origin));
} al_origin_template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__array(values, struct al_origin_table);
} al_origin SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct al_sk_origin);
} al_sk_origin SEC(".maps");

/* Redirect rules to a target of the operator's, and the origins of the
 * connections that reached one: a table per sandbox, as al_origin. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AL_TARGETS_MAX);
	__type(key, struct al_target_key);
	__type(value, struct al_target);
} al_target SEC(".maps");

struct al_target_origin_table {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AL_ORIGINS_PER_SANDBOX);
	__uint(key_size, sizeof(struct al_target_origin_key));
	__uint(value_size, sizeof(struct al_target_origin));
} al_target_origin_template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, AL_MAX_SANDBOXES);
	__type(key, __u32);
	__array(values, struct al_target_origin_table);
} al_target_origin SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AL_BUDGETS_MAX);
	__type(key, struct al_budget_key);
	__type(value, struct al_budget);
} al_budget SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct al_sk_budget);
} al_sk_budget SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct al_sk_held);
} al_sk_held SEC(".maps");

/* Updating an array-of-maps slot from user space waits for an RCU grace
 * period, i.e. for every program that might still hold an old policy id:
 * the agent does it between switching a sandbox's policy and deleting the
 * old entries. Programs never read it. */
struct al_rcu_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} al_rcu_inner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct al_rcu_inner);
} al_rcu_sync SEC(".maps") = {
	.values = { [0] = &al_rcu_inner },
};

#endif
