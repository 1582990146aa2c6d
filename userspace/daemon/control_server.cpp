#include "daemon/control_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "util/clock.h"
#include "util/error.h"

namespace airlock {

namespace {

bool again(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

}  // namespace

Fd ControlServer::listen(const std::string& path)
{
	::unlink(path.c_str());
	Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	struct sockaddr_un sa = {};
	sa.sun_family = AF_UNIX;
	if (path.size() >= sizeof(sa.sun_path))
		fail("control socket path too long: {}", path);
	std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
	mode_t old = ::umask(077);
	int bound = fd.valid() ? ::bind(fd.get(), reinterpret_cast<struct sockaddr*>(&sa), sizeof(sa)) : -1;
	::umask(old);
	if (bound != 0 || ::chmod(path.c_str(), 0600) != 0 || ::listen(fd.get(), 16) != 0)
		fail_errno("control socket " + path);
	return fd;
}

ControlServer::ControlServer(EventLoop& loop, int listener, Refuse refuse, Handle handle)
    : loop_(loop), listener_(listener), refuse_(std::move(refuse)), handle_(std::move(handle))
{
	loop_.add(listener_, EPOLLIN, [this](uint32_t) { accept_all(); });
}

ControlServer::~ControlServer()
{
	while (!conns_.empty())
		close(conns_.begin());
	loop_.remove(listener_);
}

void ControlServer::close(std::map<uint64_t, Conn>::iterator it)
{
	loop_.remove(it->second.fd.get());
	conns_.erase(it);
}

void ControlServer::accept_all()
{
	for (;;) {
		Fd c(::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
		if (!c.valid()) {
			if (!again(errno) && errno != ECONNABORTED)
				spdlog::error("control socket: accept: {}", std::strerror(errno));
			return;
		}
		if (conns_.size() >= kMaxConnections) {
			// The oldest request still unfinished makes room: a flood of
			// silent clients can only push out its own.
			auto oldest = conns_.begin();
			for (auto it = conns_.begin(); it != conns_.end(); ++it)
				if (it->second.deadline < oldest->second.deadline)
					oldest = it;
			spdlog::warn("control socket: {} connections open; closing the oldest (pid {})",
				     kMaxConnections, oldest->second.cr.pid);
			close(oldest);
		}
		Conn conn;
		socklen_t len = sizeof(conn.cr);
		if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &conn.cr, &len) != 0)
			conn.cr.uid = static_cast<uid_t>(-1);
		conn.fd = std::move(c);
		conn.deadline = monotonic_ns() + kRequestNs;
		uint64_t id = next_++;
		try {
			loop_.add(conn.fd.get(), EPOLLIN | EPOLLRDHUP,
				  [this, id](uint32_t events) { ready(id, events); });
		} catch (const std::exception& e) {
			spdlog::error("control socket: {}", e.what());
			continue;
		}
		auto it = conns_.emplace(id, std::move(conn)).first;
		if (auto no = refuse_(it->second.cr))
			answer(it, std::move(*no));
	}
}

void ControlServer::answer(std::map<uint64_t, Conn>::iterator it, Answer a)
{
	Conn& c = it->second;
	c.answering = true;
	c.then = std::move(a.then);
	c.out = std::move(a.text);
	c.sent = 0;
	c.deadline = monotonic_ns() + kAnswerNs;
	if (!flush(it))
		return;
	try {
		loop_.modify(c.fd.get(), EPOLLOUT);
	} catch (const std::exception&) {
		close(it);
	}
}

bool ControlServer::flush(std::map<uint64_t, Conn>::iterator it)
{
	Conn& c = it->second;
	while (c.sent < c.out.size()) {
		ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent,
				   MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && again(errno))
			return true;
		if (n <= 0) {
			close(it);
			return false;
		}
		c.sent += static_cast<size_t>(n);
	}
	if (c.then) {
		Fd fd = std::move(c.fd);
		auto then = std::move(c.then);
		loop_.remove(fd.get());
		conns_.erase(it);
		then(std::move(fd));
	} else {
		close(it);
	}
	return false;
}

void ControlServer::ready(uint64_t id, uint32_t events)
{
	auto it = conns_.find(id);
	if (it == conns_.end())
		return;
	Conn& c = it->second;
	if (c.answering) {
		if (events & (EPOLLERR | EPOLLHUP))
			close(it);
		else
			flush(it);
		return;
	}
	char buf[4096];
	for (;;) {
		ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && again(errno))
			break;
		if (n <= 0) {
			// The peer gave up (or half-closed without a whole line).
			size_t nl = c.in.find('\n');
			if (nl == std::string::npos) {
				close(it);
				return;
			}
			break;
		}
		c.in.append(buf, static_cast<size_t>(n));
		if (c.in.find('\n') != std::string::npos || c.in.size() >= kMaxRequest)
			break;
	}
	size_t nl = c.in.find('\n');
	if (nl == std::string::npos && c.in.size() < kMaxRequest)
		return;  // more to come, until the deadline
	std::string line = c.in.substr(0, nl == std::string::npos ? kMaxRequest : nl);
	answer(it, handle_(line, c.cr));
}

size_t ControlServer::expire(uint64_t now)
{
	std::vector<uint64_t> late;
	for (const auto& [id, c] : conns_)
		if (c.deadline <= now)
			late.push_back(id);
	size_t n = 0;
	for (uint64_t id : late) {
		// What the client sent or read while this loop was busy elsewhere
		// (a slow attach) was in time: take it in before judging.
		ready(id, 0);
		auto it = conns_.find(id);
		if (it == conns_.end() || it->second.deadline > now)
			continue;  // answered and gone, or now answering with a new deadline
		spdlog::warn("control socket: pid {} {} in time; closed", it->second.cr.pid,
			     it->second.answering ? "did not read its answer" : "did not send a whole request");
		close(it);
		n++;
	}
	return n;
}

}  // namespace airlock
