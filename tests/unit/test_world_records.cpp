// The world's records without a network: a record line's fields and their
// order, hostile strings in them, the records file's cap (counted from
// what the file already holds, the records-full line written once, only if
// it fits), `airlock world show`'s table and its report of lines that are
// not records, and which canned response answers a request.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "proxy/canned.h"
#include "proxy/records.h"
#include "proxy/world.h"
#include "proxy/world_stats.h"

namespace airlock::proxy {
namespace {

using ojson = nlohmann::ordered_json;

std::vector<std::string> keys(const ojson& j)
{
	std::vector<std::string> k;
	for (auto it = j.begin(); it != j.end(); ++it)
		k.push_back(it.key());
	return k;
}

Origin origin_v4()
{
	Origin o;
	o.addr = *parse_address("203.0.113.10");
	o.port = 80;
	o.rule = 3;
	return o;
}

std::chrono::system_clock::time_point at_ms(int64_t ms)
{
	return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

TEST(WorldRecords, TimeIsRfc3339UtcWithMilliseconds)
{
	EXPECT_EQ(rfc3339_ms(at_ms(0)), "1970-01-01T00:00:00.000Z");
	EXPECT_EQ(rfc3339_ms(at_ms(1772368496789)), "2026-03-01T12:34:56.789Z");
	EXPECT_EQ(rfc3339_ms(at_ms(1772368496789) + std::chrono::microseconds(999)), "2026-03-01T12:34:56.789Z");
}

TEST(WorldRecords, HttpLineHasItsFieldsInOrder)
{
	HttpRecord r;
	r.time = at_ms(1772368496789);
	r.method = "POST";
	r.host = "api.example.com";
	r.path = "/v1/chat?stream=1";
	r.headers = {{"Host", "api.example.com"}, {"X-Dup", "a, b"}};
	r.body = "{\"q\":1}";
	r.body_bytes = 7;
	r.status = 201;
	r.duration_ms = 12;
	Origin o = origin_v4();
	o.name = "api.example.com";
	std::string line = http_record_line("agent-1", o, r);
	ASSERT_EQ(line.back(), '\n');
	EXPECT_EQ(
		line,
		R"({"time":"2026-03-01T12:34:56.789Z","sandbox":"agent-1","kind":"http","dst":"203.0.113.10","port":80,)"
		R"("protocol":"tcp","name":"api.example.com","rule":3,"method":"POST","host":"api.example.com",)"
		R"("path":"/v1/chat?stream=1","headers":{"Host":"api.example.com","X-Dup":"a, b"},"body":"{\"q\":1}",)"
		R"("body_bytes":7,"body_truncated":false,"status":201,"duration_ms":12})"
		"\n");
	// No name known, no Host, no body, no answer: those fields are absent.
	HttpRecord bare;
	bare.time = at_ms(0);
	bare.method = "GET";
	bare.path = "/";
	auto j = ojson::parse(http_record_line("s", origin_v4(), bare));
	EXPECT_EQ(keys(j),
		  (std::vector<std::string>{"time", "sandbox", "kind", "dst", "port", "protocol", "rule", "method",
					    "path", "headers", "body_bytes", "body_truncated", "duration_ms"}));
}

TEST(WorldRecords, HostileBytesNeverBreakALine)
{
	HttpRecord r;
	r.method = "G\xff";
	r.path = "/\xc3\x28\n";
	r.headers = {{"X-\xfe", "\xed\xa0\x80"}};  // a surrogate: not UTF-8
	r.body = std::string("\xff\xfe\x00\x01", 4);
	r.body_bytes = 4;
	std::string line = http_record_line("s", origin_v4(), r);
	EXPECT_EQ(line.find('\n'), line.size() - 1);
	auto j = nlohmann::json::parse(line);
	EXPECT_EQ(j["method"], "G\xef\xbf\xbd");
	EXPECT_EQ(j["path"], "/\xef\xbf\xbd(\n");
	EXPECT_EQ(j["body_base64"], "//4AAQ==");
	EXPECT_FALSE(j.contains("body"));
	ASSERT_EQ(j["headers"].size(), 1u);
}

TEST(WorldRecords, Utf8AndBase64)
{
	EXPECT_TRUE(valid_utf8("plain, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80"));
	EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong '/'
	EXPECT_FALSE(valid_utf8("\xe0\x80\xaf"));      // overlong
	EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate
	EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
	EXPECT_FALSE(valid_utf8("caf\xc3"));           // cut
	EXPECT_EQ(base64(""), "");
	EXPECT_EQ(base64("f"), "Zg==");
	EXPECT_EQ(base64("fo"), "Zm8=");
	EXPECT_EQ(base64("foo"), "Zm9v");
	EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
	EXPECT_EQ(hex(std::string("\x00\x16\xff", 3)), "0016ff");
}

TEST(WorldRecords, TcpLineHasItsFieldsInOrder)
{
	TcpRecord r;
	r.time = at_ms(1772368496789);
	r.tls = true;
	r.sni = "github.com";
	r.bytes_in = 517;
	r.head = std::string(100, '\x16');
	r.duration_ms = 4;
	Origin o;
	o.addr = *parse_address("2001:db8::1");
	o.port = 443;
	o.rule = 1;
	std::string head_hex;
	for (int i = 0; i < 64; i++)
		head_hex += "16";  // the first 64 bytes only
	EXPECT_EQ(
		tcp_record_line("agent-1", o, r),
		R"({"time":"2026-03-01T12:34:56.789Z","sandbox":"agent-1","kind":"tcp","dst":"2001:db8::1","port":443,)"
		R"("protocol":"tcp","rule":1,"tls":true,"sni":"github.com","bytes_in":517,"head_hex":")" +
			head_hex + R"(","duration_ms":4})" + "\n");
	r.tls = false;
	r.sni.clear();
	r.truncated = true;
	auto j = ojson::parse(tcp_record_line("agent-1", o, r));
	EXPECT_EQ(keys(j), (std::vector<std::string>{"time", "sandbox", "kind", "dst", "port", "protocol", "rule",
						     "bytes_in", "head_hex", "truncated", "duration_ms"}));
}

TEST(WorldRecords, UdpLineHasItsFieldsInOrder)
{
	UdpRecord r;
	r.time = at_ms(1772368496789);
	r.bytes_in = 100;
	r.head = std::string(100, 'A');
	Origin o;
	o.addr = *parse_address("203.0.113.11");
	o.port = 5353;
	o.protocol = 17;
	o.rule = 3;
	o.name = "printer.local";
	std::string head_hex;
	for (int i = 0; i < 64; i++)
		head_hex += "41";  // the first 64 bytes only
	EXPECT_EQ(
		udp_record_line("agent-1", o, r),
		R"({"time":"2026-03-01T12:34:56.789Z","sandbox":"agent-1","kind":"udp","dst":"203.0.113.11","port":5353,)"
		R"("protocol":"udp","name":"printer.local","rule":3,"bytes_in":100,"head_hex":")" +
			head_hex + "\"}\n");
}

