/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Counters and events. Counters are exact (per-CPU, in the kernel); the ring
 * buffer is telemetry, and what it could not take is itself counted. */
#ifndef AIRLOCK_EVENTS_BPF_H
#define AIRLOCK_EVENTS_BPF_H

#include "maps.bpf.h"

/* What a verdict was about: the destination as the kernel will use it. */
struct al_dest {
	__u8 family;   /* al_family, 0 when there is none (sock_create) */
	__u8 protocol; /* IPPROTO_* */
	__u16 port;    /* host order */
	__u8 addr[16];
	/* cgroup_skb only: */
	__u16 sport; /* host order */
	__u8 saddr[16];
	__u32 l4off;   /* where the TCP/UDP header starts */
	__u8 err_site; /* al_err_site, when parsing failed with AL_REASON_HELPER */
};

/* Two 16-byte addresses are the same. */
static __always_inline int al_addr_eq(const __u8 *a, const __u8 *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

struct al_decision {
	__u8 verdict;  /* al_verdict */
	__u8 reason;   /* al_reason */
	__u16 rule;    /* AL_RULE_NONE or a policy rule index */
	__u8 latched;  /* this decision set the latch */
	__u8 quiet;    /* count it, report nothing */
	__u8 dns;      /* a DNS query: report it with its question (the egress scratch) */
	__u8 signal;   /* al_event_signal: sent to the task in the call */
	__u8 err_site; /* al_err_site, when the reason is AL_REASON_HELPER */
};

/* Set by the agent before load: cgroup_skb programs may call
 * bpf_get_current_pid_tgid and bpf_get_current_comm on this kernel. */
const volatile __u8 al_skb_task_info = 0;
/* Set by the agent before load from probes: bpf_send_signal is callable
 * from cgroup sock_addr programs (Linux 6.16+), from cgroup/sock_create. The
 * verifier never walks the call where the knob is 0. */
const volatile __u8 al_signal_sock_addr = 0;
const volatile __u8 al_signal_sock_create = 0;

#define AL_SIGKILL 9
#define AL_SIGSTOP 19

/* The event rate limit of each slot (struct al_flood): written by the
 * programs only, but pinned, so that the agent zeroes a slot's entry with its
 * counters when a new sandbox takes the slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AL_MAX_SANDBOXES + 1);
	__type(key, __u32);
	__type(value, struct al_flood);
} al_flood SEC(".maps");

static __always_inline struct al_counters *al_counters_of(__u32 slot)
{
	return bpf_map_lookup_elem(&al_counters, &slot);
}

/* A helper that failed is counted where it failed, whatever became of the
 * packet. */
static __always_inline void al_count_helper(struct al_counters *c, const struct al_decision *d)
{
	__u32 site = d->err_site;

	if (!c || d->reason != AL_REASON_HELPER)
		return;
	asm volatile("" : "+r"(site));
	if (site < AL_ERR_SITE_MAX)
		c->helper_errors[site]++;
}

/* A denial that fails the call and is counted, but is no violation: a
 * refuse rule, UDP to a destination redirected over TCP only (QUIC falls
 * back to TCP), a redirect while the proxy is down or to a target the
 * socket's family cannot reach (not the sandbox's doing). */
static __always_inline int al_refusal(__u8 reason)
{
	return reason == AL_REASON_REFUSED || reason == AL_REASON_REDIRECT_UDP || reason == AL_REASON_NO_PROXY ||
	       reason == AL_REASON_REDIRECT_FAMILY;
}

static __always_inline void al_count(struct al_counters *c, __u8 hook, const struct al_decision *d)
{
	if (!c)
		return;
	al_count_helper(c, d);
	__u32 h = hook, v = d->verdict;

	/* Keep each bound check and its index in one register. */
	asm volatile("" : "+r"(h), "+r"(v));
	if (h < AL_HOOK_MAX && v < AL_VERDICT_MAX)
		c->decisions[h][v]++;
	if (d->verdict != AL_VERDICT_ALLOW) {
		/* What the latch stops afterwards is the violation's consequence,
		 * not another violation. */
		if (d->reason != AL_REASON_QUARANTINED && !al_refusal(d->reason))
			c->violations++;
		__u32 r = d->reason;

		asm volatile("" : "+r"(r));
		if (r < AL_REASON_MAX)
			c->reasons[r]++;
	}
}

/* Whether this event may go to the ring: a generic cell rate per slot, hook
 * and reason (AL_EVENTS_PER_SEC after a burst of AL_EVENTS_BURST). What it
 * holds back is counted exactly, per CPU, so that the agent can write one
 * line with the count instead of one per event: a sandbox cannot make the
 * agent's disk use and CPU grow with its own call rate. The decision that
 * set the latch always goes through. */
static __always_inline int al_event_admit(struct al_counters *c, __u8 hook, __u32 slot, const struct al_decision *d)
{
	const __u64 interval = 1000000000ull / AL_EVENTS_PER_SEC;
	const __u64 tolerance = (AL_EVENTS_BURST - 1) * interval;
	__u32 h = hook, r = d->reason;

	if (d->latched)
		return 1;
	asm volatile("" : "+r"(h), "+r"(r));
	if (h >= AL_HOOK_MAX || r >= AL_REASON_MAX)
		return 1;
	struct al_flood *f = bpf_map_lookup_elem(&al_flood, &slot);
	if (f) {
		__u64 now = bpf_ktime_get_ns();
		__u64 tat = f->tat_ns[h][r];
		__u64 base = tat > now ? tat : now;

		/* A lost race is a flood on two CPUs at once: hold it back too. */
		if (base - now <= tolerance &&
		    __sync_val_compare_and_swap(&f->tat_ns[h][r], tat, base + interval) == tat)
			return 1;
	}
	if (c)
		c->suppressed[h][r]++;
	return 0;
}

/* The decision record every event starts with. */
static __always_inline void al_fill_event(struct al_event *e, __u8 kind, __u8 hook, __u64 cgroup_id, __u32 slot,
					  __u32 policy_id, const struct al_dest *dst, const struct al_decision *d)
{
	e->ts_ns = bpf_ktime_get_ns();
	e->cgroup_id = cgroup_id;
	e->slot = slot;
	e->policy_id = policy_id;
	e->pid = 0;
	e->tgid = 0;
	__builtin_memset(e->comm, 0, sizeof(e->comm));
	/* cgroup_skb may not call task helpers before Linux 6.6 or so: the
	 * agent sets the knob from a probe, and the verifier never walks the
	 * call where it is 0. Ingress runs in softirq: whoever ran is not the
	 * sandbox's task. */
	if ((hook != AL_HOOK_EGRESS && hook != AL_HOOK_INGRESS) || (hook == AL_HOOK_EGRESS && al_skb_task_info)) {
		__u64 pid_tgid = bpf_get_current_pid_tgid();

		e->pid = (__u32)pid_tgid;
		e->tgid = pid_tgid >> 32;
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	}
	e->kind = kind;
	e->hook = hook;
	e->verdict = d->verdict;
	e->reason = d->reason;
	e->family = dst->family;
	e->protocol = dst->protocol;
	e->port = dst->port;
	e->rule = d->rule;
	e->latched = d->latched;
	e->signal = d->signal;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	__builtin_memcpy(e->addr, dst->addr, sizeof(e->addr));
}

static __always_inline void al_emit(struct al_counters *c, __u8 hook, __u64 cgroup_id, __u32 slot, __u32 policy_id,
				    const struct al_dest *dst, const struct al_decision *d)
{
	if (!al_event_admit(c, hook, slot, d))
		return;
	void *ring = bpf_map_lookup_elem(&al_rings, &slot);
	struct al_event *e = ring ? bpf_ringbuf_reserve(ring, sizeof(*e), 0) : 0;

	/* The reservation is checked where it is made: older verifiers lose
	 * track of a reference returned through a helper function. */
	if (!e) {
		if (c)
			c->events_lost++;
		return;
	}
	al_fill_event(e, AL_EVENT_DECISION, hook, cgroup_id, slot, policy_id, dst, d);
	bpf_ringbuf_submit(e, 0);
}

/* A DNS decision or a learned address, with the question. name_bytes is
 * the name's length + 1 (0: no name was parsed). */
static __always_inline void al_emit_dns(struct al_counters *c, __u8 hook, __u64 cgroup_id, __u32 slot, __u32 policy_id,
					const struct al_dest *dst, const struct al_decision *d,
					const struct al_name_key *name, __u16 qtype, __u16 qid, __u32 name_bytes,
					__u8 learned, __u32 ttl)
{
	if (!al_event_admit(c, hook, slot, d))
		return;
	void *ring = bpf_map_lookup_elem(&al_rings, &slot);
	struct al_dns_event *e = ring ? bpf_ringbuf_reserve(ring, sizeof(*e), 0) : 0;

	if (!e) {
		if (c)
			c->events_lost++;
		return;
	}
	al_fill_event(&e->base, hook == AL_HOOK_INGRESS ? AL_EVENT_DNS_ANSWER : AL_EVENT_DNS_QUERY, hook, cgroup_id,
		      slot, policy_id, dst, d);
	e->qtype = qtype;
	e->qid = qid;
	e->name_len = name_bytes;
	e->learned = learned;
	e->pad = 0;
	e->ttl = ttl;
	e->pad2 = 0;
	if (name_bytes)
		__builtin_memcpy(e->name, name->name, AL_DNS_NAME_BYTES);
	else
		__builtin_memset(e->name, 0, AL_DNS_NAME_BYTES);
	e->name[AL_DNS_NAME_BYTES] = 0;
	e->name[AL_DNS_NAME_BYTES + 1] = 0;
	bpf_ringbuf_submit(e, 0);
}

#endif
