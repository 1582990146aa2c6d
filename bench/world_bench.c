// What a redirect to the world costs, seen from inside the sandbox: the same
// HTTP exchanges against a server of its own on loopback (allowed, direct)
// and against an address the policy redirects to the recorder, alternating
// in one process (scripts/bench_world.sh runs it in `airlock run`).
//
//   world_bench WORLD_ADDR:PORT ROUNDS CONNS BODY_BYTES
//
// Each round: CONNS requests, each on a new connection (connect, GET,
// response read to its end, close), then one POST of BODY_BYTES, against
// the direct server, then the same against the world. One JSON line per
// round: mean microseconds per connection and MB/s of the POST, each way.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
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

static void die(const char* what)
{
	perror(what);
	exit(1);
}

// The direct server: one connection at a time, a request's header read to
// its blank line, its Content-Length body read and dropped, 200 and close.
static void* serve(void* arg)
{
	int l = *(int*)arg;
	static char buf[1 << 16];
	static const char answer[] =
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			continue;
		size_t have = 0;
		char* end = NULL;
		while (!end && have < sizeof(buf) - 1) {
			ssize_t n = read(c, buf + have, sizeof(buf) - 1 - have);
			if (n <= 0)
				break;
			have += (size_t)n;
			buf[have] = 0;
			end = strstr(buf, "\r\n\r\n");
		}
		if (end) {
			long long body = 0;
			char* cl = strcasestr(buf, "\r\nContent-Length:");
			if (cl && cl < end)
				body = atoll(cl + 17);
			long long got = (long long)(have - (size_t)(end + 4 - buf));
			while (got < body) {
				ssize_t n = read(c, buf, sizeof(buf));
				if (n <= 0)
					break;
				got += n;
			}
			if (write(c, answer, sizeof(answer) - 1) < 0)
				perror("write");
		}
		close(c);
	}
	return NULL;
}

static int dial(const struct sockaddr_in* sa)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0)
		die("socket");
	if (connect(c, (const struct sockaddr*)sa, sizeof(*sa)))
		die("connect");
	int one = 1;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return c;
}

static void send_all(int c, const char* p, size_t n)
{
	while (n) {
		ssize_t w = write(c, p, n);
		if (w <= 0)
			die("write");
		p += w;
		n -= (size_t)w;
	}
}

// Reads the answer to its end (both servers close after it); returns its
// status code.
static int read_answer(int c)
{
	char buf[4096], head[16] = {0};
	size_t have = 0;
	ssize_t n;
	while ((n = read(c, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n && have < sizeof(head) - 1; i++)
			head[have++] = buf[i];
	}
	if (n < 0)
		die("read");
	return strncmp(head, "HTTP/1.", 7) == 0 ? atoi(head + 9) : 0;
}

static double per_connection_us(const struct sockaddr_in* sa, int conns)
{
	static const char req[] = "GET /bench HTTP/1.1\r\nHost: bench.example\r\nConnection: close\r\n\r\n";
	double t0 = now();
	for (int i = 0; i < conns; i++) {
		int c = dial(sa);
		send_all(c, req, sizeof(req) - 1);
		if (read_answer(c) != 200) {
			fprintf(stderr, "world_bench: a GET was not answered 200\n");
			exit(1);
		}
		close(c);
	}
	return (now() - t0) / conns * 1e6;
}

static double post_mbps(const struct sockaddr_in* sa, size_t body)
{
	static char chunk[1 << 16];
	char head[256];
	int hn = snprintf(head, sizeof(head),
			  "POST /upload HTTP/1.1\r\nHost: bench.example\r\nContent-Type: application/octet-stream\r\n"
			  "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			  body);
	memset(chunk, 'x', sizeof(chunk));
	double t0 = now();
	int c = dial(sa);
	send_all(c, head, (size_t)hn);
	for (size_t left = body; left;) {
		size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
		send_all(c, chunk, n);
		left -= n;
	}
	if (read_answer(c) != 200) {
		fprintf(stderr, "world_bench: the POST was not answered 200\n");
		exit(1);
	}
	close(c);
	return (double)body / (now() - t0) / 1e6;
}

int main(int argc, char** argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: world_bench WORLD_ADDR:PORT ROUNDS CONNS BODY_BYTES\n");
		return 2;
	}
	char host[64];
	snprintf(host, sizeof(host), "%s", argv[1]);
	char* colon = strrchr(host, ':');
	if (!colon)
		return 2;
	*colon = 0;
	struct sockaddr_in world = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
	if (inet_pton(AF_INET, host, &world.sin_addr) != 1)
		return 2;
	int rounds = atoi(argv[2]), conns = atoi(argv[3]);
	size_t body = (size_t)atoll(argv[4]);

	struct sockaddr_in direct = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t len = sizeof(direct);
	if (l < 0 || bind(l, (struct sockaddr*)&direct, sizeof(direct)) || listen(l, 128) ||
	    getsockname(l, (struct sockaddr*)&direct, &len))
		die("listen");
	pthread_t t;
	if (pthread_create(&t, NULL, serve, &l))
		die("pthread_create");

	for (int r = 0; r < rounds; r++) {
		double dc = per_connection_us(&direct, conns);
		double dt = post_mbps(&direct, body);
		double wc = per_connection_us(&world, conns);
		double wt = post_mbps(&world, body);
		printf("{\"round\":%d,\"direct_conn_us\":%.1f,\"world_conn_us\":%.1f,\"direct_post_mbps\":%.1f,"
		       "\"world_post_mbps\":%.1f}\n",
		       r + 1, dc, wc, dt, wt);
		fflush(stdout);
	}
	return 0;
}
