/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The verdict library every hook calls: find the sandbox, look the
 * destination up in its compiled rules, apply the latch, count, report. */
#ifndef AIRLOCK_VERDICT_BPF_H
#define AIRLOCK_VERDICT_BPF_H

#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_endian.h>
#include "names.bpf.h"
#include "redirect.bpf.h"
#include "budget.bpf.h"

/* What each kind of program returns, named once. cgroup_skb: the packet
 * passes or is dropped. cgroup/sock_create and the sock_addr hooks: the
 * call goes on, or fails with EPERM (getpeername and recvmsg may only go
 * on; they rewrite the address the caller sees). */
#define AL_PASS 1
#define AL_DROP 0
/* sockops: the connection goes on as the kernel runs it (the program only
 * files what it learns). */
#define AL_SOCKOPS_DONE 1
/* cgroup/getsockopt: the caller gets optval, optlen and retval as they are
 * now, the kernel's or what the program wrote (0 would fail the call with
 * EPERM). */
#define AL_SOCKOPT_KEEP 1
/* Tracepoints: the value only filters perf's own output, unused here. */
#define AL_TP_DONE 0
/* A bpf_loop callback: on to the next iteration, or stop the loop. */
#define AL_LOOP_NEXT 0
#define AL_LOOP_STOP 1

static __always_inline __u32 al_level_mask(void)
{
	__u32 zero = 0;
	struct al_config *cfg = bpf_map_lookup_elem(&al_config, &zero);

	return cfg ? cfg->level_mask : 0;
}

/* The deepest registered ancestor wins, so a sandbox nested in another is
 * judged by its own policy. Only levels where some sandbox sits are tried. */
static __always_inline struct al_sandbox *al_sandbox_of_task(__u64 *cgid)
{
	__u32 mask = al_level_mask();

	for (int lvl = AL_MAX_LEVELS - 1; lvl > 0; lvl--) {
		if (!(mask & (1u << lvl)))
			continue;
		__u64 id = bpf_get_current_ancestor_cgroup_id(lvl);
		if (!id)
			continue;
		struct al_sandbox *sb = bpf_map_lookup_elem(&al_sandboxes, &id);
		if (sb) {
			*cgid = id;
			return sb;
		}
	}
	*cgid = bpf_get_current_cgroup_id();
	return 0;
}

/* Keyed on the socket's cgroup, which is what attached the program. */
static __always_inline struct al_sandbox *al_sandbox_of_skb(struct __sk_buff *skb, __u64 *cgid)
{
	__u32 mask = al_level_mask();

	for (int lvl = AL_MAX_LEVELS - 1; lvl > 0; lvl--) {
		if (!(mask & (1u << lvl)))
			continue;
		__u64 id = bpf_skb_ancestor_cgroup_id(skb, lvl);
		if (!id)
			continue;
		struct al_sandbox *sb = bpf_map_lookup_elem(&al_sandboxes, &id);
		if (sb) {
			*cgid = id;
			return sb;
		}
	}
	*cgid = bpf_skb_cgroup_id(skb);
	return 0;
}

static __always_inline __u8 al_proto_bit(__u8 protocol)
{
	switch (protocol) {
	case IPPROTO_TCP:
		return AL_PROTO_TCP;
	case IPPROTO_UDP:
		return AL_PROTO_UDP;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return AL_PROTO_ICMP;
	}
	return 0;
}

/* The first range of rs that matches the destination decides. Returns 0 if
 * none does (out untouched). */
static __always_inline int al_ranges_decide(const struct al_rule_set *rs, __u8 bit, __u16 port, __u8 allow_reason,
					    struct al_decision *out)
{
	for (int i = 0; i < AL_MAX_RANGES; i++) {
		if (i >= rs->count)
			break;
		const struct al_range *r = &rs->ranges[i];
		if (!(r->proto_mask & bit) || port < r->port_lo || port > r->port_hi)
			continue;
		out->rule = r->rule;
		if (r->action == AL_ACTION_ALLOW) {
			out->verdict = AL_VERDICT_ALLOW;
			out->reason = allow_reason;
		} else if (r->action == AL_ACTION_REDIRECT) {
			/* Allowed to the proxy, never to the destination itself:
			 * the hook that sees this rewrites, or denies. */
			out->verdict = AL_VERDICT_ALLOW;
			out->reason = AL_REASON_REDIRECT;
		} else {
			out->verdict = AL_VERDICT_DENY;
			out->reason = AL_REASON_RULE_DENY;
		}
		return 1;
	}
	return 0;
}

