/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* DNS queries, judged at egress before they leave: header, the one
 * question, its name against the domain rules, its type, lengths, the
 * sandbox's budget. A query that is let out is remembered, so that only
 * its answer is learned (dns_answer.bpf.h). */
#ifndef AIRLOCK_DNS_QUERY_BPF_H
#define AIRLOCK_DNS_QUERY_BPF_H

#include "dns_wire.bpf.h"

/* The query budget, a generic cell rate: each query moves the time at which
 * the budget is full again one interval on; it may run at most burst
 * intervals ahead of now. */
static __always_inline int al_dns_budget(__u32 slot, const struct al_dns_policy *dp)
{
	struct al_dns_state *st = bpf_map_lookup_elem(&al_dns_state, &slot);
	__u64 now = bpf_ktime_get_ns();

	if (!st)
		return 0;
	for (int i = 0; i < 4; i++) {
		__u64 tat = st->tat_ns;
		__u64 base = tat > now ? tat : now;

		if (base - now > dp->query_burst_ns)
			return 0;
		if (__sync_val_compare_and_swap(&st->tat_ns, tat, base + dp->query_interval_ns) == tat)
			return 1;
	}
	return 0;
}

/* Where the DNS message of an egress packet is: the UDP payload, or the one
 * length-prefixed message of a TCP segment. Returns 0 or an al_reason; *len
 * 0 is a TCP segment without data (handshake, ACK, FIN). */
static __always_inline __u32 al_dns_payload(struct __sk_buff *skb, const struct al_dest *dst, __u32 *off, __u32 *len,
					    __u8 *err_site)
{
	__u32 l4 = dst->l4off, plen = skb->len;
	int r;

	if (l4 > 0xffff || plen > 0xffff)
		return AL_REASON_DNS_MALFORMED;
	if (dst->protocol == IPPROTO_UDP) {
		*off = l4 + 8;
	} else {
		__u8 doff;

		r = al_load(skb, l4 + 12, &doff, 1, AL_ERR_SITE_DNS_TCP_HEADER, err_site, AL_REASON_DNS_MALFORMED);
		if (r)
			return r;
		*off = l4 + (doff >> 4) * 4;
	}
	if (*off > plen)
		return AL_REASON_DNS_MALFORMED;
	*len = plen - *off;
	if (dst->protocol == IPPROTO_TCP && *len) {
		__be16 mlen;

		/* Exactly one whole message per segment: anything else cannot
		 * be judged by one look at one packet. */
		r = al_load(skb, *off, &mlen, 2, AL_ERR_SITE_DNS_TCP_LENGTH, err_site, AL_REASON_DNS_MALFORMED);
		if (r)
			return r;
		if (bpf_ntohs(mlen) != *len - 2)
			return AL_REASON_DNS_MALFORMED;
		*off += 2;
		*len -= 2;
	}
	return 0;
}

/* One step of the walk over a query's EDNS options: an option's code and
 * length against the policy's list, or one byte of padding, which must be
 * zero (padding is length, not content). */
static long al_opt_step(__u32 i, void *ctx)
{
	struct al_scratch *s = ((struct al_loop_ctx *)ctx)->s;
	const struct al_dns_policy *dp = ((struct al_loop_ctx *)ctx)->dp;
	__u32 p = s->e_p, end = s->e_end;

	if (p >= end)
		return AL_LOOP_STOP;
	if (s->e_zero) {
		if (al_msg8(s, p) != 0) {
			s->e_err = 1;
			return AL_LOOP_STOP;
		}
		s->e_p = p + 1;
		s->e_zero--;
		return AL_LOOP_NEXT;
	}
	if (p + 4 > end) {
		s->e_err = 1;
		return AL_LOOP_STOP;
	}
	__u32 code = al_msg16(s, p), olen = al_msg16(s, p + 2);
	int found = -1;

	for (int j = 0; j < AL_DNS_MAX_EDNS_OPTS; j++) {
		if (j >= dp->nedns_opts)
			break;
		if (dp->edns_opts[j].code == code && found < 0)
			found = j;
	}
	/* Each option at most once: a repeated one would multiply what its
	 * bytes can carry. */
	if (found < 0 || olen > dp->edns_opts[found & (AL_DNS_MAX_EDNS_OPTS - 1)].max_len ||
	    (s->e_seen & (1u << found)) || p + 4 + olen > end) {
		s->e_err = 1;
		return AL_LOOP_STOP;
	}
	s->e_seen |= 1u << found;
	if (code == AL_DNS_EDNS_PADDING) {
		s->e_p = p + 4;
		s->e_zero = olen;
	} else {
		s->e_p = p + 4 + olen;
	}
	return AL_LOOP_NEXT;
}

/* The additional section of a query: nothing, or one OPT record (RFC 6891)
 * that carries only what the policy lists. Returns 0 or an al_reason. */
