#include "events/audit.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "net/address.h"
#include "policy/dnsname.h"
#include "policy/policy.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock {

using nlohmann::json;

const char* hook_name(unsigned hook)
{
	switch (hook) {
	case AL_HOOK_SOCK_CREATE: return "sock_create";
	case AL_HOOK_CONNECT4: return "connect4";
	case AL_HOOK_CONNECT6: return "connect6";
	case AL_HOOK_SENDMSG4: return "sendmsg4";
	case AL_HOOK_SENDMSG6: return "sendmsg6";
	case AL_HOOK_EGRESS: return "egress";
	case AL_HOOK_INGRESS: return "ingress";
	case AL_HOOK_CONNECT_UNIX: return "connect_unix";
	case AL_HOOK_SENDMSG_UNIX: return "sendmsg_unix";
	case AL_HOOK_SOCKET: return "socket";
	}
	return "unknown";
}

const char* verdict_name(unsigned verdict)
{
	switch (verdict) {
	case AL_VERDICT_ALLOW: return "allow";
	case AL_VERDICT_DENY: return "deny";
	case AL_VERDICT_AUDIT: return "audit";
	}
	return "unknown";
}

const char* reason_name(unsigned reason)
{
	switch (reason) {
	case AL_REASON_RULE_ALLOW: return "rule-allow";
	case AL_REASON_NO_RULE: return "no-rule";
	case AL_REASON_RULE_DENY: return "rule-deny";
	case AL_REASON_QUARANTINED: return "quarantined";
	case AL_REASON_RAW_SOCKET: return "raw-socket";
	case AL_REASON_ICMP_SOCKET: return "icmp-socket";
	case AL_REASON_SOURCE_ROUTE: return "source-route";
	case AL_REASON_ROUTING_HEADER: return "routing-header";
	case AL_REASON_FRAGMENT: return "fragment";
	case AL_REASON_MALFORMED: return "malformed";
	case AL_REASON_NO_SANDBOX: return "no-sandbox";
	case AL_REASON_PROTOCOL: return "protocol";
	case AL_REASON_DNS_ALLOW: return "dns-allow";
	case AL_REASON_DNS_RESOLVER: return "dns-resolver";
	case AL_REASON_DNS_TCP: return "dns-tcp";
	case AL_REASON_DNS_MALFORMED: return "dns-malformed";
	case AL_REASON_DNS_NAME: return "dns-name";
	case AL_REASON_DNS_TYPE: return "dns-type";
	case AL_REASON_DNS_LENGTH: return "dns-length";
	case AL_REASON_DNS_RATE: return "dns-rate";
	case AL_REASON_DNS_TABLE: return "dns-table";
	case AL_REASON_LEARNED: return "learned";
	case AL_REASON_DNS_UNSOLICITED: return "dns-unsolicited";
	case AL_REASON_DNS_EDNS: return "dns-edns";
	case AL_REASON_DNS_OFF_CHAIN: return "dns-off-chain";
	case AL_REASON_UNIX_PATH: return "unix-path";
	case AL_REASON_UNIX_SCOPED: return "unix-scoped";
	case AL_REASON_BUSY: return "busy";
	case AL_REASON_REFUSED: return "refused";
	case AL_REASON_UNIX_OWN: return "unix-own";
	case AL_REASON_FAMILY: return "family";
	case AL_REASON_HELPER: return "helper";
	}
	return "unknown";
}

const char* err_site_name(unsigned site)
{
	// Metric labels: never renamed.
	static constexpr std::pair<unsigned, const char*> kNames[] = {
		{AL_ERR_SITE_IPV4_HEADER, "ipv4-header"},       {AL_ERR_SITE_IPV4_OPTION, "ipv4-option"},
		{AL_ERR_SITE_IPV6_HEADER, "ipv6-header"},       {AL_ERR_SITE_IPV6_EXT, "ipv6-extension"},
		{AL_ERR_SITE_L4_PORTS, "l4-ports"},             {AL_ERR_SITE_DNS_TCP_HEADER, "dns-tcp-header"},
		{AL_ERR_SITE_DNS_TCP_LENGTH, "dns-tcp-length"}, {AL_ERR_SITE_DNS_QUERY, "dns-query"},
		{AL_ERR_SITE_DNS_ANSWER, "dns-answer"},
	};
	static_assert(std::size(kNames) == AL_ERR_SITE_MAX, "a name for every al_err_site");
	for (const auto& [s, name] : kNames)
		if (s == site)
			return name;
	return "unknown";
}

