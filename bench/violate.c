// One violation for the freeze benchmark (scripts/bench_freeze.sh): sleeps
// DELAY_MS after it starts, writes the CLOCK_MONOTONIC time to ATTEMPT_FILE,
// then makes one denied TCP connect. Under on_violation freeze the kernel
// stops it in that call (where it can) and the agent freezes its cgroup;
// it never gets further until thawed or killed.
//
//   violate DELAY_MS ADDR PORT ATTEMPT_FILE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: violate DELAY_MS ADDR PORT ATTEMPT_FILE\n");
		return 2;
	}
	int delay = atoi(argv[1]);
	if (delay > 0)
		usleep(delay * 1000);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
	inet_pton(AF_INET, argv[2], &sa.sin_addr);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	int fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, buf, n) != n)
			return 1;
		close(fd);
	}
	connect(s, (struct sockaddr*)&sa, sizeof(sa));
	// Reached only where the kernel could not stop the task in the call.
	for (;;)
		pause();
}
