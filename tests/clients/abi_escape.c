// A socket of a refused family through a system-call ABI other than the
// native one, where a filter written for x86_64 numbers would not look.
//
//   abi_escape i386   int 0x80, i386's socket (359): AF_VSOCK, SOCK_STREAM
//   abi_escape x32    x32's socket (__X32_SYSCALL_BIT | 41): AF_VSOCK, SOCK_STREAM
//
// Prints {"client":"abi_escape","abi":..,"ret":N,"errno":"E..."|null} if it
// comes back; a filter that rejects the ABI kills it (SIGSYS) first.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define X32_SYSCALL_BIT 0x40000000
#define AF_VSOCK_ 40

static const char* name_of(long e)
{
	switch (e) {
	case EPERM:
		return "EPERM";
	case ENOSYS:
		return "ENOSYS";
	case EAFNOSUPPORT:
		return "EAFNOSUPPORT";
	case EINVAL:
		return "EINVAL";
	default:
		return "other";
	}
}

int main(int argc, char** argv)
{
	if (argc != 2)
		return 2;
	long ret;
	if (strcmp(argv[1], "i386") == 0) {
		long nr = 359;
		__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(AF_VSOCK_), "c"(1), "d"(0) : "memory");
	} else if (strcmp(argv[1], "x32") == 0) {
		ret = syscall(X32_SYSCALL_BIT | 41, AF_VSOCK_, 1, 0);
		if (ret < 0)
			ret = -errno;
	} else {
		return 2;
	}
	if (ret < 0)
		printf("{\"client\":\"abi_escape\",\"abi\":\"%s\",\"ret\":%ld,\"errno\":\"%s\"}\n", argv[1], ret,
		       name_of(-ret));
	else
		printf("{\"client\":\"abi_escape\",\"abi\":\"%s\",\"ret\":%ld,\"errno\":null}\n", argv[1], ret);
	return 0;
}
