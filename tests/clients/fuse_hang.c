// fuse_hang: a FUSE file system of one file, "f", whose reads wait for
// the test. Without libfuse, on <linux/fuse.h>.
//
//   fuse_hang MOUNTPOINT STATEDIR
//
// Mounts itself on MOUNTPOINT (allow_other: a sandbox's user may read it),
// writes STATEDIR/ready once the kernel's INIT is answered and
// STATEDIR/held once it holds a READ, unanswered. A process waiting for
// that answer sleeps in the kernel where the cgroup freezer cannot reach it
// (fuse's request_wait_answer, killable after the freezer's wake-up): its
// cgroup never reports "frozen 1". SIGUSR1 answers the held reads and every
// later one at once. SIGTERM, or the end of this process (the device closed),
// aborts the connection: a waiting reader gets an error and is free.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <unistd.h>

enum { FILE_INO = 2, MAX_HELD = 64 };
static const char kContent[] = "released\n";

static int dev = -1;
static const char* statedir;
static int holding = 1;
static struct {
	uint64_t unique, offset;
	uint32_t size;
} held[MAX_HELD];
static int nheld;

static void mark(const char* name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", statedir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
}

static void reply(uint64_t unique, int error, const void* arg, size_t len)
{
	if (error)
		len = 0;
	struct fuse_out_header oh = {.len = (uint32_t)(sizeof(oh) + len), .error = error, .unique = unique};
	struct iovec iov[2] = {{&oh, sizeof(oh)}, {(void*)arg, len}};
	if (writev(dev, iov, 2) < 0)
		fprintf(stderr, "fuse_hang: reply %llu: %s\n", (unsigned long long)unique, strerror(errno));
}

static void attr(uint64_t ino, struct fuse_attr* a)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->nlink = ino == FUSE_ROOT_ID ? 2 : 1;
	a->mode = ino == FUSE_ROOT_ID ? 040755 : 0100444;
	a->size = ino == FUSE_ROOT_ID ? 0 : sizeof(kContent) - 1;
	a->blksize = 4096;
}

static void answer_read(uint64_t unique, uint64_t off, uint32_t size)
{
	size_t len = sizeof(kContent) - 1;
	size_t n = off >= len ? 0 : len - off;
	if (n > size)
		n = size;
	reply(unique, 0, kContent + (off >= len ? len : off), n);
}

static void handle(const char* buf)
{
	const struct fuse_in_header* ih = (const void*)buf;
	const void* in = buf + sizeof(*ih);
	switch (ih->opcode) {
	case FUSE_INIT: {
		const struct fuse_init_in* ii = in;
		struct fuse_init_out o = {.major = FUSE_KERNEL_VERSION,
					  .minor = FUSE_KERNEL_MINOR_VERSION,
					  .max_readahead = ii->max_readahead,
					  .max_background = 16,
					  .congestion_threshold = 12,
					  .max_write = 4096,
					  .time_gran = 1};
		reply(ih->unique, 0, &o, sizeof(o));
		mark("ready");
		return;
	}
	case FUSE_LOOKUP: {
		if (ih->nodeid != FUSE_ROOT_ID || strcmp(in, "f") != 0) {
			reply(ih->unique, -ENOENT, NULL, 0);
			return;
		}
		struct fuse_entry_out e = {.nodeid = FILE_INO, .attr_valid = 3600, .entry_valid = 3600};
		attr(FILE_INO, &e.attr);
		reply(ih->unique, 0, &e, sizeof(e));
		return;
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out a = {.attr_valid = 3600};
		attr(ih->nodeid, &a.attr);
		reply(ih->unique, 0, &a, sizeof(a));
		return;
	}
	case FUSE_OPEN: {
		// Direct I/O: the reader waits in the request itself, not on a
		// page of the cache.
		struct fuse_open_out o = {.fh = 1, .open_flags = FOPEN_DIRECT_IO};
		reply(ih->unique, 0, &o, sizeof(o));
		return;
	}
	case FUSE_READ: {
		const struct fuse_read_in* ri = in;
		if (!holding) {
			answer_read(ih->unique, ri->offset, ri->size);
		} else if (nheld < MAX_HELD) {
			held[nheld].unique = ih->unique;
			held[nheld].offset = ri->offset;
			held[nheld].size = ri->size;
			nheld++;
			mark("held");
		} else {
			reply(ih->unique, -EAGAIN, NULL, 0);
		}
		return;
	}
	case FUSE_INTERRUPT:  // the freezer's wake-up: left unanswered, the read stays held
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
		return;
	case FUSE_FLUSH:
	case FUSE_RELEASE:
		reply(ih->unique, 0, NULL, 0);
		return;
	default:
		reply(ih->unique, -ENOSYS, NULL, 0);
	}
}

int main(int argc, char** argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuse_hang MOUNTPOINT STATEDIR\n");
		return 2;
	}
	const char* mnt = argv[1];
	statedir = argv[2];
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGUSR1);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	int sfd = signalfd(-1, &ss, SFD_CLOEXEC);
	dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (dev < 0 || sfd < 0) {
		perror("fuse_hang: open /dev/fuse or signalfd");
		return 1;
	}
	char opts[128];
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", dev);
	if (mount("fuse_hang", mnt, "fuse.fuse_hang", MS_NOSUID | MS_NODEV, opts) < 0) {
		perror("fuse_hang: mount");
		return 1;
	}
	static char buf[FUSE_MIN_READ_BUFFER + (1 << 20)];
	struct pollfd pfd[2] = {{dev, POLLIN, 0}, {sfd, POLLIN, 0}};
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo != SIGUSR1)
				break;
			holding = 0;
			for (int i = 0; i < nheld; i++)
				answer_read(held[i].unique, held[i].offset, held[i].size);
			nheld = 0;
		}
		if (pfd[0].revents & (POLLERR | POLLHUP))
			break;
		if (pfd[0].revents & POLLIN) {
			ssize_t n = read(dev, buf, sizeof(buf));
			if (n < 0) {
				if (errno == ENOENT || errno == EINTR || errno == EAGAIN)
					continue;
				break;  // ENODEV: unmounted or aborted
			}
			if ((size_t)n >= sizeof(struct fuse_in_header))
				handle(buf);
		}
	}
	// Closing the device aborts the connection: a held reader is freed.
	umount2(mnt, MNT_DETACH);
	return 0;
}
