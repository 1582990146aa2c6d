/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* DNS in the kernel. A query is judged at egress before it leaves: header,
 * the one question, its name against the domain rules, its type, lengths,
 * the sandbox's budget. An answer is learned at ingress before the socket
 * sees it, only if it matches a query the sandbox sent. Both parsers work
 * on a copy of the message in the per-CPU scratch; whatever they cannot
 * walk to the end is refused. */
#ifndef AIRLOCK_DNS_BPF_H
#define AIRLOCK_DNS_BPF_H

#include "verdict.bpf.h"
#include "parse.bpf.h"

#define AL_MSG_MASK (AL_DNS_MSG_MAX - 1)
#define AL_DNS_MAX_LABELS 128
#define AL_DNS_TYPE_A 1
#define AL_DNS_TYPE_CNAME 5
#define AL_DNS_TYPE_AAAA 28
#define AL_DNS_TYPE_OPT 41
#define AL_DNS_CLASS_IN 1

/* The header of a DNS message (RFC 1035, 4.1.1), in host order once read
 * (al_dns_hdr_read). */
struct al_dns_hdr {
	__u16 id;
	__u16 flags;
	__u16 qdcount;
	__u16 ancount;
	__u16 nscount;
	__u16 arcount;
};
#define AL_DNS_HDR_LEN 12

/* Bits of al_dns_hdr.flags. */
#define AL_DNS_HDR_QR 0x8000     /* a response */
#define AL_DNS_HDR_OPCODE 0x7800 /* 0: a standard query */
#define AL_DNS_HDR_AA 0x0400
#define AL_DNS_HDR_TC 0x0200     /* truncated */
#define AL_DNS_HDR_RD 0x0100
#define AL_DNS_HDR_RA 0x0080
#define AL_DNS_HDR_Z 0x0040
#define AL_DNS_HDR_AD 0x0020
#define AL_DNS_HDR_CD 0x0010
#define AL_DNS_HDR_RCODE 0x000f

static __always_inline __u32 al_msg8(const struct al_scratch *s, __u32 off)
{
	return s->msg[off & AL_MSG_MASK];
}

static __always_inline __u32 al_msg16(const struct al_scratch *s, __u32 off)
{
	return (al_msg8(s, off) << 8) | al_msg8(s, off + 1);
}

static __always_inline __u32 al_msg32(const struct al_scratch *s, __u32 off)
{
	return (al_msg16(s, off) << 16) | al_msg16(s, off + 2);
}

static __always_inline void al_dns_hdr_read(const struct al_scratch *s, struct al_dns_hdr *h)
{
	h->id = al_msg16(s, __builtin_offsetof(struct al_dns_hdr, id));
	h->flags = al_msg16(s, __builtin_offsetof(struct al_dns_hdr, flags));
	h->qdcount = al_msg16(s, __builtin_offsetof(struct al_dns_hdr, qdcount));
	h->ancount = al_msg16(s, __builtin_offsetof(struct al_dns_hdr, ancount));
	h->nscount = al_msg16(s, __builtin_offsetof(struct al_dns_hdr, nscount));
	h->arcount = al_msg16(s, __builtin_offsetof(struct al_dns_hdr, arcount));
}

/* *idx: which entry, for the global functions below, which look it up
 * again (before 6.5 or so, helpers take no plain memory pointer where a
 * map value goes). */
static __always_inline struct al_scratch *al_scratch_get(__u32 *idx)
{
#pragma unroll
	for (int i = 0; i < AL_SCRATCH_ENTRIES; i++) {
		__u32 k = i;
		struct al_scratch *s = bpf_map_lookup_elem(&al_scratch, &k);

		if (s && __sync_val_compare_and_swap(&s->busy, 0, 1) == 0) {
			*idx = k;
			return s;
		}
	}
	return 0;
}

static __always_inline void al_scratch_put(struct al_scratch *s)
{
	__sync_val_compare_and_swap(&s->busy, 1, 0);
}

/* ---- names ------------------------------------------------------------- */

/* What a parser's bpf_loop callback needs: pointers only; its state is in
 * the scratch. */
