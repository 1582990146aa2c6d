/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The only contract between airlock's BPF programs and its agent: map keys and
 * values, event records, enums and limits. Both sides include this file and
 * neither redefines anything in it. Plain C, fixed-width types, explicit
 * padding; every struct's size is asserted below.
 *
 * Bump AL_ABI_VERSION on any change to a layout or a meaning here: an agent
 * refuses to adopt pinned programs and maps of another version.
 */
#ifndef AIRLOCK_ABI_H
#define AIRLOCK_ABI_H

#include <linux/types.h>

#define AL_ABI_VERSION 13

/* Limits. */
#define AL_MAX_SANDBOXES 1024 /* slots; slot AL_MAX_SANDBOXES counts the unknown */
#define AL_SLOT_UNKNOWN AL_MAX_SANDBOXES
#define AL_MAX_LEVELS 32         /* cgroup depth the sandbox lookup walks */
#define AL_MAX_RANGES 32         /* port ranges in one compiled prefix entry */
#define AL_MAX_PREFIXES 65536    /* LPM entries, all sandboxes and banks */
#define AL_RING_BYTES (1u << 18) /* events ring of one sandbox */
#define AL_RULE_NONE 0xffffu     /* al_event.rule when no rule matched */
#define AL_COMM_LEN 16
/* Events of one sandbox and kind (hook and reason) reach its ring at this
 * rate, after a burst; the rest are counted in al_counters.suppressed. */
#define AL_EVENTS_PER_SEC 5
#define AL_EVENTS_BURST 20

/* DNS. */
#define AL_DNS_PORT 53
#define AL_DNS_MAX_RESOLVERS 8
#define AL_DNS_MAX_TYPES 16
#define AL_DNS_NAME_BYTES 254  /* name bytes of a lookup key */
#define AL_DNS_NAME_MAX 252    /* longest name (presentation form) the kernel can match */
#define AL_DNS_QUERY_MAX 512   /* a longer query is malformed */
#define AL_DNS_MSG_MAX 4096    /* answers are parsed up to this size */
#define AL_DNS_MAX_ANSWERS 16  /* addresses learned from one answer */
#define AL_DNS_MAX_RRS 64      /* answer records walked in one answer */
#define AL_DNS_OPT_MAX 128     /* EDNS option bytes a query may carry, at most */
#define AL_DNS_MAX_EDNS_OPTS 8 /* EDNS option codes a policy may allow */
#define AL_DNS_MAX_UDP_SIZES 8 /* EDNS UDP payload sizes a policy may allow */
#define AL_DNS_EDNS_PADDING 12 /* option code whose bytes must all be zero */
#define AL_DNS_PTR_HOPS 16     /* compression pointers followed in one name of an answer */
#define AL_NAME_END 0xff       /* follows the last label of a lookup key */
#define AL_MAX_NAMES 65536     /* name entries, all sandboxes and banks */
#define AL_LEARNED_PER_SANDBOX 4096
#define AL_PENDING_PER_SANDBOX 256
#define AL_NAME_KEY_FIXED_BITS 16 /* the policy id in front of a name */

/* Unix sockets. */
#define AL_UNIX_PATH_MAX 108           /* sizeof(sun_path) */
#define AL_MAX_UNIX_RULES 16384        /* unix entries of each kind, all sandboxes and banks */
#define AL_UNIX_KEY_FIXED_BITS 40      /* policy id and kind in front of a path */
#define AL_UNIX_BOUND_PER_SANDBOX 1024 /* abstract names a sandbox bound itself */
#define AL_UNIX_BINDING_MAX 8192       /* binds in progress, all sandboxes */

/* The maps of bpf/maps.bpf.h, in two lists: X(NAME) is the map al_NAME.
 * Those the agent pins as maps/al_NAME: the agent's table of descriptors,
 * the pin names and the loader's copies of the skeleton's descriptors are
 * made from this list; an agent adopting pins finds everything it needs
 * there, the templates of the inner maps it creates per slot included. */
/* clang-format off */
#define AL_PINNED_MAPS(X) \
	X(config) X(sandboxes) X(rules) X(latch) X(counters) X(flood) X(rings) \
	X(rcu_sync) X(rcu_inner) X(names) X(dns) X(dns_state) X(pending) X(learned) \
	X(unix_exact) X(unix_prefix) X(unix_bound) X(unix_binding) X(proxy) X(proxy_port) X(origin) X(sk_origin) \
	X(budget) X(sk_budget) X(sk_held) X(target) X(target_origin) \
	X(ring_template) X(pending_template) X(learned_template) X(unix_bound_template) X(origin_template) \
	X(target_origin_template)
/* clang-format on */
/* Per-CPU working memory of the programs, never pinned: only the programs
 * use it. The loader fails to compile if a map of the object is in neither
 * list, or a listed map is not in the object. */
#define AL_SCRATCH_MAPS(X) X(scratch) X(keybuf) X(unix_buf)

/* The number of entries of a list: (0 LIST(AL_COUNT_ONE)). */
#define AL_COUNT_ONE(...) +1

/* Address families as stored in keys and events (not AF_* values). */
enum al_family {
	AL_FAMILY_IPV4 = 4,
	AL_FAMILY_IPV6 = 6,
};

