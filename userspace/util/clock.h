#pragma once
// The two clocks: CLOCK_MONOTONIC for deadlines and latencies (and the
// kernel's bpf_ktime_get_ns()), the wall clock for what people read.
#include <time.h>

#include <cstdint>
#include <string>

namespace airlock {

// CLOCK_MONOTONIC in nanoseconds.
inline uint64_t monotonic_ns()
{
	struct timespec ts;
	::clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Now, UTC, with nanoseconds: 2026-01-02T03:04:05.123456789Z.
std::string now_rfc3339();

}  // namespace airlock