struct al_loop_ctx {
	struct al_scratch *s;
	struct al_name_key *key;
	const struct al_dns_policy *dp;
};

/* One label of an uncompressed name. */
static long al_walk_label(__u32 i, void *ctx)
{
	struct al_scratch *s = ((struct al_loop_ctx *)ctx)->s;
	__u32 p = s->w_p;

	if (p >= s->len || p >= AL_DNS_MSG_MAX) {
		s->w_err = AL_REASON_DNS_MALFORMED;
		return 1;
	}
	__u32 l = al_msg8(s, p);
	if (l == 0) {
		s->w_p = p + 1;
		s->w_done = 1;
		return 1;
	}
	/* A compression pointer (or an obsolete label type): a question never
	 * needs one, so it is refused rather than followed. */
	if (l & 0xc0) {
		s->w_err = AL_REASON_DNS_MALFORMED;
		return 1;
	}
	/* A label that runs past the end is malformed, however long the name
	 * would have been. */
	if (p + l >= s->len) {
		s->w_err = AL_REASON_DNS_MALFORMED;
		return 1;
	}
	if (l > s->w_max_label)
		s->w_max_label = l;
	s->w_n += l + 1;
	s->w_p = p + l + 1;
	if (s->w_n > AL_DNS_NAME_BYTES - 1) {
		s->w_err = AL_REASON_DNS_LENGTH;
		return 1;
	}
	return 0;
}

/* Byte j of the name goes to its place in reversed-label order, lowercased:
 * a label starting at s with length l lands at n - (s + l + 1). */
static long al_rev_byte(__u32 j, void *ctx)
{
	struct al_scratch *s = ((struct al_loop_ctx *)ctx)->s;
	struct al_name_key *key = ((struct al_loop_ctx *)ctx)->key;

	if (j >= s->r_n)
		return 1;
	__u32 b = al_msg8(s, s->r_off + j);
	if (j == s->r_next) {
		s->r_start = j;
		s->r_lab = b;
		s->r_next = j + b + 1;
	} else if (b >= 'A' && b <= 'Z') {
		b += 'a' - 'A';
	}
	__u32 o = s->r_n - (s->r_start + s->r_lab + 1) + (j - s->r_start);
	if (o >= AL_DNS_NAME_BYTES)
		return 1;
	key->name[o] = b;
	return 0;
}

/* Reads the uncompressed name at off into key (al_name_key form, ended by
 * AL_NAME_END, zero after). Returns 0 or an al_reason. */
static __always_inline __u32 al_read_name(struct al_scratch *s, struct al_name_key *key, __u32 off, __u32 *end,
					  __u32 *n, __u32 *max_label)
{
	struct al_loop_ctx lc = { .s = s, .key = key };

	s->w_p = off;
	s->w_n = 0;
	s->w_max_label = 0;
	s->w_err = 0;
	s->w_done = 0;
	bpf_loop(AL_DNS_MAX_LABELS, al_walk_label, &lc, 0);
	if (s->w_err)
		return s->w_err;
	if (!s->w_done)
		return AL_REASON_DNS_MALFORMED;
	__u32 len = s->w_n;

	if (len > AL_DNS_NAME_BYTES - 1)
		return AL_REASON_DNS_LENGTH;
	__builtin_memset(key->name, 0, sizeof(key->name));
	s->r_off = off;
	s->r_n = len;
	s->r_start = 0;
	s->r_lab = 0;
	s->r_next = 0;
	if (len)
		bpf_loop(len, al_rev_byte, &lc, 0);
	/* len <= 253 here, but older verifiers lose the bound of a value kept
	 * across a call: mask it afresh (what follows name[] in every key
	 * holder is padding of the same map value). */
	asm volatile("" : "+r"(len));
	key->name[len & 0xff] = AL_NAME_END;
	*end = s->w_p;
	*n = len;
	*max_label = s->w_max_label;
	return 0;
}

/* The question of a query or an answer, once read. */
struct al_question {
	__u32 end;       /* just after its type and class */
	__u32 n;         /* bytes of the name (al_name_key form) */
	__u32 max_label;
	__u16 qtype;
	__u16 qclass;
};

