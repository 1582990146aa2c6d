#include "sandbox/landlock.h"

#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif

namespace airlock {

int landlock_abi()
{
	static const int abi = [] {
		// LANDLOCK_CREATE_RULESET_VERSION: no ruleset, the ABI version.
		long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1u << 0);
		return v < 0 ? 0 : static_cast<int>(v);
	}();
	return abi;
}

}  // namespace airlock