static __always_inline __u32 al_edns_check(struct al_scratch *s, const struct al_dns_policy *dp, __u32 p, __u32 len)
{
	struct al_loop_ctx lc = { .s = s, .dp = dp };
	int size_ok = 0;

	if (!(dp->flags & AL_DNS_EDNS) || p + 11 > len)
		return AL_REASON_DNS_EDNS;
	/* Owner the root, type OPT; the class is the UDP payload size. */
	if (al_msg8(s, p) != 0 || al_msg16(s, p + 1) != AL_DNS_TYPE_OPT)
		return AL_REASON_DNS_EDNS;
	__u32 size = al_msg16(s, p + 3);

	for (int i = 0; i < AL_DNS_MAX_UDP_SIZES; i++) {
		if (i >= dp->nudp_sizes)
			break;
		if (dp->udp_sizes[i] == size)
			size_ok = 1;
	}
	/* The TTL: extended RCODE (0 in a query), version 0, then flags, of
	 * which only DO (0x8000) is defined. */
	__u32 eflags = al_msg16(s, p + 7), allowed = (dp->flags & AL_DNS_EDNS_DO) ? 0x8000 : 0;
	__u32 rdlen = al_msg16(s, p + 9);

	if (!size_ok || al_msg8(s, p + 5) != 0 || al_msg8(s, p + 6) != 0 || (eflags & ~allowed) ||
	    rdlen > AL_DNS_OPT_MAX || p + 11 + rdlen != len)
		return AL_REASON_DNS_EDNS;
	s->e_p = p + 11;
	s->e_end = len;
	s->e_zero = 0;
	s->e_seen = 0;
	s->e_err = 0;
	if (rdlen)
		bpf_loop(AL_DNS_OPT_MAX + 1, al_opt_step, &lc, 0);
	if (s->e_err || s->e_p != s->e_end || s->e_zero)
		return AL_REASON_DNS_EDNS;
	return 0;
}

static __always_inline void al_dns_deny(struct al_decision *d, __u32 reason)
{
	d->verdict = AL_VERDICT_DENY;
	d->reason = reason;
}

/* The steps of a query's judgement. Each returns 0 or the al_reason that
 * denies it; al_query_judge takes them in order, the first reason wins. */

/* The message, copied into the scratch: a header's worth, at most
 * AL_DNS_QUERY_MAX bytes. */
static __always_inline __u32 al_query_load(struct __sk_buff *skb, struct al_scratch *s, __u32 off, __u32 len,
					   __u8 *err_site)
{
	int r;

	if (len < AL_DNS_HDR_LEN || len > AL_DNS_QUERY_MAX)
		return AL_REASON_DNS_MALFORMED;
	r = al_load(skb, off, s->msg, len, AL_ERR_SITE_DNS_QUERY, err_site, AL_REASON_DNS_MALFORMED);
	if (r)
		return r;
	s->len = len;
	return 0;
}

/* A query (QR 0), standard opcode, one question, no answers. Of the
 * header's flags only RD, AD and CD may be set (stubs set RD; dig sets AD;
 * CD asks for unchecked data): every other bit would be a free one. */
static __always_inline __u32 al_query_header(const struct al_dns_hdr *h)
{
	if ((h->flags & ~(AL_DNS_HDR_RD | AL_DNS_HDR_AD | AL_DNS_HDR_CD)) || h->qdcount != 1 || h->ancount ||
	    h->nscount)
		return AL_REASON_DNS_MALFORMED;
	return 0;
}

/* The question: its name into the scratch's pending entry (kept for the
 * event even if what follows is cut), its type and class. */
static __always_inline __u32 al_query_question(struct al_scratch *s, struct al_question *q)
{
	__u32 r = al_read_name(s, &s->pv.name, AL_DNS_HDR_LEN, &q->end, &q->n, &q->max_label);

	if (r)
		return r;
	s->name_bytes = q->n + 1;
	if (q->end + 4 > s->len)
		return AL_REASON_DNS_MALFORMED;
	q->qtype = al_msg16(s, q->end);
	q->qclass = al_msg16(s, q->end + 2);
	s->qtype = q->qtype;
	q->end += 4;
	return 0;
}

/* Nothing may follow the question but one EDNS OPT record that carries
 * only what the policy lists. */
static __always_inline __u32 al_query_additional(struct al_scratch *s, const struct al_dns_policy *dp,
						 const struct al_dns_hdr *h, __u32 end)
{
	if (h->arcount > 1)
		return AL_REASON_DNS_EDNS;
	if (h->arcount == 1)
		return al_edns_check(s, dp, end, s->len);
	return end != s->len ? AL_REASON_DNS_MALFORMED : 0;
}

static __always_inline __u32 al_query_lengths(const struct al_dns_policy *dp, const struct al_question *q)
{
	__u32 n = q->n;

	if (n > AL_DNS_NAME_MAX + 1 || (n && n - 1 > dp->max_name_len) || q->max_label > dp->max_label_len)
		return AL_REASON_DNS_LENGTH;
	return 0;
}