/* ---- queries (egress) ------------------------------------------------------ */

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
static __always_inline __u32 al_dns_payload(struct __sk_buff *skb, const struct al_dest *dst, __u32 *off,
					    __u32 *len, __u8 *err_site)
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
		return 1;
	if (s->e_zero) {
		if (al_msg8(s, p) != 0) {
			s->e_err = 1;
			return 1;
		}
		s->e_p = p + 1;
		s->e_zero--;
		return 0;
	}
	if (p + 4 > end) {
		s->e_err = 1;
		return 1;
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
		return 1;
	}
	s->e_seen |= 1u << found;
	if (code == AL_DNS_EDNS_PADDING) {
		s->e_p = p + 4;
		s->e_zero = olen;
	} else {
		s->e_p = p + 4 + olen;
	}
	return 0;
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

/* The rule a query decision names: the first allowing range for an allowed
 * name, else the first range. */
static __always_inline __u16 al_name_rule(const struct al_rule_set *rs, int want_allow)
{
	for (int i = 0; i < AL_MAX_RANGES; i++) {
		if (i >= rs->count)
			break;
		if (!want_allow || rs->ranges[i].action == AL_ACTION_ALLOW)
			return rs->ranges[i].rule;
	}
	return AL_RULE_NONE;
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
static __always_inline __u32 al_query_name(struct al_scratch *s, const struct al_question *q,
					   struct al_decision *d)
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
					    const struct al_dns_policy *dp, struct al_scratch *s, __u32 off,
					    __u32 len, struct al_decision *d)
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
 * inlined into every path of the hook. */
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

/* ---- answers (ingress) ------------------------------------------------------- */

/* Phases of the walk over an answer's records. */
enum {
	AL_RR_OWNER = 0, /* skipping the owner name, a label at a time */
	AL_RR_FIXED = 1, /* at the record's type, class, TTL and length */
	AL_RR_CMP = 2,   /* comparing its owner with the chain's current name */
};

static __always_inline __u32 al_lower(__u32 b)
{
	return (b >= 'A' && b <= 'Z') ? b + ('a' - 'A') : b;
}

/* The record's owner is (eq) or is not the chain's current name: an
 * address is collected, marked off the chain if it is not; a CNAME on the
 * chain moves the chain on to its target. */
static __always_inline void al_rr_done(struct al_scratch *s, int eq)
{
	__u32 type = s->rr_type, p = s->rr_rdoff, rdlen = s->rr_rdlen;

	if (type == AL_DNS_TYPE_CNAME) {
		if (eq)
			s->rr_cur = p;
	} else {
		__u32 count = s->rr_count;

		if (!eq)
			s->rr_off_chain++;
		if (count < AL_DNS_MAX_ANSWERS) {
			__u32 k = count & (AL_DNS_MAX_ANSWERS - 1);
			struct al_learned_key *a = &s->answers[k];

			__builtin_memset(a, 0, sizeof(*a));
			a->family = type == AL_DNS_TYPE_A ? AL_FAMILY_IPV4 : AL_FAMILY_IPV6;
			for (int b = 0; b < 16; b++)
				if (b < rdlen)
					a->addr[b] = al_msg8(s, p + b);
			s->ttls[k] = s->rr_ttl;
			s->off_chain[k] = !eq;
			s->rr_count = count + 1;
		}
	}
	s->rr_p = p + rdlen;
	s->rr_owner = p + rdlen;
	s->rr_left--;
	s->rr_in_name = AL_RR_OWNER;
}

/* At a length byte of name x (position *pos): follows a compression
 * pointer. Pointers go strictly backwards, before where this name's
 * current piece began (*seg): no loop can be built, and the hops are
 * bounded too. Returns 1 if it followed one, 0 at a label, -1 if the name
 * is malformed. */
static __always_inline int al_cmp_ptr(struct al_scratch *s, __u32 *pos, __u32 *seg)
{
	__u32 x = *pos, l = al_msg8(s, x);

	if ((l & 0xc0) == 0)
		return 0;
	if ((l & 0xc0) != 0xc0 || x + 1 >= s->len)
		return -1;
	__u32 t = ((l & 0x3f) << 8) | al_msg8(s, x + 1);

	if (t >= *seg || ++s->c_hops > 2 * AL_DNS_PTR_HOPS)
		return -1;
	*pos = t;
	*seg = t;
	return 1;
}

