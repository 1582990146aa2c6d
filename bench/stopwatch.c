// Outside every sandbox: waits for ATTEMPT_FILE (the CLOCK_MONOTONIC time
// at which `violate` makes its violating call), then polls /proc/PID/stat
// until the process is stopped (state T) and prints the microseconds from
// the attempt to the first read that saw it stopped (scripts/bench_freeze.sh).
// The attempt time is written just before the call, so the figure includes
// the call itself; the polling adds at most one read of /proc (a few us).
//
//   stopwatch PID ATTEMPT_FILE TIMEOUT_MS
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int read_all(const char* path, char* buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	int n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

int main(int argc, char** argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: stopwatch PID ATTEMPT_FILE TIMEOUT_MS\n");
		return 2;
	}
	char stat_path[64], buf[1024];
	snprintf(stat_path, sizeof(stat_path), "/proc/%s/stat", argv[1]);
	long long deadline = now_ns() + atoll(argv[3]) * 1000000LL;
	long long attempt = 0;
	while (now_ns() < deadline) {
		if (!attempt && read_all(argv[2], buf, sizeof(buf)) > 1)
			attempt = atoll(buf);
		if (read_all(stat_path, buf, sizeof(buf)) > 0) {
			char* rp = strrchr(buf, ')');
			if (rp && rp[1] && rp[2] == 'T') {
				long long t = now_ns();
				if (!attempt && read_all(argv[2], buf, sizeof(buf)) > 1)
					attempt = atoll(buf);
				if (!attempt)
					break;
				printf("%.1f\n", (t - attempt) / 1e3);
				return 0;
			}
		}
	}
	printf("none\n");
	return 1;
}
