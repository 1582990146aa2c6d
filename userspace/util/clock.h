#pragma once
// CLOCK_MONOTONIC in nanoseconds: the clock of deadlines and latencies, and
// of bpf_ktime_get_ns() in the kernel's events.
#include <time.h>

#include <cstdint>

namespace airlock {

inline uint64_t monotonic_ns()
{
	struct timespec ts;
	::clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace airlock
