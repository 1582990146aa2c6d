#include "sandbox/targets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "sandbox/cgroup.h"
#include "sandbox/sock_diag.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace airlock {

namespace {

struct Listener {
	Address addr;      // normalised: ::ffff:a.b.c.d is IPv4
	bool any = false;  // the unspecified address of its family
	bool v6 = false;   // an AF_INET6 socket
	bool v6only = false;
	uint64_t cgroup = 0;
};

// Every TCP listener of one family on `port`, with its cgroup.
std::vector<Listener> listeners(int family, uint16_t port)
{
	std::vector<Listener> out;
	for (const auto& s : tcp_sockets(sock_diag_socket(Fd()), family, 1u << kTcpListen, port)) {
		Listener l;
		l.v6 = s.family == AF_INET6;
		uint8_t raw[16]{};
		std::memcpy(raw, s.id.idiag_src, l.v6 ? 16 : 4);
		l.addr = normalise(from_raw(l.v6 ? AL_FAMILY_IPV6 : AL_FAMILY_IPV4, raw));
		l.any = std::all_of(l.addr.bytes.begin(), l.addr.bytes.end(), [](uint8_t b) { return b == 0; });
		l.v6only = s.v6only;
		l.cgroup = s.cgroup;
		out.push_back(l);
	}
	return out;
}

}  // namespace

std::vector<uint64_t> tcp_listener_cgroups(const Address& target, uint16_t port)
{
	Address a = normalise(target);
	std::vector<Listener> all = listeners(AF_INET6, port);
	if (a.family == AL_FAMILY_IPV4) {
		auto v4 = listeners(AF_INET, port);
		all.insert(all.end(), v4.begin(), v4.end());
	}
	// As the kernel picks: a listener on the address itself, else one on
	// the unspecified address that takes this family.
	auto takes = [&](const Listener& l, bool exact) {
		if (exact)
			return !l.any && l.addr == a;
		if (!l.any)
			return false;
		return a.family == AL_FAMILY_IPV6 ? l.v6 : (!l.v6 || !l.v6only);
	};
	std::set<uint64_t> ids;
	for (bool exact : {true, false}) {
		for (const auto& l : all)
			if (takes(l, exact) && l.cgroup)
				ids.insert(l.cgroup);
		if (!ids.empty())
			break;
	}
	return {ids.begin(), ids.end()};
}

std::optional<std::pair<Fd, std::string>> open_cgroup_by_id(uint64_t id)
{
	// A cgroup2 file handle is its id (FILEID_KERNFS).
	struct {
		file_handle h;
		uint64_t id;
	} handle{};
	handle.h.handle_bytes = sizeof(uint64_t);
	handle.h.handle_type = 0xfe;  // FILEID_KERNFS
	handle.id = id;
	Fd mount(::open(cgroup::mount_point().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!mount.valid())
		return std::nullopt;
	Fd fd(::open_by_handle_at(mount.get(), &handle.h, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!fd.valid())
		return std::nullopt;
	std::error_code ec;
	std::string path = fs::read_symlink("/proc/self/fd/" + std::to_string(fd.get()), ec).string();
	if (ec)
		return std::nullopt;
	return std::make_pair(std::move(fd), path);
}

std::string targets_dir(const std::string& bpf_dir)
{
	return bpf_dir + "/targets";
}

void prepare_targets(kernel::Kernel& k, const Paths& paths, const SandboxRecord& r, const Policy& p)
{
	std::vector<const Rule*> targets;
	for (const auto& rule : p.rules)
		if (rule.to_target())
			targets.push_back(&rule);
	if (targets.empty())
		return;
	if (!k.has_target_origin_table(r.slot))
		k.create_target_origin_table(r.slot);
	std::set<std::pair<Address, uint16_t>> seen;
	for (const Rule* rule : targets) {
		const RedirectTarget& t = *rule->redirect;
		if (!(rule->proto_mask & AL_PROTO_TCP) || !seen.insert({t.address, t.port}).second)
			continue;
		std::string where = t.address.family == AL_FAMILY_IPV6
					    ? fmt::format("[{}]:{}", format_address(t.address), t.port)
					    : fmt::format("{}:{}", format_address(t.address), t.port);
		auto no_answer = [&](const std::string& why) {
			spdlog::warn("{}: {}: the target at {} (rule {}) gets no answer to SO_ORIGINAL_DST", r.name,
				     why, where, rule->index);
		};
		std::vector<uint64_t> ids;
		try {
			ids = tcp_listener_cgroups(t.address, t.port);
		} catch (const std::exception& e) {
			// A kernel without inet_diag (a module): the redirect holds,
			// the target is not told origins.
			no_answer(fmt::format("cannot find who listens ({})", e.what()));
			continue;
		}
		if (ids.empty()) {
			spdlog::warn(
				"{}: nothing listens on {} (TCP) in this network namespace: connects redirected there "
				"(rule {}) are refused until something does, and it gets no answer to SO_ORIGINAL_DST "
				"before a reload",
				r.name, where, rule->index);
			continue;
		}
		for (uint64_t id : ids) {
			// One link per cgroup for every sandbox: the program looks in
			// every sandbox's table.
			std::string pin = fmt::format("{}/{}_{}", targets_dir(paths.bpf_dir), kernel::kOriginalDst, id);
			if (fs::exists(pin))
				continue;
			auto cg = open_cgroup_by_id(id);
			if (!cg) {
				no_answer(fmt::format("its listener's cgroup {} cannot be opened ({})", id,
						      std::strerror(errno)));
				continue;
			}
			const std::string& path = cg->second;
			if (path.rfind(cgroup::mount_point() + "/", 0) != 0 && path != cgroup::mount_point()) {
				no_answer(fmt::format("its listener's cgroup {} is not under {}", path,
						      cgroup::mount_point()));
				continue;
			}
			// Not on the root cgroup (the program would run on every
			// getsockopt of the host), nor on a sandbox's (a sandbox
			// listening on the target is not the target).
			if (cgroup::level_of(path) <= 0) {
				no_answer(fmt::format(
					"its listener is in the root cgroup {}; run it in a cgroup of its own", path));
				continue;
			}
			bool sandbox = false;
			for (const auto& other : load_records(paths))
				sandbox = sandbox || path == other.cgroup || path.rfind(other.cgroup + "/", 0) == 0;
			if (sandbox || path == r.cgroup || path.rfind(r.cgroup + "/", 0) == 0) {
				no_answer(fmt::format("its listener is in the cgroup {} of a sandbox", path));
				continue;
			}
			try {
				make_dirs(targets_dir(paths.bpf_dir));
				k.attach_original_dst(cg->first.get(), pin);
			} catch (const std::exception& e) {
				no_answer(e.what());
				continue;
			}
			spdlog::info("{}: SO_ORIGINAL_DST answered for {}'s listener in {}", r.name, where, path);
		}
	}
}

void forget_targets(const Paths& paths)
{
	if (!load_records(paths).empty())
		return;
	std::error_code ec;
	fs::remove_all(targets_dir(paths.bpf_dir), ec);
}

}  // namespace airlock
