#include "gate/http1.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "net/url.h"
#include "util/text.h"

namespace airlock::gate {

namespace {

HttpProblem bad(std::string message, unsigned status = 400)
{
	return HttpProblem{status, std::move(message)};
}

std::string_view trim_ows(std::string_view s)
{
	while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
		s.remove_prefix(1);
	while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
		s.remove_suffix(1);
	return s;
}

// The comma-separated tokens of a header value, lower case.
std::vector<std::string> tokens(std::string_view v)
{
	std::vector<std::string> out;
	size_t start = 0;
	while (start <= v.size()) {
		size_t comma = v.find(',', start);
		if (comma == std::string_view::npos)
			comma = v.size();
		std::string_view t = trim_ows(v.substr(start, comma - start));
		if (!t.empty())
			out.push_back(ascii_lower(t));
		start = comma + 1;
	}
	return out;
}

struct Authority {
	std::string host;
	std::optional<uint16_t> port;
	bool operator==(const Authority&) const = default;
};

// host[:port] as a Host header or an absolute target writes it.
Result<Authority, HttpProblem> authority(std::string_view a, const char* what)
{
	Authority out;
	std::string_view host = a, port;
	bool has_port = false;
	if (!a.empty() && a.front() == '[') {
		size_t close = a.find(']');
		if (close == std::string_view::npos)
			return bad(fmt::format("{} '{}' is not a host", what, printable(a)));
		host = a.substr(1, close - 1);
		std::string_view rest = a.substr(close + 1);
		if (!rest.empty() && rest.front() != ':')
			return bad(fmt::format("{} '{}' is not a host", what, printable(a)));
		has_port = !rest.empty();
		if (has_port)
			port = rest.substr(1);
		bool v6 = !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
			return std::isxdigit(c) != 0 || c == ':' || c == '.';
		});
		if (!v6)
			return bad(fmt::format("{} '{}' is not a host", what, printable(a)));
	} else {
		size_t colon = a.find(':');
		if (colon != std::string_view::npos) {
			host = a.substr(0, colon);
			port = a.substr(colon + 1);
			has_port = true;
		}
		bool name = !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
			return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_';
		});
		if (!name)
			return bad(fmt::format("{} '{}' is not a host", what, printable(a)));
	}
	if (has_port) {
		bool digits = !port.empty() && port.size() <= 5 &&
			      std::all_of(port.begin(), port.end(),
					  [](unsigned char c) { return std::isdigit(c) != 0; });
		unsigned long n = digits ? std::stoul(std::string(port)) : 0;
		if (!digits || n < 1 || n > 65535)
			return bad(fmt::format("{} '{}' has no port 1-65535 after its ':'", what, printable(a)));
		out.port = static_cast<uint16_t>(n);
	}
	out.host = ascii_lower(host);
	if (!out.host.empty() && out.host.back() == '.')
		out.host.pop_back();
	// One trailing dot is the root's; an empty label anywhere else names
	// no host (and would not read back the same once that dot is gone).
	if (out.host.empty() || out.host.front() == '.' || host.find("..") != std::string_view::npos)
		return bad(fmt::format("{} '{}' is not a host", what, printable(a)));
	return out;
}

struct Target {
	std::string origin_form;
	std::optional<Authority> authority;  // of an absolute-form target
};

Result<Target, HttpProblem> request_target(std::string_view t)
{
	if (std::any_of(t.begin(), t.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7f; }))
		return bad("the target holds a control byte");
	if (!t.empty() && t.front() == '/')
		return Target{std::string(t), std::nullopt};
	if (t == "*")
		return bad("the asterisk form (OPTIONS *) is not judged");
	std::string scheme = ascii_lower(t.substr(0, t.find("://")));
	if (t.find("://") == std::string_view::npos || (scheme != "http" && scheme != "https"))
		return bad(fmt::format("the target '{}' is neither a path nor an http(s) URL", printable(t)));
	std::string_view rest = t.substr(scheme.size() + 3);
	size_t end = rest.find_first_of("/?");
	std::string_view auth = rest.substr(0, end);
	if (auth.find('@') != std::string_view::npos)
		return bad("the target's authority has user information");
	auto a = authority(auth, "the target's authority");
	if (!a)
		return a.rejection();
	std::string path(end == std::string_view::npos ? std::string_view("/") : rest.substr(end));
	if (path.front() == '?')
		path = "/" + path;
	return Target{std::move(path), std::move(*a)};
}

