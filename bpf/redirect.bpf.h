/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Redirects: a connect that a redirect rule matches goes to the sandbox's
 * proxy listener, and the socket keeps where it was meant to go. The proxy
 * finds that from the connection it accepts (al_origin, filed by sockops),
 * the application from getpeername. Only redirected sockets reach the
 * proxy's port; a packet to a redirected destination itself never leaves. */
#ifndef AIRLOCK_REDIRECT_BPF_H
#define AIRLOCK_REDIRECT_BPF_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "events.bpf.h"

static __always_inline struct al_proxy *al_proxy_of(__u32 slot)
{
	struct al_proxy *px = bpf_map_lookup_elem(&al_proxy, &slot);

	return px && px->port ? px : 0;
}

/* The slot whose proxy the destination is, or 0: a proxy's port at the
 * address every proxy listens on (127.0.0.1, ::1), or at the unspecified
 * one, which a connect takes for this host's loopback (0.0.0.0 is
 * 127.0.0.1, :: is ::1). Any sandbox's proxy, not only this one's. */
static __always_inline __u32 *al_proxy_slot_of(const struct al_dest *dst)
{
	const __u32 *w = (const __u32 *)dst->addr;
	__u32 port = dst->port;
	int local;

	if (dst->family == AL_FAMILY_IPV4)
		local = w[0] == bpf_htonl(0x7f000001) || w[0] == 0;
	else
		local = !(w[0] | w[1] | w[2]) && (w[3] == bpf_htonl(1) || w[3] == 0);
	return local ? bpf_map_lookup_elem(&al_proxy_port, &port) : 0;
}

/* The proxy has a socket for this destination's protocol and family. */
static __always_inline int al_proxy_takes(const struct al_proxy *px, const struct al_dest *dst)
{
	int v6 = dst->family == AL_FAMILY_IPV6;

	if (dst->protocol == IPPROTO_UDP)
		return px->flags & (v6 ? AL_PROXY_UDP6 : AL_PROXY_UDP4);
	return !v6 || (px->flags & AL_PROXY_IPV6);
}

/* The rule's target of the operator's ("to": "HOST:PORT"), or 0: the proxy. */
static __always_inline const struct al_target *al_target_of(const struct al_sandbox *sb, __u16 rule)
{
	struct al_target_key key = { .policy_id = sb->policy_id, .rule = rule };

	return bpf_map_lookup_elem(&al_target, &key);
}

/* The socket remembers where a redirected connect or datagram meant to go.
 * Returns 0 when it cannot (then nothing is rewritten). */
static __always_inline struct al_sk_origin *al_keep_origin(struct bpf_sock_addr *ctx, const struct al_sandbox *sb,
							   const struct al_dest *dst, __u16 rule)
{
	struct al_sk_origin *so = bpf_sk_storage_get(&al_sk_origin, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

	if (!so)
		return 0;
	so->origin.family = dst->family;
	so->origin.protocol = dst->protocol;
	so->origin.port = dst->port;
	so->origin.rule = rule;
	so->origin.slot = sb->slot;
	__builtin_memcpy(so->origin.addr, dst->addr, sizeof(so->origin.addr));
	so->netns_cookie = bpf_get_netns_cookie(ctx);
	so->flags = AL_SK_REDIRECTED;
	return so;
}

/* The call goes on to ADDR:PORT instead. The family of the socket decides
 * how it is written: an IPv6 socket reaches an IPv4 address as
 * ::ffff:a.b.c.d. An IPv4 socket cannot name an IPv6 one (the caller
 * refuses that first). */
static __always_inline void al_rewrite(struct bpf_sock_addr *ctx, int v6, __u8 family, const __u8 *addr, __u16 port)
{
	const __u32 *a = (const __u32 *)addr;

	ctx->user_port = bpf_htons(port);
	if (!v6) {
		ctx->user_ip4 = a[0];
	} else if (family == AL_FAMILY_IPV4) {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0x0000ffff);
		ctx->user_ip6[3] = a[0];
	} else {
		ctx->user_ip6[0] = a[0];
		ctx->user_ip6[1] = a[1];
		ctx->user_ip6[2] = a[2];
		ctx->user_ip6[3] = a[3];
	}
}

/* The redirect of a connect or a datagram to the sandbox's proxy: its IPv4
 * listener for an IPv4 destination (v4-mapped from an IPv6 socket), its
 * IPv6 one for an IPv6 destination. */
static __always_inline int al_redirect(struct bpf_sock_addr *ctx, const struct al_sandbox *sb,
				       const struct al_dest *dst, __u16 rule, const struct al_proxy *px, int v6)
{
	if (!al_keep_origin(ctx, sb, dst, rule))
		return 0;
	if (v6 && dst->family == AL_FAMILY_IPV6)
		al_rewrite(ctx, v6, AL_FAMILY_IPV6, px->addr6, px->port);
	else
		al_rewrite(ctx, v6, AL_FAMILY_IPV4, (const __u8 *)&px->addr4, px->port);
	return 1;
}

