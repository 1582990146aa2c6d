/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* DNS in the kernel, the wire: a message's header, its names and its
 * question, read off a copy of the message in the per-CPU scratch. A query
 * is judged at egress (dns_query.bpf.h), an answer learned at ingress
 * (dns_answer.bpf.h); whatever their parsers cannot walk to the end is
 * refused. */
#ifndef AIRLOCK_DNS_WIRE_BPF_H
#define AIRLOCK_DNS_WIRE_BPF_H

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
#define AL_DNS_HDR_TC 0x0200 /* truncated */
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
		return AL_LOOP_STOP;
	}
	__u32 l = al_msg8(s, p);
	if (l == 0) {
		s->w_p = p + 1;
		s->w_done = 1;
		return AL_LOOP_STOP;
	}
	/* A compression pointer (or an obsolete label type): a question never
	 * needs one, so it is refused rather than followed. */
	if (l & 0xc0) {
		s->w_err = AL_REASON_DNS_MALFORMED;
		return AL_LOOP_STOP;
	}
	/* A label that runs past the end is malformed, however long the name
	 * would have been. */
	if (p + l >= s->len) {
		s->w_err = AL_REASON_DNS_MALFORMED;
		return AL_LOOP_STOP;
	}
	if (l > s->w_max_label)
		s->w_max_label = l;
	s->w_n += l + 1;
	s->w_p = p + l + 1;
	if (s->w_n > AL_DNS_NAME_BYTES - 1) {
		s->w_err = AL_REASON_DNS_LENGTH;
		return AL_LOOP_STOP;
	}
	return AL_LOOP_NEXT;
}

/* Byte j of the name goes to its place in reversed-label order, lowercased:
 * a label starting at s with length l lands at n - (s + l + 1). */
static long al_rev_byte(__u32 j, void *ctx)
{
	struct al_scratch *s = ((struct al_loop_ctx *)ctx)->s;
	struct al_name_key *key = ((struct al_loop_ctx *)ctx)->key;

	if (j >= s->r_n)
		return AL_LOOP_STOP;
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
		return AL_LOOP_STOP;
	key->name[o] = b;
	return AL_LOOP_NEXT;
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
	__u32 end; /* just after its type and class */
	__u32 n;   /* bytes of the name (al_name_key form) */
	__u32 max_label;
	__u16 qtype;
	__u16 qclass;
};

#endif
