/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* DNS answers, learned at ingress before the socket sees them, only if
 * they match a query the sandbox sent (dns_query.bpf.h): the addresses on
 * the question's CNAME chain, under the question's name. */
#ifndef AIRLOCK_DNS_ANSWER_BPF_H
#define AIRLOCK_DNS_ANSWER_BPF_H

#include "dns_wire.bpf.h"

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

/* A record the walk cannot read to its end: the answer is malformed. */
static __always_inline long al_rr_fail(struct al_scratch *s)
{
	s->rr_err = 1;
	return AL_LOOP_STOP;
}

/* On to the next record, whose owner starts at p. */
static __always_inline long al_rr_next(struct al_scratch *s, __u32 p)
{
	s->rr_p = p;
	s->rr_owner = p;
	s->rr_left--;
	s->rr_in_name = AL_RR_OWNER;
	return AL_LOOP_NEXT;
}

/* An A or AAAA record: its address is collected, marked off the chain if
 * its owner is not (eq) the chain's current name. */
static __always_inline void al_rr_addr_done(struct al_scratch *s, int eq)
{
	__u32 count = s->rr_count, p = s->rr_rdoff, rdlen = s->rr_rdlen;

	if (!eq)
		s->rr_off_chain++;
	if (count >= AL_DNS_MAX_ANSWERS)
		return;
	__u32 k = count & (AL_DNS_MAX_ANSWERS - 1);
	struct al_learned_key *a = &s->answers[k];

	__builtin_memset(a, 0, sizeof(*a));
	a->family = s->rr_type == AL_DNS_TYPE_A ? AL_FAMILY_IPV4 : AL_FAMILY_IPV6;
	for (int b = 0; b < 16; b++)
		if (b < rdlen)
			a->addr[b] = al_msg8(s, p + b);
	s->ttls[k] = s->rr_ttl;
	s->off_chain[k] = !eq;
	s->rr_count = count + 1;
}

/* A CNAME whose owner is (eq) the chain's current name moves the chain on
 * to its target. */
static __always_inline void al_rr_cname_done(struct al_scratch *s, int eq)
{
	if (eq)
		s->rr_cur = s->rr_rdoff;
}

/* The record's owner is (eq) or is not the chain's current name: its type
 * says what follows from that. Then on to the next record. */
