// Per-call cost of airlock's hooks: TCP connect+accept+close and UDP sendto
// on loopback, timed in one process. Run it once outside any sandbox and once
// inside `airlock run` (scripts/bench.sh); the ratio is the overhead.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int l = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	socklen_t len = sizeof(sa);
	if (bind(l, (struct sockaddr*)&sa, sizeof(sa)) || listen(l, 4096) ||
	    getsockname(l, (struct sockaddr*)&sa, &len)) {
		perror("listen");
		return 1;
	}
	double t0 = now();
	for (int i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		struct linger lg = {1, 0};  // RST on close: no TIME_WAIT pile-up
		setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		if (connect(c, (struct sockaddr*)&sa, sizeof(sa))) {
			perror("connect");
			return 1;
		}
		int a = accept(l, NULL, NULL);
		close(c);
		close(a);
	}
	double tcp = (now() - t0) / n;

	int u = socket(AF_INET, SOCK_DGRAM, 0);
	int r = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in ua = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	len = sizeof(ua);
	bind(r, (struct sockaddr*)&ua, sizeof(ua));
	getsockname(r, (struct sockaddr*)&ua, &len);
	char buf[64] = "airlock-bench", in[64];
	t0 = now();
	for (int i = 0; i < n * 5; i++) {
		if (sendto(u, buf, sizeof(buf), 0, (struct sockaddr*)&ua, sizeof(ua)) < 0) {
			perror("sendto");
			return 1;
		}
		recv(r, in, sizeof(in), 0);
	}
	double udp = (now() - t0) / (n * 5);
	printf("{\"tcp_connect_ns\": %.0f, \"udp_sendto_ns\": %.0f}\n", tcp * 1e9, udp * 1e9);
	return 0;
}
