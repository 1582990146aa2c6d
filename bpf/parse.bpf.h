/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Packet parsing for cgroup_skb: the real destination of what leaves.
 * Anything the parser cannot walk to the end is reported, never passed. */
#ifndef AIRLOCK_PARSE_BPF_H
#define AIRLOCK_PARSE_BPF_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include "events.bpf.h"

#define AL_IPOPT_EOL 0
#define AL_IPOPT_NOP 1
#define AL_IPOPT_LSRR 0x83
#define AL_IPOPT_SSRR 0x89
#define AL_IPV4_MAX_OPTLEN 40
#define AL_IPV6_MAX_EXTHDRS 8

#define AL_NEXTHDR_HOP 0
#define AL_NEXTHDR_ROUTING 43
#define AL_NEXTHDR_FRAGMENT 44
#define AL_NEXTHDR_DEST 60

/* Every read of the packet goes through al_load, with the place it is made
 * (al_err_site). A packet that ends before the bytes its headers promise
 * is malformed (short, the caller's reason); a load of bytes that are in
 * the packet and fails all the same is the helper's failure, counted by
 * site and reported as such (AL_REASON_HELPER), never as a malformed
 * packet. The BPF unit tests define al_skb_load before this header to make
 * the load at one site fail (tests/bpf/). */
#ifndef al_skb_load
#define al_skb_load(skb, off, to, len, site) bpf_skb_load_bytes(skb, off, to, len)
#endif

/* Returns 0, short, or AL_REASON_HELPER with the site in *err_site. */
static __always_inline int al_load(struct __sk_buff *skb, __u32 off, void *to, __u32 len, __u8 site, __u8 *err_site,
				   int short_reason)
{
	if (off + len > skb->len)
		return short_reason;
	if (al_skb_load(skb, off, to, len, site) == 0)
		return 0;
	*err_site = site;
	return AL_REASON_HELPER;
}

/* Returns 0, or the al_reason that forbids the packet whatever its address. */
static __always_inline int al_parse_ipv4_options(struct __sk_buff *skb, __u32 optlen, struct al_dest *dst)
{
	__u32 off = 0;

	for (int i = 0; i < AL_IPV4_MAX_OPTLEN; i++) {
		__u8 hdr[2];
		int r;

		if (off >= optlen)
			return 0;
		r = al_load(skb, sizeof(struct iphdr) + off, hdr, 1, AL_ERR_SITE_IPV4_OPTION, &dst->err_site,
			    AL_REASON_MALFORMED);
		if (r)
			return r;
		if (hdr[0] == AL_IPOPT_EOL)
			return 0;
		if (hdr[0] == AL_IPOPT_NOP) {
			off++;
			continue;
		}
		if (off + 1 >= optlen)
			return AL_REASON_MALFORMED;
		r = al_load(skb, sizeof(struct iphdr) + off, hdr, 2, AL_ERR_SITE_IPV4_OPTION, &dst->err_site,
			    AL_REASON_MALFORMED);
		if (r)
			return r;
		if (hdr[0] == AL_IPOPT_LSRR || hdr[0] == AL_IPOPT_SSRR)
			return AL_REASON_SOURCE_ROUTE;
		if (hdr[1] < 2 || off + hdr[1] > optlen)
			return AL_REASON_MALFORMED;
		off += hdr[1];
	}
	return off >= optlen ? 0 : AL_REASON_MALFORMED;
}

static __always_inline int al_load_port(struct __sk_buff *skb, __u32 l4off, struct al_dest *dst)
{
	__be16 ports[2];
	int r;

	if (dst->protocol != IPPROTO_TCP && dst->protocol != IPPROTO_UDP) {
		dst->port = 0;
		return 0;
	}
	r = al_load(skb, l4off, ports, sizeof(ports), AL_ERR_SITE_L4_PORTS, &dst->err_site, AL_REASON_MALFORMED);
	if (r)
		return r;
	dst->sport = bpf_ntohs(ports[0]);
	dst->port = bpf_ntohs(ports[1]);
	dst->l4off = l4off;
	return 0;
}

static __always_inline int al_parse_ipv4(struct __sk_buff *skb, struct al_dest *dst)
{
	struct iphdr iph;
	int r;

	r = al_load(skb, 0, &iph, sizeof(iph), AL_ERR_SITE_IPV4_HEADER, &dst->err_site, AL_REASON_MALFORMED);
	if (r)
		return r;
	if (iph.version != 4 || iph.ihl < 5)
		return AL_REASON_MALFORMED;
	al_dest_ip4(dst, iph.daddr);
	__builtin_memcpy(dst->saddr, &iph.saddr, 4);
	dst->protocol = iph.protocol;
	dst->port = 0;
	/* Fragmentation happens after this hook for local traffic: a fragment
	 * here was built by hand. */
	if (iph.frag_off & bpf_htons(0x3fff))
		return AL_REASON_FRAGMENT;
	if (iph.ihl > 5) {
		r = al_parse_ipv4_options(skb, iph.ihl * 4 - sizeof(iph), dst);
		if (r)
			return r;
	}
	return al_load_port(skb, iph.ihl * 4, dst);
}

static __always_inline int al_parse_ipv6(struct __sk_buff *skb, struct al_dest *dst)
{
	struct ipv6hdr ip6h;
	int r;

	r = al_load(skb, 0, &ip6h, sizeof(ip6h), AL_ERR_SITE_IPV6_HEADER, &dst->err_site, AL_REASON_MALFORMED);
	if (r)
		return r;
	if (ip6h.version != 6)
		return AL_REASON_MALFORMED;
	dst->family = AL_FAMILY_IPV6;
	__builtin_memcpy(dst->addr, &ip6h.daddr, 16);
	__builtin_memcpy(dst->saddr, &ip6h.saddr, 16);
	dst->port = 0;

	__u8 next = ip6h.nexthdr;
	__u32 off = sizeof(ip6h);

	for (int i = 0; i < AL_IPV6_MAX_EXTHDRS; i++) {
		__u8 ext[2];

		switch (next) {
		case AL_NEXTHDR_HOP:
		case AL_NEXTHDR_DEST:
			r = al_load(skb, off, ext, sizeof(ext), AL_ERR_SITE_IPV6_EXT, &dst->err_site,
				    AL_REASON_MALFORMED);
			if (r)
				return r;
			next = ext[0];
			off += (ext[1] + 1) * 8;
			continue;
		case AL_NEXTHDR_ROUTING:
			dst->protocol = next;
			return AL_REASON_ROUTING_HEADER;
		case AL_NEXTHDR_FRAGMENT:
			dst->protocol = next;
			return AL_REASON_FRAGMENT;
		default:
			dst->protocol = next;
			return al_load_port(skb, off, dst);
		}
	}
	dst->protocol = next;
	return AL_REASON_MALFORMED;
}

/* Fills dst with what the packet is really sent to (and, for DNS, where it
 * comes from). Returns 0 or the
 * al_reason that makes it a violation before any rule is consulted. */
static __always_inline int al_parse_packet(struct __sk_buff *skb, struct al_dest *dst)
{
	__builtin_memset(dst, 0, sizeof(*dst));
	if (skb->protocol == bpf_htons(ETH_P_IP))
		return al_parse_ipv4(skb, dst);
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return al_parse_ipv6(skb, dst);
	return AL_REASON_MALFORMED;
}

#endif
