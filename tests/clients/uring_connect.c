// io_uring egress for airlock's integration tests (liburing).
//
//   uring_connect tcp ADDR PORT MARKER   socket(), then IORING_OP_CONNECT, then
//                                        IORING_OP_SEND of MARKER if connected
//   uring_connect udp ADDR PORT MARKER   IORING_OP_SENDMSG of MARKER to ADDR:PORT
//                                        on an unconnected UDP socket
//   uring_connect batch ADDR PORT MARKER [ADDR PORT MARKER ...]
//                                        one IORING_OP_SENDMSG per triple on one
//                                        UDP socket, all submitted by ONE
//                                        io_uring_enter: the kernel runs them in
//                                        order within that syscall, before any
//                                        freezer can stop the task
//
// ADDR is IPv4 or IPv6 (a v4-mapped ::ffff:a.b.c.d uses an AF_INET6 socket).
// Prints one JSON line: {"client":"uring_connect","mode":..,"dst":..,"port":..,
// "ok":bool,"errno":"EPERM"|null,"res":N,"sent":N|null}.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char* errname(int e)
{
	const char* n = strerrorname_np(e);
	return n ? n : "EUNKNOWN";
}

static int run_one(struct io_uring* ring, void (*prep)(struct io_uring_sqe*, void*), void* arg)
{
	struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe* cqe;
	if (!sqe)
		return -ENOMEM;
	prep(sqe, arg);
	int r = io_uring_submit(ring);
	if (r < 0)
		return r;
	r = io_uring_wait_cqe(ring, &cqe);
	if (r < 0)
		return r;
	int res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

struct op {
	int fd;
	struct sockaddr_storage* sa;
	socklen_t salen;
	const char* data;
	size_t len;
	struct msghdr* msg;
};

static void prep_connect(struct io_uring_sqe* sqe, void* a)
{
	struct op* o = a;
	io_uring_prep_connect(sqe, o->fd, (struct sockaddr*)o->sa, o->salen);
}

static void prep_send(struct io_uring_sqe* sqe, void* a)
{
	struct op* o = a;
	io_uring_prep_send(sqe, o->fd, o->data, o->len, 0);
}

static void prep_sendmsg(struct io_uring_sqe* sqe, void* a)
{
	struct op* o = a;
	io_uring_prep_sendmsg(sqe, o->fd, o->msg, 0);
}

static int parse_addr(const char* addr, int port, struct sockaddr_storage* sa, socklen_t* salen)
{
	struct sockaddr_in* s4 = (struct sockaddr_in*)sa;
	struct sockaddr_in6* s6 = (struct sockaddr_in6*)sa;
	memset(sa, 0, sizeof(*sa));
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		*salen = sizeof(*s4);
		return AF_INET;
	}
	if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		*salen = sizeof(*s6);
		return AF_INET6;
	}
	return -1;
}

#define MAX_BATCH 64

static int batch(int argc, char** argv)
{
	int n = (argc - 2) / 3;
	if (n < 1 || n > MAX_BATCH || (argc - 2) % 3) {
		fprintf(stderr, "batch: ADDR PORT MARKER triples, at most %d\n", MAX_BATCH);
		return 2;
	}
	static struct sockaddr_storage sa[MAX_BATCH];
	static socklen_t salen[MAX_BATCH];
	static struct iovec iov[MAX_BATCH];
	static struct msghdr msg[MAX_BATCH];
	static int res[MAX_BATCH];
	int family = -1;
	for (int i = 0; i < n; i++) {
		char** t = argv + 2 + 3 * i;
		int f = parse_addr(t[0], atoi(t[1]), &sa[i], &salen[i]);
		if (f < 0 || (family >= 0 && f != family)) {
			fprintf(stderr, "batch: bad or mixed-family address %s\n", t[0]);
			return 2;
		}
		family = f;
		iov[i].iov_base = t[2];
		iov[i].iov_len = strlen(t[2]);
		memset(&msg[i], 0, sizeof(msg[i]));
		msg[i].msg_name = &sa[i];
		msg[i].msg_namelen = salen[i];
		msg[i].msg_iov = &iov[i];
		msg[i].msg_iovlen = 1;
	}
	struct io_uring ring;
	int r = io_uring_queue_init(MAX_BATCH, &ring, 0);
	int fd = r < 0 ? -1 : socket(family, SOCK_DGRAM, 0);
	if (r < 0 || fd < 0) {
		printf("{\"client\":\"uring_connect\",\"mode\":\"batch\",\"error\":\"%s\",\"results\":[]}\n",
		       r < 0 ? "io_uring_queue_init" : "socket");
		return 0;
	}
	for (int i = 0; i < n; i++) {
		struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
		io_uring_prep_sendmsg(sqe, fd, &msg[i], 0);
		sqe->user_data = (unsigned long long)i;
	}
	int submitted = io_uring_submit(&ring);
	for (int i = 0; i < n; i++)
		res[i] = -ECANCELED;
	for (int k = 0; k < submitted; k++) {
		struct io_uring_cqe* cqe;
		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			break;
		if (cqe->user_data < (unsigned long long)n)
			res[cqe->user_data] = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
	}
	printf("{\"client\":\"uring_connect\",\"mode\":\"batch\",\"submitted\":%d,\"results\":[", submitted);
	for (int i = 0; i < n; i++) {
		char** t = argv + 2 + 3 * i;
		printf("%s{\"dst\":\"%s\",\"port\":%s,\"marker\":\"%s\",\"ok\":%s,\"errno\":", i ? "," : "", t[0], t[1],
		       t[2], res[i] >= 0 ? "true" : "false");
		if (res[i] < 0)
			printf("\"%s\"", errname(-res[i]));
		else
			printf("null");
		printf(",\"res\":%d}", res[i]);
	}
	printf("]}\n");
	close(fd);
	io_uring_queue_exit(&ring);
	return 0;
}