const char* signal_name(unsigned signal)
{
	switch (signal) {
	case AL_SIGNAL_NONE: return "";
	case AL_SIGNAL_STOPPED: return "stopped";
	case AL_SIGNAL_KILLED: return "killed";
	case AL_SIGNAL_FAILED: return "signal-failed";
	}
	return "unknown";
}

std::string protocol_name(unsigned p)
{
	switch (p) {
	case IPPROTO_TCP: return "tcp";
	case IPPROTO_UDP: return "udp";
	case IPPROTO_ICMP: return "icmp";
	case IPPROTO_ICMPV6: return "icmp";
	}
	return std::to_string(p);
}

namespace {

std::string comm_of(const al_event& e)
{
	size_t n = 0;
	while (n < sizeof(e.comm) && e.comm[n])
		n++;
	return std::string(reinterpret_cast<const char*>(e.comm), n);
}

std::string dest_of(const al_event& e)
{
	if (e.family != AL_FAMILY_IPV4 && e.family != AL_FAMILY_IPV6)
		return "";
	return format_address(from_raw(e.family, e.addr));
}

}  // namespace

json decision_json(const al_event& e)
{
	json j;
	j["event"] = "decision";
	j["hook"] = hook_name(e.hook);
	j["verdict"] = verdict_name(e.verdict);
	j["reason"] = reason_name(e.reason);
	j["violation"] = e.verdict != AL_VERDICT_ALLOW && e.reason != AL_REASON_REFUSED;
	j["latched"] = e.latched != 0;
	// The task stopped (SIGSTOP) or died (SIGKILL) inside its violating call.
	if (e.signal != AL_SIGNAL_NONE)
		j["in_call"] = signal_name(e.signal);
	j["pid"] = e.pid;
	j["tgid"] = e.tgid;
	j["comm"] = comm_of(e);
	j["cgroup_id"] = e.cgroup_id;
	std::string dst = e.hook == AL_HOOK_SOCK_CREATE ? "" : dest_of(e);  // a new socket has no peer
	j["family"] = e.family == AL_FAMILY_IPV4 ? json("ipv4") : e.family == AL_FAMILY_IPV6 ? json("ipv6") : json(nullptr);
	j["protocol"] = protocol_name(e.protocol);
	j["dst"] = dst.empty() ? json(nullptr) : json(dst);
	j["port"] = e.port;
	j["rule"] = e.rule == AL_RULE_NONE ? json(nullptr) : json(e.rule);
	j["policy_id"] = e.policy_id;
	if (e.hook == AL_HOOK_SOCKET) {
		// The family of socket(2) travels in the port field.
		const char* name = family_name(e.port);
		j["socket_family"] = name ? json(name) : json(e.port);
		j["protocol"] = nullptr;
		j["port"] = nullptr;
	}
	return j;
}

std::string decision_line(const al_event& e)
{
	if (e.hook == AL_HOOK_SOCKET) {
		const char* name = family_name(e.port);
		return fmt::format("{} socket family {} ({}) pid {} {}{}", verdict_name(e.verdict),
				   name ? name : std::to_string(e.port), reason_name(e.reason), e.tgid, comm_of(e),
				   e.latched ? " [quarantine latched]" : "");
	}
	std::string dst = e.hook == AL_HOOK_SOCK_CREATE ? "" : dest_of(e);
	std::string where = dst.empty() ? std::string("-")
				 : e.family == AL_FAMILY_IPV6 ? fmt::format("[{}]:{}", dst, e.port)
							      : fmt::format("{}:{}", dst, e.port);
	std::string rule = e.rule == AL_RULE_NONE ? "" : fmt::format(" rule {}", e.rule);
	return fmt::format("{} {} {} {} ({}{}) pid {} {}{}{}", verdict_name(e.verdict), hook_name(e.hook),
			   protocol_name(e.protocol), where, reason_name(e.reason), rule, e.tgid, comm_of(e),
			   e.latched ? " [quarantine latched]" : "",
			   e.signal == AL_SIGNAL_NONE ? "" : fmt::format(" [task {} in the call]", signal_name(e.signal)));
}