/* One longest-prefix lookup, then the first range that matches: the agent
 * compiled less specific rules into each entry in precedence order. */
static __always_inline void al_rules_decide(__u32 policy_id, const struct al_dest *dst, struct al_decision *out)
{
	struct al_lpm_key key = {};

	out->verdict = AL_VERDICT_DENY;
	out->reason = AL_REASON_NO_RULE;
	out->rule = AL_RULE_NONE;
	out->latched = 0;
	out->quiet = 0;
	out->dns = 0;
	out->err_site = 0;

	__u8 bit = al_proto_bit(dst->protocol);
	if (!bit) {
		out->reason = AL_REASON_PROTOCOL;
		return;
	}
	key.prefixlen = AL_LPM_FIXED_BITS + (dst->family == AL_FAMILY_IPV4 ? 32 : 128);
	key.policy_id = policy_id;
	key.family = dst->family;
	__builtin_memcpy(key.addr, dst->addr, sizeof(key.addr));

	struct al_rule_set *rs = bpf_map_lookup_elem(&al_rules, &key);
	if (rs)
		al_ranges_decide(rs, bit, dst->port, AL_REASON_RULE_ALLOW, out);
}

static __always_inline int al_is_resolver(const struct al_dns_policy *dp, __u8 family, const __u8 *addr)
{
	for (int i = 0; i < AL_DNS_MAX_RESOLVERS; i++) {
		if (i >= dp->nresolvers)
			break;
		if (dp->resolvers[i].family == family && al_addr_eq(dp->resolvers[i].addr, addr))
			return 1;
	}
	return 0;
}

/* Port 53 belongs to the DNS policy, whatever the address rules say: only
 * the listed resolvers, TCP only with dns.tcp, what the query asks judged
 * at egress; or, in a world that synthesizes DNS, the sandbox's proxy. */
static __always_inline void al_dns_dest(__u32 policy_id, const struct al_dest *dst, struct al_decision *out)
{
	struct al_dns_policy *dp = bpf_map_lookup_elem(&al_dns, &policy_id);

	out->rule = AL_RULE_NONE;
	out->verdict = AL_VERDICT_DENY;
	if (dp && (dp->flags & AL_DNS_WORLD)) {
		/* The world answers every query: to the proxy, wherever it was
		 * sent (the hook that sees this rewrites, or denies). */
		out->verdict = AL_VERDICT_ALLOW;
		out->reason = AL_REASON_REDIRECT;
	} else if (!dp || !al_is_resolver(dp, dst->family, dst->addr))
		out->reason = AL_REASON_DNS_RESOLVER;
	else if (dst->protocol == IPPROTO_TCP && !(dp->flags & AL_DNS_TCP))
		out->reason = AL_REASON_DNS_TCP;
	else {
		out->verdict = AL_VERDICT_ALLOW;
		out->reason = AL_REASON_DNS_ALLOW;
	}
}

static __always_inline struct al_keybuf *al_keybuf_get(void)
{
#pragma unroll
	for (int i = 0; i < AL_SCRATCH_ENTRIES; i++) {
		__u32 k = i;
		struct al_keybuf *b = bpf_map_lookup_elem(&al_keybuf, &k);

		if (b && __sync_val_compare_and_swap(&b->busy, 0, 1) == 0)
			return b;
	}
	return 0;
}

/* An address learned from an answer is judged by the rules of the name it
 * answered, as the policy says now (a reload re-judges it). New flows need
 * an unexpired entry; packets at egress belong to flows already let
 * through, so an entry the agent has not yet removed keeps them going. */
static __always_inline void al_learned_decide(struct al_sandbox *sb, const struct al_dest *dst, __u8 hook,
					      struct al_decision *out)
{
	__u32 slot = sb->slot;
	void *table = bpf_map_lookup_elem(&al_learned, &slot);
	struct al_learned_key lk = { .family = dst->family };