// One header line, without its CRLF.
Result<Header, HttpProblem> header_line(std::string_view line)
{
	if (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
		return bad("a header line is folded (obs-fold)");
	size_t colon = line.find(':');
	if (colon == std::string_view::npos)
		return bad(fmt::format("the header line '{}' has no ':'", printable(line.substr(0, 64))));
	std::string_view name = line.substr(0, colon);
	if (!name.empty() && (name.back() == ' ' || name.back() == '\t'))
		return bad(fmt::format("the header '{}' has white space before its ':'", printable(trim_ows(name))));
	if (!url::is_token(name))
		return bad(fmt::format("'{}' is not a header name", printable(name.substr(0, 64))));
	std::string_view value = trim_ows(line.substr(colon + 1));
	for (unsigned char c : value)
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return bad(fmt::format("the header '{}' holds a control byte", printable(name)));
	return Header{std::string(name), std::string(value)};
}

}  // namespace

std::optional<std::string_view> RequestHead::header(std::string_view name) const
{
	std::string want = ascii_lower(name);
	for (const Header& h : headers)
		if (ascii_lower(h.name) == want)
			return std::string_view(h.value);
	return std::nullopt;
}

Result<size_t, HttpProblem> head_end(std::string_view b)
{
	size_t start = 0;
	while (b.size() >= start + 2 && b[start] == '\r' && b[start + 1] == '\n')
		start += 2;
	for (size_t i = start; i < b.size(); i++) {
		if (b[i] == '\n' && (i == 0 || b[i - 1] != '\r'))
			return bad("a line ends with LF alone");
		if (b[i] == '\r' && i + 1 < b.size() && b[i + 1] != '\n')
			return bad("a CR is not followed by LF");
		if (b[i] == '\n' && i >= 3 && b.compare(i - 3, 4, "\r\n\r\n") == 0 && i - 3 >= start)
			return i + 1 > kMaxHeadBytes
				       ? Result<size_t, HttpProblem>(
						 bad(fmt::format("the head is longer than {} bytes", kMaxHeadBytes),
						     431))
				       : Result<size_t, HttpProblem>(i + 1);
	}
	if (b.size() > kMaxHeadBytes)
		return bad(fmt::format("the head is longer than {} bytes", kMaxHeadBytes), 431);
	return size_t{0};
}

namespace {

// What the headers say of the body, the connection and upgrades.
std::optional<HttpProblem> framing(RequestHead& r)
{
	size_t lengths = 0, encodings = 0, hosts = 0;
	for (const Header& h : r.headers) {
		std::string n = ascii_lower(h.name);
		if (n == "content-length") {
			lengths++;
			bool digits = !h.value.empty() && h.value.size() <= 18 &&
				      std::all_of(h.value.begin(), h.value.end(),
						  [](unsigned char c) { return std::isdigit(c) != 0; });
			if (!digits)
				return bad(fmt::format("Content-Length '{}' is not a number of bytes",
						       printable(h.value)));
			r.body = RequestHead::Body::Length;
			r.length = std::stoull(h.value);
		} else if (n == "transfer-encoding") {
			encodings++;
			if (ascii_lower(h.value) != "chunked")
				return bad(fmt::format("Transfer-Encoding '{}' is not chunked", printable(h.value)));
			r.body = RequestHead::Body::Chunked;
		} else if (n == "host") {
			hosts++;
		} else if (n == "http2-settings") {
			return bad("HTTP/2 over cleartext (h2c) is refused");
		} else if (n == "expect") {
			if (ascii_lower(h.value) != "100-continue")
				return bad(fmt::format("Expect '{}' is not 100-continue", printable(h.value)), 417);
			r.expect_continue = true;
		}
	}
	if (lengths > 1)
		return bad("Content-Length is given more than once");
	if (encodings > 1)
		return bad("Transfer-Encoding is given more than once");
	if (lengths && encodings)
		return bad("both Content-Length and Transfer-Encoding");
	if (encodings && r.http10)
		return bad("Transfer-Encoding in an HTTP/1.0 request");
	if (hosts != 1)
		return bad(hosts == 0 ? "no Host" : "Host is given more than once");
	bool keep_alive = false, upgrade = false;
	for (const Header& h : r.headers)
		if (std::string n = ascii_lower(h.name); n == "connection" || n == "upgrade") {
			// A list of tokens (an Upgrade's may name a version: "websocket/13").
			bool slash = n == "upgrade";
			bool list = std::all_of(h.value.begin(), h.value.end(), [&](unsigned char c) {
				return url::is_token_char(c) || c == ',' || c == ' ' || c == '\t' ||
				       (slash && c == '/');
			});
			std::vector<std::string> ts = tokens(h.value);
			bool spaced = std::any_of(ts.begin(), ts.end(), [](const std::string& t) {
				return t.find_first_of(" \t") != std::string::npos;
			});
			if (!list || spaced || ts.empty())
				return bad(fmt::format("{} '{}' is not a list of tokens", h.name, printable(h.value)));
		}
	for (const Header& h : r.headers)
		if (ascii_lower(h.name) == "connection")
			for (const std::string& t : tokens(h.value)) {
				r.close |= t == "close";
				keep_alive |= t == "keep-alive";
				upgrade |= t == "upgrade";
			}
	if (r.http10 && !keep_alive)
		r.close = true;
	if (auto u = r.header("upgrade")) {
		std::vector<std::string> protocols = tokens(*u);
		if (std::find(protocols.begin(), protocols.end(), "h2c") != protocols.end())
			return bad("HTTP/2 over cleartext (h2c) is refused");
		if (protocols != std::vector<std::string>{"websocket"} || !upgrade || r.method != "GET")
			return bad(fmt::format("Upgrade '{}' is not a WebSocket's (GET, Connection: upgrade)",
					       printable(*u)));
		r.websocket = true;
	}
	return std::nullopt;
}

}  // namespace