/* Protocol bits of a compiled range. */
enum al_proto_bit {
	AL_PROTO_TCP = 1u << 0,
	AL_PROTO_UDP = 1u << 1,
	AL_PROTO_ICMP = 1u << 2, /* ICMP for IPv4, ICMPv6 for IPv6 */
};

enum al_action {
	AL_ACTION_ALLOW = 0,
	AL_ACTION_DENY = 1,
	AL_ACTION_REFUSE = 2,   /* unix rules: fail the call, no violation (a probe every program makes) */
	AL_ACTION_REDIRECT = 3, /* to the proxy; a kernel without the proxy's hooks denies it */
};

/* The enums whose values reach audit logs and metrics by name: each
 * enumerator, its value and its name are one entry of a list, so that none
 * can be added without its name. AL_ENUMERATOR makes the enum of a list;
 * the agent makes its name tables of the same lists (events/audit.cpp),
 * checked at compile time: values from 0 up without a gap, below *_MAX. */
#define AL_ENUMERATOR(e, v, name) e = v,

/* clang-format off */
#define AL_HOOKS(X) \
	X(AL_HOOK_SOCK_CREATE, 0, "sock_create") \
	X(AL_HOOK_CONNECT4, 1, "connect4") \
	X(AL_HOOK_CONNECT6, 2, "connect6") \
	X(AL_HOOK_SENDMSG4, 3, "sendmsg4") \
	X(AL_HOOK_SENDMSG6, 4, "sendmsg6") \
	X(AL_HOOK_EGRESS, 5, "egress") \
	X(AL_HOOK_INGRESS, 6, "ingress") \
	X(AL_HOOK_CONNECT_UNIX, 7, "connect_unix") /* Linux 6.7+ */ \
	X(AL_HOOK_SENDMSG_UNIX, 8, "sendmsg_unix") /* Linux 6.7+ */ \
	X(AL_HOOK_SOCKET, 9, "socket")             /* socket(2)/socketpair(2) as they return (a tracepoint) */

enum al_hook {
	AL_HOOKS(AL_ENUMERATOR)
	AL_HOOK_MAX = 12, /* dimension of the counters: room for hooks to come, "unknown" until then */
};
/* clang-format on */

/* clang-format off */
#define AL_VERDICTS(X) \
	X(AL_VERDICT_ALLOW, 0, "allow") \
	X(AL_VERDICT_DENY, 1, "deny") \
	X(AL_VERDICT_AUDIT, 2, "audit") /* would have been denied; mode audit let it through */

enum al_verdict {
	AL_VERDICTS(AL_ENUMERATOR)
	AL_VERDICT_MAX = 3,
};
/* clang-format on */