/* One step of the walk over the answer records: a label of an owner name
 * (compressed or not), a record's fixed part, or one byte of the
 * comparison of an A, AAAA or CNAME record's owner with the current name
 * of the question's CNAME chain. One flat loop of small steps, not a loop
 * in a loop, keeps the verifier's work small on every kernel. */
static long al_rr_step(__u32 i, void *ctx)
{
	struct al_scratch *s = ((struct al_loop_ctx *)ctx)->s;
	__u32 p = s->rr_p, len = s->len;

	if (s->rr_left == 0)
		return 1;
	if (s->rr_in_name == AL_RR_CMP) {
		__u32 a = s->c_a, b = s->c_b;

		if (a >= len || b >= len || a >= AL_DNS_MSG_MAX || b >= AL_DNS_MSG_MAX) {
			s->rr_err = 1;
			return 1;
		}
		if (s->c_rem) {
			if (al_lower(al_msg8(s, a)) != al_lower(al_msg8(s, b))) {
				al_rr_done(s, 0);
				return 0;
			}
			s->c_a = a + 1;
			s->c_b = b + 1;
			s->c_rem--;
			return 0;
		}
		__u32 sa = s->c_sa, sb = s->c_sb;
		int fa = al_cmp_ptr(s, &a, &sa), fb = al_cmp_ptr(s, &b, &sb);

		if (fa < 0 || fb < 0) {
			s->rr_err = 1;
			return 1;
		}
		s->c_a = a;
		s->c_b = b;
		s->c_sa = sa;
		s->c_sb = sb;
		if (fa || fb)
			return 0; /* at the label next step */
		__u32 la = al_msg8(s, a), lb = al_msg8(s, b);

		s->c_n += la + 1;
		if (s->c_n > 255) {
			s->rr_err = 1;
			return 1;
		}
		if (la != lb) {
			al_rr_done(s, 0);
			return 0;
		}
		if (la == 0) {
			al_rr_done(s, 1);
			return 0;
		}
		s->c_a = a + 1;
		s->c_b = b + 1;
		s->c_rem = la;
		return 0;
	}
	if (p >= len || p >= AL_DNS_MSG_MAX) {
		s->rr_err = 1;
		return 1;
	}
	if (s->rr_in_name == AL_RR_OWNER) {
		__u32 l = al_msg8(s, p);

		if (l == 0) {
			p += 1;
			s->rr_in_name = AL_RR_FIXED;
		} else if ((l & 0xc0) == 0xc0) {
			p += 2;
			s->rr_in_name = AL_RR_FIXED;
		} else if (l & 0xc0) {
			s->rr_err = 1;
			return 1;
		} else {
			p += l + 1;
		}
		s->rr_p = p;
		return 0;
	}
	if (p + 10 > len) {
		s->rr_err = 1;
		return 1;
	}
	__u32 type = al_msg16(s, p), class = al_msg16(s, p + 2), ttl = al_msg32(s, p + 4);
	__u32 rdlen = al_msg16(s, p + 8);

	p += 10;
	if (p + rdlen > len || (class == AL_DNS_CLASS_IN && ((type == AL_DNS_TYPE_A && rdlen != 4) ||
							     (type == AL_DNS_TYPE_AAAA && rdlen != 16) ||
							     (type == AL_DNS_TYPE_CNAME && rdlen < 1)))) {
		s->rr_err = 1;
		return 1;
	}
	if (class == AL_DNS_CLASS_IN &&
	    (type == AL_DNS_TYPE_A || type == AL_DNS_TYPE_AAAA || type == AL_DNS_TYPE_CNAME)) {
		s->rr_type = type;
		s->rr_ttl = ttl;
		s->rr_rdoff = p;
		s->rr_rdlen = rdlen;
		s->c_a = s->rr_owner;
		s->c_sa = s->rr_owner;
		s->c_b = s->rr_cur;
		s->c_sb = s->rr_cur;
		s->c_rem = 0;
		s->c_hops = 0;
		s->c_n = 0;
		s->rr_in_name = AL_RR_CMP;
		return 0;
	}
	s->rr_p = p + rdlen;
	s->rr_owner = p + rdlen;
	s->rr_left--;
	s->rr_in_name = AL_RR_OWNER;
	return 0;
}

