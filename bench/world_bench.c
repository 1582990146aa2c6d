// What a redirect to the world, or the SNI gate, costs, seen from inside the
// sandbox: the same HTTP exchanges against a server of its own on loopback
// (allowed, direct) and against an address the policy redirects to the
// recorder, or gates, alternating in one process (scripts/bench_world.sh
// runs it in `airlock run`).
//
//   world_bench WORLD_ADDR:PORT ROUNDS CONNS BODY_BYTES
//   world_bench --gate NAME 127.0.0.1:PORT ROUNDS CONNS BODY_BYTES
//   world_bench --target PORT ADDR:PORT ROUNDS CONNS BODY_BYTES
//
// Each round: CONNS requests, each on a new connection (connect, GET,
// response read to its end, close), then one POST of BODY_BYTES, against
// the direct server, then the same against the world. One JSON line per
// round: mean microseconds per connection and MB/s of the POST, each way.
//
// --gate: this process serves 127.0.0.1:PORT too, the destination of a
// gated rule for NAME, and its direct server is on PORT+1. Every exchange, direct or gated, starts with the same
// minimal ClientHello naming NAME (the gate judges it and splices what
// follows; the TLS itself would cost the same both ways), and each round
// starts with an A query for NAME to 127.0.0.1:53, so that the sandbox has
// NAME's address learned. The keys are gate_* instead of world_*.
//
// --target: the direct server listens on 127.0.0.1:PORT, which the policy
// redirects ADDR:PORT to ("to": "127.0.0.1:PORT"): the same server both
// ways, the kernel's rewrite the only difference. The keys are target_*.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
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

// The ClientHello every exchange starts with under --gate (none: 0 bytes).
static unsigned char hello[600];
static size_t hello_len;

static void make_hello(const char* name)
{
	size_t nl = strlen(name), n = 0;
	if (nl == 0 || nl > 253) {
		fprintf(stderr, "world_bench: a name of 1-253 bytes\n");
		exit(2);
	}
	size_t ext = 2 + 2 + 2 + 1 + 2 + nl;         // server_name
	size_t body = 2 + 32 + 1 + 4 + 2 + 2 + ext;  // version, random, session, suites, compression, extensions
	unsigned char* m = hello;
	m[n++] = 0x16, m[n++] = 3, m[n++] = 1, m[n++] = (unsigned char)((body + 4) >> 8),
	m[n++] = (unsigned char)(body + 4);
	m[n++] = 1, m[n++] = 0, m[n++] = (unsigned char)(body >> 8), m[n++] = (unsigned char)body;
	m[n++] = 3, m[n++] = 3;
	memset(m + n, 0x5a, 32);
	n += 32;
	m[n++] = 0;
	m[n++] = 0, m[n++] = 2, m[n++] = 0xc0, m[n++] = 0x2f;
	m[n++] = 1, m[n++] = 0;
	m[n++] = (unsigned char)(ext >> 8), m[n++] = (unsigned char)ext;
	m[n++] = 0, m[n++] = 0;
	m[n++] = (unsigned char)((nl + 5) >> 8), m[n++] = (unsigned char)(nl + 5);
	m[n++] = (unsigned char)((nl + 3) >> 8), m[n++] = (unsigned char)(nl + 3);
	m[n++] = 0;
	m[n++] = (unsigned char)(nl >> 8), m[n++] = (unsigned char)nl;
	memcpy(m + n, name, nl);
	hello_len = n + nl;
}

// An A query for name to 127.0.0.1:53; exits unless answered.
static void resolve(const char* name)
{
	unsigned char q[300], r[512];
	static const unsigned char head[] = {0x42, 0x43, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
	size_t n = sizeof(head);
	memcpy(q, head, n);
	for (const char* p = name; *p;) {
		const char* dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		q[n++] = (unsigned char)l;
		memcpy(q + n, p, l);
		n += l;
		p += l + (dot ? 1 : 0);
	}
	static const unsigned char tail[] = {0, 0, 1, 0, 1};
	memcpy(q + n, tail, sizeof(tail));
	n += sizeof(tail);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(53),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct timeval tv = {.tv_sec = 3};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sendto(s, q, n, 0, (struct sockaddr*)&a, sizeof(a)) != (ssize_t)n || recv(s, r, sizeof(r), 0) < 12)
		die("resolve");
	close(s);
}

// The servers: one connection at a time each, a ClientHello's bytes (if
// any) and a request's header read to its blank line, its Content-Length
// body read and dropped, 200 and close.
static void* serve(void* arg)
{
	int l = *(int*)arg;
	static __thread char buf[1 << 16];
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
			end = memmem(buf, have, "\r\n\r\n", 4);
		}
		if (end) {
			long long body = 0;
			char* cl = memmem(buf, (size_t)(end - buf), "\r\nContent-Length:", 17);
			if (cl)
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
		send_all(c, (const char*)hello, hello_len);
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
	send_all(c, (const char*)hello, hello_len);
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
	const char* gate = NULL;
	int target_port = 0;
	if (argc == 7 && strcmp(argv[1], "--target") == 0) {
		target_port = atoi(argv[2]);
		argv += 2;
		argc -= 2;
	} else if (argc == 7 && strcmp(argv[1], "--gate") == 0) {
		gate = argv[2];
		make_hello(gate);
		argv += 2;
		argc -= 2;
	}
	if (argc != 5) {
		fprintf(stderr, "usage: world_bench [--gate NAME | --target PORT] ADDR:PORT ROUNDS CONNS BODY_BYTES\n");
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

	// Under --gate, the direct server is on the next port (the policy's
	// plain allow rule names it); else on any.
	struct sockaddr_in direct = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (gate)
		direct.sin_port = htons((uint16_t)(ntohs(world.sin_port) + 1));
	if (target_port)
		direct.sin_port = htons((uint16_t)target_port);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t len = sizeof(direct);
	if (l < 0 || bind(l, (struct sockaddr*)&direct, sizeof(direct)) || listen(l, 128) ||
	    getsockname(l, (struct sockaddr*)&direct, &len))
		die("listen");
	pthread_t t;
	if (pthread_create(&t, NULL, serve, &l))
		die("pthread_create");
	// The gated destination is this process's too.
	int gl = -1;
	if (gate) {
		int one = 1;
		gl = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(gl, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (gl < 0 || bind(gl, (struct sockaddr*)&world, sizeof(world)) || listen(gl, 128))
			die("listen on the gated address");
		pthread_t gt;
		if (pthread_create(&gt, NULL, serve, &gl))
			die("pthread_create");
	}
	const char* via = gate ? "gate" : target_port ? "target" : "world";

	for (int r = 0; r < rounds; r++) {
		if (gate)
			resolve(gate);
		double dc = per_connection_us(&direct, conns);
		double dt = post_mbps(&direct, body);
		double wc = per_connection_us(&world, conns);
		double wt = post_mbps(&world, body);
		printf("{\"round\":%d,\"direct_conn_us\":%.1f,\"%s_conn_us\":%.1f,\"direct_post_mbps\":%.1f,"
		       "\"%s_post_mbps\":%.1f}\n",
		       r + 1, dc, via, wc, dt, via, wt);
		fflush(stdout);
	}
	return 0;
}