Result<RequestHead, HttpProblem> read_request_head(std::string_view head)
{
	while (head.size() >= 2 && head[0] == '\r' && head[1] == '\n')
		head.remove_prefix(2);
	size_t eol = head.find("\r\n");
	if (eol == std::string_view::npos)
		return bad("no request line");
	std::string_view line = head.substr(0, eol);
	RequestHead r;
	size_t sp1 = line.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
	if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
		return bad("the request line is not METHOD SP TARGET SP VERSION");
	std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
			 version = line.substr(sp2 + 1);
	if (!url::is_token(method))
		return bad(fmt::format("'{}' is not a method", printable(method.substr(0, 32))));
	if (method == "PRI" && version == "HTTP/2.0")
		return bad("HTTP/2 over cleartext (h2c) is refused");
	if (version != "HTTP/1.1" && version != "HTTP/1.0")
		return bad(fmt::format("version '{}' is not HTTP/1.1 or HTTP/1.0", printable(version.substr(0, 32))),
			   505);
	if (method == "CONNECT")
		return bad("CONNECT inside the gate would open a tunnel it cannot read");
	r.method = std::string(method);
	r.http10 = version == "HTTP/1.0";
	auto t = request_target(target);
	if (!t)
		return t.rejection();
	r.target = std::move(t->origin_form);

	std::string_view rest = head.substr(eol + 2);
	while (!rest.empty()) {
		size_t e = rest.find("\r\n");
		if (e == std::string_view::npos)
			return bad("the head does not end with an empty line");
		if (e == 0)
			break;
		if (r.headers.size() == kMaxHeaders)
			return bad(fmt::format("more than {} headers", kMaxHeaders), 431);
		auto h = header_line(rest.substr(0, e));
		if (!h)
			return h.rejection();
		r.headers.push_back(std::move(*h));
		rest.remove_prefix(e + 2);
	}
	if (auto problem = framing(r))
		return *problem;
	auto host = authority(*r.header("host"), "Host");
	if (!host)
		return host.rejection();
	if (t->authority && !(*t->authority == *host))
		return bad(fmt::format("the target names '{}', the Host '{}'", t->authority->host, host->host));
	r.host = host->host;
	r.port = host->port;
	return r;
}