/* The redirect to a target of the operator's: the socket keeps the target
 * too, which its packets may reach and its answers come from. */
static __always_inline int al_redirect_target(struct bpf_sock_addr *ctx, const struct al_sandbox *sb,
					      const struct al_dest *dst, __u16 rule, const struct al_target *t, int v6)
{
	struct al_sk_origin *so = al_keep_origin(ctx, sb, dst, rule);

	if (!so)
		return 0;
	so->flags = AL_SK_REDIRECTED | AL_SK_TARGET;
	so->target = *t;
	al_rewrite(ctx, v6, t->family, t->addr, t->port);
	return 1;
}

/* A socket that connects again, elsewhere, is no longer redirected. */
static __always_inline void al_redirect_forget(struct bpf_sock_addr *ctx)
{
	struct al_sk_origin *so = bpf_sk_storage_get(&al_sk_origin, ctx->sk, 0, 0);

	if (so)
		so->flags = 0;
}

/* What a connect or sendmsg does with a destination the rules decided (D):
 * the proxy's own port is never reached directly; a redirect goes to the
 * proxy (a TCP connect, a UDP connect or datagram), or is refused (UDP the
 * proxy takes no datagrams of, any other protocol), or fails closed (no
 * proxy, or none for IPv6). */
static __always_inline void al_redirect_decide(struct bpf_sock_addr *ctx, const struct al_sandbox *sb,
					       const struct al_dest *dst, struct al_decision *d, int v6, int connect)
{
	struct al_proxy *px = al_proxy_of(sb->slot);

	if (al_proxy_slot_of(dst)) {
		d->verdict = AL_VERDICT_DENY;
		d->reason = AL_REASON_PROXY_PORT;
		d->rule = AL_RULE_NONE;
		return;
	}
	if (d->verdict != AL_VERDICT_ALLOW || d->reason != AL_REASON_REDIRECT) {
		if (connect && d->verdict == AL_VERDICT_ALLOW)
			al_redirect_forget(ctx);
		return;
	}
	d->verdict = AL_VERDICT_DENY;
	const struct al_target *t = al_target_of(sb, d->rule);
	if (dst->protocol == IPPROTO_TCP ? !connect : dst->protocol != IPPROTO_UDP)
		d->reason = AL_REASON_REDIRECT_UDP;
	else if (t && !v6 && t->family == AL_FAMILY_IPV6)
		d->reason = AL_REASON_REDIRECT_FAMILY;
	else if (t && !al_redirect_target(ctx, sb, dst, d->rule, t, v6))
		d->reason = AL_REASON_BUSY;
	else if (t) {
		d->verdict = AL_VERDICT_ALLOW;
		d->reason = AL_REASON_REDIRECT;
	} else if (!px)
		d->reason = AL_REASON_NO_PROXY;
	else if (!al_proxy_takes(px, dst))
		d->reason = dst->protocol == IPPROTO_UDP ? AL_REASON_REDIRECT_UDP : AL_REASON_NO_PROXY;
	else if (!al_redirect(ctx, sb, dst, d->rule, px, v6))
		d->reason = AL_REASON_BUSY;
	else {
		d->verdict = AL_VERDICT_ALLOW;
		d->reason = AL_REASON_REDIRECT;
	}
}

/* A packet to a loopback address (127/8, ::1) that leaves through another
 * device: a socket bound to a device (SO_BINDTODEVICE, IP_UNICAST_IF, an
 * IP_PKTINFO ifindex) makes the route lookup skip lo, and the packet goes
 * out to the gateway with the loopback address on it. Whatever allowed
 * loopback (a rule, a redirect to the proxy), that is not loopback. */
#define AL_LOOPBACK_IFINDEX 1
static __always_inline int al_loopback_elsewhere(const struct __sk_buff *skb, const struct al_dest *dst)
{
	const __u32 *w = (const __u32 *)dst->addr;
	int loopback = dst->family == AL_FAMILY_IPV4 ? dst->addr[0] == 127
						     : !(w[0] | w[1] | w[2]) && w[3] == bpf_htonl(1);

	return loopback && skb->ifindex != AL_LOOPBACK_IFINDEX;
}

/* A redirected datagram as it leaves: its origin is filed under its
 * source address and port, which is what the proxy receives it from. */
static __always_inline void *al_origin_table_of(__u32 slot)
{
	return bpf_map_lookup_elem(&al_origin, &slot);
}

