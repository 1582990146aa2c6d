#include "events/audit.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "net/address.h"
#include "policy/dnsname.h"
#include "policy/policy.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/files.h"

namespace airlock {

using nlohmann::json;

namespace {

// The names of an enum's values, from its list in airlock/abi.h (each
// X(enumerator, value, name)). Checked as it is made, at compile time: every
// value below N (the enum's *_MAX) at most once, and, unless the list may
// leave room (al_hook's counters have slots for hooks to come), every value
// below N named: adding an enumerator without its name, or past *_MAX,
// does not compile. A value without a name is "unknown".
template <size_t N>
class Names {
public:
	struct Entry {
		unsigned value;
		const char* name;
	};
	template <size_t M>
	consteval Names(const Entry (&list)[M], bool room = false)
	{
		if (!room && M != N)
			throw "the list does not name every value below *_MAX";
		for (const auto& e : list) {
			if (e.value >= N)
				throw "a value at or past *_MAX";
			if (names_[e.value])
				throw "two enumerators of one value";
			names_[e.value] = e.name;
		}
		for (size_t v = 0; v < M; v++)
			if (!names_[v])
				throw "a gap in the values";
	}
	const char* operator()(unsigned v) const { return has(v) ? names_[v] : "unknown"; }
	bool has(unsigned v) const { return v < N && names_[v]; }

private:
	std::array<const char*, N> names_{};
};

#define AL_NAME_ENTRY(e, v, name) {e, name},
constexpr Names<AL_HOOK_MAX> kHookNames({AL_HOOKS(AL_NAME_ENTRY)}, true);
constexpr Names<AL_VERDICT_MAX> kVerdictNames({AL_VERDICTS(AL_NAME_ENTRY)});
constexpr Names<AL_REASON_MAX> kReasonNames({AL_REASONS(AL_NAME_ENTRY)});
constexpr Names<AL_SIGNAL_MAX> kSignalNames({AL_EVENT_SIGNALS(AL_NAME_ENTRY)});
constexpr Names<AL_ERR_SITE_MAX> kErrSiteNames({AL_ERR_SITES(AL_NAME_ENTRY)});
#undef AL_NAME_ENTRY

}  // namespace

const char* hook_name(unsigned hook)
{
	return kHookNames(hook);
}
bool hook_known(unsigned hook)
{
	return kHookNames.has(hook);
}

bool reason_allows(unsigned reason)
{
	switch (reason) {
	case AL_REASON_RULE_ALLOW:
	case AL_REASON_DNS_ALLOW:
	case AL_REASON_LEARNED:
	case AL_REASON_UNIX_SCOPED:
	case AL_REASON_UNIX_OWN:
	case AL_REASON_REDIRECT:
		return true;
	default:
		return false;
	}
}
bool reason_refuses(unsigned reason)
{
	return reason == AL_REASON_REFUSED || reason == AL_REASON_REDIRECT_UDP || reason == AL_REASON_NO_PROXY ||
	       reason == AL_REASON_REDIRECT_FAMILY;
}
const char* verdict_name(unsigned verdict)
{
	return kVerdictNames(verdict);
}
const char* reason_name(unsigned reason)
{
	return kReasonNames(reason);
}
const char* signal_name(unsigned signal)
{
	return kSignalNames(signal);
}
const char* err_site_name(unsigned site)
{
	return kErrSiteNames(site);
}

std::string protocol_name(unsigned p)
{
	switch (p) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return "icmp";
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
	j["violation"] = e.verdict != AL_VERDICT_ALLOW && !reason_refuses(e.reason);
	j["latched"] = e.latched != 0;
	// The task stopped (SIGSTOP) or died (SIGKILL) inside its violating call.
	if (e.signal != AL_SIGNAL_NONE)
		j["in_call"] = signal_name(e.signal);
	j["pid"] = e.pid;
	j["tgid"] = e.tgid;
	j["comm"] = comm_of(e);
	j["cgroup_id"] = e.cgroup_id;
	std::string dst = e.hook == AL_HOOK_SOCK_CREATE ? "" : dest_of(e);  // a new socket has no peer
	j["family"] = e.family == AL_FAMILY_IPV4   ? json("ipv4")
		      : e.family == AL_FAMILY_IPV6 ? json("ipv6")
						   : json(nullptr);
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
	std::string where = dst.empty()                  ? std::string("-")
			    : e.family == AL_FAMILY_IPV6 ? fmt::format("[{}]:{}", dst, e.port)
							 : fmt::format("{}:{}", dst, e.port);
	std::string rule = e.rule == AL_RULE_NONE ? "" : fmt::format(" rule {}", e.rule);
	return fmt::format("{} {} {} {} ({}{}) pid {} {}{}{}", verdict_name(e.verdict), hook_name(e.hook),
			   protocol_name(e.protocol), where, reason_name(e.reason), rule, e.tgid, comm_of(e),
			   e.latched ? " [quarantine latched]" : "",
			   e.signal == AL_SIGNAL_NONE ? ""
						      : fmt::format(" [task {} in the call]", signal_name(e.signal)));
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
			   e.kind ? unix_address(e) : "-", reason_name(e.base.reason), rule, e.base.tgid,
			   comm_of(e.base), e.base.latched ? " [quarantine latched]" : "");
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
			return fmt::format("dropped DNS answer from {} ({}) for {}", dest_of(e.base),
					   reason_name(e.base.reason), q);
		return fmt::format("answer {} -> {} ttl {} {}", q, dest_of(e.base), e.ttl,
				   e.learned ? "learned" : fmt::format("not learned ({})", reason_name(e.base.reason)));
	}
	return fmt::format("{} query {}", decision_line(e.base), q);
}

AuditLog::AuditLog(const std::string& path, AuditBound bound) : path_(path), bound_(bound.resolved())
{
	std::filesystem::path p(path);
	std::error_code ec;
	// Only a directory airlock makes gets airlock's mode: an existing one
	// (/tmp) keeps its own.
	try {
		if (p.has_parent_path() && !std::filesystem::is_directory(p.parent_path(), ec))
			make_dirs(p.parent_path().string(), 0750);
	} catch (const std::exception& e) {
		fail("audit log {}: {}", path, e.what());
	}
	reopen();
	if (fd_ < 0)
		fail_errno("audit log " + path + ": open");
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

AuditLog::AuditLog(AuditLog&& o) noexcept : path_(std::move(o.path_)), bound_(o.bound_), fd_(std::exchange(o.fd_, -1))
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

namespace {
std::function<void(const std::string&, const std::string&)>& tee_target()
{
	static std::function<void(const std::string&, const std::string&)> f;
	return f;
}
}  // namespace

void AuditLog::tee_all(std::function<void(const std::string& sandbox, const std::string& line)> f)
{
	tee_target() = std::move(f);
}

void AuditLog::write(const std::string& sandbox, const json& record)
{
	const auto& tee = tee_target();
	if (fd_ < 0 && !tee)
		return;
	json line = json::object();
	line["ts"] = now_rfc3339();
	line["sandbox"] = sandbox;
	for (auto it = record.begin(); it != record.end(); ++it)
		line[it.key()] = it.value();
	std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
	if (tee)
		tee(sandbox, text);
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
