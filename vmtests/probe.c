// What the vmtest's sandbox tries on Linux 6.1, where there is no python:
//
//   probe fam    sockets of vsock, packet, netlink (NETLINK_USERSOCK), then
//                rtnetlink and unix: one line "FAM <af> <proto> ok|<errno>"
//   probe edns   to 127.0.0.1:53, a query for allowed.test carrying an EDNS
//                option the policy does not list (14 bytes of marker), then
//                the same query with a COOKIE, as dig sends it:
//                "EDNS-BAD sent|<errno>", "EDNS-GOOD answered|<errno>"
//   probe udp ADDR PORT TEXT
//                one datagram of TEXT to ADDR:PORT (unconnected sendto):
//                "UDP sent|<errno>"
//   probe dnsa ADDR NAME
//                an A query for NAME to ADDR:53 (unconnected): "DNSA from
//                SRC:PORT answer ADDRESS", or "DNSA send|recv <errno>"
//   probe hello ADDR PORT SNI
//                a TCP connect to ADDR:PORT, then a minimal TLS 1.2
//                ClientHello naming SNI, then what comes back (3 s at most):
//                "HELLO <SNI> back <text>", "HELLO <SNI> closed", or
//                "HELLO <SNI> connect|send <errno>"
//   probe origdst PORT
//                a target: listens on 127.0.0.1:PORT, accepts one
//                connection, asks getsockopt(SOL_IP, SO_ORIGINAL_DST) as a
//                transparent proxy does: "ORIGDST ADDR:PORT" or "ORIGDST
//                <errno>", and answers "TARGET-UP"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static void fam(int af, int type, int proto)
{
	int s = socket(af, type, proto);
	if (s >= 0) {
		printf("FAM %d %d ok\n", af, proto);
		close(s);
	} else {
		printf("FAM %d %d %d\n", af, proto, errno);
	}
}

// A query for allowed.test A with one OPT record holding one option.
static size_t query(unsigned char* m, unsigned id, unsigned code, const char* data, size_t len)
{
	static const unsigned char head[] = {0, 0, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1};
	static const unsigned char q[] = "\7allowed\4test\0\0\1\0\1";
	size_t n = 0;
	memcpy(m, head, sizeof(head));
	m[0] = id >> 8;
	m[1] = id & 0xff;
	n += sizeof(head);
	memcpy(m + n, q, sizeof(q) - 1);
	n += sizeof(q) - 1;
	const unsigned char opt[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, (unsigned char)(4 + len)};
	memcpy(m + n, opt, sizeof(opt));
	n += sizeof(opt);
	m[n++] = code >> 8;
	m[n++] = code & 0xff;
	m[n++] = 0;
	m[n++] = (unsigned char)len;
	memcpy(m + n, data, len);
	return n + len;
}

static int edns(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(53),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {.tv_sec = 3};
	unsigned char m[512];
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
		return 1;
	size_t n = query(m, 0x4242, 0xfde9, "EXFILTRATE-ME!", 14);
	if (sendto(s, m, n, 0, (struct sockaddr*)&a, sizeof(a)) == (ssize_t)n)
		printf("EDNS-BAD sent\n");
	else
		printf("EDNS-BAD %d\n", errno);
	n = query(m, 0x4343, 10, "\1\2\3\4\5\6\7\10", 8);
	if (sendto(s, m, n, 0, (struct sockaddr*)&a, sizeof(a)) != (ssize_t)n) {
		printf("EDNS-GOOD %d\n", errno);
		return 0;
	}
	// The answer to the second query: the responder has read the first.
	for (;;) {
		ssize_t r = recv(s, m, sizeof(m), 0);
		if (r < 0) {
			printf("EDNS-GOOD %d\n", errno);
			return 0;
		}
		if (r >= 2 && m[0] == 0x43 && m[1] == 0x43) {
			printf("EDNS-GOOD answered\n");
			return 0;
		}
	}
}