static __always_inline long al_rr_done(struct al_scratch *s, int eq)
{
	if (s->rr_type == AL_DNS_TYPE_CNAME)
		al_rr_cname_done(s, eq);
	else
		al_rr_addr_done(s, eq);
	return al_rr_next(s, s->rr_rdoff + s->rr_rdlen);
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

/* Inside a label of both names (at a of the owner, b of the chain's
 * name): one byte, compared without case. */
static __always_inline long al_rr_cmp_byte(struct al_scratch *s, __u32 a, __u32 b)
{
	if (al_lower(al_msg8(s, a)) != al_lower(al_msg8(s, b)))
		return al_rr_done(s, 0);
	s->c_a = a + 1;
	s->c_b = b + 1;
	s->c_rem--;
	return AL_LOOP_NEXT;
}

/* At a length byte of both names: a compression pointer is followed (the
 * label is compared at the next step), else the two labels' lengths; the
 * root of both ends the comparison equal. */
static __always_inline long al_rr_cmp_label(struct al_scratch *s, __u32 a, __u32 b)
{
	__u32 sa = s->c_sa, sb = s->c_sb;
	int fa = al_cmp_ptr(s, &a, &sa), fb = al_cmp_ptr(s, &b, &sb);

	if (fa < 0 || fb < 0)
		return al_rr_fail(s);
	s->c_a = a;
	s->c_b = b;
	s->c_sa = sa;
	s->c_sb = sb;
	if (fa || fb)
		return AL_LOOP_NEXT; /* at the label next step */
	__u32 la = al_msg8(s, a), lb = al_msg8(s, b);

	s->c_n += la + 1;
	if (s->c_n > 255)
		return al_rr_fail(s);
	if (la != lb)
		return al_rr_done(s, 0);
	if (la == 0)
		return al_rr_done(s, 1);
	s->c_a = a + 1;
	s->c_b = b + 1;
	s->c_rem = la;
	return AL_LOOP_NEXT;
}

/* One step of the comparison of a record's owner with the chain's current
 * name. */
static __always_inline long al_rr_cmp(struct al_scratch *s)
{
	__u32 a = s->c_a, b = s->c_b, len = s->len;

	if (a >= len || b >= len || a >= AL_DNS_MSG_MAX || b >= AL_DNS_MSG_MAX)
		return al_rr_fail(s);
	return s->c_rem ? al_rr_cmp_byte(s, a, b) : al_rr_cmp_label(s, a, b);
}

/* One label of a record's owner name, at p, skipped: the root or a
 * compression pointer ends it. */
static __always_inline long al_rr_owner(struct al_scratch *s, __u32 p)
{
	__u32 l = al_msg8(s, p);

	if (l == 0) {
		p += 1;
		s->rr_in_name = AL_RR_FIXED;
	} else if ((l & 0xc0) == 0xc0) {
		p += 2;
		s->rr_in_name = AL_RR_FIXED;
	} else if (l & 0xc0) {
		return al_rr_fail(s);
	} else {
		p += l + 1;
	}
	s->rr_p = p;
	return AL_LOOP_NEXT;
}

/* A record of the chain's types, its data of rdlen bytes at p: its owner
 * is compared with the chain's current name from the next step on. */
static __always_inline long al_rr_compare(struct al_scratch *s, __u32 type, __u32 ttl, __u32 p, __u32 rdlen)
{
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
	return AL_LOOP_NEXT;
}

/* An A record: an IPv4 address, 4 bytes. */
static __always_inline long al_rr_a(struct al_scratch *s, __u32 ttl, __u32 p, __u32 rdlen)
{
	if (rdlen != 4)
		return al_rr_fail(s);
	return al_rr_compare(s, AL_DNS_TYPE_A, ttl, p, rdlen);
}

/* An AAAA record: an IPv6 address, 16 bytes. */
static __always_inline long al_rr_aaaa(struct al_scratch *s, __u32 ttl, __u32 p, __u32 rdlen)
{
	if (rdlen != 16)
		return al_rr_fail(s);
	return al_rr_compare(s, AL_DNS_TYPE_AAAA, ttl, p, rdlen);
}

/* A CNAME record: its target, a name of at least the root's byte. */
static __always_inline long al_rr_cname(struct al_scratch *s, __u32 ttl, __u32 p, __u32 rdlen)
{
	if (rdlen < 1)
		return al_rr_fail(s);
	return al_rr_compare(s, AL_DNS_TYPE_CNAME, ttl, p, rdlen);
}

/* A record's fixed part, at p: type, class, TTL and data length. Its class
 * and type choose its step; a record of any other class or type is
 * skipped whole. */
static __always_inline long al_rr_fixed(struct al_scratch *s, __u32 p)
{
	__u32 len = s->len;

	if (p + 10 > len)
		return al_rr_fail(s);
	__u32 type = al_msg16(s, p), class = al_msg16(s, p + 2), ttl = al_msg32(s, p + 4);
	__u32 rdlen = al_msg16(s, p + 8);

	p += 10;
	if (p + rdlen > len)
		return al_rr_fail(s);
	if (class != AL_DNS_CLASS_IN)
		return al_rr_next(s, p + rdlen);
	if (type == AL_DNS_TYPE_A)
		return al_rr_a(s, ttl, p, rdlen);
	if (type == AL_DNS_TYPE_AAAA)
		return al_rr_aaaa(s, ttl, p, rdlen);
	if (type == AL_DNS_TYPE_CNAME)
		return al_rr_cname(s, ttl, p, rdlen);
	return al_rr_next(s, p + rdlen);
}

/* One step of the walk over the answer records: a label of an owner name
 * (compressed or not), a record's fixed part, or one byte of the
 * comparison of an A, AAAA or CNAME record's owner with the current name
 * of the question's CNAME chain. One flat loop of small steps, not a loop
 * in a loop, keeps the verifier's work small on every kernel. */
static long al_rr_step(__u32 i, void *ctx)
{
	struct al_scratch *s = ((struct al_loop_ctx *)ctx)->s;
	__u32 p = s->rr_p;

	if (s->rr_left == 0)
		return AL_LOOP_STOP;
	if (s->rr_in_name == AL_RR_CMP)
		return al_rr_cmp(s);
	if (p >= s->len || p >= AL_DNS_MSG_MAX)
		return al_rr_fail(s);
	if (s->rr_in_name == AL_RR_OWNER)
		return al_rr_owner(s, p);
	return al_rr_fixed(s, p);
}

struct al_learn_ctx {
	struct al_scratch *s;
	void *table; /* the sandbox's learned addresses */
	struct al_dns_policy *dp;
	struct al_counters *c;
	__u64 cgid;
	__u64 now;
	__u32 slot;
	__u32 policy_id;
	__u16 rule;
	__u8 allowed; /* the question's name is allowed: learn */
	__u8 report;  /* emit an event per address */
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
			.reason = learned           ? AL_REASON_LEARNED
				  : s->off_chain[i] ? AL_REASON_DNS_OFF_CHAIN
				  : lc->allowed     ? AL_REASON_DNS_TABLE
						    : AL_REASON_NO_RULE,
			.rule = lc->rule,
		};

		__builtin_memcpy(a.addr, s->answers[i].addr, sizeof(a.addr));
		al_emit_dns(lc->c, AL_HOOK_INGRESS, lc->cgid, lc->slot, lc->policy_id, &a, &d, &s->lv.name, s->qtype,
			    s->qid, s->name_bytes, learned, ttl);
	}
	return AL_LOOP_NEXT;
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
		al_emit_dns(c, AL_HOOK_INGRESS, cgid, sb->slot, sb->policy_id, &from, &d, &s->lv.name, s->qtype, s->qid,
			    s->name_bytes, 0, 0);
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
		bpf_loop(AL_DNS_MAX_RRS * (AL_DNS_MAX_LABELS + 2 + 2 * 256 + 2 * AL_DNS_PTR_HOPS), al_rr_step, &walk,
			 0);
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
