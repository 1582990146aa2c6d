#include "proxy/canned.h"

#include <boost/beast/http/status.hpp>
#include <fmt/format.h>

#include "proxy/conn_common.h"

namespace airlock::proxy {

namespace http = boost::beast::http;

namespace {

// The name a Host header names: without port, brackets, trailing dot; lowercase.
std::string host_name(std::string_view h)
{
	while (!h.empty() && (h.front() == ' ' || h.front() == '\t'))
		h.remove_prefix(1);
	while (!h.empty() && (h.back() == ' ' || h.back() == '\t'))
		h.remove_suffix(1);
	if (!h.empty() && h.front() == '[') {
		size_t end = h.find(']');
		h = h.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1);
	} else if (size_t colon = h.find(':'); colon != std::string_view::npos && colon == h.rfind(':')) {
		h = h.substr(0, colon);
	}
	if (!h.empty() && h.back() == '.')
		h.remove_suffix(1);
	return lower(h);
}

// The path of a request target, without its query or fragment.
std::string_view target_path(std::string_view t)
{
	if (!t.empty() && t.front() != '/' && t != "*") {
		size_t scheme = t.find("://");
		if (scheme == std::string_view::npos)
			return t;  // authority-form (CONNECT host:port)
		size_t slash = t.find('/', scheme + 3);
		if (slash == std::string_view::npos)
			return "/";
		t = t.substr(slash);
	}
	return t.substr(0, t.find_first_of("?#"));
}

bool host_matches(std::string_view pattern, const std::string& host)
{
	std::string p = lower(pattern);
	if (p == "*")
		return true;
	if (p.size() > 2 && p.compare(0, 2, "*.") == 0) {
		std::string_view suffix = std::string_view(p).substr(1);  // ".name"
		return host.size() > suffix.size() &&
		       host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0;
	}
	return host == p;
}

bool path_matches(std::string_view pattern, std::string_view path)
{
	if (pattern.empty())
		return true;
	if (pattern.back() == '*')
		return path.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
	return path == pattern;
}

std::string reason_of(unsigned status)
{
	http::status s = http::int_to_status(status);
	return s == http::status::unknown ? std::string("Unknown") : std::string(http::obsolete_reason(s));
}

}  // namespace

const WorldResponse* find_response(const std::vector<WorldResponse>& responses, std::string_view host,
				   std::string_view method, std::string_view target)
{
	std::string name = host_name(host);
	std::string_view path = target_path(target);
	for (const auto& r : responses)
		if (host_matches(r.host, name) && (r.method.empty() || r.method == method) &&
		    path_matches(r.path, path))
			return &r;
	return nullptr;
}

std::string format_response(unsigned status, const std::string& body, bool keep_alive, unsigned version, bool head,
			    const std::vector<std::pair<std::string, std::string>>* headers)
{
	bool no_body = status < 200 || status == 204 || status == 304;
	std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_of(status));
	if (headers) {
		for (const auto& [name, value] : *headers)
			if (!iequal(name, "content-length") && !iequal(name, "transfer-encoding") &&
			    !iequal(name, "connection"))
				out += fmt::format("{}: {}\r\n", name, value);
	} else {
		out += "Content-Type: text/plain\r\n";
	}
	if (!no_body)
		out += fmt::format("Content-Length: {}\r\n", body.size());
	if (!keep_alive)
		out += "Connection: close\r\n";
	else if (version == 10)
		out += "Connection: keep-alive\r\n";
	out += "\r\n";
	if (!no_body && !head)
		out += body;
	return out;
}

}  // namespace airlock::proxy