static int hello(const char* addr, int port, const char* sni)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	unsigned char m[600];
	size_t nl = strlen(sni), n = 0;
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1 || nl == 0 || nl > 253)
		return 2;
	/* server_name extension: type 0, its length, the list's, host_name (0), the name's. */
	size_t ext = 2 + 2 + 2 + 1 + 2 + nl;
	/* client_version, random, session id, cipher suites, compression, extensions. */
	size_t body = 2 + 32 + 1 + 4 + 2 + 2 + ext;
	m[n++] = 0x16, m[n++] = 3, m[n++] = 1, m[n++] = (unsigned char)((body + 4) >> 8),
	m[n++] = (unsigned char)(body + 4);
	m[n++] = 1, m[n++] = 0, m[n++] = (unsigned char)(body >> 8), m[n++] = (unsigned char)body;
	m[n++] = 3, m[n++] = 3;
	memset(m + n, 0x5a, 32);
	n += 32;
	m[n++] = 0;                                           /* session id */
	m[n++] = 0, m[n++] = 2, m[n++] = 0xc0, m[n++] = 0x2f; /* one cipher suite */
	m[n++] = 1, m[n++] = 0;                               /* null compression */
	m[n++] = (unsigned char)(ext >> 8), m[n++] = (unsigned char)ext;
	m[n++] = 0, m[n++] = 0;
	m[n++] = (unsigned char)((nl + 5) >> 8), m[n++] = (unsigned char)(nl + 5);
	m[n++] = (unsigned char)((nl + 3) >> 8), m[n++] = (unsigned char)(nl + 3);
	m[n++] = 0;
	m[n++] = (unsigned char)(nl >> 8), m[n++] = (unsigned char)nl;
	memcpy(m + n, sni, nl);
	n += nl;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = {.tv_sec = 3};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr*)&a, sizeof(a)) != 0) {
		printf("HELLO %s connect %d\n", sni, errno);
		return 0;
	}
	if (send(s, m, n, 0) != (ssize_t)n) {
		printf("HELLO %s send %d\n", sni, errno);
		return 0;
	}
	char r[128];
	ssize_t got = recv(s, r, sizeof(r) - 1, 0);
	if (got > 0) {
		r[got] = 0;
		r[strcspn(r, "\r\n")] = 0;
		printf("HELLO %s back %s\n", sni, r);
	} else {
		printf("HELLO %s closed\n", sni);
	}
	return 0;
}

static int origdst(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	struct sockaddr_in o;
	socklen_t len = sizeof(o);
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0), c;
	char ip[INET_ADDRSTRLEN];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr*)&a, sizeof(a)) || listen(s, 4)) {
		printf("ORIGDST listen %d\n", errno);
		return 1;
	}
	c = accept(s, 0, 0);
	if (c < 0)
		return 1;
	if (getsockopt(c, SOL_IP, 80 /* SO_ORIGINAL_DST */, &o, &len) == 0)
		printf("ORIGDST %s:%d\n", inet_ntop(AF_INET, &o.sin_addr, ip, sizeof(ip)), ntohs(o.sin_port));
	else
		printf("ORIGDST %d\n", errno);
	fflush(stdout);
	if (write(c, "TARGET-UP\n", 10) != 10)
		return 1;
	close(c);
	return 0;
}

int main(int argc, char** argv)
{
	if (argc == 3 && strcmp(argv[1], "origdst") == 0)
		return origdst(atoi(argv[2]));
	if (argc == 5 && strcmp(argv[1], "hello") == 0)
		return hello(argv[2], atoi(argv[3]), argv[4]);
	if (argc == 2 && strcmp(argv[1], "fam") == 0) {
		fam(40, SOCK_STREAM, 0);  // AF_VSOCK
		fam(17, SOCK_RAW, 0);     // AF_PACKET
		fam(16, SOCK_RAW, 2);     // AF_NETLINK, NETLINK_USERSOCK
		fam(16, SOCK_RAW, 0);     // AF_NETLINK, NETLINK_ROUTE
		fam(1, SOCK_STREAM, 0);   // AF_UNIX
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "edns") == 0)
		return edns();
	if (argc == 5 && strcmp(argv[1], "udp") == 0) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[3]))};
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1)
			return 2;
		size_t n = strlen(argv[4]);
		if (sendto(s, argv[4], n, 0, (struct sockaddr*)&a, sizeof(a)) == (ssize_t)n)
			printf("UDP sent\n");
		else
			printf("UDP %d\n", errno);
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "dnsa") == 0) {
		/* An A query for NAME (one label) from an unconnected socket; the
		 * answer's source as recvfrom gives it, and its first address. */
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)}, from;
		socklen_t flen = sizeof(from);
		unsigned char m[512], r[512];
		size_t nl = strlen(argv[3]), n = 0;
		struct timeval tv = {.tv_sec = 3};
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1 || nl == 0 || nl > 63)
			return 2;
		static const unsigned char head[] = {0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
		memcpy(m, head, sizeof(head));
		n = sizeof(head);
		m[n++] = (unsigned char)nl;
		memcpy(m + n, argv[3], nl);
		n += nl;
		static const unsigned char tail[] = {0, 0, 1, 0, 1};
		memcpy(m + n, tail, sizeof(tail));
		n += sizeof(tail);
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (sendto(s, m, n, 0, (struct sockaddr*)&a, sizeof(a)) != (ssize_t)n) {
			printf("DNSA send %d\n", errno);
			return 0;
		}
		ssize_t got = recvfrom(s, r, sizeof(r), 0, (struct sockaddr*)&from, &flen);
		if (got < (ssize_t)(n + 16)) {
			printf("DNSA recv %d\n", got < 0 ? errno : 0);
			return 0;
		}
		char src[INET_ADDRSTRLEN], ans[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &from.sin_addr, src, sizeof(src));
		inet_ntop(AF_INET, r + n + 12, ans, sizeof(ans));
		printf("DNSA from %s:%u answer %s\n", src, ntohs(from.sin_port), ans);
		return 0;
	}
	fprintf(stderr, "usage: probe fam|edns|udp ADDR PORT TEXT|dnsa ADDR NAME\n");
	return 2;
}