std::string unix_address(const al_unix_event& e)
{
	size_t n = std::min<size_t>(e.len, sizeof(e.path));
	std::string out = e.kind == AL_UNIX_ABSTRACT ? "@" : "";
	// Bytes as they are where printable; the rest, and the escape itself,
	// as \xNN: an abstract name may hold any byte.
	for (size_t i = 0; i < n; i++) {
		unsigned char c = e.path[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			out += static_cast<char>(c);
		else
			out += fmt::format("\\x{:02x}", c);
	}
	return out;
}

json unix_json(const al_unix_event& e)
{
	json j = decision_json(e.base);
	j["family"] = "unix";
	j["protocol"] = nullptr;
	j["port"] = nullptr;
	j["dst"] = e.kind ? json(unix_address(e)) : json(nullptr);
	j["unix"] = e.kind == AL_UNIX_ABSTRACT ? "abstract" : e.kind == AL_UNIX_NAMED ? "named" : "unreadable";
	return j;
}

std::string unix_line(const al_unix_event& e)
{
	std::string rule = e.base.rule == AL_RULE_NONE ? "" : fmt::format(" rule {}", e.base.rule);
	return fmt::format("{} {} unix {} ({}{}) pid {} {}{}", verdict_name(e.base.verdict), hook_name(e.base.hook),
			   e.kind ? unix_address(e) : "-", reason_name(e.base.reason), rule, e.base.tgid, comm_of(e.base),
			   e.base.latched ? " [quarantine latched]" : "");
}

std::optional<std::string> dns_qname(const al_dns_event& e)
{
	if (e.name_len == 0 || e.name_len > AL_DNS_NAME_BYTES)
		return std::nullopt;
	return name_from_key(e.name, e.name_len - 1u);
}

json dns_json(const al_dns_event& e)
{
	auto name = dns_qname(e);
	json q = name ? json(*name) : json(nullptr);
	json type = e.name_len ? json(dns_type_name(e.qtype)) : json(nullptr);
	if (e.base.kind == AL_EVENT_DNS_ANSWER) {
		json j;
		j["event"] = "dns-answer";
		j["qname"] = q;
		j["qtype"] = type;
		j["qid"] = e.qid;
		j["cgroup_id"] = e.base.cgroup_id;
		j["policy_id"] = e.base.policy_id;
		std::string addr = dest_of(e.base);
		if (e.base.verdict == AL_VERDICT_ALLOW) {
			j["addr"] = addr.empty() ? json(nullptr) : json(addr);
			j["ttl"] = e.ttl;
			j["learned"] = e.learned != 0;
			j["reason"] = reason_name(e.base.reason);  // why it was (not) learned
			j["rule"] = e.base.rule == AL_RULE_NONE ? json(nullptr) : json(e.base.rule);
		} else {
			// Dropped before the socket saw it; no violation of the
			// sandbox: whoever sent it is outside.
			j["dropped"] = true;
			j["reason"] = reason_name(e.base.reason);
			j["from"] = addr.empty() ? json(nullptr) : json(addr);
			j["from_port"] = e.base.port;
		}
		return j;
	}
	json j = decision_json(e.base);
	j["qname"] = q;
	j["qtype"] = type;
	j["qid"] = e.qid;
	return j;
}

std::string dns_line(const al_dns_event& e)
{
	auto name = dns_qname(e);
	std::string q = name ? fmt::format("{} {}", dns_type_name(e.qtype), name->empty() ? "." : *name) : "(unparsed)";
	if (e.base.kind == AL_EVENT_DNS_ANSWER) {
		if (e.base.verdict != AL_VERDICT_ALLOW)
			return fmt::format("dropped DNS answer from {} ({}) for {}", dest_of(e.base), reason_name(e.base.reason),
					   q);
		return fmt::format("answer {} -> {} ttl {} {}", q, dest_of(e.base), e.ttl,
				   e.learned ? "learned" : fmt::format("not learned ({})", reason_name(e.base.reason)));
	}
	return fmt::format("{} query {}", decision_line(e.base), q);
}

void put_audit_bound(json& request, const AuditBound& b)
{
	if (b.max_bytes)
		request["audit_log_max_bytes"] = *b.max_bytes;
	if (b.keep)
		request["audit_log_keep"] = *b.keep;
}

AuditBound audit_bound_of(const json& request)
{
	AuditBound b;
	if (auto it = request.find("audit_log_max_bytes"); it != request.end() && it->is_number_unsigned())
		b.max_bytes = it->get<uint64_t>();
	if (auto it = request.find("audit_log_keep"); it != request.end() && it->is_number_unsigned())
		b.keep = it->get<unsigned>();
	return b;
}

AuditLog::AuditLog(const std::string& path, AuditBound bound) : path_(path), bound_(bound.resolved())
{
	std::filesystem::path p(path);
	std::error_code ec;
	// Only a directory airlock makes gets airlock's mode: an existing one
	// (/tmp) keeps its own.
	if (p.has_parent_path() && !std::filesystem::is_directory(p.parent_path(), ec))
		make_dirs(p.parent_path().string(), 0750);
	reopen();
	if (fd_ < 0)
		fail_errno("open audit log " + path);
}

void AuditLog::reopen()
{
	if (path_.empty())
		return;
	int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (fd < 0)
		return;  // the old descriptor stays: a line in a renamed file beats none
	if (fd_ >= 0)
		::close(fd_);
	fd_ = fd;
}

AuditLog::AuditLog(AuditLog&& o) noexcept
    : path_(std::move(o.path_)), bound_(o.bound_), fd_(std::exchange(o.fd_, -1)), tee_(std::move(o.tee_))
{
}
AuditLog& AuditLog::operator=(AuditLog&& o) noexcept
{
	if (this != &o) {
		if (fd_ >= 0)
			::close(fd_);
		path_ = std::move(o.path_);
		bound_ = o.bound_;
		fd_ = std::exchange(o.fd_, -1);
		tee_ = std::move(o.tee_);
	}
	return *this;
}
AuditLog::~AuditLog()
{
	if (fd_ >= 0)
		::close(fd_);
}

// Called holding the lock on the file that has the name now.
void AuditLog::rotate()
{
	if (bound_.kept() == 0) {
		if (::ftruncate(fd_, 0) != 0)
			fail_errno("truncate audit log " + path_);
		return;
	}
	for (unsigned i = bound_.kept() - 1; i >= 1; i--)
		::rename(fmt::format("{}.{}", path_, i).c_str(), fmt::format("{}.{}", path_, i + 1).c_str());
	if (::rename(path_.c_str(), (path_ + ".1").c_str()) != 0)
		fail_errno("rotate audit log " + path_);
}

void AuditLog::write(const std::string& sandbox, const json& record)
{
	if (fd_ < 0 && !tee_)
		return;
	json line = json::object();
	line["ts"] = now_rfc3339();
	line["sandbox"] = sandbox;
	for (auto it = record.begin(); it != record.end(); ++it)
		line[it.key()] = it.value();
	std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
	if (tee_)
		tee_(sandbox, text);
	if (fd_ < 0)
		return;
	// Another writer may rename the file between our lock and theirs: a
	// few rounds settle on the file that has the name.
	for (int round = 0; round < 8; round++) {
		if (::flock(fd_, LOCK_EX) != 0)
			fail_errno("lock audit log " + path_);
		struct stat mine, named;
		bool current = ::fstat(fd_, &mine) == 0 && ::stat(path_.c_str(), &named) == 0 &&
			       mine.st_ino == named.st_ino && mine.st_dev == named.st_dev;
		if (current && bound_.max() && mine.st_size > 0 &&
		    static_cast<uint64_t>(mine.st_size) + text.size() > bound_.max()) {
			rotate();
			current = false;
		}
		if (!current && round < 7) {
			::flock(fd_, LOCK_UN);
			reopen();
			continue;
		}
		// O_APPEND makes the one write atomic against other appenders.
		ssize_t n = ::write(fd_, text.data(), text.size());
		int e = errno;
		::flock(fd_, LOCK_UN);
		if (n < 0)
			fail_errno("write audit log", e);
		return;
	}
}

}  // namespace airlock
