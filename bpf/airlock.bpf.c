// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* airlock's hooks. Each is a few lines in front of the shared verdict
 * library (verdict.bpf.h), and returns the constant named there for its
 * kind: AL_PASS or AL_DROP (sock_create, sock_addr: the call goes on or
 * fails with EPERM; cgroup_skb: the packet passes or is dropped),
 * AL_SOCKOPS_DONE, AL_SOCKOPT_KEEP, AL_TP_DONE. */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/socket.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "verdict.bpf.h"
#include "parse.bpf.h"
#include "dns_query.bpf.h"
#include "dns_answer.bpf.h"
#include "unix.bpf.h"

#define AL_AF_INET 2
#define AL_AF_INET6 10
#define AL_PAGE_SIZE 4096
#define AL_SOCK_DGRAM 2
#define AL_SOCK_RAW 3

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("cgroup/sock_create")
int al_sock_create(struct bpf_sock *sk)
{
	struct al_dest dst = { .protocol = (__u8)sk->protocol };
	struct al_decision d = { .verdict = AL_VERDICT_ALLOW, .rule = AL_RULE_NONE };
	__u64 cgid;
	struct al_sandbox *sb;

	if (sk->family != AL_AF_INET && sk->family != AL_AF_INET6)
		return AL_PASS;
	sb = al_sandbox_of_task(&cgid);
	if (!sb)
		return al_no_sandbox(AL_HOOK_SOCK_CREATE, cgid, &dst);
	struct al_counters *c = al_counters_of(sb->slot);

	if (al_latched(sb->slot))
		return al_quarantined(AL_HOOK_SOCK_CREATE, c);
	if (sk->type == AL_SOCK_RAW) {
		d.verdict = AL_VERDICT_DENY;
		d.reason = AL_REASON_RAW_SOCKET;
	} else if (sk->type == AL_SOCK_DGRAM && (sk->protocol == IPPROTO_ICMP || sk->protocol == IPPROTO_ICMPV6) &&
		   !(sb->flags & AL_SB_ALLOW_ICMP)) {
		d.verdict = AL_VERDICT_DENY;
		d.reason = AL_REASON_ICMP_SOCKET;
	}
	if (d.verdict == AL_VERDICT_ALLOW)
		return AL_PASS; /* creating a socket is not yet egress: not counted */
	dst.family = sk->family == AL_AF_INET ? AL_FAMILY_IPV4 : AL_FAMILY_IPV6;
	return al_finish(AL_HOOK_SOCK_CREATE, sb, c, cgid, &dst, &d, 0);
}

static __always_inline int al_addr4(struct bpf_sock_addr *ctx, __u8 hook, int connect)
{
	struct al_dest dst = { .protocol = (__u8)ctx->protocol };

	al_dest_ip4(&dst, ctx->user_ip4);
	dst.port = bpf_ntohs((__u16)ctx->user_port);
	return al_decide_task(hook, &dst, ctx, 0, connect);
}

static __always_inline int al_addr6(struct bpf_sock_addr *ctx, __u8 hook, int connect)
{
	struct al_dest dst = { .protocol = (__u8)ctx->protocol };
	__u32 ip6[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3] };

	al_dest_ip6(&dst, ip6);
	dst.port = bpf_ntohs((__u16)ctx->user_port);
	return al_decide_task(hook, &dst, ctx, 1, connect);
}

SEC("cgroup/connect4")
int al_connect4(struct bpf_sock_addr *ctx)
{
	return al_addr4(ctx, AL_HOOK_CONNECT4, 1);
}

SEC("cgroup/connect6")
int al_connect6(struct bpf_sock_addr *ctx)
{
	return al_addr6(ctx, AL_HOOK_CONNECT6, 1);
}

/* A connected UDP socket that sends with ancillary data reaches sendmsg with
 * no address (0.0.0.0:0): the datagram goes to the socket's peer, so that is
 * what is judged; for a redirected socket, whose peer is the proxy, where it
 * meant to go. */
static __always_inline int al_peer_datagram(struct bpf_sock_addr *ctx, __u8 hook, struct al_dest *dst, int v6)
{
	struct al_sk_origin *so = al_redirected(ctx);

	if (so) {
		dst->family = so->origin.family;
		dst->port = so->origin.port;
		__builtin_memcpy(dst->addr, so->origin.addr, sizeof(dst->addr));
	}
	return al_decide_task(hook, dst, ctx, v6, 0);
}

