// Commands that act on sandboxes: through the daemon's control socket when a
// daemon runs for this state directory (it supervises them, and its view
// stays whole), on the pins and the state directory directly when none does.
#include <sys/socket.h>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "events/audit.h"
#include "ops/control.h"
#include "ops/ops.h"
#include "sandbox/sandbox.h"
#include "util/error.h"

namespace airlock {

using nlohmann::json;

namespace {

// Asks the daemon, or does it here; prints the line either gives, or
// every line of a rejection.
int via_daemon(const Paths& paths, const Request& request, const std::function<Result<std::string>()>& here)
{
	auto answer = daemon_call(paths, request);
	Result<std::string> line = !answer ? here()
				   : *answer ? Result<std::string>((*answer)->value("message", ""))
					     : Result<std::string>(answer->rejection());
	if (!line) {
		for (const auto& l : line.rejection().lines)
			fmt::print(stderr, "{}\n", l);
		return kExitFailure;
	}
	fmt::print("{}\n", *line);
	return kExitOk;
}

Request about(Request::Cmd cmd, const std::string& name) { return Request::of(cmd, name); }

}  // namespace

std::string policy_argument(const std::string& arg)
{
	// A file here is sent by its absolute path (the daemon has another
	// working directory); anything else may name a file in its policy directory.
	std::error_code ec;
	if (std::filesystem::exists(arg, ec))
		return std::filesystem::absolute(arg).lexically_normal().string();
	return arg;
}

int cmd_status(const Paths& paths, bool as_json)
{
	auto answer = daemon_ask(paths, Request::of(Request::Cmd::Status));
	json out = answer ? (*answer)["status"] : ops::status(paths);
	if (as_json) {
		fmt::print("{}\n", out.dump(2));
		return kExitOk;
	}
	if (out["sandboxes"].empty()) {
		fmt::print("no sandboxes\n");
		return kExitOk;
	}
	fmt::print("{:<24} {:<12} {:<20} {:>8} {:>10} {:>12} {:>9} {:>8}  {}\n", "NAME", "STATE", "POLICY", "RUNNER",
		   "VIOLATIONS", "EGRESS", "DNS-DENY", "LEARNED", "CGROUP");
	for (const auto& s : out["sandboxes"]) {
		std::string runner = s["runner_alive"].get<bool>() ? std::to_string(s["runner_pid"].get<int>())
				     : s["attached"].get<bool>()    ? "attached"
				     : s.value("managed", false)    ? "daemon"
								    : "dead";
		fmt::print("{:<24} {:<12} {:<20} {:>8} {:>10} {:>12} {:>9} {:>8}  {}\n", s["name"].get<std::string>(),
			   s["state"].get<std::string>(), s["policy"].get<std::string>(), runner,
			   s["counters"]["violations"].get<uint64_t>(),
			   fmt::format("{} B", s["counters"]["egress_bytes"].get<uint64_t>()),
			   s["dns"]["queries_denied"].get<uint64_t>(), s["dns"]["learned_addresses"].get<uint64_t>(),
			   s["cgroup"].get<std::string>());
		if (s.contains("unix") && s["unix"].value("hooks", "") != "kernel")
			fmt::print("  {}: unix sockets not decided (no cgroup unix hooks in this kernel)\n",
				   s["name"].get<std::string>());
	}
	return kExitOk;
}

int cmd_thaw(const Paths& paths, const std::string& name)
{
	return via_daemon(paths, about(Request::Cmd::Thaw, name), [&] { return ops::thaw(paths, name); });
}

int cmd_kill(const Paths& paths, const std::string& name)
{
	return via_daemon(paths, about(Request::Cmd::Kill, name), [&] { return ops::kill(paths, name); });
}

int cmd_reload(const Paths& paths, const std::string& name, const std::string& file)
{
	std::string f = policy_argument(file);
	return via_daemon(paths, reload_request(name, f),
			  [&] { return ops::reload(paths, name, f); });
}

int cmd_attach(const Paths& paths, const AttachOptions& o)
{
	ops::NewSandbox n;
	n.name = o.name;
	n.policy_file = policy_argument(o.policy_file);
	n.audit_log = o.audit_log;
	n.log_allowed = o.log_allowed;
	n.cgroup = o.cgroup;
	n.pid = o.pid;
	n.audit_bound = o.audit_bound;
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
		for (const auto& w : ops::escape_warnings(resolve_attach_target(paths, n.cgroup, n.pid)))
			spdlog::warn("{}", w);
	} catch (const std::exception&) {
	}
	return via_daemon(paths, req, [&]() -> Result<std::string> {
		std::string msg;
		if (auto added = ops::add(paths, n, &msg); !added)
			return added.rejection();
		return msg;
	});
}

int cmd_detach(const Paths& paths, const std::string& name)
{
	return via_daemon(paths, about(Request::Cmd::Detach, name), [&] { return ops::detach(paths, name); });
}

int cmd_sandbox_create(const Paths& paths, const SandboxCreateOptions& o)
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

int cmd_sandbox_delete(const Paths& paths, const std::string& name)
{
	return via_daemon(paths, about(Request::Cmd::Delete, name), [&] { return ops::remove(paths, name); });
}

int cmd_uninstall(const Paths& paths, bool force)
{
	auto done = ops::uninstall(paths, force);
	if (!done) {
		for (const auto& l : done.rejection().lines)
			fmt::print(stderr, "{}\n", l);
		return kExitFailure;
	}
	for (const auto& l : *done)
		fmt::print("{}\n", l);
	return kExitOk;
}

int cmd_events(const Paths& paths, const std::string& sandbox, bool follow)
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
		std::fwrite(buf, 1, static_cast<size_t>(n), stdout);
		std::fflush(stdout);
	}
	return kExitOk;
}

}  // namespace airlock
