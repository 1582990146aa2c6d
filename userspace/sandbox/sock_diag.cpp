#include "sandbox/sock_diag.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/netns.h"

namespace airlock {

namespace {

struct Request {
	nlmsghdr nlh;
	inet_diag_req_v2 req;
	// INET_DIAG_REQ_SK_BPF_STORAGES, nesting one map's descriptor: sent
	// only when nlh.nlmsg_len covers it.
	rtattr storages;
	rtattr map_fd;
	uint32_t fd;
};
static_assert(sizeof(Request) == NLMSG_LENGTH(sizeof(inet_diag_req_v2)) + 2 * sizeof(rtattr) + sizeof(uint32_t),
	      "a request is laid out as netlink wants it");

void send_request(const Fd& diag, const Request& msg, const char* what)
{
	sockaddr_nl kernel{};
	kernel.nl_family = AF_NETLINK;
	if (::sendto(diag.get(), &msg, msg.nlh.nlmsg_len, 0, reinterpret_cast<const sockaddr*>(&kernel),
		     sizeof(kernel)) < 0)
		fail_errno(what);
}

// The first 8 bytes of the one map's value in INET_DIAG_SK_BPF_STORAGES.
uint64_t stored_value(const rtattr* storages)
{
	uint64_t v = 0;
	int len = static_cast<int>(RTA_PAYLOAD(storages));
	for (auto* st = static_cast<const rtattr*>(RTA_DATA(storages)); RTA_OK(st, len); st = RTA_NEXT(st, len)) {
		if ((st->rta_type & NLA_TYPE_MASK) != SK_DIAG_BPF_STORAGE)
			continue;
		int in = static_cast<int>(RTA_PAYLOAD(st));
		for (auto* a = static_cast<const rtattr*>(RTA_DATA(st)); RTA_OK(a, in); a = RTA_NEXT(a, in))
			if ((a->rta_type & NLA_TYPE_MASK) == SK_DIAG_BPF_STORAGE_MAP_VALUE &&
			    RTA_PAYLOAD(a) >= sizeof(v))
				std::memcpy(&v, RTA_DATA(a), sizeof(v));
	}
	return v;
}

// One datagram of the kernel's answer (0: the socket was shut).
size_t receive(const Fd& diag, char* buf, size_t size)
{
	for (;;) {
		ssize_t n = ::recv(diag.get(), buf, size, 0);
		if (n >= 0)
			return static_cast<size_t>(n);
		if (errno != EINTR)
			fail_errno("read sock_diag's answer");
	}
}

TcpSocket parse(const nlmsghdr* h)
{
	const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
	TcpSocket s;
	s.family = m->idiag_family;
	s.state = m->idiag_state;
	s.id = m->id;
	auto attrs_len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
	for (auto* a = reinterpret_cast<const rtattr*>(m + 1); RTA_OK(a, attrs_len); a = RTA_NEXT(a, attrs_len)) {
		if (a->rta_type == INET_DIAG_CGROUP_ID && RTA_PAYLOAD(a) >= sizeof(uint64_t))
			std::memcpy(&s.cgroup, RTA_DATA(a), sizeof(uint64_t));
		else if (a->rta_type == INET_DIAG_SKV6ONLY && RTA_PAYLOAD(a) >= 1)
			s.v6only = *static_cast<const uint8_t*>(RTA_DATA(a)) != 0;
		else if ((a->rta_type & NLA_TYPE_MASK) == INET_DIAG_SK_BPF_STORAGES)
			s.stored = stored_value(a);
	}
	return s;
}

}  // namespace

Fd sock_diag_socket(const Fd& netns)
{
	Fd fd = socket_in(netns, AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (!fd.valid())
		fail_errno("open a sock_diag socket");
	return fd;
}

std::vector<TcpSocket> tcp_sockets(const Fd& diag, int family, uint32_t states, uint16_t sport, int storage_map)
{
	Request msg{};
	msg.nlh.nlmsg_len = NLMSG_LENGTH(sizeof(inet_diag_req_v2));
	if (storage_map >= 0) {
		msg.nlh.nlmsg_len = sizeof(msg);
		msg.storages.rta_type = NLA_F_NESTED | INET_DIAG_REQ_SK_BPF_STORAGES;
		msg.storages.rta_len = 2 * sizeof(rtattr) + sizeof(uint32_t);
		msg.map_fd.rta_type = SK_DIAG_BPF_STORAGE_REQ_MAP_FD;
		msg.map_fd.rta_len = sizeof(rtattr) + sizeof(uint32_t);
		msg.fd = static_cast<uint32_t>(storage_map);
	}
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	msg.req.sdiag_family = static_cast<uint8_t>(family);
	msg.req.sdiag_protocol = IPPROTO_TCP;
	msg.req.idiag_states = states;
	msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	send_request(diag, msg, "ask sock_diag for TCP sockets");

	std::vector<TcpSocket> out;
	alignas(nlmsghdr) char buf[32768];
	for (;;) {
		auto len = static_cast<unsigned>(receive(diag, buf, sizeof(buf)));
		if (len == 0)
			return out;
		for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return out;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
				fail_errno("sock_diag's dump of TCP sockets", -e->error);
			}
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
				continue;
			TcpSocket s = parse(h);
			// The state filter is the kernel's; the port is checked here.
			if ((states & (1u << s.state)) && (sport == 0 || ntohs(s.id.idiag_sport) == sport))
				out.push_back(s);
		}
	}
}

int destroy_tcp_socket(const Fd& diag, const TcpSocket& s)
{
	Request msg{};
	msg.nlh.nlmsg_len = NLMSG_LENGTH(sizeof(inet_diag_req_v2));
	msg.nlh.nlmsg_type = SOCK_DESTROY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	msg.req.sdiag_family = s.family;
	msg.req.sdiag_protocol = IPPROTO_TCP;
	msg.req.idiag_states = ~0u;
	msg.req.id = s.id;  // the cookie too: never another socket on the same addresses
	send_request(diag, msg, "ask sock_diag to end a TCP socket");
	alignas(nlmsghdr) char buf[4096];
	for (;;) {
		auto len = static_cast<unsigned>(receive(diag, buf, sizeof(buf)));
		if (len == 0)
			return EIO;
		for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len))
			if (h->nlmsg_type == NLMSG_ERROR)
				return -static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
	}
}

Ended end_tcp_sockets(const Fd& diag, const std::set<uint64_t>& cgroups, int storage_map, uint64_t stored)
{
	// Every state a socket that may still send is in; a listener too (its
	// connections to come would be the cgroup's).
	uint32_t states = 0;
	for (unsigned st = kTcpEstablished; st <= kTcpNewSynRecv; st++)
		if (st != kTcpTimeWait && st != kTcpClose && st != kTcpNewSynRecv)
			states |= 1u << st;
	Ended r;
	for (int pass = 0;; pass++) {
		std::vector<TcpSocket> found;
		for (int family : {AF_INET, AF_INET6})
			for (const auto& s : tcp_sockets(diag, family, states, 0, storage_map))
				if (cgroups.count(s.cgroup) || (storage_map >= 0 && stored && s.stored == stored))
					found.push_back(s);
		if (found.empty() || pass == 3 || r.error) {
			r.left = found.size();
			break;
		}
		for (const auto& s : found) {
			int e = destroy_tcp_socket(diag, s);
			if (e == 0)
				r.ended++;
			else if (e != ENOENT && !r.error)
				r.error = e;
		}
	}
	return r;
}

}  // namespace airlock