SEC("cgroup/sendmsg4")
int al_sendmsg4(struct bpf_sock_addr *ctx)
{
	struct bpf_sock *sk = ctx->sk;

	if (sk && sk->dst_ip4 &&
	    ((ctx->user_ip4 == 0 && ctx->user_port == 0) ||
	     /* An IPv6 socket connected to a v4-mapped address: its sends come
	      * here with the peer written out (the proxy, when redirected). */
	     (ctx->user_ip4 == sk->dst_ip4 && bpf_ntohs((__u16)ctx->user_port) == bpf_ntohs(sk->dst_port) &&
	      al_redirected(ctx)))) {
		struct al_dest dst = { .protocol = (__u8)ctx->protocol };

		al_dest_ip4(&dst, sk->dst_ip4);
		dst.port = bpf_ntohs(sk->dst_port);
		return al_peer_datagram(ctx, AL_HOOK_SENDMSG4, &dst, 0);
	}
	return al_addr4(ctx, AL_HOOK_SENDMSG4, 0);
}

SEC("cgroup/sendmsg6")
int al_sendmsg6(struct bpf_sock_addr *ctx)
{
	struct bpf_sock *sk = ctx->sk;

	if (!(ctx->user_ip6[0] | ctx->user_ip6[1] | ctx->user_ip6[2] | ctx->user_ip6[3]) && ctx->user_port == 0 && sk &&
	    (sk->dst_ip6[0] | sk->dst_ip6[1] | sk->dst_ip6[2] | sk->dst_ip6[3])) {
		struct al_dest dst = { .protocol = (__u8)ctx->protocol };
		__u32 ip6[4] = { sk->dst_ip6[0], sk->dst_ip6[1], sk->dst_ip6[2], sk->dst_ip6[3] };

		al_dest_ip6(&dst, ip6);
		dst.port = bpf_ntohs(sk->dst_port);
		return al_peer_datagram(ctx, AL_HOOK_SENDMSG6, &dst, 1);
	}
	return al_addr6(ctx, AL_HOOK_SENDMSG6, 0);
}

/* Where a redirected socket meant to go, written into the address a
 * getpeername or recvmsg returns: an IPv4 socket's (an IPv4 origin only),
 * an IPv6 socket's (an IPv4 origin as ::ffff:a.b.c.d). */
static __always_inline void al_show_origin4(struct bpf_sock_addr *ctx, const struct al_sk_origin *so)
{
	if (so->origin.family != AL_FAMILY_IPV4)
		return;
	ctx->user_ip4 = *(const __u32 *)so->origin.addr;
	ctx->user_port = bpf_htons(so->origin.port);
}

static __always_inline void al_show_origin6(struct bpf_sock_addr *ctx, const struct al_sk_origin *so)
{
	const __u32 *a = (const __u32 *)so->origin.addr;

	if (so->origin.family == AL_FAMILY_IPV4) {
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
	ctx->user_port = bpf_htons(so->origin.port);
}

/* A redirected socket's peer is where it meant to go. */
SEC("cgroup/getpeername4")
int al_getpeername4(struct bpf_sock_addr *ctx)
{
	struct al_sk_origin *so = al_redirected(ctx);

	if (so)
		al_show_origin4(ctx, so);
	return AL_PASS;
}

SEC("cgroup/getpeername6")
int al_getpeername6(struct bpf_sock_addr *ctx)
{
	struct al_sk_origin *so = al_redirected(ctx);

	if (so)
		al_show_origin6(ctx, so);
	return AL_PASS;
}

/* A datagram from the proxy (or the target) to a redirected socket comes
 * from where the socket sent (an answer to a DNS query, say): its latest
 * origin. Any other sender is left as it is. */
static __always_inline struct al_sk_origin *al_answered(struct bpf_sock_addr *ctx, const struct al_dest *src)
{
	struct al_sk_origin *so = al_redirected(ctx);
	__u32 *ps;

	if (!so || so->origin.protocol != IPPROTO_UDP)
		return 0;
	if (so->flags & AL_SK_TARGET)
		return al_is_target(so, src) ? so : 0;
	ps = al_proxy_slot_of(src);
	return ps && *ps == so->origin.slot ? so : 0;
}

SEC("cgroup/recvmsg4")
int al_recvmsg4(struct bpf_sock_addr *ctx)
{
	struct al_dest src = { .protocol = IPPROTO_UDP };

	al_dest_ip4(&src, ctx->user_ip4);
	src.port = bpf_ntohs((__u16)ctx->user_port);
	struct al_sk_origin *so = al_answered(ctx, &src);
	if (so)
		al_show_origin4(ctx, so);
	return AL_PASS;
}

SEC("cgroup/recvmsg6")
int al_recvmsg6(struct bpf_sock_addr *ctx)
{
	struct al_dest src = { .protocol = IPPROTO_UDP };
	__u32 ip6[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3] };

	al_dest_ip6(&src, ip6);
	src.port = bpf_ntohs((__u16)ctx->user_port);
	struct al_sk_origin *so = al_answered(ctx, &src);
	if (so)
		al_show_origin6(ctx, so);
	return AL_PASS;
}

