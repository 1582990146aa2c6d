// A sandboxed process that makes denied TCP connects as fast as it can for
// a number of seconds (scripts/bench_flood.sh). One socket: a connect the
// kernel refuses leaves it unconnected. Writes START_FILE when it starts and
// DONE_FILE when the flood is over, then waits for GO_FILE, so that the
// benchmark reads the agent's CPU while the sandbox still exists.
//
//   connect_flood ADDR PORT SECONDS START_FILE DONE_FILE GO_FILE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void touch(const char* path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0)
		close(fd);
}

int main(int argc, char** argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: connect_flood ADDR PORT SECONDS START_FILE DONE_FILE GO_FILE\n");
		return 2;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
	inet_pton(AF_INET, argv[1], &sa.sin_addr);
	double seconds = atof(argv[3]);
	long attempts = 0, eperm = 0, other = 0;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	touch(argv[4]);
	double end = now() + seconds;
	while (now() < end) {
		for (int i = 0; i < 256; i++) {
			attempts++;
			if (connect(s, (struct sockaddr*)&sa, sizeof(sa)) == 0 || errno != EPERM) {
				other++;
				close(s);
				s = socket(AF_INET, SOCK_STREAM, 0);
			} else {
				eperm++;
			}
		}
	}
	printf("{\"attempts\":%ld,\"eperm\":%ld,\"other\":%ld}\n", attempts, eperm, other);
	fflush(stdout);
	touch(argv[5]);
	for (int i = 0; i < 60000 && access(argv[6], F_OK) != 0; i++)
		usleep(1000);
	return 0;
}