static __always_inline void al_file_datagram(const struct al_sk_origin *so, const struct al_dest *dst)
{
	struct al_origin_key key = {};
	void *table = al_origin_table_of(so->origin.slot);

	if (!table)
		return;

	key.netns_cookie = so->netns_cookie;
	key.family = dst->family;
	key.port = dst->sport;
	key.protocol = IPPROTO_UDP;
	__builtin_memcpy(key.addr, dst->saddr, sizeof(key.addr));
	bpf_map_update_elem(table, &key, &so->origin, BPF_ANY);
}

/* Egress: a packet to the proxy's port passes only from a redirected
 * socket (and a datagram's origin is filed); one to a redirected
 * destination itself is a socket that got past its connect or sendmsg
 * hook, and never leaves. Returns 1 when it decided. */
/* The destination is where the socket was redirected to, by a target rule. */
static __always_inline int al_is_target(const struct al_sk_origin *so, const struct al_dest *dst)
{
	const __u32 *a = (const __u32 *)dst->addr, *b = (const __u32 *)so->target.addr;

	return (so->flags & (AL_SK_REDIRECTED | AL_SK_TARGET)) == (AL_SK_REDIRECTED | AL_SK_TARGET) &&
	       dst->family == so->target.family && dst->port == so->target.port &&
	       ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3])) == 0;
}

/* The rule that redirected the socket still sends it to that target under
 * the sandbox's policy now (a reload may have changed or removed it). */
static __always_inline int al_target_still(const struct al_sandbox *sb, const struct al_sk_origin *so)
{
	const struct al_target *t = al_target_of(sb, so->origin.rule);

	return t && so->origin.slot == sb->slot && t->family == so->target.family && t->port == so->target.port &&
	       al_addr_eq(t->addr, so->target.addr);
}

/* The origin kept for a packet's socket, if it has one. */
static __always_inline struct al_sk_origin *al_skb_origin(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;

	if (sk)
		sk = bpf_sk_fullsock(sk);
	return sk ? bpf_sk_storage_get(&al_sk_origin, sk, 0, 0) : 0;
}

static __always_inline void al_pass_redirected(const struct al_sk_origin *so, struct al_decision *d)
{
	d->verdict = AL_VERDICT_ALLOW;
	d->reason = AL_REASON_REDIRECT;
	d->rule = so->origin.rule;
	d->quiet = 1;
}

/* A packet to a proxy's port: decided here, denied unless its socket was
 * redirected to that proxy. A packet to a target (a sandbox with target
 * rules only looks): passed if its socket was redirected there, with the
 * protocol it was redirected with, under a rule that still sends it there.
 * Returns 0 when the rules are to decide. */
static __always_inline int al_redirect_egress(struct __sk_buff *skb, const struct al_sandbox *sb,
					      const struct al_dest *dst, struct al_decision *d)
{
	__u32 *ps = al_proxy_slot_of(dst);
	struct al_sk_origin *so;

	if (!ps) {
		if (!(sb->flags & AL_SB_TARGETS))
			return 0;
		so = al_skb_origin(skb);
		if (!so || !al_is_target(so, dst) || dst->protocol != so->origin.protocol || !al_target_still(sb, so))
			return 0;
		al_pass_redirected(so, d);
		return 1;
	}
	d->rule = AL_RULE_NONE;
	d->verdict = AL_VERDICT_DENY;
	d->reason = AL_REASON_PROXY_PORT;
	so = al_skb_origin(skb);
	if (so && (so->flags & AL_SK_REDIRECTED) && dst->protocol == so->origin.protocol && so->origin.slot == *ps) {
		al_pass_redirected(so, d);
		if (dst->protocol == IPPROTO_UDP)
			al_file_datagram(so, dst);
	}
	return 1;
}

/* getpeername shows the application where it meant to go. */
static __always_inline struct al_sk_origin *al_redirected(struct bpf_sock_addr *ctx)
{
	struct bpf_sock *sk = ctx->sk;
	struct al_sk_origin *so;

	if (!sk)
		return 0;
	so = bpf_sk_storage_get(&al_sk_origin, sk, 0, 0);
	return so && (so->flags & AL_SK_REDIRECTED) ? so : 0;
}

/* An address as a key: ::ffff:a.b.c.d as IPv4. Returns its family. */
static __always_inline __u8 al_key_addr(__u8 *out, __u32 family, __u32 ip4, const __u32 ip6[4])
{
	if (family == 2 /* AF_INET */) {
		__builtin_memcpy(out, &ip4, 4);
		return AL_FAMILY_IPV4;
	}
	if (ip6[0] == 0 && ip6[1] == 0 && ip6[2] == bpf_htonl(0x0000ffff)) {
		__builtin_memcpy(out, &ip6[3], 4);
		return AL_FAMILY_IPV4;
	}
	__builtin_memcpy(out, ip6, 16);
	return AL_FAMILY_IPV6;
}

