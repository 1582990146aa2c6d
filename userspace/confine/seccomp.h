#pragma once
// A seccomp filter built with libseccomp, a rule at a time: an allowlist
// (the proxy: what is not named fails) or a denylist (a sandboxed command:
// what is named fails). Each rule that cannot be added fails with its name.
#include <linux/filter.h>
#include <seccomp.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace airlock::confine {

class SeccompFilter {
public:
	// The action of every call no rule names (SCMP_ACT_ALLOW for a
	// denylist, SCMP_ACT_ERRNO(EPERM) for an allowlist).
	explicit SeccompFilter(uint32_t default_action);
	~SeccompFilter();
	SeccompFilter(const SeccompFilter&) = delete;
	SeccompFilter& operator=(const SeccompFilter&) = delete;

	void set(scmp_filter_attr attr, uint32_t value, const char* what);
	// Allows each named call this architecture has (one it lacks is skipped).
	void allow(std::span<const char* const> names);
	// `action` for `syscall` when every condition holds.
	void add(uint32_t action, int syscall, std::initializer_list<scmp_arg_cmp> conditions, const char* what);

	// Loads the filter into this process.
	void load();
	// The filter's instructions, for a child to load with seccomp(2)
	// without libseccomp (which may allocate).
	std::vector<sock_filter> compile() const;

private:
	scmp_filter_ctx ctx_;
};

}  // namespace airlock::confine