int main(int argc, char** argv)
{
	if (argc >= 2 && strcmp(argv[1], "batch") == 0)
		return batch(argc, argv);
	if (argc != 5 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "udp"))) {
		fprintf(stderr, "usage: %s tcp|udp ADDR PORT MARKER\n", argv[0]);
		return 2;
	}
	int tcp = strcmp(argv[1], "tcp") == 0;
	const char* addr = argv[2];
	int port = atoi(argv[3]);
	const char* marker = argv[4];

	struct sockaddr_storage sa;
	memset(&sa, 0, sizeof(sa));
	socklen_t salen;
	int family;
	struct sockaddr_in* s4 = (struct sockaddr_in*)&sa;
	struct sockaddr_in6* s6 = (struct sockaddr_in6*)&sa;
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		family = AF_INET;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		salen = sizeof(*s4);
	} else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		family = AF_INET6;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		salen = sizeof(*s6);
	} else {
		fprintf(stderr, "bad address %s\n", addr);
		return 2;
	}

	struct io_uring ring;
	int r = io_uring_queue_init(8, &ring, 0);
	if (r < 0) {
		printf("{\"client\":\"uring_connect\",\"mode\":\"%s\",\"dst\":\"%s\",\"port\":%d,\"ok\":false,"
		       "\"stage\":\"io_uring_queue_init\",\"errno\":\"%s\",\"res\":%d,\"sent\":null}\n",
		       argv[1], addr, port, errname(-r), r);
		return 0;
	}
	int fd = socket(family, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (fd < 0) {
		printf("{\"client\":\"uring_connect\",\"mode\":\"%s\",\"dst\":\"%s\",\"port\":%d,\"ok\":false,"
		       "\"stage\":\"socket\",\"errno\":\"%s\",\"res\":%d,\"sent\":null}\n",
		       argv[1], addr, port, errname(errno), -errno);
		return 0;
	}
	struct op o = {fd, &sa, salen, marker, strlen(marker), NULL};
	int res, sent = -1;
	const char* stage;
	if (tcp) {
		stage = "connect";
		res = run_one(&ring, prep_connect, &o);
		if (res == 0) {
			stage = "send";
			sent = run_one(&ring, prep_send, &o);
			shutdown(fd, SHUT_WR);
			char buf[256];
			while (read(fd, buf, sizeof(buf)) > 0)  // the peer's close: the data arrived
				;
		}
	} else {
		stage = "sendmsg";
		struct iovec iov = {(void*)marker, strlen(marker)};
		struct msghdr msg;
		memset(&msg, 0, sizeof(msg));
		msg.msg_name = &sa;
		msg.msg_namelen = salen;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		o.msg = &msg;
		res = run_one(&ring, prep_sendmsg, &o);
		if (res >= 0) {
			sent = res;
			res = 0;
		}
	}
	int ok = res == 0 && (sent < 0 ? 0 : 1);
	if (sent < 0 && res == 0 && tcp)  // the send itself failed
		res = sent;
	printf("{\"client\":\"uring_connect\",\"mode\":\"%s\",\"dst\":\"%s\",\"port\":%d,\"ok\":%s,\"stage\":\"%s\","
	       "\"errno\":%s%s%s,\"res\":%d,\"sent\":",
	       argv[1], addr, port, ok ? "true" : "false", stage, res < 0 ? "\"" : "", res < 0 ? errname(-res) : "null",
	       res < 0 ? "\"" : "", res);
	if (sent >= 0)
		printf("%d}\n", sent);
	else
		printf("null}\n");
	close(fd);
	io_uring_queue_exit(&ring);
	return 0;
}