/* TCP events of the sandbox's sockets: a redirected connection's origin is
 * filed as it starts; a target's is marked closed as it closes. */
SEC("sockops")
int al_sockops(struct bpf_sock_ops *skops)
{
	if (skops->op == BPF_SOCK_OPS_TCP_CONNECT_CB)
		al_file_origin(skops);
	else if (skops->op == BPF_SOCK_OPS_STATE_CB)
		al_close_target_origin(skops);
	return AL_SOCKOPS_DONE;
}

/* getsockopt(SO_ORIGINAL_DST) of a target's accepted connection, in the
 * target's cgroup (not a sandbox's): where the connection was meant to go,
 * as netfilter answers it, so that a transparent proxy works unmodified.
 * The connection is found by both its ends in the table of each sandbox
 * that redirects to targets; any other call is left as the kernel made it. */
struct al_target_find {
	struct al_target_origin_key key;
	struct al_origin origin;
	__u64 filed_ns;
	__u64 now;
	int found;
};

/* Every sandbox's table: the newest entry for these ends answers, if its
 * client's socket is open or closed within the grace period. */
static long al_find_target_origin(__u32 slot, void *arg)
{
	struct al_target_find *f = arg;
	void *table = al_target_origin_table_of(slot);
	struct al_target_origin *o;

	if (!table)
		return AL_LOOP_NEXT;
	o = bpf_map_lookup_elem(table, &f->key);
	if (!o || o->origin.slot != slot || (f->found && o->filed_ns <= f->filed_ns) ||
	    (o->closed_ns && f->now - o->closed_ns > AL_TARGET_GRACE_NS))
		return AL_LOOP_NEXT;
	f->origin = o->origin;
	f->filed_ns = o->filed_ns;
	f->found = 1;
	return AL_LOOP_NEXT;
}

#define AL_SOL_IP 0
#define AL_SOL_IPV6 41
#define AL_AF_INET 2
#define AL_AF_INET6 10

SEC("cgroup/getsockopt")
int al_original_dst(struct bpf_sockopt *ctx)
{
	struct bpf_sock *sk = ctx->sk;
	struct al_target_find f = {};

	/* Past a page the program sees a truncated buffer: optlen 0 leaves the
	 * kernel's answer as it is (before Linux 6.5, anything else is EFAULT). */
	if (ctx->optlen > AL_PAGE_SIZE) {
		ctx->optlen = 0;
		return AL_SOCKOPT_KEEP;
	}
	if (ctx->optname != AL_SO_ORIGINAL_DST || (ctx->level != AL_SOL_IP && ctx->level != AL_SOL_IPV6) || !sk ||
	    sk->protocol != IPPROTO_TCP)
		return AL_SOCKOPT_KEEP;
	__u32 src6[4] = { sk->src_ip6[0], sk->src_ip6[1], sk->src_ip6[2], sk->src_ip6[3] };
	__u32 dst6[4] = { sk->dst_ip6[0], sk->dst_ip6[1], sk->dst_ip6[2], sk->dst_ip6[3] };

	f.key.protocol = IPPROTO_TCP;
	f.key.port = bpf_ntohs(sk->dst_port);
	f.key.target_port = (__u16)sk->src_port;
	f.key.family = al_key_addr(f.key.addr, sk->family, sk->dst_ip4, dst6);
	if (al_key_addr(f.key.target, sk->family, sk->src_ip4, src6) != f.key.family)
		return AL_SOCKOPT_KEEP;
	f.key.netns_cookie = al_is_loopback(f.key.family, f.key.target) ? bpf_get_netns_cookie(ctx) : 0;
	f.now = bpf_ktime_get_ns();
	bpf_loop(AL_MAX_SANDBOXES, al_find_target_origin, &f, 0);
	if (!f.found)
		return AL_SOCKOPT_KEEP;

	__u8 *out = ctx->optval;
	if (ctx->level == AL_SOL_IP) {
		struct sockaddr_in4 {
			__u16 family;
			__u16 port;
			__u32 addr;
			__u8 zero[8];
		} sin = { .family = AL_AF_INET, .port = bpf_htons(f.origin.port) };

		if (f.origin.family != AL_FAMILY_IPV4 || (void *)(out + sizeof(sin)) > ctx->optval_end)
			return AL_SOCKOPT_KEEP;
		__builtin_memcpy(&sin.addr, f.origin.addr, 4);
		__builtin_memcpy(out, &sin, sizeof(sin));
		ctx->optlen = sizeof(sin);
	} else {
		struct sockaddr_in6_ {
			__u16 family;
			__u16 port;
			__u32 flowinfo;
			__u32 addr[4];
			__u32 scope_id;
		} sin6 = { .family = AL_AF_INET6, .port = bpf_htons(f.origin.port) };

		if ((void *)(out + sizeof(sin6)) > ctx->optval_end)
			return AL_SOCKOPT_KEEP;
		if (f.origin.family == AL_FAMILY_IPV4) {
			sin6.addr[2] = bpf_htonl(0x0000ffff);
			__builtin_memcpy(&sin6.addr[3], f.origin.addr, 4);
		} else {
			__builtin_memcpy(sin6.addr, f.origin.addr, 16);
		}
		__builtin_memcpy(out, &sin6, sizeof(sin6));
		ctx->optlen = sizeof(sin6);
	}
	ctx->retval = 0;
	return AL_SOCKOPT_KEEP;
}

