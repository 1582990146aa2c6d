// The HTTP gate end to end (docs/gate.md): real clients in a sandbox, a
// real TLS origin in the sink's namespace (tests/clients/gate_origin.py)
// that prints every request it receives, the policy's rule for
// allowed.test:9443 inspected. Each refusal is checked where it matters:
// the origin never saw the request.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dns_world.h"
#include "fixture.h"

namespace it {
namespace {

constexpr int kPort = 9443;
const std::string kUrl = "https://allowed.test:9443";
const std::string kHost = "allowed.test:9443";

std::string base64(const std::string& in)
{
	static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	std::string out;
	size_t i = 0;
	for (; i + 2 < in.size(); i += 3) {
		unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
			     static_cast<unsigned char>(in[i + 2]);
		for (int s = 18; s >= 0; s -= 6)
			out += t[(v >> s) & 63];
	}
	if (i < in.size()) {
		unsigned v = static_cast<unsigned char>(in[i]) << 16;
		if (i + 1 < in.size())
			v |= static_cast<unsigned char>(in[i + 1]) << 8;
		out += t[(v >> 18) & 63];
		out += t[(v >> 12) & 63];
		out += i + 1 < in.size() ? t[(v >> 6) & 63] : '=';
		out += '=';
	}
	return out;
}

// A request as a client would write it, Host and (for a body) its
// Content-Length added.
std::string request(const std::string& method, const std::string& target, const std::string& headers = "",
		    const std::string& body = "")
{
	std::string r = method + " " + target + " HTTP/1.1\r\nHost: " + kHost + "\r\n" + headers;
	if (!body.empty() || method == "POST")
		r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
	return r + "\r\n" + body;
}

struct Answer {
	json status;  // null: none came
	std::string body;
};

class Gate : public DnsTestBase {
protected:
	void SetUp() override
	{
		DnsTestBase::SetUp();
		if (HasFatalFailure())
			return;
		std::string dir = env().path("gate");
		cert_ = make_origin_cert(dir + "/tls");
		// The injected token: a file only root may read.
		token_ = "tok-" + env().marker("token");
		token_file_ = dir + "/secrets/token";
		std::filesystem::create_directories(dir + "/secrets");
		::chmod((dir + "/secrets").c_str(), 0700);
		write_file(token_file_, token_ + "\n");
		::chmod(token_file_.c_str(), 0600);
		// A workspace .env the sandbox can read.
		api_key_ = "sk-live-" + env().marker("key");
		env_file_ = dir + "/workspace/.env";
		std::filesystem::create_directories(dir + "/workspace");
		write_file(env_file_, "API_KEY=" + api_key_ + "\nSHORT=abc\n");
		::chmod(env_file_.c_str(), 0644);
		// Where a sandbox as nobody may write (git's clone).
		work_ = dir + "/work";
		std::filesystem::create_directories(work_);
		::chmod(work_.c_str(), 0777);
		git_root_ = dir + "/git";
		std::filesystem::create_directories(git_root_);
		origin_ = &env().start({"ip", "netns", "exec", env().topo->sink_ns, python(), "-u",
					client_script("gate_origin.py"), std::to_string(kPort), cert_.cert, cert_.key,
					git_root_},
				       "gate-origin");
		wait_until([&] { return origin_->out().find("serving") != std::string::npos || !origin_->running(); },
			   10s, 10ms);
		ASSERT_TRUE(origin_->running()) << origin_->describe();
	}

	std::string sandbox(const std::string& tag) { return "g" + env().id + "-" + tag; }
	std::string records(const std::string& name) { return "/var/log/airlock/world/" + name + ".jsonl"; }

	json policy(const std::string& name)
	{
		json p = standard_dns_policy(name);
		p["secrets"] = {{"token", {{"file", token_file_}}}, {"workspace", {{"env_file", env_file_}}}};
		auto entry = [](std::vector<std::string> methods, const std::string& path) {
			return json{{"methods", methods}, {"path", path}};
		};
		json http = json::array();
		http.push_back(entry({"GET", "HEAD"}, "/pub/*"));
		json wiki = entry({"GET"}, "/w/index.php");
		wiki["query"] = {{"action", {"view", "raw"}}};
		http.push_back(wiki);
		json limited = entry({"GET"}, "/limited");
		limited["rate"] = "3/m";
		http.push_back(limited);
		json mail = entry({"POST"}, "/api/mail/send");
		mail["json"] = {{"/to", "*@example.org"}};
		mail["max_body_bytes"] = 65536;
		http.push_back(mail);
		json refs = entry({"GET"}, "/git/*");
		refs["query"] = {{"service", {"git-upload-pack", "git-receive-pack"}}};
		http.push_back(refs);
		http.push_back(entry({"POST"}, "/git/repo.git/git-upload-pack"));
		http.push_back(entry({"GET"}, "/ws"));
		p["rules"].push_back({{"action", "allow"},
				      {"domain", "allowed.test"},
				      {"ports", json::array({kPort})},
				      {"protocol", "tcp"},
				      {"http", http},
				      {"inject", {{"Authorization", "Bearer ${secret:token}"}}},
				      {"tls", {{"upstream_ca", cert_.cert}}}});
		return p;
	}

