#include "sandbox/targets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "sandbox/cgroup.h"
#include "util/error.h"
#include "util/fd.h"

namespace fs = std::filesystem;

namespace airlock {

namespace {

constexpr uint8_t kTcpListen = 10;  // TCP_LISTEN of the kernel's states

struct Listener {
	Address addr;   // normalised: ::ffff:a.b.c.d is IPv4
	bool any = false;       // the unspecified address of its family
	bool v6 = false;        // an AF_INET6 socket
	bool v6only = false;
	uint64_t cgroup = 0;
};

// Every TCP listener of one family on `port`, with its cgroup.
std::vector<Listener> listeners(int family, uint16_t port)
{
	Fd fd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
	if (!fd.valid())
		fail_errno("open a sock_diag socket");
	struct {
		nlmsghdr nlh;
		inet_diag_req_v2 req;
	} msg{};
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	msg.req.sdiag_family = static_cast<uint8_t>(family);
	msg.req.sdiag_protocol = IPPROTO_TCP;
	msg.req.idiag_states = 1u << kTcpListen;
	msg.req.id.idiag_sport = htons(port);
	msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	sockaddr_nl kernel{};
	kernel.nl_family = AF_NETLINK;
	if (::sendto(fd.get(), &msg, sizeof(msg), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0)
		fail_errno("ask sock_diag for TCP listeners");

	std::vector<Listener> out;
	alignas(nlmsghdr) char buf[32768];
	for (;;) {
		ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail_errno("read sock_diag's answer");
		}
		if (n == 0)
			return out;
		auto len = static_cast<unsigned>(n);
		for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return out;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
				fail_errno("sock_diag's dump of TCP listeners", -e->error);
			}
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
				continue;
			const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
			if (ntohs(m->id.idiag_sport) != port || m->idiag_state != kTcpListen)
				continue;
			Listener l;
			l.v6 = m->idiag_family == AF_INET6;
			uint8_t raw[16]{};
			std::memcpy(raw, m->id.idiag_src, l.v6 ? 16 : 4);
			l.addr = normalise(from_raw(l.v6 ? AL_FAMILY_IPV6 : AL_FAMILY_IPV4, raw));
			l.any = std::all_of(l.addr.bytes.begin(), l.addr.bytes.end(), [](uint8_t b) { return b == 0; });
			auto attrs_len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
			for (auto* a = reinterpret_cast<const rtattr*>(m + 1); RTA_OK(a, attrs_len); a = RTA_NEXT(a, attrs_len)) {
				if (a->rta_type == INET_DIAG_CGROUP_ID && RTA_PAYLOAD(a) >= sizeof(uint64_t))
					std::memcpy(&l.cgroup, RTA_DATA(a), sizeof(uint64_t));
				else if (a->rta_type == INET_DIAG_SKV6ONLY && RTA_PAYLOAD(a) >= 1)
					l.v6only = *static_cast<const uint8_t*>(RTA_DATA(a)) != 0;
			}
			out.push_back(l);
		}
	}
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

std::optional<std::string> cgroup_path_of_id(uint64_t id)
{
	const std::string& root = cgroup::mount_point();
	struct stat st;
	if (::stat(root.c_str(), &st) == 0 && st.st_ino == id)
		return root;
	std::error_code ec;
	for (fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
	     !ec && it != end; it.increment(ec)) {
		if (!it->is_directory(ec) || it->is_symlink(ec))
			continue;
		if (::lstat(it->path().c_str(), &st) == 0 && st.st_ino == id)
			return it->path().string();
	}
	return std::nullopt;
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
	std::string links = kernel::links_dir(paths.bpf_dir, r.name);
	std::set<std::pair<Address, uint16_t>> seen;
	for (const Rule* rule : targets) {
		const RedirectTarget& t = *rule->redirect;
		if (!(rule->proto_mask & AL_PROTO_TCP) || !seen.insert({t.address, t.port}).second)
			continue;
		std::string where = t.address.family == AL_FAMILY_IPV6
					    ? fmt::format("[{}]:{}", format_address(t.address), t.port)
					    : fmt::format("{}:{}", format_address(t.address), t.port);
		std::vector<uint64_t> ids;
		try {
			ids = tcp_listener_cgroups(t.address, t.port);
		} catch (const std::exception& e) {
			// A kernel without inet_diag (a module): the redirect holds,
			// the target is not told origins.
			spdlog::warn("{}: cannot find who listens on {} ({}): it gets no answer to SO_ORIGINAL_DST", r.name,
				     where, e.what());
			continue;
		}
		if (ids.empty()) {
			spdlog::warn("{}: nothing listens on {} (TCP) in this network namespace: connects redirected there "
				     "(rule {}) are refused until something does, and it gets no answer to SO_ORIGINAL_DST "
				     "before a reload",
				     r.name, where, rule->index);
			continue;
		}
		for (uint64_t id : ids) {
			std::string pin = fmt::format("{}/{}_{}", links, kernel::kOriginalDst, id);  // bpffs refuses dots
			if (fs::exists(pin))
				continue;
			auto path = cgroup_path_of_id(id);
			if (!path) {
				spdlog::warn("{}: the listener on {} is in cgroup {}, which is not under {}: it gets no answer "
					     "to SO_ORIGINAL_DST",
					     r.name, where, id, cgroup::mount_point());
				continue;
			}
			Fd cgfd(::open(path->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
			if (!cgfd.valid())
				fail_errno("open cgroup " + *path);
			k.attach_original_dst(cgfd.get(), pin);
			spdlog::info("{}: SO_ORIGINAL_DST answered for {}'s listener in {}", r.name, where, *path);
		}
	}
}

}  // namespace airlock
