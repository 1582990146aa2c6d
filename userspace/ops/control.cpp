#include "ops/control.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace airlock {

using nlohmann::json;

std::string control_socket(const Paths& paths)
{
	return paths.state_dir + "/control.sock";
}

Fd daemon_connect(const Paths& paths)
{
	std::string path = control_socket(paths);
	Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
	if (!s.valid())
		fail_errno("socket");
	struct sockaddr_un sa = {};
	sa.sun_family = AF_UNIX;
	if (path.size() >= sizeof(sa.sun_path))
		fail("control socket path too long: {}", path);
	std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
	if (::connect(s.get(), reinterpret_cast<struct sockaddr*>(&sa), sizeof(sa)) != 0) {
		int e = errno;
		if (e == ENOENT || e == ECONNREFUSED)
			return Fd();
		fail_errno("connect to the daemon's control socket " + path, e);
	}
	// Whatever answers there must be root's: the answers name cgroups to run commands in.
	struct ucred cr {};
	socklen_t len = sizeof(cr);
	if (::getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != 0)
		fail("the control socket {} is served by uid {}, not root: refusing it", path, cr.uid);
	return s;
}

std::optional<Result<json>> daemon_call(const Paths& paths, const Request& request)
{
	Fd s = daemon_connect(paths);
	if (!s.valid())
		return std::nullopt;
	// A daemon answers within seconds (a kill waits up to 5 s for the
	// processes to go); one that does not is stuck, not busy.
	struct timeval tv = {30, 0};
	::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	std::string req = to_line(request);
	// A daemon that refuses answers and closes at once: read its reason
	// even when the request could not be sent whole.
	int send_errno = ::send(s.get(), req.data(), req.size(), MSG_NOSIGNAL) < 0 ? errno : 0;
	std::string answer;
	char buf[65536];
	for (;;) {
		ssize_t n = ::recv(s.get(), buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			fail("the daemon did not answer '{}' within 30 s (its log says why)", to_string(request.cmd));
		if (n <= 0)
			break;
		answer.append(buf, static_cast<size_t>(n));
	}
	if (answer.empty()) {
		if (send_errno)
			fail_errno("send to the daemon", send_errno);
		fail("the daemon closed the control connection without an answer");
	}
	json j = json::parse(answer.substr(0, answer.find('\n')), nullptr, false);
	if (!j.is_object())
		fail("the daemon answered something that is not a JSON object: {}", answer.substr(0, 200));
	if (j.contains("error")) {
		std::string what = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
		if (j.contains("errors") && j["errors"].is_array() && !j["errors"].empty()) {
			Rejection no;
			for (const auto& l : j["errors"])
				no.lines.push_back(l.is_string() ? l.get<std::string>() : l.dump());
			return Result<json>(no);
		}
		fail("the daemon refused: {}", what);
	}
	return Result<json>(j);
}

std::optional<json> daemon_ask(const Paths& paths, const Request& request)
{
	auto answer = daemon_call(paths, request);
	if (!answer)
		return std::nullopt;
	return answer->value_or_fail();
}

}  // namespace airlock
