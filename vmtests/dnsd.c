// A DNS responder for the vmtest, where nothing else is: answers A queries
// for allowed.test and denied.test with 127.0.0.1 (TTL 60), everything else
// with NXDOMAIN. Listens on 127.0.0.1:53 (UDP); appends every query it
// receives to /tmp/dns.log, as it came.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(53),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof(a)) != 0) {
		perror("dnsd");
		return 1;
	}
	FILE* log = fopen("/tmp/dns.log", "ab");
	for (;;) {
		unsigned char m[512];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s, m, sizeof(m) - 16, 0, (struct sockaddr*)&from, &fl);
		if (n > 0 && log) {
			fwrite(m, 1, (size_t)n, log);
			fflush(log);
		}
		if (n < 12)
			continue;
		size_t p = 12;
		while (p < (size_t)n && m[p])
			p += m[p] + 1;
		if (p + 5 > (size_t)n)
			continue;
		size_t qend = p + 5;
		int type_a = m[p + 1] == 0 && m[p + 2] == 1;
		int known = (p - 12 == 13 && memcmp(m + 12, "\7allowed\4test", 13) == 0) ||
			    (p - 12 == 12 && memcmp(m + 12, "\6denied\4test", 12) == 0);
		m[2] = 0x84 | (m[2] & 1); /* QR, AA, RD as asked */
		m[3] = known ? 0x00 : 0x03;
		m[6] = 0;
		m[7] = known && type_a;
		m[8] = m[9] = m[10] = m[11] = 0; /* drop the EDNS record */
		size_t len = qend;
		if (known && type_a) {
			static const unsigned char rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1};
			memcpy(m + len, rr, sizeof(rr));
			len += sizeof(rr);
		}
		sendto(s, m, len, 0, (struct sockaddr*)&from, fl);
	}
}