/* Unix sockets (Linux 6.7+). The sections are the inet ones that libbpf
 * 1.1 knows; the loader sets the unix attach types, or leaves these out on
 * a kernel without them. */
SEC("cgroup/connect4")
int al_connect_unix(struct bpf_sock_addr *ctx)
{
	return al_unix_decide(ctx, AL_HOOK_CONNECT_UNIX);
}

SEC("cgroup/sendmsg4")
int al_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return al_unix_decide(ctx, AL_HOOK_SENDMSG_UNIX);
}

/* Abstract names the sandbox binds itself (loaded with the unix hooks). */
SEC("tracepoint/syscalls/sys_enter_bind")
int al_bind_enter_tp(struct al_sys_enter_bind *ctx)
{
	al_bind_enter(ctx);
	return AL_TP_DONE;
}

SEC("tracepoint/syscalls/sys_exit_bind")
int al_bind_exit_tp(struct al_sys_exit *ctx)
{
	al_bind_exit(ctx);
	return AL_TP_DONE;
}

/* Socket families the policy does not list, created or refused. */
SEC("tracepoint/syscalls/sys_exit_socket")
int al_socket_exit_tp(struct al_sys_exit *ctx)
{
	al_socket_exit(ctx);
	return AL_TP_DONE;
}

SEC("tracepoint/syscalls/sys_exit_socketpair")
int al_socketpair_exit_tp(struct al_sys_exit *ctx)
{
	al_socket_exit(ctx);
	return AL_TP_DONE;
}

/* The backstop: whatever the syscall claimed, this is where the packet goes.
 * A packet to a resolver is also a DNS query, judged by what it asks. */
/* A TCP socket whose packet egress refused may keep what was refused in
 * its send queue: marked with its sandbox, to be ended when the sandbox is
 * removed, whichever cgroup of it the socket was made in. */