static __always_inline __u32 al_query_type(const struct al_dns_policy *dp, const struct al_question *q)
{
	int type_ok = 0;

	for (int i = 0; i < AL_DNS_MAX_TYPES; i++) {
		if (i >= dp->ntypes)
			break;
		if (dp->types[i] == q->qtype)
			type_ok = 1;
	}
	return type_ok && q->qclass == AL_DNS_CLASS_IN ? 0 : AL_REASON_DNS_TYPE;
}

/* A domain rule must let the name be queried; the decision names the rule. */
static __always_inline __u32 al_query_name(struct al_scratch *s, const struct al_question *q, struct al_decision *d)
{
	struct al_rule_set *rs = al_name_match(&s->pv.name, q->n);

	if (!rs || !(rs->flags & AL_RS_QUERY)) {
		if (rs)
			d->rule = al_name_rule(rs, 0);
		return AL_REASON_DNS_NAME;
	}
	d->rule = al_name_rule(rs, 1);
	return 0;
}

static __always_inline __u32 al_query_judge(struct __sk_buff *skb, const struct al_sandbox *sb,
					    const struct al_dns_policy *dp, struct al_scratch *s, __u32 off, __u32 len,
					    struct al_decision *d)
{
	struct al_dns_hdr h;
	struct al_question q = {};
	__u32 r;

	r = al_query_load(skb, s, off, len, &d->err_site);
	if (r)
		return r;
	al_dns_hdr_read(s, &h);
	s->qid = h.id;
	r = al_query_header(&h);
	if (r)
		return r;
	s->pv.name.policy_id = (__u16)sb->policy_id;
	r = al_query_question(s, &q);
	if (r)
		return r;
	r = al_query_additional(s, dp, &h, q.end);
	if (r)
		return r;
	r = al_query_lengths(dp, &q);
	if (r)
		return r;
	r = al_query_type(dp, &q);
	if (r)
		return r;
	r = al_query_name(s, &q, d);
	if (r)
		return r;
	return al_dns_budget(sb->slot, dp) ? 0 : AL_REASON_DNS_RATE;
}

/* Remembers what is let out (everything, in audit mode) so that its answer
 * can be matched, then counts the query. A query whose answer could not be
 * matched is not let out: answers over TCP are not learned, so only UDP is
 * remembered. */
static __always_inline void al_query_remember(const struct al_sandbox *sb, const struct al_dest *dst,
					      struct al_scratch *s, struct al_counters *c, struct al_decision *d)
{
	if (s->name_bytes && dst->protocol == IPPROTO_UDP &&
	    (d->verdict == AL_VERDICT_ALLOW || (sb->flags & AL_SB_AUDIT))) {
		__u32 slot = sb->slot;
		void *pt = bpf_map_lookup_elem(&al_pending, &slot);
		struct al_pending_key pk = {
			.family = dst->family,
			.port = dst->sport,
			.id = s->qid,
		};

		__builtin_memcpy(pk.resolver, dst->addr, sizeof(pk.resolver));
		s->pv.ts_ns = bpf_ktime_get_ns();
		s->pv.qtype = s->qtype;
		if ((!pt || bpf_map_update_elem(pt, &pk, &s->pv, BPF_ANY)) && d->verdict == AL_VERDICT_ALLOW)
			al_dns_deny(d, AL_REASON_DNS_TABLE);
	}
	if (!c)
		return;
	if (d->verdict == AL_VERDICT_ALLOW)
		c->dns_queries_allowed++;
	else
		c->dns_queries_denied++;
}

/* Judges the query in an egress packet that the address rules let go to a
 * resolver. d becomes the query's decision; s keeps its question for the
 * event. A global function: the verifier checks it once, on its own, not
 * inlined into every path of the hook. It returns 0 (a global function
 * returns a scalar): the verdict is d's. */
__noinline int al_dns_query(struct __sk_buff *skb, struct al_sandbox *sb, const struct al_dest *dst,
			    struct al_decision *d, __u32 sidx)
{
	struct al_scratch *s = bpf_map_lookup_elem(&al_scratch, &sidx);

	if (!skb || !sb || !dst || !d)
		return 0;
	if (!s) {
		/* The hook holds this entry: not found, nothing is judged. */
		al_dns_deny(d, AL_REASON_BUSY);
		return 0;
	}
	__u32 policy_id = sb->policy_id;
	struct al_dns_policy *dp = bpf_map_lookup_elem(&al_dns, &policy_id);
	__u32 off = 0, len = 0, r;

	s->name_bytes = 0;
	s->qtype = 0;
	s->qid = 0;
	d->dns = 1;
	d->rule = AL_RULE_NONE;
	r = dp ? al_dns_payload(skb, dst, &off, &len, &d->err_site) : AL_REASON_DNS_RESOLVER;
	if (!r && len == 0 && dst->protocol == IPPROTO_TCP) {
		d->dns = 0; /* no message in this segment */
		return 0;
	}
	if (!r)
		r = al_query_judge(skb, sb, dp, s, off, len, d);
	if (r)
		al_dns_deny(d, r);
	al_query_remember(sb, dst, s, al_counters_of(sb->slot), d);
	return 0;
}

#endif
