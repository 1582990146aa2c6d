#include "confine/capabilities.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace airlock::confine {

namespace {

// Each with its name as linux/capability.h spells it (the --keep-caps help
// and the tests name them).
const Capability kDropped[] = {
	{CAP_NET_RAW, "CAP_NET_RAW"},       {CAP_NET_ADMIN, "CAP_NET_ADMIN"},
	{CAP_SYS_ADMIN, "CAP_SYS_ADMIN"},   {CAP_BPF, "CAP_BPF"},
	{CAP_PERFMON, "CAP_PERFMON"},       {CAP_SYS_PTRACE, "CAP_SYS_PTRACE"},
	{CAP_SYS_MODULE, "CAP_SYS_MODULE"}, {CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH"},
};

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