/* clang-format off */
#define AL_REASONS(X) \
	X(AL_REASON_RULE_ALLOW, 0, "rule-allow")          /* an allow rule matched */ \
	X(AL_REASON_NO_RULE, 1, "no-rule")                /* default deny */ \
	X(AL_REASON_RULE_DENY, 2, "rule-deny")            /* a deny rule matched */ \
	X(AL_REASON_QUARANTINED, 3, "quarantined")        /* the sandbox's latch is set */ \
	X(AL_REASON_RAW_SOCKET, 4, "raw-socket") \
	X(AL_REASON_ICMP_SOCKET, 5, "icmp-socket")        /* ping socket without an ICMP rule */ \
	X(AL_REASON_SOURCE_ROUTE, 6, "source-route")      /* IPv4 LSRR/SSRR option */ \
	X(AL_REASON_ROUTING_HEADER, 7, "routing-header")  /* IPv6 routing header */ \
	X(AL_REASON_FRAGMENT, 8, "fragment")              /* a fragment reached cgroup egress */ \
	X(AL_REASON_MALFORMED, 9, "malformed")            /* headers the parser could not walk */ \
	X(AL_REASON_NO_SANDBOX, 10, "no-sandbox")         /* program ran, no sandbox entry: fail closed */ \
	X(AL_REASON_PROTOCOL, 11, "protocol")             /* an L4 protocol no rule can name */ \
	X(AL_REASON_DNS_ALLOW, 12, "dns-allow")           /* a query the DNS policy lets out; port 53 to a listed resolver */ \
	X(AL_REASON_DNS_RESOLVER, 13, "dns-resolver")     /* port 53 to an address that is not a listed resolver */ \
	X(AL_REASON_DNS_TCP, 14, "dns-tcp")               /* TCP to a resolver while dns.tcp is off */ \
	X(AL_REASON_DNS_MALFORMED, 15, "dns-malformed")   /* a query the parser could not fully validate */ \
	X(AL_REASON_DNS_NAME, 16, "dns-name")             /* no allow rule for the queried name */ \
	X(AL_REASON_DNS_TYPE, 17, "dns-type")             /* query type (or class) not listed */ \
	X(AL_REASON_DNS_LENGTH, 18, "dns-length")         /* name or label over the policy's limits */ \
	X(AL_REASON_DNS_RATE, 19, "dns-rate")             /* over the sandbox's query budget */ \
	X(AL_REASON_DNS_TABLE, 20, "dns-table")           /* no room to remember the query: its answer could not be matched */ \
	X(AL_REASON_LEARNED, 21, "learned")               /* allowed: an address learned from an answer to an allowed name */ \
	X(AL_REASON_DNS_UNSOLICITED, 22, "dns-unsolicited") /* ingress: an answer no query of the sandbox asked for */ \
	X(AL_REASON_DNS_EDNS, 23, "dns-edns")             /* the additional section is not one OPT record the policy allows */ \
	X(AL_REASON_DNS_OFF_CHAIN, 24, "dns-off-chain")   /* ingress: a record whose owner is not the question's CNAME chain */ \
	X(AL_REASON_UNIX_PATH, 25, "unix-path")           /* a unix path that cannot be judged by its name: relative, or with //, /./, /../ */ \
	X(AL_REASON_UNIX_SCOPED, 26, "unix-scoped")       /* allowed: an autobound abstract name, which Landlock lets reach only the sandbox's own sockets */ \
	X(AL_REASON_BUSY, 27, "busy")                     /* no working memory free on this CPU: fail closed */ \
	X(AL_REASON_REFUSED, 28, "refused")               /* a refuse rule: failed, counted, not a violation */ \
	X(AL_REASON_UNIX_OWN, 29, "unix-own")             /* allowed: an abstract name a process of the sandbox bound */ \
	X(AL_REASON_FAMILY, 30, "family")                 /* a socket family the policy does not list (al_event.port holds AF_x) */ \
	X(AL_REASON_HELPER, 31, "helper")                 /* a BPF helper failed (al_counters.helper_errors says where): fail closed */ \
	X(AL_REASON_REDIRECT, 32, "redirect")             /* allowed: a redirect rule sent the connect to the sandbox's proxy */ \
	X(AL_REASON_NO_PROXY, 33, "no-proxy")             /* a redirect rule matched and no proxy serves the sandbox: fail closed */ \
	X(AL_REASON_PROXY_PORT, 34, "proxy-port")         /* the proxy's listener named directly, not through a redirect */ \
	X(AL_REASON_REDIRECT_UDP, 35, "redirect-udp")     /* UDP to a destination the proxy takes over TCP only: refused, no violation */ \
	X(AL_REASON_NOT_REDIRECTED, 36, "not-redirected") /* egress: a packet to a redirected destination from a socket that was not redirected */ \
	X(AL_REASON_LOOPBACK_DEV, 37, "loopback-dev") /* egress: a packet to a loopback address leaving through another device */ \
	X(AL_REASON_BUDGET, 38, "budget")             /* a rule's egress byte budget is spent: the packet that crossed it, later connects */ \
	X(AL_REASON_REDIRECT_FAMILY, 39, "redirect-family") /* a redirect to an IPv6 HOST:PORT from an IPv4 socket, which cannot reach it: refused, no violation */

enum al_reason {
	AL_REASONS(AL_ENUMERATOR)
	AL_REASON_MAX = 40,
};
/* clang-format on */

/* Where a BPF helper call failed: al_counters.helper_errors[site]. A packet
 * too short for what its headers say is malformed, and is found by length
 * checks before any load; these count the loads that failed all the same,
 * which no packet's bytes can cause. The names are metric labels: never
 * renamed. */
/* clang-format off */
#define AL_ERR_SITES(X) \
	X(AL_ERR_SITE_IPV4_HEADER, 0, "ipv4-header")       /* the fixed IPv4 header */ \
	X(AL_ERR_SITE_IPV4_OPTION, 1, "ipv4-option")       /* an IPv4 option's type or length */ \
	X(AL_ERR_SITE_IPV6_HEADER, 2, "ipv6-header")       /* the fixed IPv6 header */ \
	X(AL_ERR_SITE_IPV6_EXT, 3, "ipv6-extension")       /* an IPv6 extension header's next header and length */ \
	X(AL_ERR_SITE_L4_PORTS, 4, "l4-ports")             /* the TCP or UDP ports */ \
	X(AL_ERR_SITE_DNS_TCP_HEADER, 5, "dns-tcp-header") /* the data offset of a TCP segment to a resolver */ \
	X(AL_ERR_SITE_DNS_TCP_LENGTH, 6, "dns-tcp-length") /* the length in front of a DNS message over TCP */ \
	X(AL_ERR_SITE_DNS_QUERY, 7, "dns-query")           /* the copy of a query into the scratch */ \
	X(AL_ERR_SITE_DNS_ANSWER, 8, "dns-answer")         /* the copy of an answer into the scratch */

enum al_err_site {
	AL_ERR_SITES(AL_ENUMERATOR)
	AL_ERR_SITE_MAX = 9,
};
/* clang-format on */

enum al_violation_action {
	AL_ON_VIOLATION_DENY = 0,
	AL_ON_VIOLATION_FREEZE = 1,
	AL_ON_VIOLATION_KILL = 2,
};