Result<size_t, HttpProblem> ChunkedReader::feed(std::string_view in, std::string& out)
{
	size_t i = 0;
	while (i < in.size() && stage_ != Stage::Done) {
		auto c = static_cast<unsigned char>(in[i]);
		switch (stage_) {
		case Stage::Size:
			if (std::isxdigit(c)) {
				if (++digits_ > 16)
					return bad("a chunk size has more than 16 digits");
				left_ = left_ * 16 +
					static_cast<uint64_t>(std::isdigit(c) ? c - '0' : std::tolower(c) - 'a' + 10);
			} else if (c == '\r' && digits_ > 0) {
				stage_ = Stage::SizeLf;
			} else if (c == ';') {
				return bad("a chunk extension is refused");
			} else {
				return bad("a chunk size is not hex digits and CRLF");
			}
			i++;
			break;
		case Stage::SizeLf:
			if (c != '\n')
				return bad("a chunk size is not hex digits and CRLF");
			stage_ = left_ == 0 ? Stage::TrailerCr : Stage::Data;
			i++;
			break;
		case Stage::Data: {
			size_t n = static_cast<size_t>(std::min<uint64_t>(left_, in.size() - i));
			out.append(in.substr(i, n));
			left_ -= n;
			i += n;
			if (left_ == 0)
				stage_ = Stage::DataCr;
			break;
		}
		case Stage::DataCr:
		case Stage::TrailerCr:
			if (c != '\r')
				return bad(stage_ == Stage::DataCr ? "a chunk is longer than its size"
								   : "a trailer field is refused");
			stage_ = stage_ == Stage::DataCr ? Stage::DataLf : Stage::TrailerLf;
			i++;
			break;
		case Stage::DataLf:
		case Stage::TrailerLf:
			if (c != '\n')
				return bad("a chunk is not followed by CRLF");
			stage_ = stage_ == Stage::DataLf ? Stage::Size : Stage::Done;
			digits_ = 0;
			left_ = 0;
			i++;
			break;
		case Stage::Done:
			break;
		}
	}
	return i;
}

namespace {

const std::set<std::string> kNeverUpstream = {
	"host",
	"content-length",
	"transfer-encoding",
	"connection",
	"keep-alive",
	"proxy-connection",
	"proxy-authorization",
	"proxy-authenticate",
	"te",
	"trailer",
	"upgrade",
	"expect",
	"http2-settings",
};

bool body_method(std::string_view m)
{
	return m == "POST" || m == "PUT" || m == "PATCH";
}

}  // namespace

std::vector<std::string> replaced_headers(const RequestHead& r, const std::vector<Header>& added)
{
	std::vector<std::string> out;
	for (const Header& h : r.headers) {
		std::string n = ascii_lower(h.name);
		bool replaced = std::any_of(added.begin(), added.end(),
					    [&](const Header& a) { return ascii_lower(a.name) == n; });
		if (replaced && std::find(out.begin(), out.end(), n) == out.end())
			out.push_back(n);
	}
	return out;
}

std::string upstream_head(const RequestHead& r, std::string_view target, std::string_view host, uint16_t port, bool tls,
			  const std::vector<Header>& added, uint64_t body_bytes)
{
	std::set<std::string> dropped = kNeverUpstream;
	for (const Header& h : r.headers)
		if (ascii_lower(h.name) == "connection")
			for (const std::string& t : tokens(h.value))
				dropped.insert(t);
	for (const Header& a : added)
		dropped.insert(ascii_lower(a.name));
	std::string out = fmt::format("{} {} HTTP/1.1\r\n", r.method, target);
	bool v6 = host.find(':') != std::string_view::npos;
	out += fmt::format("Host: {}{}{}", v6 ? "[" : "", host, v6 ? "]" : "");
	if (port != (tls ? 443 : 80))
		out += fmt::format(":{}", port);
	out += "\r\n";
	for (const Header& h : r.headers) {
		std::string n = ascii_lower(h.name);
		if (dropped.count(n) != 0 || n.rfind("proxy-", 0) == 0)
			continue;
		out += fmt::format("{}: {}\r\n", h.name, h.value);
	}
	for (const Header& a : added)
		out += fmt::format("{}: {}\r\n", a.name, a.value);
	if (r.websocket)
		out += "Connection: Upgrade\r\nUpgrade: websocket\r\n";
	if (body_bytes > 0 || r.body != RequestHead::Body::None || body_method(r.method))
		out += fmt::format("Content-Length: {}\r\n", body_bytes);
	out += "\r\n";
	return out;
}

}  // namespace airlock::gate