	// Runs cmd (client commands in sequence) in a sandbox under policy().
	RunResult sandboxed(const std::string& name, const std::vector<std::vector<std::string>>& cmds,
			    const std::string& user = "")
	{
		std::string file = env().write_policy(name + ".json", policy(name));
		RunSpec s;
		s.policy = file;
		s.name = name;
		s.cmd = Sequence(cmds);
		s.user = user;
		RunResult rr = world().run(s, 90s);
		EXPECT_FALSE(rr.r.timed_out) << rr.describe();
		EXPECT_EQ(rr.r.status, 0) << rr.describe();
		return rr;
	}

	json result(const RunResult& rr, const std::string& tag)
	{
		json r = ResultFor(rr, tag);
		EXPECT_TRUE(r.is_object()) << "the client reported nothing for " << tag << "\n" << rr.describe();
		return r.is_object() ? r : json::object();
	}

	// Raw requests (tests/clients/http_raw.py), each case on a connection
	// of its own: the answers by case.
	std::map<std::string, std::vector<Answer>> raw(
		const std::string& name, const std::vector<std::pair<std::string, std::vector<std::string>>>& cases,
		const std::string& user = "")
	{
		json list = json::array();
		for (const auto& [n, reqs] : cases)
			list.push_back({{"name", n}, {"requests", reqs}});
		std::string file = env().write_text(name + "-cases.json", list.dump());
		std::string answers = work_ + "/" + name + "-answers.json";
		RunResult rr = sandboxed(name,
					 {world().exec("raw",
						       {python(), client_script("http_raw.py"), "allowed.test",
							std::to_string(kPort), file, answers},
						       120)},
					 user);
		std::map<std::string, std::vector<Answer>> out;
		json parsed = json::parse(read_file(answers), nullptr, false);
		EXPECT_TRUE(parsed.is_object()) << result(rr, "raw").dump();
		if (!parsed.is_object())
			return out;
		for (auto& [n, answers] : parsed.items())
			for (const auto& a : answers)
				out[n].push_back({a["status"], a.value("body", "")});
		return out;
	}

	// The requests the origin received: "METHOD TARGET" each.
	std::vector<std::string> received()
	{
		std::vector<std::string> r;
		for (const auto& j : origin_requests())
			r.push_back(j.value("method", "") + " " + j.value("target", ""));
		return r;
	}
	std::vector<json> origin_requests()
	{
		std::vector<json> r;
		std::istringstream in(origin_->out());
		for (std::string line; std::getline(in, line);)
			if (!line.empty() && line[0] == '{')
				r.push_back(json::parse(line, nullptr, false));
		return r;
	}

	// The gate's records of a sandbox: "METHOD PATH REASON STATUS".
	std::vector<json> gate_records(const std::string& name)
	{
		std::vector<json> r;
		for (const auto& j : read_json_lines(records(name)))
			if (j.value("kind", "") == "http-gate")
				r.push_back(j);
		return r;
	}

	void TearDown() override
	{
		for (const auto& n : made_)
			std::filesystem::remove(records(n));
		DnsTestBase::TearDown();
	}
	std::string made(const std::string& tag)
	{
		made_.push_back(sandbox(tag));
		return made_.back();
	}