	if (!table)
		return;
	__builtin_memcpy(lk.addr, dst->addr, sizeof(lk.addr));
	struct al_learned *l = bpf_map_lookup_elem(table, &lk);
	if (!l)
		return;
	if (hook != AL_HOOK_EGRESS && l->expires_ns <= bpf_ktime_get_ns())
		return;
	struct al_keybuf *b = al_keybuf_get();
	if (!b)
		return; /* no working memory: the learned address opens nothing */
	__builtin_memcpy(&b->key, &l->name, sizeof(b->key));
	b->key.policy_id = (__u16)sb->policy_id;
	__u32 n = (b->key.prefixlen - AL_NAME_KEY_FIXED_BITS) / 8;
	if (n > 0 && n <= AL_DNS_NAME_BYTES) {
		struct al_rule_set *rs = al_name_match(&b->key, n - 1);

		if (rs)
			al_ranges_decide(rs, al_proto_bit(dst->protocol), dst->port, AL_REASON_LEARNED, out);
	}
	__sync_val_compare_and_swap(&b->busy, 1, 0);
}

static __always_inline int al_is_dns(const struct al_dest *dst)
{
	return dst->port == AL_DNS_PORT && (dst->protocol == IPPROTO_UDP || dst->protocol == IPPROTO_TCP);
}

/* The verdict on a destination: port 53 by the DNS policy; otherwise an
 * explicit address deny wins, then what a learned name allows, then the
 * address rules' allow, else default deny. */
static __always_inline void al_decide_dest(struct al_sandbox *sb, const struct al_dest *dst, __u8 hook,
					   struct al_decision *out)
{
	if (al_is_dns(dst)) {
		/* No address lookup: the dns block alone decides port 53. */
		__builtin_memset(out, 0, sizeof(*out));
		al_dns_dest(sb->policy_id, dst, out);
		return;
	}
	al_rules_decide(sb->policy_id, dst, out);
	if (out->reason == AL_REASON_PROTOCOL || out->reason == AL_REASON_RULE_DENY)
		return;
	/* Overwrites out only where a range of the name's rules matches. */
	al_learned_decide(sb, dst, hook, out);
}

static __always_inline int al_latched(__u32 slot)
{
	struct al_latch *l = bpf_map_lookup_elem(&al_latch, &slot);

	/* A slot outside the array cannot be checked: treat it as latched. */
	return !l || l->violated_ns != 0;
}

/* The task that set the latch in a syscall stops (freeze) or dies (kill)
 * in that very call, before user space hears of it: the rest of its process
 * cannot run on while the agent freezes the cgroup. SIGSTOP takes effect
 * when the call returns to user space, SIGKILL there too; the call itself
 * fails with EPERM either way. Only where the task is the sandbox's own:
 * never from cgroup_skb, whose current task may be anyone (softirq). */
static __always_inline void al_signal_violator(__u8 hook, struct al_sandbox *sb, struct al_decision *d)
{
	int sig = sb->on_violation == AL_ON_VIOLATION_KILL ? AL_SIGKILL : AL_SIGSTOP;

	if (hook == AL_HOOK_EGRESS || hook == AL_HOOK_INGRESS)
		return;
	if (hook == AL_HOOK_SOCK_CREATE ? !al_signal_sock_create : !al_signal_sock_addr)
		return;
	if (bpf_send_signal(sig) == 0)
		d->signal = sig == AL_SIGKILL ? AL_SIGNAL_KILLED : AL_SIGNAL_STOPPED;
	else
		d->signal = AL_SIGNAL_FAILED;
}

/* Everything after the rule lookup, shared by every hook: audit mode, the
 * latch, counters, the event. C is the sandbox's counters, looked up once by
 * the hook. Returns AL_PASS or AL_DROP. */
static __always_inline int al_finish(__u8 hook, struct al_sandbox *sb, struct al_counters *c, __u64 cgid,
				     const struct al_dest *dst, struct al_decision *d, struct al_scratch *s)
{
	__u32 slot = sb->slot;

	d->signal = AL_SIGNAL_NONE;
	if (d->verdict == AL_VERDICT_DENY && (sb->flags & AL_SB_AUDIT))
		d->verdict = AL_VERDICT_AUDIT;

	if (d->verdict == AL_VERDICT_DENY && sb->on_violation != AL_ON_VIOLATION_DENY && !al_refusal(d->reason)) {
		struct al_latch *l = bpf_map_lookup_elem(&al_latch, &slot);
		if (l) {
			/* The first violation's time is what freeze latency is measured from. */
			if (__sync_val_compare_and_swap(&l->violated_ns, 0, bpf_ktime_get_ns()) == 0) {
				l->cgroup_id = cgid;
				d->latched = 1;
				al_signal_violator(hook, sb, d);
			}
		}
	}
	al_count(c, hook, d);
	if (d->quiet)
		return d->verdict == AL_VERDICT_DENY ? AL_DROP : AL_PASS;
	if (d->verdict != AL_VERDICT_ALLOW || ((sb->flags & AL_SB_LOG_ALLOWED) && (hook != AL_HOOK_EGRESS || d->dns))) {
		if (d->dns && s)
			al_emit_dns(c, hook, cgid, slot, sb->policy_id, dst, d, &s->pv.name, s->qtype, s->qid,
				    s->name_bytes, 0, 0);
		else
			al_emit(c, hook, cgid, slot, sb->policy_id, dst, d);
	}
	return d->verdict == AL_VERDICT_DENY ? AL_DROP : AL_PASS;
}