enum al_sandbox_flag {
	AL_SB_AUDIT = 1u << 0,       /* mode audit: record, let through */
	AL_SB_ALLOW_ICMP = 1u << 1,  /* some rule allows ICMP: ping sockets may exist */
	AL_SB_LOG_ALLOWED = 1u << 2, /* emit events for allowed sock_addr decisions */
	/* Every process of the sandbox is under Landlock's abstract-unix scope:
	 * the kernel lets an abstract connect reach only sockets bound inside. */
	AL_SB_ABSTRACT_SCOPED = 1u << 3,
	/* Some allow rule has a byte budget: only then do connects and packets
	 * look al_budget up. */
	AL_SB_BUDGETS = 1u << 4,
	/* Some redirect rule goes to a target of the operator's: only then do
	 * egress packets look their socket's origin up for it. */
	AL_SB_TARGETS = 1u << 5,
};

/* Map "al_config", array of one. */
struct al_config {
	__u32 abi_version;
	__u32 level_mask; /* bit L set: some sandbox cgroup sits at level L */
	__u64 object_id;  /* hash of the BPF object that was loaded: which build */
};

/* Map "al_sandboxes", hash: cgroup id (__u64) -> al_sandbox. Replaced whole on
 * reload, so a program sees either the old or the new policy id. */
struct al_sandbox {
	__u32 slot;        /* index into al_latch and al_counters */
	__u32 policy_id;   /* key prefix of this sandbox's entries in al_rules */
	__u32 flags;       /* al_sandbox_flag */
	__u8 on_violation; /* al_violation_action */
	__u8 pad[3];
	__u64 families; /* bit AF_x: the policy lets the sandbox create AF_x sockets */
};

/* Map "al_rules", LPM trie. data[] is policy id, family, address: the prefix
 * length counts 64 bits for the first two, then the address bits. */
struct al_lpm_key {
	__u32 prefixlen;
	__u32 policy_id;
	__u32 family;  /* al_family */
	__u8 addr[16]; /* IPv4 in the first four bytes */
};
#define AL_LPM_FIXED_BITS 64

/* One port range of a compiled prefix, in the order the kernel tries them:
 * the first range that matches port and protocol decides. The compiler has
 * already folded in the less specific prefixes' rules, so one LPM lookup is
 * enough. */
struct al_range {
	__u16 port_lo; /* host order; 0..65535 also covers ICMP (no port) */
	__u16 port_hi;
	__u8 proto_mask; /* al_proto_bit */
	__u8 action;     /* al_action */
	__u16 rule;      /* index of the policy rule, for events */
};

enum al_rule_set_flag {
	AL_RS_QUERY = 1u << 0,    /* name entry: some range allows, so queries for it may leave */
	AL_RS_WILDCARD = 1u << 1, /* name entry "*.name": matches names strictly below name */
};

/* The value of an al_rules (address) or al_names (name) entry. */
struct al_rule_set {
	__u32 count;
	__u16 flags;    /* al_rule_set_flag, names only */
	__u16 name_len; /* names: bytes of the entry's name (without AL_NAME_END) */
	struct al_range ranges[AL_MAX_RANGES];
};

/* Map "al_names", LPM trie: a sandbox's domain rules. A name is keyed by
 * its labels in reverse order, each with its length byte in front, so that
 * the names below x.y share x.y's bytes as a prefix: "www.example.com" is
 * \3com\7example\3www. A lookup key ends in AL_NAME_END; an exact entry
 * includes the first bit of it (label lengths are below 0x40, so no longer
 * name shares that bit), a wildcard entry stops at the last label. */
struct al_name_key {
	__u32 prefixlen; /* AL_NAME_KEY_FIXED_BITS + 8 * bytes (+ 1: exact) */
	__u16 policy_id;
	__u8 name[AL_DNS_NAME_BYTES];
};

enum al_dns_flag {
	AL_DNS_TCP = 1u << 0,     /* DNS over TCP to the resolvers */
	AL_DNS_EDNS = 1u << 1,    /* a query may carry one EDNS OPT record */
	AL_DNS_EDNS_DO = 1u << 2, /* its DNSSEC OK bit may be set */
	AL_DNS_WORLD = 1u << 3,   /* world.dns synthesize: every query (port 53, UDP and TCP, any
				    * address) is redirected to the sandbox's proxy, which answers it */
};

/* An EDNS option a query may carry: its code, and at most this many bytes
 * (at most once per query). */
struct al_dns_edns_opt {
	__u16 code;
	__u16 max_len;
};

struct al_dns_resolver {
	__u8 family; /* al_family */
	__u8 pad[3];
	__u8 addr[16];
};

/* Map "al_dns", hash: policy id (__u32) -> the policy's "dns" block. */
struct al_dns_policy {
	__u32 flags;        /* al_dns_flag */
	__u16 max_name_len; /* presentation form, without the trailing dot */
	__u8 max_label_len;
	__u8 nresolvers;
	__u8 ntypes;
	__u8 pad[3];
	__u32 min_ttl; /* seconds */
	__u32 max_ttl;
	__u32 pad2;
	__u64 query_interval_ns; /* 1 s / queries_per_second */
	__u64 query_burst_ns;    /* (burst - 1) * interval: how far ahead of time the budget may run */
	__u16 types[AL_DNS_MAX_TYPES];
	struct al_dns_resolver resolvers[AL_DNS_MAX_RESOLVERS];
	__u8 nedns_opts;
	__u8 nudp_sizes;
	__u8 pad3[6];
	__u16 udp_sizes[AL_DNS_MAX_UDP_SIZES]; /* the OPT record's class: the requestor's UDP payload size */
	struct al_dns_edns_opt edns_opts[AL_DNS_MAX_EDNS_OPTS];
};