struct al_learn_ctx {
	struct al_scratch *s;
	void *table;                /* the sandbox's learned addresses */
	struct al_dns_policy *dp;
	struct al_counters *c;
	__u64 cgid;
	__u64 now;
	__u32 slot;
	__u32 policy_id;
	__u16 rule;
	__u8 allowed;               /* the question's name is allowed: learn */
	__u8 report;                /* emit an event per address */
};

/* Address k of the answer: learned with its clamped TTL, and reported. */
static long al_learn_one(__u32 k, void *ctx)
{
	struct al_learn_ctx *lc = ctx;
	struct al_scratch *s = lc->s;
	struct al_dns_policy *dp = lc->dp;
	__u32 i = k & (AL_DNS_MAX_ANSWERS - 1);
	__u32 ttl = s->ttls[i];
	__u8 learned = 0;

	if (ttl < dp->min_ttl)
		ttl = dp->min_ttl;
	if (ttl > dp->max_ttl)
		ttl = dp->max_ttl;
	if (lc->allowed && lc->table && !s->off_chain[i]) {
		s->lv.expires_ns = lc->now + (__u64)ttl * 1000000000ull;
		if (bpf_map_update_elem(lc->table, &s->answers[i], &s->lv, BPF_ANY) == 0) {
			learned = 1;
			if (lc->c)
				lc->c->dns_answers_learned++;
		} else if (lc->c) {
			lc->c->dns_learn_full++;
		}
	}
	if (lc->report) {
		struct al_dest a = { .family = (__u8)s->answers[i].family };
		struct al_decision d = {
			.verdict = AL_VERDICT_ALLOW,
			.reason = learned ? AL_REASON_LEARNED
					  : s->off_chain[i] ? AL_REASON_DNS_OFF_CHAIN
					  : lc->allowed ? AL_REASON_DNS_TABLE : AL_REASON_NO_RULE,
			.rule = lc->rule,
		};

		__builtin_memcpy(a.addr, s->answers[i].addr, sizeof(a.addr));
		al_emit_dns(lc->c, AL_HOOK_INGRESS, lc->cgid, lc->slot, lc->policy_id, &a, &d, &s->lv.name, s->qtype,
			    s->qid, s->name_bytes, learned, ttl);
	}
	return 0;
}

/* A dropped answer: counted (a helper's failure also where it failed) and
 * reported, never a violation of the sandbox (whoever forged it is
 * outside). */
static __always_inline int al_answer_drop_why(struct al_sandbox *sb, struct al_counters *c, __u64 cgid,
					      const struct al_dest *pkt, struct al_scratch *s, __u32 reason,
					      __u8 err_site)
{
	struct al_decision d = {
		.verdict = AL_VERDICT_DENY,
		.reason = reason,
		.rule = AL_RULE_NONE,
		.err_site = err_site,
	};
	struct al_dest from = { .family = pkt->family, .protocol = pkt->protocol, .port = pkt->sport };

	__builtin_memcpy(from.addr, pkt->saddr, sizeof(from.addr));
	if (c)
		c->dns_answers_dropped++;
	al_count_helper(c, &d);
	if (s)
		al_emit_dns(c, AL_HOOK_INGRESS, cgid, sb->slot, sb->policy_id, &from, &d, &s->lv.name, s->qtype,
			    s->qid, s->name_bytes, 0, 0);
	return (sb->flags & AL_SB_AUDIT) ? AL_PASS : AL_DROP;
}

static __always_inline int al_answer_drop(struct al_sandbox *sb, struct al_counters *c, __u64 cgid,
					  const struct al_dest *pkt, struct al_scratch *s)
{
	return al_answer_drop_why(sb, c, cgid, pkt, s, AL_REASON_DNS_UNSOLICITED, 0);
}