/* A quarantined sandbox: counted, not reported (it would flood the ring
 * buffer exactly when the violation that set the latch must get through). */
static __always_inline int al_quarantined(__u8 hook, struct al_counters *c)
{
	struct al_decision d = {
		.verdict = AL_VERDICT_DENY,
		.reason = AL_REASON_QUARANTINED,
		.rule = AL_RULE_NONE,
	};

	al_count(c, hook, &d);
	return AL_DROP;
}

/* A program ran for a cgroup with no sandbox entry: fail closed. */
static __always_inline int al_no_sandbox(__u8 hook, __u64 cgid, const struct al_dest *dst)
{
	struct al_counters *c = al_counters_of(AL_SLOT_UNKNOWN);
	struct al_decision d = {
		.verdict = AL_VERDICT_DENY,
		.reason = AL_REASON_NO_SANDBOX,
		.rule = AL_RULE_NONE,
	};

	al_count(c, hook, &d);
	al_emit(c, hook, cgid, AL_SLOT_UNKNOWN, 0, dst, &d);
	return AL_DROP;
}

/* The full decision for a destination named by a syscall (sock_addr hooks):
 * the rules, then what a redirect makes of it (redirect.bpf.h; ctx 0: none). */
static __always_inline int al_decide_task(__u8 hook, const struct al_dest *dst, struct bpf_sock_addr *ctx, int v6,
					  int connect)
{
	__u64 cgid;
	struct al_sandbox *sb = al_sandbox_of_task(&cgid);
	struct al_decision d;

	if (!sb)
		return al_no_sandbox(hook, cgid, dst);

	struct al_counters *c = al_counters_of(sb->slot);

	if (al_latched(sb->slot))
		return al_quarantined(hook, c);
	al_decide_dest(sb, dst, hook, &d);
	al_budget_connect(sb, &d);
	if (ctx) {
		/* UDP that no rule takes, to where TCP is redirected (QUIC, say):
		 * refused, not a violation, so that the client falls back to TCP. */
		if (d.verdict == AL_VERDICT_DENY && d.reason == AL_REASON_NO_RULE && dst->protocol == IPPROTO_UDP) {
			struct al_dest t = *dst;
			struct al_decision td;

			t.protocol = IPPROTO_TCP;
			al_decide_dest(sb, &t, hook, &td);
			if (td.verdict == AL_VERDICT_ALLOW && td.reason == AL_REASON_REDIRECT) {
				d.reason = AL_REASON_REDIRECT_UDP;
				d.rule = td.rule;
			}
		}
		al_redirect_decide(ctx, sb, dst, &d, v6, connect);
	}
	return al_finish(hook, sb, c, cgid, dst, &d, 0);
}

static __always_inline void al_dest_ip4(struct al_dest *dst, __u32 ip4_be)
{
	dst->family = AL_FAMILY_IPV4;
	__builtin_memset(dst->addr, 0, sizeof(dst->addr));
	__builtin_memcpy(dst->addr, &ip4_be, 4);
}

/* ::ffff:a.b.c.d is routed as IPv4, so it is judged as IPv4. */
static __always_inline void al_dest_ip6(struct al_dest *dst, const __u32 ip6[4])
{
	if (ip6[0] == 0 && ip6[1] == 0 && ip6[2] == bpf_htonl(0x0000ffff)) {
		al_dest_ip4(dst, ip6[3]);
		return;
	}
	dst->family = AL_FAMILY_IPV6;
	__builtin_memcpy(dst->addr, ip6, 16);
}

#endif