class RecordsFile : public ::testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/airlock-records-XXXXXX";
		dir_ = ::mkdtemp(tmpl);
		path_ = dir_ + "/r.jsonl";
	}
	void TearDown() override { std::filesystem::remove_all(dir_); }

	int open_with(const std::string& content)
	{
		std::ofstream(path_) << content;
		return ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
	}
	std::string content() const
	{
		std::ifstream in(path_);
		return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
	}

	std::string dir_, path_;
};

TEST_F(RecordsFile, TheCapCountsWhatTheFileHeldAndEndsWithOneFullLine)
{
	const std::string before(100, 'x');
	const std::string line = "{\"kind\":\"tcp\",\"n\":1}\n";
	const size_t full_len = records_full_line("agent-1", 0, {}).size();  // its length with any cap of one digit
	// Room for what is there, one line and the full line: exactly.
	uint64_t cap = before.size() + line.size() + full_len + 2;  // the cap's own digits: 3, not 1
	RecordsWriter w(open_with(before), cap, "agent-1");
	EXPECT_EQ(w.size(), 100u);
	EXPECT_TRUE(w.write(line));
	EXPECT_FALSE(w.write(line));
	EXPECT_FALSE(w.write("{}\n"));  // after the full line, nothing, however small
	EXPECT_EQ(w.written(), 1u);
	EXPECT_EQ(w.dropped(), 2u);
	std::string text = content();
	EXPECT_EQ(text.size(), cap);
	ASSERT_EQ(text.substr(0, 100 + line.size()), before + line);
	auto full = nlohmann::json::parse(text.substr(100 + line.size()));
	EXPECT_EQ(full["kind"], "records-full");
	EXPECT_EQ(full["sandbox"], "agent-1");
	EXPECT_EQ(full["max_records_bytes"], cap);
}