/* The steps of an answer's judgement. Each returns 0 or the al_reason the
 * answer is dropped for. */

/* From a listed resolver: the message copied into the scratch (at most
 * AL_DNS_MSG_MAX bytes of it). */
static __always_inline __u32 al_answer_load(struct __sk_buff *skb, const struct al_dns_policy *dp,
					    const struct al_dest *pkt, struct al_scratch *s, __u8 *err_site)
{
	__u32 off = pkt->l4off + 8, plen = skb->len, len;
	int r;

	if (!al_is_resolver(dp, pkt->family, pkt->saddr) || pkt->l4off > 0xffff || off > plen)
		return AL_REASON_DNS_UNSOLICITED;
	len = plen - off;
	if (len > AL_DNS_MSG_MAX)
		len = AL_DNS_MSG_MAX;
	if (len < AL_DNS_HDR_LEN)
		return AL_REASON_DNS_UNSOLICITED;
	r = al_load(skb, off, s->msg, len, AL_ERR_SITE_DNS_ANSWER, err_site, AL_REASON_DNS_UNSOLICITED);
	if (r)
		return r;
	s->len = len;
	return 0;
}

/* An answer (QR 1) to a standard query, with one question. */
static __always_inline __u32 al_answer_header(const struct al_dns_hdr *h)
{
	if (!(h->flags & AL_DNS_HDR_QR) || (h->flags & AL_DNS_HDR_OPCODE) || h->qdcount != 1)
		return AL_REASON_DNS_UNSOLICITED;
	return 0;
}

/* The question, into the scratch's learned entry. */
static __always_inline __u32 al_answer_question(struct al_scratch *s, struct al_question *q)
{
	if (al_read_name(s, &s->lv.name, AL_DNS_HDR_LEN, &q->end, &q->n, &q->max_label) || q->end + 4 > s->len)
		return AL_REASON_DNS_UNSOLICITED;
	s->name_bytes = q->n + 1;
	s->qtype = al_msg16(s, q->end);
	q->qtype = s->qtype;
	q->end += 4;
	return 0;
}

/* Only for a query this sandbox sent: resolver, port, id, then the
 * question itself. Used once. */
static __always_inline __u32 al_answer_match(struct al_scratch *s, __u32 slot, const struct al_dest *pkt)
{
	void *pt = bpf_map_lookup_elem(&al_pending, &slot);
	struct al_pending_key pk = { .family = pkt->family, .port = pkt->port, .id = s->qid };

	__builtin_memcpy(pk.resolver, pkt->saddr, sizeof(pk.resolver));
	struct al_pending *pe = pt ? bpf_map_lookup_elem(pt, &pk) : 0;
	if (!pe || pe->qtype != s->qtype)
		return AL_REASON_DNS_UNSOLICITED;
	s->lv.name.policy_id = pe->name.policy_id;
	s->lv.name.prefixlen = pe->name.prefixlen;
	const __u32 *x = (const __u32 *)&pe->name, *y = (const __u32 *)&s->lv.name;
	int same = 1;

	for (int i = 0; i < (int)(sizeof(struct al_name_key) / 4); i++)
		if (x[i] != y[i])
			same = 0;
	if (!same)
		return AL_REASON_DNS_UNSOLICITED;
	bpf_map_delete_elem(pt, &pk);
	return 0;
}

/* The answer records, at most AL_DNS_MAX_RRS of them, from p on: each
 * owner, each fixed part, the question's CNAME chain. */