/* Map "al_dns_state", array by slot: the query budget (generic cell rate:
 * the time at which the budget is back to full). */
struct al_dns_state {
	__u64 tat_ns;
};

/* Inner maps of "al_pending" (one LRU hash per slot): queries that left,
 * waiting for their answer. An answer is learned only if it matches one. */
struct al_pending_key {
	__u8 family;
	__u8 pad;
	__u16 port; /* the sandbox's source port, host order */
	__u16 id;   /* DNS message id */
	__u16 pad2;
	__u8 resolver[16];
};

struct al_pending {
	__u64 ts_ns;
	__u16 qtype;
	__u16 pad[3];
	struct al_name_key name; /* the question, as a lookup key */
	__u32 pad2;
};

/* Inner maps of "al_learned" (one hash per slot, never an LRU): addresses
 * from answers, judged by the rules of the name they answered. */
struct al_learned_key {
	__u32 family;
	__u8 addr[16];
};

struct al_learned {
	__u64 expires_ns; /* bpf_ktime_get_ns(): no new flows after it */
	__u64 learned_ns;
	struct al_name_key name; /* the question name; its policy id is rewritten at lookup */
	__u32 pad;
};

/* Unix socket rules. A path is the bytes of sun_path that name it: a named
 * socket's path up to its NUL ("/run/x.sock"), an abstract name with its
 * leading NUL and exactly the length the caller gave. */
enum al_unix_kind {
	AL_UNIX_NAMED = 1,
	AL_UNIX_ABSTRACT = 2,
};

/* Map "al_unix_exact", hash: a rule for exactly this path. */
struct al_unix_exact_key {
	__u32 policy_id;
	__u8 kind; /* al_unix_kind */
	__u8 len;  /* bytes of path[] (abstract: without the leading NUL) */
	__u16 pad;
	__u8 path[AL_UNIX_PATH_MAX]; /* zero after len */
};

/* Map "al_unix_prefix", LPM trie: a rule for every path that starts with
 * path[]. prefixlen counts AL_UNIX_KEY_FIXED_BITS, then the path's bits. */
struct al_unix_prefix_key {
	__u32 prefixlen;
	__u32 policy_id;
	__u8 kind;
	__u8 path[AL_UNIX_PATH_MAX];
	__u8 pad[3];
};

/* Inner maps of "al_unix_bound" (one hash per slot, never an LRU): the
 * abstract names the sandbox's own processes bound, learned from bind(2)
 * as it returns 0. A full table refuses: the name is then not the
 * sandbox's, and a connect to it is denied. */
struct al_unix_bound_key {
	__u8 len;
	__u8 pad[3];
	__u8 name[AL_UNIX_PATH_MAX]; /* without the leading NUL; zero after len */
};

/* Map "al_unix_binding", LRU hash: thread (pid_tgid) -> its bind(2) of an
 * abstract name, between the syscall's entry and its return. */
struct al_unix_binding {
	__u32 slot;
	struct al_unix_bound_key key;
};

struct al_unix_rule {
	__u16 rule;  /* index of the policy rule */
	__u8 action; /* al_action */
	__u8 pad;
};

/* Redirects. A connect that a redirect rule matches goes to the sandbox's
 * proxy listener instead (al_proxy), and the socket remembers where it was
 * meant to go (al_sk_origin); when the connection starts, sockops files the
 * same under the client's address and port in its network namespace
 * (al_origin), which is what the proxy sees of the connection it accepts. */

/* Map "al_proxy", array by slot: where the sandbox's proxy listens, in the
 * sandbox's network namespace. port 0: no proxy (redirects fail closed). */
struct al_proxy {
	__u32 addr4;    /* network order; the listener on IPv4 loopback */
	__u16 port;     /* host order, the same on both families */
	__u16 flags;    /* al_proxy_flag */
	__u8 addr6[16]; /* the listener on IPv6 loopback */
};

/* Map "al_proxy_port", hash: the port of every sandbox's proxy -> its slot
 * (__u32 port in host order -> __u32 slot). Every proxy listens on
 * 127.0.0.1 and ::1 of its sandbox's network namespace, on a port no other
 * proxy holds, in any namespace (the agent claims it with BPF_NOEXIST, or
 * binds another): its port, named directly, is a proxy port for every
 * sandbox, and a packet reaches it only from a socket redirected to that
 * slot's proxy. */

enum al_proxy_flag {
	AL_PROXY_IPV6 = 1u << 0, /* a listener on addr6 exists: IPv6 destinations can be redirected */
	AL_PROXY_UDP4 = 1u << 1, /* a UDP socket on addr4:port takes redirected IPv4 datagrams */
	AL_PROXY_UDP6 = 1u << 2, /* a UDP socket on addr6:port takes redirected IPv6 datagrams */
};