TEST_F(RecordsFile, AFileAlreadyFullGetsNothing)
{
	RecordsWriter w(open_with(std::string(290, 'x')), 300, "agent-1");
	EXPECT_FALSE(w.write("{}\n"));
	EXPECT_EQ(w.dropped(), 1u);
	EXPECT_EQ(content(), std::string(290, 'x'));  // not even the full line: it does not fit
}

TEST_F(RecordsFile, ALineThatWouldLeaveNoRoomForTheFullLineIsDropped)
{
	const size_t full_len = records_full_line("s", 1000, {}).size();
	std::string line(1000 - full_len, 'a');  // with the full line: 1000, fits
	line.back() = '\n';
	RecordsWriter w(open_with(""), 1000, "s");
	std::string longer = "b" + line;  // one byte too many
	EXPECT_FALSE(w.write(longer));
	EXPECT_EQ(content().size(), full_len);  // the full line alone
	RecordsWriter w2(open_with(""), 1000, "s");
	EXPECT_TRUE(w2.write(line));
	EXPECT_EQ(content(), line);
}

TEST(WorldShow, ATableOfRecordsAndLinesThatAreNot)
{
	std::istringstream in(
		R"({"time":"2026-03-01T12:34:56.789Z","sandbox":"a","kind":"http","dst":"203.0.113.10","port":80,"protocol":"tcp","name":"api.example.com","rule":0,"method":"POST","host":"api.example.com","path":"/v1/chat\u001b[2J","headers":{},"body":"hi","body_bytes":2,"body_truncated":false,"status":200,"duration_ms":3})"
		"\n"
		R"({"time":"2026-03-01T12:34:57.001Z","sandbox":"a","kind":"tcp","dst":"2001:db8::1","port":443,"protocol":"tcp","rule":1,"tls":true,"sni":"github.com","bytes_in":517,"head_hex":"16","duration_ms":1})"
		"\n"
		"not json\n"
		"\n"
		R"({"time":"2026-03-01T12:34:58.000Z","sandbox":"b","kind":"tcp","dst":"198.51.100.7","port":22,"protocol":"tcp","rule":2,"bytes_in":21,"head_hex":"","duration_ms":5})"
		"\n"
		"[1,2]\n"
		R"({"time":"2026-03-01T12:34:59.000Z","sandbox":"a","kind":"http","dst":"203.0.113.10","port":80,"protocol":"tcp","rule":0,"method":"PUT","path":"/upload","headers":{},"body_bytes":70000,"body_truncated":true,"duration_ms":30000})"
		"\n"
		R"({"time":"2026-03-01T12:35:00.000Z","sandbox":"a","kind":"records-full","max_records_bytes":300})"
		"\n");
	ShowResult r = show_records(in, "w.jsonl", {});
	EXPECT_EQ(r.out,
		  "TIME          KIND          DESTINATION         WHAT                                 BODY   STATUS\n"
		  "12:34:56.789  http          api.example.com:80  POST api.example.com/v1/chat\\x1b[2J  2      200\n"
		  "12:34:57.001  tcp           [2001:db8::1]:443   517 bytes tls sni=github.com         -      -\n"
		  "12:34:58.000  tcp           198.51.100.7:22     21 bytes                             -      -\n"
		  "12:34:59.000  http          203.0.113.10:80     PUT /upload                          70000  -\n"
		  "12:35:00.000  records-full  -                   records stopped at 300 bytes         -      -\n");
	EXPECT_EQ(r.errors, (std::vector<std::string>{"w.jsonl:3: not a JSON record, skipped",
						      "w.jsonl:6: not a JSON record, skipped"}));

	// One sandbox's, as the lines they are.
	in.clear();
	in.seekg(0);
	ShowOptions o;
	o.sandbox = "b";
	o.json = true;
	r = show_records(in, "w.jsonl", o);
	EXPECT_EQ(
		r.out,
		R"({"time":"2026-03-01T12:34:58.000Z","sandbox":"b","kind":"tcp","dst":"198.51.100.7","port":22,"protocol":"tcp","rule":2,"bytes_in":21,"head_hex":"","duration_ms":5})"
		"\n");
	EXPECT_EQ(r.errors.size(), 2u);
}

TEST(WorldShow, ADatagramIsItsSize)
{
	std::istringstream in(
		R"({"time":"2026-03-01T12:34:56.789Z","sandbox":"a","kind":"udp","dst":"fd77::3","port":443,"protocol":"udp","rule":1,"bytes_in":1200,"head_hex":"c0"})"
		"\n");
	ShowResult r = show_records(in, "w.jsonl", {});
	EXPECT_EQ(r.out, "TIME          KIND  DESTINATION    WHAT        BODY  STATUS\n"
			 "12:34:56.789  udp   [fd77::3]:443  1200 bytes  -     -\n");
	EXPECT_TRUE(r.errors.empty());
}

TEST(WorldShow, NoRecordsIsTheHeaderAlone)
{
	std::istringstream in("");
	ShowResult r = show_records(in, "w.jsonl", {});
	EXPECT_EQ(r.out, "TIME  KIND  DESTINATION  WHAT  BODY  STATUS\n");
	EXPECT_TRUE(r.errors.empty());
}

TEST(WorldResponses, TheFirstMatchingResponseAnswers)
{
	std::vector<WorldResponse> rs(5);
	rs[0].host = "api.Example.com";
	rs[0].method = "POST";
	rs[0].path = "/v1/*";
	rs[0].status = 201;
	rs[1].host = "*.example.com";
	rs[1].path = "/health";
	rs[1].status = 204;
	rs[2].host = "::1";
	rs[2].status = 299;
	rs[3].host = "*.example.org";
	rs[3].status = 403;
	rs[4].host = "*";
	rs[4].method = "DELETE";
	rs[4].status = 405;
	auto status = [&](std::string_view host, std::string_view method, std::string_view target) {
		const WorldResponse* r = find_response(rs, host, method, target);
		return r ? r->status : 0u;
	};
	EXPECT_EQ(status("api.example.com", "POST", "/v1/chat"), 201u);
	EXPECT_EQ(status("API.EXAMPLE.COM:8443", "POST", "/v1/"), 201u);   // case, port
	EXPECT_EQ(status("api.example.com.", "POST", "/v1/x?y=1"), 201u);  // trailing dot, query
	EXPECT_EQ(status("api.example.com", "POST", "/v2/chat"), 0u);
	EXPECT_EQ(status("api.example.com", "post", "/v1/chat"), 0u);  // methods are case-sensitive
	EXPECT_EQ(status("api.example.com", "GET", "/health"), 204u);  // the second: the first wants POST
	EXPECT_EQ(status("a.b.example.com", "GET", "/health?full"), 204u);
	EXPECT_EQ(status("example.com", "GET", "/health"), 0u);  // *.name: strictly below name
	EXPECT_EQ(status("badexample.com", "GET", "/health"), 0u);
	EXPECT_EQ(status("api.example.com", "GET", "/healthz"), 0u);
	EXPECT_EQ(status("api.example.com", "GET", "http://api.example.com/health"), 204u);  // absolute-form
	EXPECT_EQ(status("[::1]:8080", "GET", "/"), 299u);
	EXPECT_EQ(status("www.example.org", "PATCH", "/anything"), 403u);
	EXPECT_EQ(status("10.0.0.1", "DELETE", "/x"), 405u);
	EXPECT_EQ(status("", "DELETE", "*"), 405u);
	EXPECT_EQ(status("10.0.0.1", "GET", "/x"), 0u);
}

// The proxy's counts as the agent writes them down: every field by its
// name, read back the same; anything else (not an object, a count missing,
// negative, fractional, a string) is no counts at all.
TEST(ProxyCounts, WrittenAndReadBackAndNothingElse)
{
	ProxyCounts c;
	c.starts = 2;
	uint64_t v = 1;
	for (const auto& f : kStatsFields)
		c.stats.*f.member = v++;
	std::string text = proxy_counts_json(c);
	auto back = parse_proxy_counts(text);
	ASSERT_TRUE(back);
	EXPECT_EQ(back->starts, 2u);
	EXPECT_TRUE(back->stats == c.stats);
	auto j = nlohmann::json::parse(text);
	EXPECT_EQ(j.size(), std::size(kStatsFields) + 1);
	EXPECT_EQ(j["sni_denied"], 12u);
	EXPECT_EQ(j["connections"], 1u);

	EXPECT_FALSE(parse_proxy_counts(""));
	EXPECT_FALSE(parse_proxy_counts("[1, 2]"));
	EXPECT_FALSE(parse_proxy_counts("{\"proxy_starts\": 1}"));
	for (const char* bad : {"-1", "1.5", "\"3\"", "null"}) {
		auto k = j;
		k["records_written"] = nlohmann::json::parse(bad);
		EXPECT_FALSE(parse_proxy_counts(k.dump())) << bad;
	}
}

}  // namespace
}  // namespace airlock::proxy
