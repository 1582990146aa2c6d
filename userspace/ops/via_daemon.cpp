#include "ops/via_daemon.h"

#include <sys/socket.h>

#include <cerrno>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ops/control.h"
#include "sandbox/sandbox.h"
#include "util/error.h"

namespace airlock::ops {

using nlohmann::json;

Result<std::string> via_daemon(const Paths& paths, const Request& request,
			       const std::function<Result<std::string>()>& here)
{
	auto answer = daemon_call(paths, request);
	return !answer   ? here()
	       : *answer ? Result<std::string>((*answer)->value("message", ""))
			 : Result<std::string>(answer->rejection());
}

std::string policy_argument(const std::string& arg)
{
	// A file here is sent by its absolute path (the daemon has another
	// working directory); anything else may name a file in its policy directory.
	std::error_code ec;
	if (std::filesystem::exists(arg, ec))
		return std::filesystem::absolute(arg).lexically_normal().string();
	return arg;
}

Result<std::string> reload_via_daemon(const Paths& paths, const std::string& name, const std::string& file)
{
	std::string f = policy_argument(file);
	return via_daemon(paths, reload_request(name, f), [&] { return reload(paths, name, f); });
}

Result<std::string> attach_via_daemon(const Paths& paths, NewSandbox n)
{
	n.policy_file = policy_argument(n.policy_file);
	if (!n.audit_log.empty())
		n.audit_log = std::filesystem::absolute(n.audit_log).string();
	// A relative cgroup path is relative to the cgroup2 mount, for both.
	Request req = Request::of(Request::Cmd::Attach, n.name);
	req.policy = n.policy_file;
	req.audit_log = n.audit_log;
	req.audit_bound = n.audit_bound;
	req.log_allowed = n.log_allowed;
	req.cgroup = n.cgroup;
	req.pid = n.pid;
	// Judged before attaching: a bad target is reported by the attach itself.
	try {
		for (const auto& w : escape_warnings(resolve_attach_target(paths, n.cgroup, n.pid)))
			spdlog::warn("{}", w);
	} catch (const std::exception&) {
	}
	return via_daemon(paths, req, [&]() -> Result<std::string> {
		std::string msg;
		if (auto added = add(paths, n, &msg); !added)
			return added.rejection();
		return msg;
	});
}

Result<std::string> create_via_daemon(const Paths& paths, const SandboxCreateOptions& o)
{
	std::string audit = o.audit_log.empty() ? "" : std::filesystem::absolute(o.audit_log).string();
	Request req = Request::of(Request::Cmd::Create, o.name);
	req.policy = policy_argument(o.policy_file);
	req.audit_log = audit;
	req.audit_bound = o.audit_bound;
	req.log_allowed = o.log_allowed;
	return via_daemon(paths, req, [&]() -> Result<std::string> {
		fail("no airlock daemon runs for {}: a sandbox made by `sandbox create` is the daemon's to supervise "
		     "(start airlock daemon, or use airlock run)",
		     paths.state_dir);
	});
}

void follow_events(const Paths& paths, const std::string& sandbox, bool follow,
		   const std::function<void(std::string_view)>& out)
{
	Fd s = daemon_connect(paths);
	if (!s.valid())
		fail("no airlock daemon runs for {} (start one: airlock daemon)", paths.state_dir);
	Request events = Request::of(Request::Cmd::Events);
	events.sandbox = sandbox;
	events.follow = follow;
	std::string req = to_line(events);
	// A daemon that refuses answers and closes at once: read its reason
	// even when the request could not be sent.
	int send_errno = ::send(s.get(), req.data(), req.size(), MSG_NOSIGNAL) < 0 ? errno : 0;
	char buf[4096];
	for (bool first = true;; first = false) {
		ssize_t n = ::recv(s.get(), buf, sizeof(buf), 0);
		if (n <= 0) {
			if (first && send_errno)
				fail_errno("send to the daemon", send_errno);
			break;
		}
		std::string chunk(buf, static_cast<size_t>(n));
		if (chunk.rfind("{\"error\"", 0) == 0) {
			auto j = json::parse(chunk.substr(0, chunk.find('\n')), nullptr, false);
			fail("the daemon refused: {}", j.is_object() ? j.value("error", chunk) : chunk);
		}
		out(std::string_view(buf, static_cast<size_t>(n)));
	}
}

}  // namespace airlock::ops