/* Where a redirected connection was meant to go. */
struct al_origin {
	__u8 family;   /* al_family */
	__u8 protocol; /* IPPROTO_TCP or IPPROTO_UDP */
	__u16 port;    /* host order */
	__u16 rule;    /* the redirect rule */
	__u16 pad;
	__u32 slot;
	__u32 pad2;
	__u8 addr[16];
};

/* Map "al_target", hash: (policy id, redirect rule) -> where a rule with
 * "to": "HOST:PORT" sends what it matches (a simulator the operator runs),
 * instead of the sandbox's proxy. No entry: the rule goes to the proxy. */
struct al_target_key {
	__u32 policy_id;
	__u16 rule;
	__u16 pad;
};
struct al_target {
	__u8 family; /* al_family */
	__u8 pad;
	__u16 port; /* host order */
	__u32 pad2;
	__u8 addr[16]; /* network order; IPv4 in the first 4 bytes */
};
#define AL_TARGETS_MAX 4096

/* Map "al_sk_origin", socket storage of a redirected socket. */
struct al_sk_origin {
	struct al_origin origin;
	__u64 netns_cookie; /* the socket's network namespace */
	__u32 flags;        /* al_sk_origin_flag */
	__u32 pad;
	struct al_target target; /* AL_SK_TARGET: where the connect or datagram went instead */
};

enum al_sk_origin_flag {
	AL_SK_REDIRECTED = 1u << 0, /* connect (or, UDP, the last sendmsg) went to the proxy or a target */
	AL_SK_FILED = 1u << 1,      /* its origin table has its entry */
	AL_SK_TARGET = 1u << 2,     /* it went to a target (al_target), not to the proxy */
};

/* Map "al_target_origin", array of maps indexed by slot, one LRU hash per
 * sandbox whose policy redirects to a target (of al_target_origin_template's
 * shape): a connection to a target as the target sees the socket it
 * accepted (its peer and its own address and port) -> al_target_origin.
 * Filed by sockops as the connection starts; read by al_original_dst, the
 * getsockopt(SO_ORIGINAL_DST) program attached to the target's cgroup. An
 * IPv4 address in an IPv6 socket is keyed as IPv4, on both ends. The
 * network namespace's cookie is in the key for a loopback target only
 * (loopback never leaves a namespace); a routed target, reached from
 * another namespace, is keyed with 0 on both ends. */
struct al_target_origin_key {
	__u64 netns_cookie;
	__u8 family;       /* al_family, of both ends */
	__u8 protocol;     /* IPPROTO_TCP */
	__u16 port;        /* the client's port, host order */
	__u16 target_port; /* host order */
	__u16 pad;
	__u8 addr[16];   /* the client's address */
	__u8 target[16]; /* the target's address */
};
/* Its value: the origin, when it was filed and when the client's socket
 * closed (CLOCK_MONOTONIC, 0: open). An entry answers while the client's
 * socket is open and for AL_TARGET_GRACE_NS after (a target may read
 * first and ask after the client sent and closed); the newest of all
 * tables answers, as a later connection with the same ends replaces an
 * earlier one. */
struct al_target_origin {
	struct al_origin origin;
	__u64 filed_ns;
	__u64 closed_ns;
};
#define AL_TARGET_GRACE_NS (5ull * 1000000000ull)
#define AL_SO_ORIGINAL_DST 80 /* getsockopt(SOL_IP or SOL_IPV6, SO_ORIGINAL_DST) of netfilter */

/* Map "al_origin", array of maps indexed by slot, one LRU hash per sandbox
 * with a proxy (made with it, of al_origin_template's shape; the proxy reads
 * its own, read-only): the client end of a redirected connection, as
 * the proxy sees it from the socket it accepted (TCP, filed by sockops as
 * the connection starts) or from the datagram it received (UDP, filed at
 * egress as each datagram leaves: the latest datagram's) -> al_origin. An
 * IPv4 address in an IPv6 socket (::ffff:a.b.c.d) is keyed as IPv4. */
struct al_origin_key {
	__u64 netns_cookie;
	__u32 family;  /* al_family */
	__u16 port;    /* the client's port, host order */
	__u8 protocol; /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;
	__u8 addr[16]; /* the client's address */
};
#define AL_ORIGINS_PER_SANDBOX 16384

/* Map "al_budget", hash: (slot, rule) -> the rule's egress byte budget and
 * what its destinations received: TCP payload once (a retransmission is
 * not counted again), UDP payload. */
struct al_budget_key {
	__u32 slot;
	__u16 rule;
	__u16 pad;
};
struct al_budget {
	__u64 limit; /* bytes */
	__u64 used;  /* bytes counted; past limit: spent */
};
#define AL_BUDGETS_MAX 4096

/* Map "al_sk_budget", socket storage of a TCP socket a budget counts: the
 * sequence number after the last payload byte counted. */
struct al_sk_budget {
	__u32 next_seq;
	__u32 started;
};

/* Map "al_sk_held", socket storage: a TCP socket one of whose packets
 * egress refused, with the cgroup id of its sandbox. Its send queue may
 * hold what was refused: when the sandbox is removed, the agent finds it
 * by this (sock_diag's INET_DIAG_REQ_SK_BPF_STORAGES), whichever cgroup
 * it was made in, and ends it before the programs are detached. */
