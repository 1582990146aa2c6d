#pragma once
// Events from the kernel, in words: names of hooks, verdicts and reasons,
// and the JSON-lines audit log.
#include <airlock/abi.h>

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "events/audit_bound.h"

namespace airlock {

const char* hook_name(unsigned hook);
// A hook of this build (al_hook's counters have room for hooks to come).
bool hook_known(unsigned hook);
const char* verdict_name(unsigned verdict);
const char* reason_name(unsigned reason);
// A reason the kernel gives for letting a call or a packet through.
bool reason_allows(unsigned reason);
// A reason that fails the call without being a violation (the kernel's
// al_refusal): a refuse rule, UDP to a TCP-only redirect, a proxy down.
bool reason_refuses(unsigned reason);
// Where a BPF helper failed (al_err_site): stable names, metric labels.
const char* err_site_name(unsigned site);
// What the kernel did to the task in its violating call ("" for nothing).
const char* signal_name(unsigned signal);
std::string protocol_name(unsigned ipproto);

// A decision event as an audit-log object (without "ts" and "sandbox").
nlohmann::json decision_json(const al_event& e);
// One human line for the terminal.
std::string decision_line(const al_event& e);

// A DNS query decision (event "decision" with qname, qtype, qid) or an
// answer's address (event "dns-answer").
nlohmann::json dns_json(const al_dns_event& e);
std::string dns_line(const al_dns_event& e);
// The queried name of a DNS event, lowercase, without the trailing dot;
// nullopt when the name was not parsed.
std::optional<std::string> dns_qname(const al_dns_event& e);

// A unix socket decision: event "decision" with family "unix", dst the path
// or "@abstract" name (unprintable bytes as \xNN), and "unix": its kind.
nlohmann::json unix_json(const al_unix_event& e);
std::string unix_line(const al_unix_event& e);
std::string unix_address(const al_unix_event& e);

// The bound's set fields as request fields ("audit_log_max_bytes",
// "audit_log_keep"), and back.

// Appends one JSON object per line with a single write(2), so lines from
// several writers (the runner, `airlock reload`) never interleave.
//
// Bounded: before a line would take the file past the bound's max_bytes,
// the file is renamed to PATH.1 (PATH.1 to PATH.2, ..., up to PATH.keep; the
// oldest goes) and a new one started. Writers take flock(2) on the file and
// check that the name still points to it, so that several processes
// appending to one log rotate it once and never write past the bound. A
// file renamed or removed by someone else (logrotate) is reopened on the
// next line; one truncated in place (copytruncate) is appended to from its
// new end.
class AuditLog {
public:
	AuditLog() = default;
	explicit AuditLog(const std::string& path, AuditBound bound = {});
	AuditLog(AuditLog&&) noexcept;
	AuditLog& operator=(AuditLog&&) noexcept;
	~AuditLog();
	bool open() const { return fd_ >= 0; }
	// Adds "ts" and "sandbox" in front of the object's own fields.
	void write(const std::string& sandbox, const nlohmann::json& record);
	// Opens the file by its name again (SIGHUP, after an external rename).
	void reopen();
	// Hands every line any AuditLog of this process writes (with its
	// newline) to f as well: the daemon's event stream, which so carries the
	// lifecycle lines of its requests (created, thawed, killed, deleted) as
	// well as its supervisors' decisions.
	static void tee_all(std::function<void(const std::string& sandbox, const std::string& line)> f);

private:
	void rotate();
	std::string path_;
	AuditBound bound_;
	int fd_ = -1;
};

}  // namespace airlock
