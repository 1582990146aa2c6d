#include "proxy/records.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "util/text.h"

namespace airlock::proxy {

namespace {

using ojson = nlohmann::ordered_json;

std::string protocol_name(uint8_t p)
{
	switch (p) {
	case 6:
		return "tcp";
	case 17:
		return "udp";
	default:
		return std::to_string(p);
	}
}

// The fields every record starts with, in their order.
ojson head_fields(const std::string& sandbox, const char* kind, const Origin& o,
		  std::chrono::system_clock::time_point t)
{
	ojson j;
	j["time"] = rfc3339_ms(t);
	j["sandbox"] = sandbox;
	j["kind"] = kind;
	j["dst"] = format_address(o.addr);
	j["port"] = o.port;
	j["protocol"] = protocol_name(o.protocol);
	if (!o.name.empty())
		j["name"] = o.name;
	if (o.rule != AL_RULE_NONE)
		j["rule"] = o.rule;
	return j;
}

}  // namespace

std::string rfc3339_ms(std::chrono::system_clock::time_point t)
{
	auto ms = std::chrono::time_point_cast<std::chrono::milliseconds>(t).time_since_epoch().count();
	std::time_t secs = static_cast<std::time_t>(ms / 1000);
	long frac = static_cast<long>(ms % 1000);
	if (frac < 0) {
		frac += 1000;
		secs--;
	}
	std::tm tm{};
	gmtime_r(&secs, &tm);
	char buf[32];
	std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return fmt::format("{}.{:03d}Z", buf, frac);
}

bool valid_utf8(std::string_view s)
{
	size_t i = 0;
	while (i < s.size()) {
		auto c = static_cast<unsigned char>(s[i]);
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t len = 0;
		unsigned lo = 0x80, hi = 0xbf;  // the second byte's range (RFC 3629 section 4)
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			if (c == 0xe0)
				lo = 0xa0;  // no overlong form
			else if (c == 0xed)
				hi = 0x9f;  // no surrogate
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;  // nothing past U+10FFFF
		} else {
			return false;
		}
		if (s.size() - i < len)
			return false;
		auto c1 = static_cast<unsigned char>(s[i + 1]);
		if (c1 < lo || c1 > hi)
			return false;
		for (size_t k = 2; k < len; k++) {
			auto ck = static_cast<unsigned char>(s[i + k]);
			if (ck < 0x80 || ck > 0xbf)
				return false;
		}
		i += len;
	}
	return true;
}

std::string base64(std::string_view in)
{
	static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	std::string out;
	out.reserve((in.size() + 2) / 3 * 4);
	size_t i = 0;
	for (; i + 3 <= in.size(); i += 3) {
		uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) |
			     static_cast<uint8_t>(in[i + 2]);
		out += kAlphabet[(v >> 18) & 63];
		out += kAlphabet[(v >> 12) & 63];
		out += kAlphabet[(v >> 6) & 63];
		out += kAlphabet[v & 63];
	}
	if (size_t rest = in.size() - i) {
		uint32_t v = static_cast<uint8_t>(in[i]) << 16;
		if (rest == 2)
			v |= static_cast<uint8_t>(in[i + 1]) << 8;
		out += kAlphabet[(v >> 18) & 63];
		out += kAlphabet[(v >> 12) & 63];
		out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
		out += '=';
	}
	return out;
}

std::string hex(std::string_view in)
{
	static constexpr char kDigits[] = "0123456789abcdef";
	std::string out;
	out.reserve(in.size() * 2);
	for (char c : in) {
		auto b = static_cast<uint8_t>(c);
		out += kDigits[b >> 4];
		out += kDigits[b & 15];
	}
	return out;
}

