// Runs a pinned cgroup_skb program on crafted packets with BPF_PROG_TEST_RUN:
// nothing is sent anywhere, the verdict is the program's return value. The
// kernel gives the test packet a socket of the caller's cgroup, so run this
// inside a sandbox to exercise that sandbox's policy.
//
//   skb_testrun PROG_PIN HEX [HEX ...]
//
// HEX is an IPv4 or IPv6 packet (from its IP header on). Prints one JSON
// line: {"client":"skb_testrun","results":[{"i":0,"retval":1,"errno":null},...]}
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unhex(const char* s, unsigned char* out, size_t max)
{
	size_t n = strlen(s);
	if (n % 2 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (unsigned char)v;
	}
	return (int)(n / 2);
}

int main(int argc, char** argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: skb_testrun PROG_PIN HEX [HEX ...]\n");
		return 2;
	}
	int prog = bpf_obj_get(argv[1]);
	if (prog < 0) {
		fprintf(stderr, "skb_testrun: open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	printf("{\"client\":\"skb_testrun\",\"results\":[");
	for (int i = 2; i < argc; i++) {
		unsigned char pkt[14 + 65536];
		int n = unhex(argv[i], pkt + 14, sizeof(pkt) - 14);
		if (n < 1) {
			fprintf(stderr, "skb_testrun: argument %d is not hex\n", i - 1);
			return 2;
		}
		// An Ethernet header: the kernel takes the protocol from it and
		// strips it for cgroup_skb.
		memset(pkt, 0, 12);
		pkt[0] = 0x02;
		pkt[6] = 0x02;
		int v6 = (pkt[14] >> 4) == 6;
		pkt[12] = v6 ? 0x86 : 0x08;
		pkt[13] = v6 ? 0xdd : 0x00;
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = (unsigned)(14 + n), .repeat = 1);
		int err = bpf_prog_test_run_opts(prog, &opts);
		if (err)
			printf("%s{\"i\":%d,\"retval\":null,\"errno\":\"%s\"}", i > 2 ? "," : "", i - 2,
			       strerror(errno));
		else
			printf("%s{\"i\":%d,\"retval\":%u,\"errno\":null}", i > 2 ? "," : "", i - 2, opts.retval);
	}
	printf("]}\n");
	return 0;
}
