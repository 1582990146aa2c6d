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
