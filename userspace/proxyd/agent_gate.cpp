#include "proxyd/agent_gate.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "gate/inputs.h"
#include "proxy/agent_channel.h"
#include "proxyd/origins.h"

namespace airlock::proxyd {

AgentGate::AgentGate(boost::asio::io_context& io, const Policy& p, int control_fd, int learned_fd)
    : channel_(io, control_fd), learned_(learned_fd)
{
	set_rules(p);
}

void AgentGate::set_rules(const Policy& p)
{
	rules_.clear();
	for (const auto& r : p.rules)
		if (r.tls_sni_require && r.domain)
			rules_.emplace(static_cast<uint16_t>(r.index), proxy::GateRule{*r.domain, r.wildcard});
}

// The memfd's text, whole (at most the bytes the message says, within
// gate::kMaxInputsBytes), to on_inputs_.
void AgentGate::take_inputs(int memfd, uint64_t bytes)
{
	std::string text;
	if (bytes <= gate::kMaxInputsBytes) {
		text.resize(bytes);
		size_t have = 0;
		while (have < text.size()) {
			ssize_t n = ::read(memfd, text.data() + have, text.size() - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			have += static_cast<size_t>(n);
		}
		text.resize(have);
	}
	::close(memfd);
	if (text.size() != bytes) {
		spdlog::error("HTTP gate: a reload's inputs could not be read ({} of {} bytes)", text.size(), bytes);
		return;
	}
	if (on_inputs_)
		on_inputs_(std::move(text));
}

void AgentGate::stop()
{
	boost::system::error_code ignored;
	channel_.close(ignored);
}

const proxy::GateRule* AgentGate::rule(uint16_t index) const
{
	auto it = rules_.find(index);
	return it == rules_.end() ? nullptr : &it->second;
}

std::string AgentGate::learned_name(const Address& a) const
{
	return learned_.name_of(a).value_or("");
}

void AgentGate::connect(int accepted_fd, const proxy::Origin&, std::function<void(int, int)> done)
{
	auto key = connection_key_of(accepted_fd);
	if (!key)
		return post(std::move(done), -1, errno ? errno : ENOTCONN);
	proxy::GateRequest q;
	q.type = proxy::kGateConnect;
	q.id = ++last_id_;
	q.key = *key;
	if (pending_.size() >= kMaxPending)
		return post(std::move(done), -1, EBUSY);
	if (::send(channel_.native_handle(), &q, sizeof(q), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(q))
		return post(std::move(done), -1, errno ? errno : EPIPE);
	pending_.emplace(q.id, std::move(done));
}

void AgentGate::violation(const proxy::Origin& o, const std::string& sni, const std::string& reason)
{
	proxy::GateRequest q;
	q.type = proxy::kGateViolation;
	q.key.family = o.addr.family;
	q.key.port = o.port;
	q.key.protocol = o.protocol;
	std::memcpy(q.key.addr, o.addr.bytes.data(), sizeof(q.key.addr));
	std::memcpy(q.sni, sni.data(), std::min(sni.size(), sizeof(q.sni) - 1));
	std::memcpy(q.reason, reason.data(), std::min(reason.size(), sizeof(q.reason) - 1));
	// The rule, in the place of the cookie the agent does not need here.
	q.key.netns_cookie = o.rule;
	if (::send(channel_.native_handle(), &q, sizeof(q), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(q))
		spdlog::error("SNI gate: the agent was not told of a denied connection: {}", std::strerror(errno));
}

void AgentGate::post(std::function<void(int, int)> done, int fd, int err)
{
	boost::asio::post(channel_.get_executor(), [done = std::move(done), fd, err] { done(fd, err); });
}

void AgentGate::wait()
{
	channel_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
			    [this](const boost::system::error_code& ec) {
				    if (ec)
					    return;
				    if (receive())
					    wait();
			    });
}

// Every reply waiting; false once the agent is gone (each pending
// connect then fails).
bool AgentGate::receive()
{
	for (;;) {
		union {
			proxy::GateReply reply;
			proxy::GateInputs inputs;
		} got{};
		proxy::GateReply& r = got.reply;
		struct iovec iov = {&got, sizeof(got)};
		alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
		struct msghdr m = {};
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = control;
		m.msg_controllen = sizeof(control);
		ssize_t n = ::recvmsg(channel_.native_handle(), &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		int fd = -1;
		for (struct cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
			    c->cmsg_len == CMSG_LEN(sizeof(int)))
				std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
		if (n <= 0) {
			spdlog::error("SNI gate: the channel to the agent is closed");
			auto waiting = std::move(pending_);
			pending_.clear();
			for (auto& [id, done] : waiting)
				done(-1, EPIPE);
			return false;
		}
		if (n == sizeof(got.inputs) && got.inputs.type == proxy::kGateInputs && fd >= 0) {
			take_inputs(fd, got.inputs.bytes);
			continue;
		}
		auto it = n == sizeof(r) ? pending_.find(r.id) : pending_.end();
		if (it == pending_.end()) {
			if (fd >= 0)
				::close(fd);
			continue;
		}
		auto done = std::move(it->second);
		pending_.erase(it);
		if (r.error == 0 && fd < 0)
			r.error = EPROTO;
		if (r.error != 0 && fd >= 0) {
			::close(fd);
			fd = -1;
		}
		done(fd, r.error);
	}
}

}  // namespace airlock::proxyd