static __always_inline __u32 al_answer_walk(struct al_scratch *s, const struct al_dns_hdr *h, __u32 p)
{
	__u32 an = h->ancount;
	struct al_loop_ctx walk = { .s = s };

	if (an > AL_DNS_MAX_RRS)
		an = AL_DNS_MAX_RRS;
	s->rr_p = p;
	s->rr_owner = p;
	s->rr_cur = AL_DNS_HDR_LEN; /* the question's name, uncompressed (al_read_name) */
	s->rr_count = 0;
	s->rr_err = 0;
	s->rr_left = an;
	s->rr_off_chain = 0;
	s->rr_in_name = AL_RR_OWNER;
	/* Per record: its owner's labels, the fixed part, a comparison of at
	 * most 255 name bytes, their length bytes and the pointer hops. */
	if (an)
		bpf_loop(AL_DNS_MAX_RRS * (AL_DNS_MAX_LABELS + 2 + 2 * 256 + 2 * AL_DNS_PTR_HOPS), al_rr_step, &walk, 0);
	return s->rr_err || s->rr_left ? AL_REASON_DNS_MALFORMED : 0;
}

/* What a walked answer teaches: the addresses on the chain, learned under
 * the question's name (n bytes) if its rules let it be queried now. */
static __always_inline void al_answer_learn(struct al_sandbox *sb, struct al_scratch *s, struct al_dns_policy *dp,
					    struct al_counters *c, __u64 cgid, __u32 n)
{
	__u32 count = s->rr_count, slot = sb->slot, policy_id = sb->policy_id;

	if (c)
		c->dns_records_off_chain += s->rr_off_chain;
	s->lv.name.policy_id = (__u16)policy_id;
	struct al_rule_set *rs = al_name_match(&s->lv.name, n);
	struct al_learn_ctx lc = {
		.s = s,
		.table = bpf_map_lookup_elem(&al_learned, &slot),
		.dp = dp,
		.c = c,
		.cgid = cgid,
		.now = bpf_ktime_get_ns(),
		.slot = slot,
		.policy_id = policy_id,
		.rule = rs ? al_name_rule(rs, 1) : AL_RULE_NONE,
		.allowed = rs && (rs->flags & AL_RS_QUERY),
		.report = (sb->flags & (AL_SB_AUDIT | AL_SB_LOG_ALLOWED)) != 0,
	};

	s->lv.learned_ns = lc.now;
	if (count > AL_DNS_MAX_ANSWERS)
		count = AL_DNS_MAX_ANSWERS;
	if (count)
		bpf_loop(count, al_learn_one, &lc, 0);
}

/* An answer from port 53 to a sandbox socket. Returns AL_PASS or AL_DROP.
 * A global function, like al_dns_query. */
__noinline int al_dns_answer(struct __sk_buff *skb, struct al_sandbox *sb, __u64 cgid, const struct al_dest *pkt,
			     __u32 sidx)
{
	struct al_scratch *s = bpf_map_lookup_elem(&al_scratch, &sidx);

	if (!skb || !sb || !pkt)
		return AL_DROP;
	__u32 policy_id = sb->policy_id;
	struct al_counters *c = al_counters_of(sb->slot);
	struct al_dns_policy *dp = bpf_map_lookup_elem(&al_dns, &policy_id);
	struct al_dns_hdr h;
	struct al_question q = {};
	__u8 site = 0;
	__u32 r;

	if (!s)
		return al_answer_drop(sb, c, cgid, pkt, 0); /* the hook holds this entry */
	s->name_bytes = 0;
	s->qtype = 0;
	s->qid = 0;
	if (!dp)
		return al_answer_drop(sb, c, cgid, pkt, s);
	r = al_answer_load(skb, dp, pkt, s, &site);
	if (r)
		return al_answer_drop_why(sb, c, cgid, pkt, s, r, site);
	al_dns_hdr_read(s, &h);
	s->qid = h.id;
	s->lv.name.policy_id = (__u16)policy_id;
	r = al_answer_header(&h);
	if (!r)
		r = al_answer_question(s, &q);
	if (!r)
		r = al_answer_match(s, sb->slot, pkt);
	if (r)
		return al_answer_drop_why(sb, c, cgid, pkt, s, r, 0);
	if (h.flags & (AL_DNS_HDR_TC | AL_DNS_HDR_RCODE))
		return AL_PASS; /* truncated or an error: nothing to learn */
	r = al_answer_walk(s, &h, q.end);
	if (r)
		return al_answer_drop_why(sb, c, cgid, pkt, s, r, 0);
	al_answer_learn(sb, s, dp, c, cgid, q.n);
	return AL_PASS;
}

#endif
