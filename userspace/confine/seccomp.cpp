#include "confine/seccomp.h"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "util/error.h"
#include "util/fd.h"

namespace airlock::confine {

namespace {

void check(int rc, const char* what)
{
	if (rc < 0)
		fail_errno(std::string("seccomp: ") + what, -rc);
}

}  // namespace

SeccompFilter::SeccompFilter(uint32_t default_action) : ctx_(::seccomp_init(default_action))
{
	if (!ctx_)
		fail("seccomp_init failed");
}

SeccompFilter::~SeccompFilter()
{
	::seccomp_release(ctx_);
}

void SeccompFilter::set(scmp_filter_attr attr, uint32_t value, const char* what)
{
	check(::seccomp_attr_set(ctx_, attr, value), what);
}

void SeccompFilter::allow(std::span<const char* const> names)
{
	for (const char* name : names) {
		int nr = ::seccomp_syscall_resolve_name(name);
		if (nr != __NR_SCMP_ERROR)
			check(::seccomp_rule_add(ctx_, SCMP_ACT_ALLOW, nr, 0), name);
	}
}

void SeccompFilter::add(uint32_t action, int syscall, std::initializer_list<scmp_arg_cmp> conditions, const char* what)
{
	check(::seccomp_rule_add_array(ctx_, action, syscall, static_cast<unsigned>(conditions.size()),
				       conditions.begin()),
	      what);
}

void SeccompFilter::load()
{
	check(::seccomp_load(ctx_), "load");
}

std::vector<sock_filter> SeccompFilter::compile() const
{
	Fd mem(::memfd_create("airlock-seccomp", MFD_CLOEXEC));
	if (!mem.valid())
		fail_errno("memfd_create");
	check(::seccomp_export_bpf(ctx_, mem.get()), "export");
	off_t size = ::lseek(mem.get(), 0, SEEK_END);
	if (size <= 0 || size % sizeof(sock_filter) != 0)
		fail("seccomp: exported filter has {} bytes", size);
	std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
	if (::pread(mem.get(), prog.data(), static_cast<size_t>(size), 0) != size)
		fail_errno("seccomp: read back the filter");
	return prog;
}

}  // namespace airlock::confine