	OriginCert cert_;
	std::string token_, token_file_, api_key_, env_file_, work_, git_root_;
	Proc* origin_ = nullptr;
	std::vector<std::string> made_;
};

std::string status_of(const std::vector<Answer>& a, size_t i = 0)
{
	if (i >= a.size() || a[i].status.is_null())
		return "none";
	return a[i].status.dump();
}

}  // namespace

// curl (HTTP/1.1, and --http2 offered), Python's requests and urllib and
// Node's fetch read a page the entries allow, with the token the gate
// injects; a POST there and a GET outside the entries are answered 403 by
// the gate. The origin receives exactly the allowed requests, each with
// the token in place of the Authorization the sandbox sent; the token is
// in no byte the sandbox read (its clients' output, its environment) and,
// as nobody, its file cannot be read.
class GateClients : public Gate {
public:
	void run(const std::string& user)
	{
		std::string name = made("clients-" + (user.empty() ? std::string("root") : user));
		std::string page = kUrl + "/pub/page";
		auto curl = [](std::vector<std::string> extra) {
			std::vector<std::string> a{"curl", "-sS", "--max-time",
						   "10",   "-w",  " %{http_code} %{http_version}"};
			a.insert(a.end(), extra.begin(), extra.end());
			return a;
		};
		auto node = [](const std::string& script, const std::string& url) {
			return std::vector<std::string>{"node", "-e", script, url};
		};
		RunResult rr = sandboxed(
			name,
			{world().exec("curl", curl({"-H", "Authorization: Bearer from-the-sandbox", page})),
			 world().exec("curl2", curl({"--http2", page + "?h2"})),
			 world().exec("requests", {python(), "-c",
						   "import requests, sys\n"
						   "r = requests.get(sys.argv[1], timeout=10)\n"
						   "print(r.status_code, r.text, end='')\n",
						   page + "?requests"}),
			 world().exec(
				 "urllib",
				 {python(), "-c",
				  "import urllib.request, sys\n"
				  "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode(), end='')\n",
				  page + "?urllib"}),
			 world().exec("fetch", node("fetch(process.argv[1]).then(async r => "
						    "process.stdout.write(r.status + ' ' + await r.text()))",
						    page + "?fetch")),
			 world().exec("post", curl({"-d", "x=1", page})),
			 world().exec("outside", curl({kUrl + "/admin"})),
			 world().exec("fetch-post",
				      node("fetch(process.argv[1], {method: 'POST', body: 'x'}).then("
					   "async r => process.stdout.write(r.status + ' ' + await r.text()))",
					   page)),
			 world().exec("env", {"env"}),
			 // uid 0 in the sandbox may read a file only root may read: the
			 // token is out of reach of the sandbox's other users (docs/gate.md).
			 user.empty() ? std::vector<std::string>{"true"} : world().exec("cat", {"cat", token_file_})},
			user);
		auto out = [&](const std::string& tag) { return result(rr, tag).value("out", ""); };
		EXPECT_EQ(out("curl"), "origin:/pub/page 200 1.1");
		EXPECT_EQ(out("curl2"), "origin:/pub/page?h2 200 1.1") << "h2 is not offered: the client falls back";
		EXPECT_EQ(out("requests"), "200 origin:/pub/page?requests");
		EXPECT_EQ(out("urllib"), "origin:/pub/page?urllib");
		EXPECT_EQ(out("post").substr(out("post").size() < 8 ? 0 : out("post").size() - 8), " 403 1.1")
			<< out("post");
		EXPECT_NE(out("post").find("\"reason\":\"http-deny\""), std::string::npos) << out("post");
		EXPECT_EQ(out("outside").substr(out("outside").size() < 8 ? 0 : out("outside").size() - 8), " 403 1.1")
			<< out("outside");
		EXPECT_EQ(out("fetch"), "200 origin:/pub/page?fetch");
		EXPECT_EQ(out("fetch-post").substr(0, 4), "403 ") << out("fetch-post");

		std::vector<std::string> got = received();
		EXPECT_EQ(got, (std::vector<std::string>{"GET /pub/page", "GET /pub/page?h2", "GET /pub/page?requests",
							 "GET /pub/page?urllib", "GET /pub/page?fetch"}))
			<< origin_->out();
		for (const auto& j : origin_requests()) {
			std::vector<std::string> auth;
			for (const auto& h : j["headers"])
				if (h[0].get<std::string>() == "Authorization")
					auth.push_back(h[1]);
			EXPECT_EQ(auth, std::vector<std::string>{"Bearer " + token_}) << j.dump();
		}
		EXPECT_EQ(rr.r.out.find(token_), std::string::npos) << "the sandbox read the injected token";
		EXPECT_EQ(rr.r.err.find(token_), std::string::npos) << "the sandbox read the injected token";
		if (!user.empty()) {
			EXPECT_NE(result(rr, "cat").value("status", 0), 0) << "nobody read the token's file";
		}
		std::vector<std::string> replaced;
		for (const auto& j : gate_records(name))
			if (j.contains("replaced"))
				replaced.push_back(j["replaced"].dump());
		EXPECT_EQ(replaced, std::vector<std::string>{"[\"authorization\"]"}) << read_file(records(name));
	}
};

TEST_F(GateClients, RealClientsGetWhatTheEntriesAllowWithTheTokenInjected)
{
	run("");
}

TEST_F(GateClients, RealClientsGetWhatTheEntriesAllowWithTheTokenInjectedAsNobody)
{
	run("nobody");
}

// Targets that a server could read as another path than the gate would
// (traversal, encoded separators, double encoding, case): each refused
// before the entries are looked at, and the origin never sees it. A
// target whose %XX are of unreserved bytes is decoded once and goes
// upstream in that form.
TEST_F(Gate, TraversalAndEncodingBypassesAreRefusedBeforeTheEntries)
{
	// target -> "STATUS REASON" of the gate's answer.
	std::vector<std::pair<std::string, std::string>> bypass = {
		{"/pub/%2e%2e/admin", "403 http-path"},
		{"/pub/%2E%2E/admin", "403 http-path"},
		{"/pub/.%2e/admin", "403 http-path"},
		{"/pub/%2e./admin", "403 http-path"},
		{"/pub/../admin", "403 http-path"},
		{"/pub/./admin", "403 http-path"},
		{"/pub/%2e/admin", "403 http-path"},
		{"/pub/..;a=b/admin", "403 http-path"},
		{"/pub/.;/admin", "403 http-path"},
		{"/pub;/../admin", "403 http-path"},
		{"/pub/..", "403 http-path"},
		{"/pub/..%2fadmin", "403 http-path"},
		{"/pub/..%2Fadmin", "403 http-path"},
		{"/pub/%2e%2e%2fadmin", "403 http-path"},
		{"/pub%2fadmin", "403 http-path"},
		{"/pub%2Fx", "403 http-path"},
		{"/pub%5cx", "403 http-path"},
		{"/pub/..%5cadmin", "403 http-path"},
		{"/pub/x%00.html", "403 http-path"},
		{"/pub\\..\\admin", "403 http-path"},
		{"/pub//admin", "403 http-path"},
		{"//pub/x", "403 http-path"},
		{"/./pub/x", "403 http-path"},
		{"/pub/%252e%252e/admin", "403 http-path"},
		{"/pub/%252f", "403 http-path"},
		{"/pub/%255c", "403 http-path"},
		{"/pub/%2500", "403 http-path"},
		{"/pub/%25252f", "403 http-path"},
		{"/pub/%25%32%66admin", "403 http-path"},
		{"/PUB/x", "403 http-deny"},
		{"/Pub/x", "403 http-deny"},
		{"/pubx", "403 http-deny"},
		{"/pub", "403 http-deny"},
		{"/pub/%", "400 http-malformed"},
		{"/pub/%zz", "400 http-malformed"},
		{"/pub/%u002e%u002e/admin", "400 http-malformed"},
		{"/pub/x#/../admin", "400 http-malformed"},
		{"http://allowed.test:9443/pub/../admin", "403 http-path"},
	};
	std::vector<std::pair<std::string, std::vector<std::string>>> cases;
	cases.push_back({"control", {request("GET", "/%70ub/%7Euser")}});
	for (const auto& [target, _] : bypass)
		cases.push_back({target, {request("GET", target)}});
	auto got = raw(made("bypass"), cases);
	EXPECT_EQ(status_of(got["control"]), "200");
	for (const auto& [target, want] : bypass) {
		const auto& a = got[target];
		json body = a.empty() ? json() : json::parse(a[0].body, nullptr, false);
		std::string reason = body.is_object() ? body.value("reason", "") : "";
		EXPECT_EQ(status_of(a) + " " + reason, want) << target << ": " << (a.empty() ? "" : a[0].body);
	}
	EXPECT_EQ(received(), std::vector<std::string>{"GET /pub/~user"}) << origin_->out();
}

// Requests that two HTTP parsers could read two ways (request smuggling)
// or that are not HTTP/1.1 as the gate reads it: each answered 400 by the
// gate, its connection closed, nothing of it upstream. Most carry a second
// request where a lax reader would find one. (An HTTP version other than
// 1.1 and 1.0 is 505.)
TEST_F(Gate, SmugglingAndMalformedRequestsAre400AndNothingGoesUpstream)
{
	const std::string smuggled = "GET /pub/smuggled HTTP/1.1\r\nHost: " + kHost + "\r\n\r\n";
	const std::string chunk_end = "0\r\n\r\n";
	auto head = [&](const std::string& lines) { return "POST /pub/x HTTP/1.1\r\nHost: " + kHost + "\r\n" + lines; };
	auto get = [&](const std::string& lines) { return "GET /pub/x HTTP/1.1\r\nHost: " + kHost + "\r\n" + lines; };
	std::vector<std::pair<std::string, std::string>> bad = {
		{"cl-and-te", head("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk_end + smuggled)},
		{"te-and-cl", head("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunk_end + smuggled)},
		{"te-gzip", head("Transfer-Encoding: gzip\r\n\r\n" + smuggled)},
		{"te-gzip-chunked", head("Transfer-Encoding: gzip, chunked\r\n\r\n" + chunk_end + smuggled)},
		{"te-chunked-identity", head("Transfer-Encoding: chunked, identity\r\n\r\n" + chunk_end + smuggled)},
		{"te-identity", head("Transfer-Encoding: identity\r\n\r\n" + smuggled)},
		{"te-xchunked", head("Transfer-Encoding: xchunked\r\n\r\n" + chunk_end + smuggled)},
		{"te-twice",
		 head("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk_end + smuggled)},
		{"te-vertical-tab", head("Transfer-Encoding:\x0b"
					 "chunked\r\n\r\n" +
					 chunk_end + smuggled)},
		{"te-space-before-colon", head("Transfer-Encoding : chunked\r\n\r\n" + chunk_end + smuggled)},
		{"cl-twice-same", head("Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc")},
		{"cl-twice-differ", head("Content-Length: 3\r\nContent-Length: 0\r\n\r\nabc" + smuggled)},
		{"cl-list", head("Content-Length: 3, 3\r\n\r\nabc")},
		{"cl-plus", head("Content-Length: +3\r\n\r\nabc")},
		{"cl-negative", head("Content-Length: -1\r\n\r\n" + smuggled)},
		{"cl-hex", head("Content-Length: 0x3\r\n\r\nabc")},
		{"cl-inner-space", head("Content-Length: 1 3\r\n\r\nabc")},
		{"cl-huge", head("Content-Length: 99999999999999999999999\r\n\r\nabc")},
		{"obs-fold", get("X-A: a\r\n b\r\n\r\n")},
		{"obs-fold-tab", get("X-A: a\r\n\tTransfer-Encoding: chunked\r\n\r\n")},
		{"bare-lf-header", get("X-A: a\nX-B: b\r\n\r\n")},
		{"bare-cr-value", get("X-A: a\rX-B: b\r\n\r\n")},
		{"bare-lf-request-line", "GET /pub/x HTTP/1.1\nHost: " + kHost + "\r\n\r\n"},
		{"nul-in-value", get(std::string("X-A: a\0b\r\n\r\n", 12))},
		{"name-with-space", get("X A: b\r\n\r\n")},
		{"line-without-colon", get("X-A b\r\n\r\n")},
		{"chunk-negative", head("Transfer-Encoding: chunked\r\n\r\n-1\r\n\r\n" + smuggled)},
		{"chunk-0x", head("Transfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n" + chunk_end)},
		{"chunk-extension", head("Transfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n" + chunk_end)},
		{"chunk-17-digits", head("Transfer-Encoding: chunked\r\n\r\n00000000000000003\r\nabc\r\n" + chunk_end)},
		{"chunk-space", head("Transfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n" + chunk_end)},
		{"chunk-overrun", head("Transfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n" + chunk_end + smuggled)},
		{"chunk-trailer", head("Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n")},
		{"chunk-bare-lf", head("Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n" + chunk_end)},
		{"absolute-other-host", "GET https://evil.test/pub/x HTTP/1.1\r\nHost: " + kHost + "\r\n\r\n"},
		{"host-other", "GET /pub/x HTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"host-none", "GET /pub/x HTTP/1.1\r\n\r\n"},
		{"host-twice", get("Host: evil.test\r\n\r\n")},
		{"connect", "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n"},
		{"h2-preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
		{"h2c-upgrade",
		 get("Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")},
		{"version-1.2", "GET /pub/x HTTP/1.2\r\nHost: " + kHost + "\r\n\r\n"},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: " + kHost + "\r\n\r\n"},
		{"double-space", "GET  /pub/x HTTP/1.1\r\nHost: " + kHost + "\r\n\r\n"},
	};
	std::vector<std::pair<std::string, std::vector<std::string>>> cases;
	cases.push_back({"control", {request("GET", "/pub/control")}});
	for (const auto& [n, r] : bad)
		cases.push_back({n, {r, request("GET", "/pub/after-" + n)}});
	auto got = raw(made("smuggle"), cases);
	EXPECT_EQ(status_of(got["control"]), "200");
	for (const auto& [n, _] : bad) {
		EXPECT_EQ(status_of(got[n]), n == "version-1.2" ? "505" : "400")
			<< n << ": " << (got[n].empty() ? "" : got[n][0].body);
		EXPECT_EQ(status_of(got[n], 1), "none") << n << ": the connection went on after a 400";
	}
	EXPECT_EQ(received(), std::vector<std::string>{"GET /pub/control"}) << origin_->out();
}

// On one kept-alive connection each request is judged on its own: allowed,
// refused, allowed again; after a 400 the connection ends.
TEST_F(Gate, EachRequestOfAKeptAliveConnectionIsJudgedOnItsOwn)
{
	auto got = raw(made("keepalive"),
		       {{"one",
			 {request("GET", "/pub/a"), request("GET", "/admin"), request("GET", "/pub/b"),
			  request("POST", "/pub/c", "", "x=1"), request("HEAD", "/pub/d")}},
			{"broken",
			 {request("GET", "/pub/e"), "GET /pub/f HTTP/1.1\r\n\r\n", request("GET", "/pub/g")}}});
	std::vector<std::string> one, broken;
	for (size_t i = 0; i < 5; i++)
		one.push_back(status_of(got["one"], i));
	for (size_t i = 0; i < 3; i++)
		broken.push_back(status_of(got["broken"], i));
	EXPECT_EQ(one, (std::vector<std::string>{"200", "403", "200", "403", "200"}));
	EXPECT_EQ(broken, (std::vector<std::string>{"200", "400", "none"}));
	EXPECT_EQ(received(), (std::vector<std::string>{"GET /pub/a", "GET /pub/b", "HEAD /pub/d", "GET /pub/e"}))
		<< origin_->out();
}

// A secret the sandbox can read (its workspace's .env) is refused wherever
// it is put: the query (plain and percent-encoded), a header, the path,
// the Host, a body, and the body as base64 at each of its three
// alignments; refused too where an entry would allow the request. The records and the audit log name the
// secret, never its value.
TEST_F(Gate, ASecretTheSandboxCanReadIsRefusedInEveryPlaceAndEncoding)
{
	std::string pct;
	for (unsigned char c : api_key_)
		pct += fmt::format("%{:02X}", c);
	std::string mail = R"({"to": "bob@example.org", "text": ")";
	std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
		{"control", {request("GET", "/pub/control")}},
		{"query", {request("GET", "/pub/x?q=" + api_key_)}},
		{"query-encoded", {request("GET", "/pub/x?q=" + pct)}},
		{"header", {request("GET", "/pub/x", "X-Key: " + api_key_ + "\r\n")}},
		{"path", {request("GET", "/pub/" + api_key_)}},
		{"host", {"GET /pub/x HTTP/1.1\r\nHost: " + api_key_ + ".allowed.test\r\n\r\n"}},
		{"malformed-host", {"GET /pub/x HTTP/1.1\r\nHost: " + api_key_ + "/x\r\n\r\n"}},
		{"body",
		 {request("POST", "/api/mail/send", "Content-Type: application/json\r\n", mail + api_key_ + "\"}")}},
	};
	for (std::string pad : {"", "a", "ab"})
		cases.push_back({"base64-" + std::to_string(pad.size()),
				 {request("POST", "/api/mail/send", "Content-Type: application/json\r\n",
					  mail + base64(pad + api_key_) + "\"}")}});
	std::string name = made("secret");
	auto got = raw(name, cases);
	EXPECT_EQ(status_of(got["control"]), "200");
	for (size_t i = 1; i < cases.size(); i++) {
		if (cases[i].first == "malformed-host")
			continue;
		const auto& a = got[cases[i].first];
		json body = a.empty() ? json() : json::parse(a[0].body, nullptr, false);
		EXPECT_EQ(status_of(a) + " " + (body.is_object() ? body.value("reason", "") : ""), "403 secret")
			<< cases[i].first;
		EXPECT_EQ(a.empty()                                       ? std::string()
			  : a[0].body.find(api_key_) == std::string::npos ? ""
									  : "value",
			  "")
			<< cases[i].first;
	}
	EXPECT_EQ(received(), std::vector<std::string>{"GET /pub/control"}) << origin_->out();
	size_t named = 0;
	for (const auto& j : gate_records(name))
		if (j.value("secret", "") == "workspace/API_KEY")
			named++;
	EXPECT_EQ(named, cases.size() - 2) << read_file(records(name));
	// Not even lower-cased (a Host is): the records and the audit log.
	EXPECT_EQ(lower(read_file(records(name))).find(lower(api_key_)), std::string::npos);
	EXPECT_EQ(lower(read_file(env().audit_path())).find(lower(api_key_)), std::string::npos);
	// A request the gate cannot read whose refusal would quote the secret.
	EXPECT_EQ(status_of(got["malformed-host"]), "400");
	EXPECT_EQ(read_file(records(name)).find(base64(api_key_).substr(0, 16)), std::string::npos);
}

// The mail entry: a JSON body whose every recipient is in example.org
// passes (its body intact upstream); one outside it, an array with one
// outside it, a body that is not JSON and one over the entry's
// max_body_bytes do not (no entry allows them: 403, the denial naming the
// entry's limit).
TEST_F(Gate, AJsonBodyRuleLetsOnlyItsOwnDomainsRecipientsThrough)
{
	const std::string js = "Content-Type: application/json\r\n";
	std::string big = R"({"to": "bob@example.org", "text": ")" + std::string(70000, 'x') + "\"}";
	auto got = raw(
		made("json"),
		{{"own", {request("POST", "/api/mail/send", js, R"({"to": "bob@example.org"})")}},
		 {"other", {request("POST", "/api/mail/send", js, R"({"to": "eve@evil.test"})")}},
		 {"array", {request("POST", "/api/mail/send", js, R"({"to": ["bob@example.org", "eve@evil.test"]})")}},
		 {"text",
		  {request("POST", "/api/mail/send", "Content-Type: text/plain\r\n", R"({"to": "bob@example.org"})")}},
		 {"big", {request("POST", "/api/mail/send", js, big)}}});
	std::vector<std::string> statuses;
	for (const char* n : {"own", "other", "array", "text", "big"})
		statuses.push_back(std::string(n) + " " + status_of(got[n]));
	EXPECT_EQ(statuses, (std::vector<std::string>{"own 200", "other 403", "array 403", "text 403", "big 403"}));
	EXPECT_NE(got["big"].empty() ? std::string::npos : got["big"][0].body.find("more than the entry's 65536"),
		  std::string::npos);
	auto reqs = origin_requests();
	ASSERT_EQ(reqs.size(), 1u) << origin_->out();
	EXPECT_EQ(reqs[0].value("target", ""), "/api/mail/send");
	EXPECT_EQ(reqs[0].value("body", ""), R"({"to": "bob@example.org"})");
}

// `airlock status --json` counts the gate's verdicts while the sandbox
// runs: requests sent to the origin, requests the gate answered, and of
// those the ones that carried a secret.
TEST_F(Gate, StatusCountsTheGatesVerdicts)
{
	std::string name = made("counts");
	json list = json::array();
	list.push_back({{"name", "one"},
			{"requests",
			 {request("GET", "/pub/a"), request("GET", "/admin"), request("GET", "/pub/b"),
			  request("GET", "/pub/x?k=" + api_key_)}}});
	std::string cases = env().write_text(name + "-cases.json", list.dump());
	std::string answers = work_ + "/" + name + "-answers.json", release = work_ + "/" + name + "-release";
	RunSpec spec;
	spec.policy = env().write_policy(name + ".json", policy(name));
	spec.name = name;
	spec.cmd = Sequence(
		{{python(), client_script("http_raw.py"), "allowed.test", std::to_string(kPort), cases, answers},
		 {python(), "-u", client_script("wait_file.py"), release, "60"}});
	Proc& runner = world().start_run(spec);
	json counts;
	EXPECT_TRUE(wait_until(
		[&] {
			auto st = env().status_of(name);
			counts = st ? (*st)["proxy"] : json();
			return counts.is_object() && counts.value("http_denied", 0) == 2;
		},
		30s))
		<< counts.dump() << runner.describe();
	EXPECT_EQ(counts.value("http_passed", 0), 2) << counts.dump();
	EXPECT_EQ(counts.value("secrets_refused", 0), 1) << counts.dump();
	write_file(release, "");
	EXPECT_EQ(runner.wait(30s), std::optional<int>(0)) << runner.describe();
	EXPECT_EQ(received(), (std::vector<std::string>{"GET /pub/a", "GET /pub/b"}));
}

// `airlock reload` between two requests of one kept-alive connection: the
// proxy takes the new entries on its channel (no restart: the connection
// stays), and the next request is judged under them. /pub/* gives way to
// /talk/*: the second request, allowed before, is refused; the third,
// refused before, passes; the origin sees the first and the third.
TEST_F(Gate, AReloadAppliesToTheNextRequestOfAConnection)
{
	std::string name = made("reload");
	std::string ready = work_ + "/" + name + "-ready", go = work_ + "/" + name + "-go";
	json list = json::array();
	list.push_back({{"name", "one"},
			{"requests",
			 {request("GET", "/pub/a"), json{{"signal", ready}}, json{{"wait", go}},
			  request("GET", "/pub/b"), request("GET", "/talk/c")}}});
	std::string cases = env().write_text(name + "-cases.json", list.dump());
	std::string answers = work_ + "/" + name + "-answers.json";
	RunSpec spec;
	spec.policy = env().write_policy(name + ".json", policy(name));
	spec.name = name;
	spec.cmd = {python(), client_script("http_raw.py"), "allowed.test", std::to_string(kPort), cases, answers};
	Proc& runner = world().start_run(spec);
	ASSERT_TRUE(wait_until([&] { return exists(ready) || !runner.running(); }, 30s)) << runner.describe();

	json next = policy(name);
	next["rules"].back()["http"] = json::array({{{"methods", {"GET"}}, {"path", "/talk/*"}}});
	Result r = env().airlock({"reload", name, env().write_policy(name + "-next.json", next)}, 20s);
	EXPECT_EQ(r.status, 0) << r.describe();
	json counts;
	EXPECT_TRUE(wait_until(
		[&] {
			auto st = env().status_of(name);
			counts = st ? (*st)["proxy"] : json();
			return counts.is_object() && counts.value("gate_reloads", 0) == 1;
		},
		20s))
		<< counts.dump();
	EXPECT_EQ(counts.value("proxy_starts", 0), 1) << "the proxy was started again: " << counts.dump();
	write_file(go, "");
	EXPECT_EQ(runner.wait(30s), std::optional<int>(0)) << runner.describe();
	json got = json::parse(read_file(answers), nullptr, false);
	std::vector<std::string> statuses;
	for (const auto& a : got.value("one", json::array()))
		statuses.push_back(a["status"].is_null() ? "none" : a["status"].dump());
	EXPECT_EQ(statuses, (std::vector<std::string>{"200", "403", "200"})) << got.dump();
	EXPECT_EQ(received(), (std::vector<std::string>{"GET /pub/a", "GET /talk/c"}));
}

// A WebSocket is judged at its upgrade: /ws is allowed, the origin's 101
// (its Sec-WebSocket-Accept intact) reaches the client, and the bytes
// after it pass both ways untouched (the origin echoes them); an upgrade
// to a path no entry allows is answered 403 and never reaches the origin.
TEST_F(Gate, AWebSocketIsJudgedAtItsUpgradeAndItsFramesPass)
{
	std::string client = env().write_text(
		"ws_client.py",
		"import json, socket, ssl, sys\n"
		"out = {}\n"
		"for path in ('/ws', '/ws-other'):\n"
		"    s = ssl.create_default_context().wrap_socket(socket.create_connection(('allowed.test', 9443), "
		"timeout=5), server_hostname='allowed.test')\n"
		"    s.sendall(('GET %s HTTP/1.1\\r\\nHost: allowed.test:9443\\r\\nConnection: Upgrade\\r\\n'\n"
		"               'Upgrade: websocket\\r\\nSec-WebSocket-Version: 13\\r\\n'\n"
		"               'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\n\\r\\n' % path).encode())\n"
		"    head = b''\n"
		"    while b'\\r\\n\\r\\n' not in head:\n"
		"        b = s.recv(1)\n"
		"        if not b: break\n"
		"        head += b\n"
		"    r = {'status': head.split(b' ')[1].decode() if head else None,\n"
		"         'accept': 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=' in head.decode('latin-1')}\n"
		"    if r['status'] == '101':\n"
		"        frame = bytes([0x81, 0x85, 1, 2, 3, 4]) + bytes(c ^ k for c, k in zip(b'hello', b'\\x01\\x02\\x03\\x04\\x01'))\n"
		"        got = b''\n"
		"        for i in range(3):\n"
		"            s.sendall(frame)\n"
		"            while len(got) < len(frame) * (i + 1):\n"
		"                b = s.recv(4096)\n"
		"                if not b: break\n"
		"                got += b\n"
		"        r['echoed'] = got == frame * 3\n"
		"    out[path] = r\n"
		"    s.close()\n"
		"print(json.dumps(out))\n");
	std::string name = made("ws");
	RunResult rr = sandboxed(name, {world().exec("ws", {python(), client}, 30)});
	json r = json::parse(result(rr, "ws").value("out", ""), nullptr, false);
	ASSERT_TRUE(r.is_object()) << result(rr, "ws").dump();
	EXPECT_EQ(r["/ws"].value("status", json()).dump(), "\"101\"") << r.dump();
	EXPECT_TRUE(r["/ws"].value("accept", false)) << r.dump();
	EXPECT_TRUE(r["/ws"].value("echoed", false)) << r.dump();
	EXPECT_EQ(r["/ws-other"].value("status", json()).dump(), "\"403\"") << r.dump();
	EXPECT_EQ(received(), std::vector<std::string>{"GET /ws"}) << origin_->out();
	auto reqs = origin_requests();
	ASSERT_EQ(reqs.size(), 1u);
	std::map<std::string, std::string> h;
	for (const auto& kv : reqs[0]["headers"])
		h[lower(kv[0].get<std::string>())] = kv[1];
	EXPECT_EQ(h["upgrade"], "websocket");
	EXPECT_EQ(h["connection"], "Upgrade");
	EXPECT_EQ(h["sec-websocket-key"], "dGhlIHNhbXBsZSBub25jZQ==");
	EXPECT_EQ(h["authorization"], "Bearer " + token_);
}

// rate "3/m": three requests pass, the fourth is answered 429 by the gate.
TEST_F(Gate, AnEntrysRateIsAnswered429PastIt)
{
	std::string r = request("GET", "/limited");
	auto got = raw(made("rate"), {{"one", {r, r}}, {"two", {r, r}}});
	EXPECT_EQ(status_of(got["one"], 0) + status_of(got["one"], 1) + status_of(got["two"], 0) +
			  status_of(got["two"], 1),
		  "200200200429");
	EXPECT_EQ(received(), (std::vector<std::string>{"GET /limited", "GET /limited", "GET /limited"}));
}

// git over smart HTTP, git http-backend the origin: clone and fetch pass
// (GET info/refs, POST git-upload-pack); push is refused at its POST to
// git-receive-pack, and the origin's repository is as it was.
TEST_F(Gate, GitCloneAndFetchPassAndPushIsRefused)
{
	std::string bare = git_root_ + "/repo.git";
	auto git = [&](std::vector<std::string> args) {
		std::vector<std::string> a{"git", "-c", "user.name=t", "-c", "user.email=t@example.org"};
		a.insert(a.end(), args.begin(), args.end());
		auto r = run(a, 30s);
		EXPECT_EQ(r.status, 0) << r.err;
		return r.out;
	};
	std::string seed = env().path("gate/seed");
	git({"init", "-q", "-b", "main", seed});
	write_file(seed + "/README", "hello\n");
	git({"-C", seed, "add", "README"});
	git({"-C", seed, "commit", "-q", "-m", "first"});
	git({"clone", "-q", "--bare", seed, bare});
	git({"--git-dir", bare, "config", "http.receivepack", "true"});
	std::string before = git({"--git-dir", bare, "rev-parse", "main"});

	std::string clone = work_ + "/clone";
	std::string script = "set -e; export HOME=" + work_ + "; git clone -q " + kUrl + "/git/repo.git " + clone +
			     "; cd " + clone +
			     "; git fetch -q origin; cat README; echo more > more; git add more; "
			     "git -c user.name=a -c user.email=a@example.org commit -q -m second; "
			     "if git push -q origin HEAD:main 2>/dev/null; then echo pushed; else echo refused; fi";
	std::string name = made("git");
	RunResult rr = sandboxed(name, {world().exec("git", {"/bin/sh", "-c", script}, 60)});
	json r = result(rr, "git");
	EXPECT_EQ(r.value("status", -1), 0) << r.dump();
	EXPECT_EQ(r.value("out", ""), "hello\nrefused\n") << r.dump();
	EXPECT_EQ(git({"--git-dir", bare, "rev-parse", "main"}), before) << "the push reached the origin";
	for (const auto& got : received())
		EXPECT_FALSE(got.rfind("POST ", 0) == 0 && got.find("receive-pack") != std::string::npos) << got;
	size_t refused = 0;
	for (const auto& j : gate_records(name))
		if (j.value("method", "") == "POST" && j.value("path", "") == "/git/repo.git/git-receive-pack" &&
		    j.value("reason", "") == "http-deny")
			refused++;
	EXPECT_EQ(refused, 1u) << read_file(records(name));
}

}  // namespace it
