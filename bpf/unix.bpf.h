/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Unix sockets as destinations (cgroup/connect_unix, cgroup/sendmsg_unix,
 * Linux 6.7+). The hook runs before the kernel looks the path up, so it
 * judges the name the caller gave: an exact rule, else the longest prefix
 * rule, else default deny. A named path that does not name one file by its
 * characters (relative, or with //, /./, /../) is refused before any rule
 * is consulted: "/allowed/../run/x.sock" must not pass for a rule on the
 * prefix "/allowed/". */
#ifndef AIRLOCK_UNIX_BPF_H
#define AIRLOCK_UNIX_BPF_H

#include "verdict.bpf.h"

/* The kernel's view of a sock_addr context; only what is read here, found
 * by name in the running kernel's BTF. */
struct bpf_sock_addr_kern___al {
	void *uaddr; /* struct sockaddr *, in kernel memory */
	__u32 uaddrlen;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

#define AL_SUN_PATH_OFF 2 /* offsetof(struct sockaddr_un, sun_path) */

static __always_inline struct al_unix_buf *al_unix_buf_get(void)
{
#pragma unroll
	for (int i = 0; i < AL_SCRATCH_ENTRIES; i++) {
		__u32 k = i;
		struct al_unix_buf *b = bpf_map_lookup_elem(&al_unix_buf, &k);

		if (b && __sync_val_compare_and_swap(&b->busy, 0, 1) == 0)
			return b;
	}
	return 0;
}

static __always_inline void al_unix_buf_put(struct al_unix_buf *b)
{
	__sync_val_compare_and_swap(&b->busy, 1, 0);
}

/* A component of a named path ends: not empty, not ".", not "..". */
static __always_inline void al_unix_component(struct al_unix_buf *b)
{
	if (b->n == 0 || (b->n == 1 && b->c0 == '.') || (b->n == 2 && b->c0 == '.' && b->c1 == '.'))
		b->bad = 1;
	b->n = 0;
}

/* Byte i of the path: where the path ends (a named path at its first NUL),
 * zero after the end, and the components of a named path. */
struct al_unix_loop {
	struct al_unix_buf *b; /* bpf_loop takes a pointer to the stack */
};

static long al_unix_step(__u32 i, void *ctx)
{
	struct al_unix_buf *b = ((struct al_unix_loop *)ctx)->b;

	if (i >= AL_UNIX_PATH_MAX)
		return AL_LOOP_STOP;
	__u8 c = b->ek.path[i];

	if (!b->ended && (i >= b->plen || (b->named && c == 0))) {
		b->ended = 1;
		b->len = i;
		if (b->named && i > 0)
			al_unix_component(b);
	}
	if (b->ended) {
		b->ek.path[i] = 0;
		return AL_LOOP_NEXT;
	}
	if (!b->named || i == 0)
		return AL_LOOP_NEXT;
	if (c == '/') {
		al_unix_component(b);
	} else {
		if (b->n == 0)
			b->c0 = c;
		else if (b->n == 1)
			b->c1 = c;
		b->n++;
	}
	return AL_LOOP_NEXT;
}

/* Reads the address into b->ek (path zero after len). Returns 0 or an
 * al_reason that refuses it whatever the rules say. */
static __always_inline int al_unix_read(struct bpf_sock_addr *ctx, struct al_unix_buf *b)
{
	struct bpf_sock_addr_kern___al *k = bpf_cast_to_kern_ctx(ctx);
	__u8 first = 0;

	if (!k)
		return AL_REASON_UNIX_PATH;
	__u32 alen = k->uaddrlen;
	void *sa = k->uaddr;

	if (alen <= AL_SUN_PATH_OFF || alen > AL_SUN_PATH_OFF + AL_UNIX_PATH_MAX)
		return AL_REASON_UNIX_PATH;
	if (bpf_probe_read_kernel(&first, 1, sa + AL_SUN_PATH_OFF))
		return AL_REASON_UNIX_PATH;
	b->named = first != 0;
	b->plen = alen - AL_SUN_PATH_OFF;
	if (!b->named) {
		/* Abstract: every byte after the leading NUL is the name. */
		b->plen--;
		sa++;
	}
	b->ek.kind = b->named ? AL_UNIX_NAMED : AL_UNIX_ABSTRACT;
	if (bpf_probe_read_kernel(b->ek.path, AL_UNIX_PATH_MAX, sa + AL_SUN_PATH_OFF))
		return AL_REASON_UNIX_PATH;
	b->ended = 0;
	b->len = 0;
	b->n = 0;
	b->c0 = 0;
	b->c1 = 0;
	b->bad = 0;
	struct al_unix_loop lc = { .b = b };

	bpf_loop(AL_UNIX_PATH_MAX, al_unix_step, &lc, 0);
	if (!b->ended) {
		b->len = b->plen;
		if (b->named)
			al_unix_component(b);
	}
	b->ek.len = b->len;
	if (b->named && (b->ek.path[0] != '/' || b->bad))
		return AL_REASON_UNIX_PATH;
	return 0;
}

static __always_inline int al_hex5(const __u8 *p)
{
	for (int i = 0; i < 5; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
	return 1;
}

/* The most specific rule for the path: exact, else the longest prefix;
 * else, for an abstract name, whether the sandbox bound it itself. */
static __always_inline void al_unix_rules(struct al_sandbox *sb, struct al_unix_buf *b, struct al_decision *d)
{
	struct al_unix_exact_key *ek = &b->ek;

	ek->policy_id = sb->policy_id;
	ek->pad = 0;
	struct al_unix_rule *r = bpf_map_lookup_elem(&al_unix_exact, ek);

	if (!r) {
		b->pk.prefixlen = AL_UNIX_KEY_FIXED_BITS + 8 * (__u32)ek->len;
		b->pk.policy_id = sb->policy_id;
		b->pk.kind = ek->kind;
		__builtin_memcpy(b->pk.path, ek->path, sizeof(b->pk.path));
		__builtin_memset(b->pk.pad, 0, sizeof(b->pk.pad));
		r = bpf_map_lookup_elem(&al_unix_prefix, &b->pk);
	}
	if (r) {
		d->rule = r->rule;
		if (r->action == AL_ACTION_ALLOW) {
			d->verdict = AL_VERDICT_ALLOW;
			d->reason = AL_REASON_RULE_ALLOW;
		} else {
			d->reason = r->action == AL_ACTION_REFUSE ? AL_REASON_REFUSED : AL_REASON_RULE_DENY;
		}
		return;
	}
	if (ek->kind != AL_UNIX_ABSTRACT)
		return;
	/* An abstract name a process of the sandbox bound is its own IPC. */
	__u32 slot = sb->slot;
	void *bound = bpf_map_lookup_elem(&al_unix_bound, &slot);

	b->bk.len = ek->len;
	__builtin_memset(b->bk.pad, 0, sizeof(b->bk.pad));
	__builtin_memcpy(b->bk.name, ek->path, sizeof(b->bk.name));
	if (bound && bpf_map_lookup_elem(bound, &b->bk)) {
		d->verdict = AL_VERDICT_ALLOW;
		d->reason = AL_REASON_UNIX_OWN;
		return;
	}
	/* The kernel picks an autobound name ("%05x") where no bind(2) shows
	 * it: a datagram's reply goes there. Under Landlock's scope such a
	 * connect reaches only the sandbox's own sockets (the kernel refuses
	 * the rest after us); without it, no rule, no way. */
	if ((sb->flags & AL_SB_ABSTRACT_SCOPED) && ek->len == 5 && al_hex5(ek->path)) {
		d->verdict = AL_VERDICT_ALLOW;
		d->reason = AL_REASON_UNIX_SCOPED;
	}
}

static __always_inline void al_emit_unix(struct al_counters *c, __u8 hook, __u64 cgroup_id, __u32 slot, __u32 policy_id,
					 const struct al_dest *dst, const struct al_decision *d,
					 const struct al_unix_exact_key *ek)
{
	if (!al_event_admit(c, hook, slot, d))
		return;
	void *ring = bpf_map_lookup_elem(&al_rings, &slot);
	struct al_unix_event *e = ring ? bpf_ringbuf_reserve(ring, sizeof(*e), 0) : 0;

	if (!e) {
		if (c)
			c->events_lost++;
		return;
	}
	al_fill_event(&e->base, AL_EVENT_UNIX, hook, cgroup_id, slot, policy_id, dst, d);
	e->kind = ek->kind;
	e->len = ek->len;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	__builtin_memcpy(e->path, ek->path, sizeof(e->path));
	__builtin_memset(e->pad2, 0, sizeof(e->pad2));
	bpf_ringbuf_submit(e, 0);
}

/* The decision on a unix connect or addressed datagram. */
static __always_inline int al_unix_decide(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct al_dest dst = {};
	struct al_decision d = { .verdict = AL_VERDICT_DENY, .reason = AL_REASON_NO_RULE, .rule = AL_RULE_NONE };
	__u64 cgid;
	struct al_sandbox *sb = al_sandbox_of_task(&cgid);

	if (!sb)
		return al_no_sandbox(hook, cgid, &dst);
	struct al_counters *c = al_counters_of(sb->slot);

	if (al_latched(sb->slot))
		return al_quarantined(hook, c);
	struct al_unix_buf *b = al_unix_buf_get();
	int bad = b ? al_unix_read(ctx, b) : AL_REASON_BUSY;

	if (bad)
		d.reason = bad;
	else
		al_unix_rules(sb, b, &d);
	if (d.reason == AL_REASON_REFUSED) {
		/* Counted; neither a violation nor the latch's business. Audit
		 * mode lets it through like everything else. */
		if (sb->flags & AL_SB_AUDIT)
			d.verdict = AL_VERDICT_AUDIT;
		al_count(c, hook, &d);
		if (sb->flags & AL_SB_LOG_ALLOWED)
			al_emit_unix(c, hook, cgid, sb->slot, sb->policy_id, &dst, &d, &b->ek);
		al_unix_buf_put(b);
		return d.verdict == AL_VERDICT_AUDIT ? AL_PASS : AL_DROP;
	}
	/* al_finish counts, applies audit mode and the latch; the event is
	 * this hook's own, with the path. */
	d.quiet = 1;
	int verdict = al_finish(hook, sb, c, cgid, &dst, &d, 0);

	if (b) {
		if (d.verdict != AL_VERDICT_ALLOW || (sb->flags & AL_SB_LOG_ALLOWED))
			al_emit_unix(c, hook, cgid, sb->slot, sb->policy_id, &dst, &d, &b->ek);
		al_unix_buf_put(b);
	} else {
		al_emit(c, hook, cgid, sb->slot, sb->policy_id, &dst, &d);
	}
	return verdict;
}

/* bind(2) of an abstract name by a sandbox's process: remembered at entry,
 * learned for the sandbox when the call returns 0 (a name someone else
 * holds fails with EADDRINUSE and is not the sandbox's). */
struct al_sys_enter_bind {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 fd;
	__u64 addr; /* struct sockaddr __user * */
	__u64 addrlen;
};

struct al_sys_exit {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

#define AL_AF_UNIX 1

static __always_inline void al_bind_enter(struct al_sys_enter_bind *ctx)
{
	__u64 cgid;
	struct al_sandbox *sb = al_sandbox_of_task(&cgid);
	__u8 head[3];

	if (!sb)
		return;
	__u32 alen = ctx->addrlen;

	/* Family, then the leading NUL of an abstract name, then its bytes. */
	if (alen <= 3 || alen > AL_SUN_PATH_OFF + AL_UNIX_PATH_MAX)
		return;
	if (bpf_probe_read_user(head, sizeof(head), (void *)ctx->addr))
		return;
	if (head[0] != AL_AF_UNIX || head[1] != 0 || head[2] != 0)
		return;
	struct al_unix_binding b = { .slot = sb->slot };
	__u32 n = alen - 3;

	if (n > AL_UNIX_PATH_MAX - 1)
		return;
	b.key.len = n;
	if (bpf_probe_read_user(b.key.name, n, (void *)(ctx->addr + 3)))
		return;
	__u64 id = bpf_get_current_pid_tgid();

	bpf_map_update_elem(&al_unix_binding, &id, &b, BPF_ANY);
}

static __always_inline void al_bind_exit(struct al_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct al_unix_binding *b = bpf_map_lookup_elem(&al_unix_binding, &id);

	if (!b)
		return;
	if (ctx->ret == 0) {
		__u32 slot = b->slot, one = 1;
		void *bound = bpf_map_lookup_elem(&al_unix_bound, &slot);

		if (!bound || bpf_map_update_elem(bound, &b->key, &one, BPF_ANY)) {
			struct al_counters *c = al_counters_of(slot);

			if (c)
				c->unix_bound_full++;
		}
	}
	bpf_map_delete_elem(&al_unix_binding, &id);
}

/* socket(2) and socketpair(2) of a family the policy does not list, as
 * they return. The seccomp filter of the processes airlock starts has
 * already refused them (EPERM; a refused call never reaches the entry
 * tracepoint, only this one); in an attached container nothing refused it.
 * Either way a violation, with the quarantine latch as the policy says.
 * The family is the call's first argument, read from its registers. */
struct pt_regs___al {
	unsigned long dx;
	unsigned long di;
} __attribute__((preserve_access_index));

#define AL_AF_NETLINK 16
#define AL_NETLINK_ROUTE_BIT 63 /* "netlink-route": AF_NETLINK, protocol NETLINK_ROUTE only */

static __always_inline void al_socket_exit(struct al_sys_exit *ctx)
{
	__u64 cgid;
	struct al_sandbox *sb = al_sandbox_of_task(&cgid);

	if (!sb || (ctx->ret < 0 && ctx->ret != -1 /* EPERM */))
		return;
	struct pt_regs___al *regs = (struct pt_regs___al *)bpf_task_pt_regs(bpf_get_current_task_btf());
	unsigned long di = 0;

	if (!regs || bpf_probe_read_kernel(&di, sizeof(di), &regs->di))
		return;
	__u32 af = (__u32)di;

	if (af < 64 && (sb->families & (1ull << af)))
		return; /* listed: an EPERM here came from elsewhere */
	if (af == AL_AF_NETLINK && (sb->families & (1ull << AL_NETLINK_ROUTE_BIT))) {
		unsigned long proto = 1;

		/* The protocol, the call's third argument. */
		if (bpf_probe_read_kernel(&proto, sizeof(proto), &regs->dx) || (__u32)proto == 0)
			return;
	}
	struct al_counters *c = al_counters_of(sb->slot);
	struct al_dest dst = { .port = af < 0xffff ? af : 0xffff };
	struct al_decision d = { .verdict = AL_VERDICT_DENY, .reason = AL_REASON_FAMILY, .rule = AL_RULE_NONE };

	if (al_latched(sb->slot)) {
		al_quarantined(AL_HOOK_SOCKET, c);
		return;
	}
	al_finish(AL_HOOK_SOCKET, sb, c, cgid, &dst, &d, 0);
}

#endif
