#include "confine/capabilities.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace airlock::confine {

namespace {

#define AL_CAP(c) Capability{c, #c}
const Capability kDropped[] = {AL_CAP(CAP_NET_RAW),    AL_CAP(CAP_NET_ADMIN),  AL_CAP(CAP_SYS_ADMIN),
			       AL_CAP(CAP_BPF),        AL_CAP(CAP_PERFMON),    AL_CAP(CAP_SYS_PTRACE),
			       AL_CAP(CAP_SYS_MODULE), AL_CAP(CAP_DAC_READ_SEARCH)};
#undef AL_CAP

}  // namespace

std::span<const Capability> dropped_capabilities()
{
	return kDropped;
}

std::string capability_names(std::span<const Capability> caps)
{
	std::string out;
	for (const auto& c : caps) {
		if (!out.empty())
			out += ", ";
		out += c.name;
	}
	return out;
}

void drop_capabilities(std::span<const Capability> caps)
{
	for (const auto& c : caps)
		prctl(PR_CAPBSET_DROP, c.number, 0, 0, 0);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2] = {};
	if (syscall(SYS_capget, &hdr, data) == 0) {
		for (const auto& c : caps) {
			int cap = c.number;
			data[cap / 32].inheritable &= ~(1u << (cap % 32));
			// Gone now, not only at the exec: the command's uid 0 would
			// otherwise get them back from the bounding set's remainder.
			data[cap / 32].effective &= ~(1u << (cap % 32));
			data[cap / 32].permitted &= ~(1u << (cap % 32));
		}
		syscall(SYS_capset, &hdr, data);
	}
}

}  // namespace airlock::confine