static __always_inline void al_hold(struct __sk_buff *skb, __u64 sandbox_cgroup, const struct al_dest *dst)
{
	if (dst->protocol != IPPROTO_TCP || !skb->sk)
		return;
	struct bpf_sock *sk = bpf_sk_fullsock(skb->sk);
	if (!sk)
		return;
	struct al_sk_held *h = bpf_sk_storage_get(&al_sk_held, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (h)
		h->sandbox_cgroup = sandbox_cgroup;
}

SEC("cgroup_skb/egress")
int al_egress(struct __sk_buff *skb)
{
	__u64 cgid;
	struct al_sandbox *sb = al_sandbox_of_skb(skb, &cgid);
	struct al_dest dst;
	struct al_decision d = { .rule = AL_RULE_NONE };
	struct al_scratch *s = 0;
	__u32 sidx = 0;
	int bad = al_parse_packet(skb, &dst);
	int verdict;

	if (!sb)
		return al_no_sandbox(AL_HOOK_EGRESS, cgid, &dst);

	struct al_counters *c = al_counters_of(sb->slot);

	if (al_latched(sb->slot)) {
		verdict = al_quarantined(AL_HOOK_EGRESS, c);
	} else {
		if (bad) {
			d.verdict = AL_VERDICT_DENY;
			d.reason = bad;
			d.err_site = dst.err_site;
		} else if (al_loopback_elsewhere(skb, &dst)) {
			d.verdict = AL_VERDICT_DENY;
			d.reason = AL_REASON_LOOPBACK_DEV;
		} else if (!al_redirect_egress(skb, sb, &dst, &d)) {
			al_decide_dest(sb, &dst, AL_HOOK_EGRESS, &d);
			if (d.reason == AL_REASON_REDIRECT) {
				d.verdict = AL_VERDICT_DENY;
				d.reason = AL_REASON_NOT_REDIRECTED;
			}
			if (d.verdict == AL_VERDICT_ALLOW && al_is_dns(&dst)) {
				s = al_scratch_get(&sidx);
				if (s) {
					al_dns_query(skb, sb, &dst, &d, sidx);
				} else {
					d.verdict = AL_VERDICT_DENY;
					d.reason = AL_REASON_DNS_TABLE;
					d.dns = 1;
				}
			}
			/* In audit mode every packet of a would-be-denied flow
			 * passes: its connect or sendmsg was reported already. */
			d.quiet = (sb->flags & AL_SB_AUDIT) && !d.dns &&
				  (dst.protocol == IPPROTO_TCP || dst.protocol == IPPROTO_UDP);
			if (!d.dns)
				al_budget_egress(skb, sb, &dst, &d);
		} else if (d.verdict == AL_VERDICT_ALLOW) {
			/* What a redirected socket sends the proxy is what a gated
			 * rule's proxy passes on: its budget counts it here. */
			al_budget_egress(skb, sb, &dst, &d);
		}
		verdict = al_finish(AL_HOOK_EGRESS, sb, c, cgid, &dst, &d, s);
		if (s)
			al_scratch_put(s);
	}
	if (verdict != AL_PASS)
		al_hold(skb, cgid, &dst);
	if (c) {
		if (verdict == AL_PASS) {
			c->egress_packets++;
			c->egress_bytes += skb->len;
		} else {
			c->denied_packets++;
			c->denied_bytes += skb->len;
		}
	}
	return verdict;
}

/* A datagram to a socket redirected to a target, from that target (a DNS
 * simulator on port 53 answering), under a rule that still sends it there:
 * not an answer of a resolver, nothing to learn from it. */
static __always_inline int al_from_target(struct __sk_buff *skb, const struct al_sandbox *sb, const struct al_dest *pkt)
{
	struct al_sk_origin *so;
	struct al_dest src = { .family = pkt->family, .protocol = pkt->protocol, .port = pkt->sport };

	if (!(sb->flags & AL_SB_TARGETS))
		return 0;
	so = al_skb_origin(skb);
	__builtin_memcpy(src.addr, pkt->saddr, sizeof(src.addr));
	return so && so->origin.protocol == IPPROTO_UDP && al_is_target(so, &src) && al_target_still(sb, so);
}

/* DNS answers to the sandbox, learned before the socket sees them. Every
 * other packet passes: ingress is not where egress control happens. A
 * packet that a failed helper kept from being read passes too, counted:
 * nothing is learned from it. */
SEC("cgroup_skb/ingress")
int al_ingress(struct __sk_buff *skb)
{
	struct al_dest pkt;
	__u64 cgid;
	int bad = al_parse_packet(skb, &pkt);

	if (bad ? bad != AL_REASON_HELPER : pkt.protocol != IPPROTO_UDP || pkt.sport != AL_DNS_PORT)
		return AL_PASS;
	struct al_sandbox *sb = al_sandbox_of_skb(skb, &cgid);
	if (!sb)
		return AL_PASS;
	if (!bad && al_from_target(skb, sb, &pkt))
		return AL_PASS;
	struct al_counters *c = al_counters_of(sb->slot);
	if (bad) {
		struct al_decision d = { .reason = AL_REASON_HELPER, .err_site = pkt.err_site };

		al_count_helper(c, &d);
		return AL_PASS;
	}
	if (al_latched(sb->slot)) {
		if (c)
			c->dns_answers_dropped++;
		return AL_DROP;
	}
	__u32 sidx = 0;
	struct al_scratch *s = al_scratch_get(&sidx);
	if (!s)
		return al_answer_drop(sb, c, cgid, &pkt, 0);
	int verdict = al_dns_answer(skb, sb, cgid, &pkt, sidx);
	al_scratch_put(s);
	return verdict == AL_PASS ? AL_PASS : AL_DROP;
}