struct al_sk_held {
	__u64 sandbox_cgroup;
};

/* Map "al_latch", array indexed by slot. Nonzero: quarantined since then. */
struct al_latch {
	__u64 violated_ns; /* bpf_ktime_get_ns() of the violation that set it */
	__u64 cgroup_id;   /* sandbox the latch was set for */
};

/* Map "al_counters", per-CPU array indexed by slot (AL_SLOT_UNKNOWN for a
 * program that ran without a sandbox entry). */
struct al_counters {
	__u64 decisions[AL_HOOK_MAX][AL_VERDICT_MAX];
	__u64 reasons[AL_REASON_MAX]; /* denials (and audit) by reason */
	__u64 egress_packets;         /* allowed at cgroup_skb/egress */
	__u64 egress_bytes;
	__u64 denied_packets; /* dropped at cgroup_skb/egress */
	__u64 denied_bytes;
	__u64 violations;  /* denied or audited, not counting quarantined */
	__u64 events_lost; /* ring buffer full or missing */
	__u64 dns_queries_allowed;
	__u64 dns_queries_denied;             /* and audited */
	__u64 dns_answers_learned;            /* addresses written to the learned table */
	__u64 dns_answers_dropped;            /* unsolicited, mismatched or unparseable answers */
	__u64 dns_learn_full;                 /* addresses not learned: the table was full */
	__u64 dns_records_off_chain;          /* A/AAAA records not learned: owner outside the question's CNAME chain */
	__u64 unix_bound_full;                /* abstract names bound but not remembered: the table was full */
	__u64 helper_errors[AL_ERR_SITE_MAX]; /* helper calls that failed, by al_err_site */
	/* Events not sent to the ring by the rate limit, by hook and reason. */
	__u64 suppressed[AL_HOOK_MAX][AL_REASON_MAX];
};

/* Map "al_flood", array by slot: the event rate limit of a sandbox (generic
 * cell rate per hook and reason: when the budget is back to full). */
struct al_flood {
	__u64 tat_ns[AL_HOOK_MAX][AL_REASON_MAX];
};

/* al_event.signal: what the program did to the task of a sock_addr or
 * sock_create decision that set the latch, before user space heard of it. */
/* clang-format off */
#define AL_EVENT_SIGNALS(X) \
	X(AL_SIGNAL_NONE, 0, "")                 /* nothing: never written out */ \
	X(AL_SIGNAL_STOPPED, 1, "stopped")       /* SIGSTOP: the task stops when the call returns */ \
	X(AL_SIGNAL_KILLED, 2, "killed")         /* SIGKILL: the task dies in the call */ \
	X(AL_SIGNAL_FAILED, 3, "signal-failed")  /* bpf_send_signal failed */

enum al_event_signal {
	AL_EVENT_SIGNALS(AL_ENUMERATOR)
	AL_SIGNAL_MAX = 4,
};
/* clang-format on */

enum al_event_kind {
	AL_EVENT_DECISION = 1,
	AL_EVENT_DNS_QUERY = 2,  /* al_dns_event: a decision on a DNS query */
	AL_EVENT_DNS_ANSWER = 3, /* al_dns_event: an address from an answer (base.addr) */
	AL_EVENT_UNIX = 4,       /* al_unix_event: a decision on a unix socket address */
};

/* Record in a sandbox's ring buffer (map "al_rings", slot -> ring). */
struct al_event {
	__u64 ts_ns;     /* bpf_ktime_get_ns(), CLOCK_MONOTONIC */
	__u64 cgroup_id; /* the sandbox's cgroup, not necessarily the task's */
	__u32 pid;       /* thread id; in softirq context, whoever ran */
	__u32 tgid;
	__u32 slot;
	__u32 policy_id;
	__u8 comm[AL_COMM_LEN];
	__u8 kind;     /* al_event_kind */
	__u8 hook;     /* al_hook */
	__u8 verdict;  /* al_verdict */
	__u8 reason;   /* al_reason */
	__u8 family;   /* al_family, 0 when not known (sock_create) */
	__u8 protocol; /* IPPROTO_* */
	__u16 port;    /* destination port, host order */
	__u16 rule;    /* AL_RULE_NONE or the policy rule index */
	__u8 latched;  /* this decision set the quarantine latch */
	__u8 signal;   /* al_event_signal */
	__u8 pad[4];
	__u8 addr[16]; /* destination, IPv4 in the first four bytes */
};

/* A DNS query decision or an answer's address: the decision record, then
 * the question. */
struct al_dns_event {
	struct al_event base;
	__u16 qtype;
	__u16 qid;
	__u16 name_len; /* bytes of name[] (al_name_key form); 0: not parsed */
	__u8 learned;   /* answer: the address went into the learned table */
	__u8 pad;
	__u32 ttl; /* answer: seconds, after clamping */
	__u32 pad2;
	__u8 name[256];
};

/* A decision on a unix connect or datagram: the decision record (family
 * 0, no address), then the path as the kernel would resolve it. */
struct al_unix_event {
	struct al_event base;
	__u8 kind; /* al_unix_kind, 0 when the address was not a unix one */
	__u8 len;  /* bytes of path[] */
	__u8 pad[6];
	__u8 path[AL_UNIX_PATH_MAX];
	__u8 pad2[4];
};

