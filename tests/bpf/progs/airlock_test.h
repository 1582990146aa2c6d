/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the BPF unit tests hand their own programs (progs/airlock_test.bpf.c)
 * and get back: plain C, included by the test program and by the tests. */
#ifndef AIRLOCK_TEST_H
#define AIRLOCK_TEST_H

#include <linux/types.h>

/* A sock_addr decision (connect4/6, sendmsg4/6) on an address, made as the
 * hooks make it from struct bpf_sock_addr, for the calling task. */
struct al_test_sock_addr {
	__u8 hook;     /* al_hook */
	__u8 ipv6;     /* addr6 holds the address (IPv4-mapped ones too), else addr4 */
	__u8 protocol; /* IPPROTO_* */
	__u8 pad;
	__u16 port; /* host order */
	__u16 pad2;
	__u32 addr4;    /* network order */
	__u32 addr6[4]; /* network order */
	__s32 ret;      /* out: 1 the call goes on, 0 it fails with EPERM */
};

#ifdef __cplusplus
static_assert(sizeof(struct al_test_sock_addr) == 32, "al_test_sock_addr layout");
#else
_Static_assert(sizeof(struct al_test_sock_addr) == 32, "al_test_sock_addr layout");
#endif

#endif /* AIRLOCK_TEST_H */
