// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The BPF unit tests' own object: airlock's programs exactly as production
 * builds them (airlock.bpf.c, included whole), with one seam, and a program
 * that calls the verdict library on an address the test crafts.
 *
 * The seam is al_skb_load (bpf/parse.bpf.h): here the load at the site in
 * al_test_fail_site fails as a failed helper would. No packet can make it
 * fail in production (the parsers check lengths first), so this is how each
 * site's accounting is proven. The tests load this object next to the
 * production one and share its maps, not its knobs: here al_signal_sock_addr
 * stays 0, so a decision that latches never stops the test with SIGSTOP. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <airlock/abi.h>
#include "airlock_test.h"

/* An al_err_site; AL_ERR_SITE_MAX: no load fails. Set by the test. */
volatile __u32 al_test_fail_site = AL_ERR_SITE_MAX;

static __always_inline long al_test_skb_load(const struct __sk_buff *skb, __u32 off, void *to, __u32 len, __u32 site)
{
	if (site == al_test_fail_site)
		return -14; /* -EFAULT, as bpf_skb_load_bytes fails */
	return bpf_skb_load_bytes(skb, off, to, len);
}
#define al_skb_load al_test_skb_load

#include "airlock.bpf.c"

/* The sock_addr hooks' decision (al_addr4, al_addr6 in airlock.bpf.c) on
 * the address in al_test_in, for the task that runs the test, with the
 * answer in al_test_in.ret. A cgroup_skb program, whatever the packet: its
 * test runs are synchronous and it may use every map the hooks use (a
 * syscall program, being sleepable, may not use LPM tries). */
struct al_test_sock_addr al_test_in;

SEC("cgroup_skb/egress")
int al_test_sock_addr(struct __sk_buff *skb)
{
	struct al_dest dst = { .protocol = al_test_in.protocol };
	__u8 hook = al_test_in.hook;

	if (al_test_in.ipv6) {
		__u32 ip6[4] = { al_test_in.addr6[0], al_test_in.addr6[1], al_test_in.addr6[2], al_test_in.addr6[3] };

		al_dest_ip6(&dst, ip6);
	} else {
		al_dest_ip4(&dst, al_test_in.addr4);
	}
	dst.port = al_test_in.port;
	al_test_in.ret = al_decide_task(hook, &dst, 0, 0, 0);
	return AL_PASS;
}
