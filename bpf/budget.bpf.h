/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Byte budgets of allow rules: what a rule's destinations receive from a
 * sandbox, counted at egress (TCP payload once, by sequence number, so a
 * retransmission is not counted again; UDP payload), in al_budget per
 * (slot, rule). The packet that crosses a budget never leaves and is a
 * violation (reason budget); after it, the rule's packets are dropped and
 * its connects and datagrams refused, with the same reason. */
#ifndef AIRLOCK_BUDGET_BPF_H
#define AIRLOCK_BUDGET_BPF_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "events.bpf.h"

/* The budget of the rule that allowed this, if it has one. Sandboxes
 * without budgets (most) never look: connects and packets are hot. */
static __always_inline struct al_budget *al_budget_of(const struct al_sandbox *sb, const struct al_decision *d)
{
	struct al_budget_key k = { .slot = sb->slot, .rule = d->rule };

	if (!(sb->flags & AL_SB_BUDGETS) || d->verdict != AL_VERDICT_ALLOW || d->rule == AL_RULE_NONE ||
	    (d->reason != AL_REASON_RULE_ALLOW && d->reason != AL_REASON_LEARNED))
		return 0;
	return bpf_map_lookup_elem(&al_budget, &k);
}

static __always_inline int al_budget_spent(const struct al_budget *b)
{
	return b->used > b->limit;
}

/* connect, sendmsg: a spent budget's destinations are refused. */
static __always_inline void al_budget_connect(const struct al_sandbox *sb, struct al_decision *d)
{
	struct al_budget *b = al_budget_of(sb, d);

	if (b && al_budget_spent(b)) {
		d->verdict = AL_VERDICT_DENY;
		d->reason = AL_REASON_BUDGET;
	}
}

/* The payload bytes of this TCP packet that no earlier packet of its socket
 * carried: the socket keeps the sequence number after the last one counted.
 * Without a socket to keep it on, every byte counts. */
static __always_inline __u32 al_tcp_new_bytes(struct __sk_buff *skb, const struct al_dest *dst)
{
	__u8 h[16];
	__u32 seq, len, doff, end;

	if (bpf_skb_load_bytes(skb, dst->l4off, h, sizeof(h)))
		return 0;
	doff = (__u32)(h[12] >> 4) * 4;
	if (skb->len <= dst->l4off + doff)
		return 0;
	len = skb->len - dst->l4off - doff;
	seq = ((__u32)h[4] << 24) | ((__u32)h[5] << 16) | ((__u32)h[6] << 8) | h[7];
	end = seq + len;
	struct bpf_sock *sk = skb->sk;
	if (sk)
		sk = bpf_sk_fullsock(sk);
	if (!sk)
		return len;
	struct al_sk_budget *sb = bpf_sk_storage_get(&al_sk_budget, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!sb)
		return len;
	if (!sb->started) {
		sb->started = 1;
		sb->next_seq = end;
		return len;
	}
	__s32 ahead = (__s32)(end - sb->next_seq);
	if (ahead <= 0)
		return 0;
	sb->next_seq = end;
	return (__u32)ahead < len ? (__u32)ahead : len;
}

/* egress, after the rules allowed the packet. */
static __always_inline void al_budget_egress(struct __sk_buff *skb, const struct al_sandbox *sb,
					     const struct al_dest *dst, struct al_decision *d)
{
	struct al_budget *b = al_budget_of(sb, d);
	__u64 n = 0, used;

	if (!b)
		return;
	if (dst->protocol == IPPROTO_TCP)
		n = al_tcp_new_bytes(skb, dst);
	else if (dst->protocol == IPPROTO_UDP && skb->len > dst->l4off + 8)
		n = skb->len - dst->l4off - 8;
	if (n == 0) {
		used = b->used;
	} else {
		used = __sync_fetch_and_add(&b->used, n) + n;
	}
	if (used <= b->limit)
		return;
	d->verdict = AL_VERDICT_DENY;
	d->reason = AL_REASON_BUDGET;
	/* The packet that crossed it is the violation; those after, counted. */
	d->quiet = n == 0 || used - n > b->limit;
}

#endif