static __always_inline void *al_target_origin_table_of(__u32 slot)
{
	return bpf_map_lookup_elem(&al_target_origin, &slot);
}

/* 127.0.0.0/8 or ::1. */
static __always_inline int al_is_loopback(__u8 family, const __u8 *addr)
{
	const __u32 *w = (const __u32 *)addr;

	return family == AL_FAMILY_IPV4 ? addr[0] == 127 : !(w[0] | w[1] | w[2]) && w[3] == bpf_htonl(1);
}

/* A connection to a target as the target sees it: both its ends. */
static __always_inline int al_target_origin_key_of(struct bpf_sock_ops *skops, const struct al_sk_origin *so,
						   struct al_target_origin_key *key)
{
	__u32 l6[4] = { skops->local_ip6[0], skops->local_ip6[1], skops->local_ip6[2], skops->local_ip6[3] };
	__u32 r6[4] = { skops->remote_ip6[0], skops->remote_ip6[1], skops->remote_ip6[2], skops->remote_ip6[3] };

	key->protocol = IPPROTO_TCP;
	key->port = (__u16)skops->local_port;
	key->target_port = (__u16)bpf_ntohl(skops->remote_port);
	key->family = al_key_addr(key->addr, skops->family, skops->local_ip4, l6);
	if (al_key_addr(key->target, skops->family, skops->remote_ip4, r6) != key->family)
		return 0;
	key->netns_cookie = al_is_loopback(key->family, key->target) ? so->netns_cookie : 0;
	return 1;
}

/* A connection to a target, as it starts: filed with the time, its state
 * changes followed. The entry outlives the client's socket for a grace
 * period (a target may ask after a client that sent and closed is gone);
 * a later connection with the same ends, of any sandbox, is newer and
 * answers instead. */
static __always_inline void al_file_target_origin(struct bpf_sock_ops *skops, struct al_sk_origin *so)
{
	struct al_target_origin_key key = {};
	struct al_target_origin v = { .origin = so->origin };
	void *table = al_target_origin_table_of(so->origin.slot);

	if (!table || !al_target_origin_key_of(skops, so, &key))
		return;
	v.filed_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(table, &key, &v, BPF_ANY) == 0) {
		so->flags |= AL_SK_FILED;
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
	}
}

/* sockops, as a connection to a target closes: its entry says when, and
 * answers for AL_TARGET_GRACE_NS more. */
static __always_inline void al_close_target_origin(struct bpf_sock_ops *skops)
{
	struct al_target_origin_key key = {};
	struct bpf_sock *sk = skops->sk;
	struct al_target_origin *v;
	struct al_sk_origin *so;
	void *table;

	if (!sk || skops->args[1] != BPF_TCP_CLOSE)
		return;
	so = bpf_sk_storage_get(&al_sk_origin, sk, 0, 0);
	if (!so || (so->flags & (AL_SK_TARGET | AL_SK_FILED)) != (AL_SK_TARGET | AL_SK_FILED))
		return;
	so->flags &= ~AL_SK_FILED;
	table = al_target_origin_table_of(so->origin.slot);
	if (!table || !al_target_origin_key_of(skops, so, &key))
		return;
	v = bpf_map_lookup_elem(table, &key);
	if (v && !v->closed_ns)
		v->closed_ns = bpf_ktime_get_ns();
}

/* sockops, as the connection starts: file the origin under the client's
 * address and port, which is what the proxy sees of it. */
static __always_inline void al_file_origin(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct al_origin_key key = {};
	struct al_sk_origin *so;

	if (!sk)
		return;
	so = bpf_sk_storage_get(&al_sk_origin, sk, 0, 0);
	if (!so || !(so->flags & AL_SK_REDIRECTED))
		return;
	if (so->flags & AL_SK_TARGET) {
		al_file_target_origin(skops, so);
		return;
	}
	key.netns_cookie = so->netns_cookie;
	key.port = (__u16)skops->local_port;
	key.protocol = IPPROTO_TCP;
	if (skops->family == 2 /* AF_INET */) {
		key.family = AL_FAMILY_IPV4;
		__u32 a = skops->local_ip4;
		__builtin_memcpy(key.addr, &a, 4);
	} else {
		__u32 a[4] = { skops->local_ip6[0], skops->local_ip6[1], skops->local_ip6[2], skops->local_ip6[3] };

		if (a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0x0000ffff)) {
			key.family = AL_FAMILY_IPV4;
			__builtin_memcpy(key.addr, &a[3], 4);
		} else {
			key.family = AL_FAMILY_IPV6;
			__builtin_memcpy(key.addr, a, 16);
		}
	}
	void *table = al_origin_table_of(so->origin.slot);
	if (table && bpf_map_update_elem(table, &key, &so->origin, BPF_ANY) == 0)
		so->flags |= AL_SK_FILED;
}

#endif