#ifdef __cplusplus
#define AL_STATIC_ASSERT static_assert
#else
#define AL_STATIC_ASSERT _Static_assert
#endif

AL_STATIC_ASSERT(sizeof(struct al_config) == 16, "al_config layout");
AL_STATIC_ASSERT(sizeof(struct al_sandbox) == 24, "al_sandbox layout");
AL_STATIC_ASSERT(sizeof(struct al_lpm_key) == 28, "al_lpm_key layout");
AL_STATIC_ASSERT(sizeof(struct al_range) == 8, "al_range layout");
AL_STATIC_ASSERT(sizeof(struct al_rule_set) == 8 + 8 * AL_MAX_RANGES, "al_rule_set layout");
AL_STATIC_ASSERT(sizeof(struct al_latch) == 16, "al_latch layout");
AL_STATIC_ASSERT(sizeof(struct al_proxy) == 24, "al_proxy layout");
AL_STATIC_ASSERT(sizeof(struct al_origin) == 32, "al_origin layout");
AL_STATIC_ASSERT(sizeof(struct al_budget_key) == 8, "al_budget_key layout");
AL_STATIC_ASSERT(sizeof(struct al_budget) == 16, "al_budget layout");
AL_STATIC_ASSERT(sizeof(struct al_sk_budget) == 8, "al_sk_budget layout");
AL_STATIC_ASSERT(sizeof(struct al_sk_held) == 8, "al_sk_held layout");
AL_STATIC_ASSERT(sizeof(struct al_sk_origin) == 72, "al_sk_origin layout");
AL_STATIC_ASSERT(sizeof(struct al_target_key) == 8, "al_target_key layout");
AL_STATIC_ASSERT(sizeof(struct al_target) == 24, "al_target layout");
AL_STATIC_ASSERT(sizeof(struct al_target_origin_key) == 48, "al_target_origin_key layout");
AL_STATIC_ASSERT(sizeof(struct al_target_origin) == 48, "al_target_origin layout");
AL_STATIC_ASSERT(sizeof(struct al_origin_key) == 32, "al_origin_key layout");
AL_STATIC_ASSERT(sizeof(struct al_counters) == 8 * ((int)AL_HOOK_MAX * (int)AL_VERDICT_MAX + (int)AL_REASON_MAX + 13 +
						    (int)AL_ERR_SITE_MAX + (int)AL_HOOK_MAX * (int)AL_REASON_MAX),
		 "al_counters layout");
AL_STATIC_ASSERT(sizeof(struct al_flood) == 8 * (int)AL_HOOK_MAX * (int)AL_REASON_MAX, "al_flood layout");
AL_STATIC_ASSERT(sizeof(struct al_event) == 80, "al_event layout");
AL_STATIC_ASSERT(sizeof(struct al_name_key) == 260, "al_name_key layout");
AL_STATIC_ASSERT(sizeof(struct al_dns_resolver) == 20, "al_dns_resolver layout");
AL_STATIC_ASSERT(sizeof(struct al_dns_edns_opt) == 4, "al_dns_edns_opt layout");
AL_STATIC_ASSERT(sizeof(struct al_dns_policy) == 40 + 2 * AL_DNS_MAX_TYPES + 20 * AL_DNS_MAX_RESOLVERS + 8 +
							 2 * AL_DNS_MAX_UDP_SIZES + 4 * AL_DNS_MAX_EDNS_OPTS,
		 "al_dns_policy layout");
AL_STATIC_ASSERT(sizeof(struct al_dns_state) == 8, "al_dns_state layout");
AL_STATIC_ASSERT(sizeof(struct al_pending_key) == 24, "al_pending_key layout");
AL_STATIC_ASSERT(sizeof(struct al_pending) == 280, "al_pending layout");
AL_STATIC_ASSERT(sizeof(struct al_learned_key) == 20, "al_learned_key layout");
AL_STATIC_ASSERT(sizeof(struct al_learned) == 280, "al_learned layout");
AL_STATIC_ASSERT(sizeof(struct al_dns_event) == 80 + 16 + 256, "al_dns_event layout");
AL_STATIC_ASSERT(sizeof(struct al_unix_exact_key) == 8 + AL_UNIX_PATH_MAX, "al_unix_exact_key layout");
AL_STATIC_ASSERT(sizeof(struct al_unix_prefix_key) == 12 + AL_UNIX_PATH_MAX, "al_unix_prefix_key layout");
AL_STATIC_ASSERT(sizeof(struct al_unix_rule) == 4, "al_unix_rule layout");
AL_STATIC_ASSERT(sizeof(struct al_unix_bound_key) == 4 + AL_UNIX_PATH_MAX, "al_unix_bound_key layout");
AL_STATIC_ASSERT(sizeof(struct al_unix_binding) == 8 + AL_UNIX_PATH_MAX, "al_unix_binding layout");
AL_STATIC_ASSERT(sizeof(struct al_unix_event) == 80 + 8 + AL_UNIX_PATH_MAX + 4, "al_unix_event layout");

#endif /* AIRLOCK_ABI_H */
