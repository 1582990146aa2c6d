#pragma once
// The control socket's requests: one JSON object on one line, {"cmd": ...}
// and the fields of that command. The daemon parses what arrives with
// parse_request (a bad line is an answer, never an exception); the client
// writes them with to_line. docs/operations.md lists the protocol.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "events/audit_bound.h"
#include "util/result.h"

namespace airlock {

struct Request {
	enum class Cmd { Ping, Status, Thaw, Kill, Reload, Attach, Create, Detach, Delete, Events };
	Cmd cmd = Cmd::Ping;
	std::string name;        // a sandbox name; "" where a command may go without
	std::string policy;      // reload, attach, create: a file or a name in the policy directory
	std::string audit_log;   // attach, create
	AuditBound audit_bound;  // attach, create
	bool log_allowed = false;
	std::string cgroup;      // attach: a cgroup path ...
	int pid = 0;             // ... or the cgroup of this process
	uint64_t cgroup_id = 0;  // attach: if set, the cgroup must be this one (the OCI hook checked it)
	int runner_pid = 0;      // create: the `airlock run` that waits for the sandbox
	std::string sandbox;     // events: one sandbox's, or "" for all
	bool follow = false;     // events: keep sending new lines

	static Request of(Cmd cmd, std::string name = "")
	{
		Request r;
		r.cmd = cmd;
		r.name = std::move(name);
		return r;
	}
};

std::string_view to_string(Request::Cmd);

inline Request reload_request(const std::string& name, const std::string& policy)
{
	Request r = Request::of(Request::Cmd::Reload, name);
	r.policy = policy;
	return r;
}

// A line as received (without its newline). A rejection is one line
// saying what is wrong with it: "request: KEY: MESSAGE".
Result<Request> parse_request(std::string_view line);

// The line a client sends (with its newline); parse_request gives back r.
std::string to_line(const Request& r);

}  // namespace airlock