std::string dump_line(const ojson& j)
{
	return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string http_record_line(const std::string& sandbox, const Origin& o, const HttpRecord& r)
{
	ojson j = head_fields(sandbox, "http", o, r.time);
	if (r.tls)
		j["tls"] = true;
	if (!r.sni.empty())
		j["sni"] = r.sni;
	j["method"] = r.method;
	if (!r.host.empty())
		j["host"] = r.host;
	if (!r.secret.empty()) {
		// Never a secret's value: what could carry it is left out.
		j["path"] = r.path.substr(0, r.path.find('?'));
		j["secret"] = r.secret;
	} else {
		j["path"] = r.path;
		ojson headers = ojson::object();
		for (const auto& [name, value] : r.headers)
			headers[name] = value;
		j["headers"] = std::move(headers);
		if (r.body_bytes > 0) {
			if (valid_utf8(r.body))
				j["body"] = r.body;
			else
				j["body_base64"] = base64(r.body);
		}
	}
	j["body_bytes"] = r.body_bytes;
	j["body_truncated"] = r.body_truncated;
	if (r.status)
		j["status"] = r.status;
	j["duration_ms"] = r.duration_ms;
	return dump_line(j);
}

std::string tcp_record_line(const std::string& sandbox, const Origin& o, const TcpRecord& r)
{
	ojson j = head_fields(sandbox, "tcp", o, r.time);
	if (r.tls)
		j["tls"] = true;
	if (!r.sni.empty())
		j["sni"] = r.sni;
	if (r.decrypted)
		j["decrypted"] = true;
	if (!r.tls_error.empty())
		j["tls_error"] = r.tls_error;
	j["bytes_in"] = r.bytes_in;
	j["head_hex"] = hex(std::string_view(r.head).substr(0, kHeadBytes));
	if (r.truncated)
		j["truncated"] = true;
	j["duration_ms"] = r.duration_ms;
	return dump_line(j);
}

std::string udp_record_line(const std::string& sandbox, const Origin& o, const UdpRecord& r)
{
	ojson j = head_fields(sandbox, "udp", o, r.time);
	j["bytes_in"] = r.bytes_in;
	j["head_hex"] = hex(std::string_view(r.head).substr(0, kHeadBytes));
	return dump_line(j);
}

std::string dns_record_line(const std::string& sandbox, const Origin& o, const DnsRecord& r)
{
	ojson j = head_fields(sandbox, "dns", o, r.time);
	j["bytes_in"] = r.bytes_in;
	if (!r.query.empty())
		j["query"] = r.query;
	if (!r.qtype.empty())
		j["qtype"] = r.qtype;
	if (!r.rcode.empty())
		j["rcode"] = r.rcode;
	if (!r.answer.empty())
		j["answer"] = r.answer;
	if (!r.head.empty())
		j["head_hex"] = hex(std::string_view(r.head).substr(0, kHeadBytes));
	return dump_line(j);
}

std::string sni_record_line(const std::string& sandbox, const Origin& o, const SniRecord& r)
{
	ojson j = head_fields(sandbox, "sni", o, r.time);
	j["verdict"] = r.passed ? "pass" : "deny";
	if (!r.sni.empty())
		j["sni"] = r.sni;
	if (!r.reason.empty())
		j["reason"] = r.reason;
	if (!r.upstream_error.empty())
		j["upstream_error"] = r.upstream_error;
	j["bytes_out"] = r.bytes_out;
	j["bytes_back"] = r.bytes_back;
	j["duration_ms"] = r.duration_ms;
	return dump_line(j);
}

std::string gate_request_line(const std::string& sandbox, const Origin& o, const GateRequestRecord& r)
{
	ojson j = head_fields(sandbox, "http-gate", o, r.time);
	j["verdict"] = r.reason.empty() ? "pass" : "deny";
	if (r.tls)
		j["tls"] = true;
	if (!r.method.empty())
		j["method"] = r.method;
	if (!r.host.empty())
		j["host"] = r.host;
	if (!r.path.empty())
		j["path"] = r.path;
	if (r.entry)
		j["entry"] = *r.entry;
	if (!r.reason.empty())
		j["reason"] = r.reason;
	if (!r.detail.empty())
		j["detail"] = r.detail;
	if (!r.secret.empty())
		j["secret"] = r.secret;
	if (!r.replaced.empty())
		j["replaced"] = r.replaced;
	if (r.status)
		j["status"] = r.status;
	j["body_bytes"] = r.body_bytes;
	return dump_line(j);
}

std::string records_full_line(const std::string& sandbox, uint64_t max_records_bytes,
			      std::chrono::system_clock::time_point t)
{
	ojson j;
	j["time"] = rfc3339_ms(t);
	j["sandbox"] = sandbox;
	j["kind"] = "records-full";
	j["max_records_bytes"] = max_records_bytes;
	return dump_line(j);
}

RecordsWriter::RecordsWriter(int fd, uint64_t max_bytes, std::string sandbox)
    : fd_(fd), max_bytes_(max_bytes), sandbox_(std::move(sandbox))
{
	struct stat st {};
	if (fd_.valid() && ::fstat(fd_.get(), &st) == 0)
		size_ = static_cast<uint64_t>(st.st_size);
	// Its time is always 24 characters: this is its length whenever it is written.
	reserve_ = records_full_line(sandbox_, max_bytes_, std::chrono::system_clock::now()).size();
}

bool RecordsWriter::write(const std::string& line)
{
	if (!fd_.valid() || full_) {
		dropped_++;
		return false;
	}
	if (size_ + line.size() + reserve_ <= max_bytes_) {
		if (append(line)) {
			written_++;
			return true;
		}
		dropped_++;
		return false;
	}
	dropped_++;
	full_ = true;
	std::string last = records_full_line(sandbox_, max_bytes_, std::chrono::system_clock::now());
	if (size_ + last.size() <= max_bytes_)
		append(last);
	spdlog::warn("world records of {} reached {} bytes: later records are dropped", sandbox_, max_bytes_);
	return false;
}

bool RecordsWriter::append(const std::string& line)
{
	size_t done = 0;
	while (done < line.size()) {
		// One call for the whole line; a regular file takes it whole unless
		// the disk is full or the file too large.
		ssize_t n = ::write(fd_.get(), line.data() + done, line.size() - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : ENOSPC;
			// Part of a line is no record: take it back if we can.
			if (done && ::ftruncate(fd_.get(), static_cast<off_t>(size_)) != 0)
				size_ += done;
			spdlog::warn("world records of {}: write failed: {}", sandbox_, std::strerror(err));
			return false;
		}
		done += static_cast<size_t>(n);
	}
	size_ += done;
	return true;
}

namespace {

std::string str(const nlohmann::json& j, const char* key)
{
	auto it = j.find(key);
	return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string num(const nlohmann::json& j, const char* key, const char* absent = "-")
{
	auto it = j.find(key);
	if (it == j.end() || !it->is_number_integer())
		return absent;
	return it->dump();
}

// At most `max` characters, "..." at the end of what is cut.
std::string clip(std::string s, size_t max)
{
	if (s.size() > max)
		s = s.substr(0, max - 3) + "...";
	return s;
}

std::vector<std::string> row_of(const nlohmann::json& j)
{
	std::string time = str(j, "time");
	if (time.size() >= 23 && time[10] == 'T')
		time = time.substr(11, 12);
	std::string kind = str(j, "kind");
	auto tls_flag = j.find("tls");
	bool tls = tls_flag != j.end() && tls_flag->is_boolean() && tls_flag->get<bool>();
	std::string dest = "-";
	if (j.contains("dst") || j.contains("name")) {
		std::string host = str(j, "name");
		if (host.empty()) {
			host = str(j, "dst");
			if (host.find(':') != std::string::npos)
				host = "[" + host + "]";
		}
		dest = host + ":" + num(j, "port", "?");
	}
	std::string what, body = "-", status = "-";
	if (kind == "http") {
		std::string host = str(j, "host"), path = str(j, "path");
		bool origin_form = !path.empty() && path.front() == '/';
		what = str(j, "method") + " " + (origin_form ? host : std::string()) + path;
		body = num(j, "body_bytes");
		status = num(j, "status");
	} else if (kind == "tcp") {
		what = num(j, "bytes_in", "?") + " bytes";
		auto tls = j.find("tls");
		if (tls != j.end() && tls->is_boolean() && tls->get<bool>())
			what += " tls";
		std::string sni = str(j, "sni");
		if (!sni.empty())
			what += " sni=" + sni;
		auto trunc = j.find("truncated");
		if (trunc != j.end() && trunc->is_boolean() && trunc->get<bool>())
			what += " (truncated)";
	} else if (kind == "udp") {
		what = num(j, "bytes_in", "?") + " bytes";
	} else if (kind == "dns") {
		std::string query = str(j, "query"), answer = str(j, "answer"), rcode = str(j, "rcode");
		what = query.empty() ? (rcode.empty() ? "not a query, " + num(j, "bytes_in", "?") + " bytes" : rcode)
				     : str(j, "qtype") + " " + query;
		if (!answer.empty())
			what += " -> " + answer;
		else if (!query.empty())
			what += rcode == "NOERROR" ? " (no data)" : " " + rcode;
	} else if (kind == "sni") {
		std::string sni = str(j, "sni");
		what = str(j, "verdict") + " " + (sni.empty() ? std::string("(no name)") : sni);
		std::string reason = str(j, "reason"), up = str(j, "upstream_error");
		if (!reason.empty())
			what += ": " + reason;
		else if (!up.empty())
			what += ", upstream: " + up;
		else
			what += ", " + num(j, "bytes_out", "?") + " bytes out, " + num(j, "bytes_back", "?") + " back";
	} else if (kind == "records-full") {
		what = "records stopped at " + num(j, "max_records_bytes", "?") + " bytes";
	}
	if (kind == "tcp" && j.contains("tls_error"))
		what += " (" + str(j, "tls_error") + ")";
	else if (kind == "tcp" && j.contains("decrypted"))
		what += " decrypted";
	if (kind == "http" && tls)
		kind = "https";
	return {printable(time), printable(kind), printable(dest), clip(printable(what), 100), body, status};
}

}  // namespace

ShowResult show_records(std::istream& in, std::string_view source, const ShowOptions& o)
{
	ShowResult r;
	std::vector<std::vector<std::string>> rows = {{"TIME", "KIND", "DESTINATION", "WHAT", "BODY", "STATUS"}};
	std::string line;
	for (size_t n = 1; std::getline(in, line); n++) {
		if (line.empty())
			continue;
		auto j = nlohmann::json::parse(line, nullptr, false);
		if (j.is_discarded() || !j.is_object() || !j.contains("kind") || !j["kind"].is_string()) {
			r.errors.push_back(fmt::format("{}:{}: not a JSON record, skipped", source, n));
			continue;
		}
		if (!o.sandbox.empty() && str(j, "sandbox") != o.sandbox)
			continue;
		if (o.json)
			r.out += line + "\n";
		else
			rows.push_back(row_of(j));
	}
	if (o.json)
		return r;
	std::vector<size_t> width(rows.front().size(), 0);
	for (const auto& row : rows)
		for (size_t c = 0; c < row.size(); c++)
			width[c] = std::max(width[c], row[c].size());
	for (const auto& row : rows) {
		std::string text;
		for (size_t c = 0; c < row.size(); c++) {
			text += row[c];
			if (c + 1 < row.size())
				text += std::string(width[c] - row[c].size() + 2, ' ');
		}
		r.out += text + "\n";
	}
	return r;
}

}  // namespace airlock::proxy
