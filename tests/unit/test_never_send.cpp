// Never-send (gate/never_send.h, gate/secrets.h): a secret found as it is,
// percent-encoded, JSON-escaped, in base64 at every alignment and either
// alphabet, in hex of either case, across the pieces of a stream; named,
// never shown; and the secrets files read the one way the docs say.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "gate/never_send.h"
#include "gate/secrets.h"
#include "policy_text.h"

namespace airlock::gate {
namespace {

const std::string kToken = "wk_live_7Hq2Zp9RtX4m";
const std::string kOther = "s3cr3t-database-password";

NeverSend scanner()
{
	return NeverSend({{"wiki-token", kToken}, {"project-env/DB_PASSWORD", kOther}});
}

std::string b64(const std::string& s)
{
	std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
	int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
				reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
	out.resize(static_cast<size_t>(n));
	return out;
}

std::string b64url(std::string s)
{
	for (char& c : s)
		c = c == '+' ? '-' : c == '/' ? '_' : c;
	return s;
}

std::string hex(const std::string& s, bool upper)
{
	std::string out;
	for (unsigned char c : s)
		out += upper ? fmt::format("{:02X}", c) : fmt::format("{:02x}", c);
	return out;
}

std::string percent_all(const std::string& s)
{
	std::string out;
	for (unsigned char c : s)
		out += fmt::format("%{:02X}", c);
	return out;
}

TEST(NeverSend, FindsASecretInEveryEncodingItNames)
{
	NeverSend n = scanner();
	const std::vector<std::string> carriers = {
		"GET /x?t=" + kToken + " HTTP/1.1",
		"GET /x?t=" + percent_all(kToken),
		"{\"t\": \"" + kToken.substr(0, 5) + "\\u00" + hex(kToken.substr(5, 1), false) + kToken.substr(6) +
			"\"}",
		"{\"t\": \"wk_live\\x5f7Hq2Zp9RtX4m\"}",
		"Authorization: Basic " + b64("user:" + kToken),  // alignment 2
		"X: " + b64(kToken),                              // alignment 0
		"X: " + b64("u" + kToken + "tail"),               // alignment 1
		"X: " + b64url(b64("?>" + kToken + "?>")),        // the URL alphabet
		"q=" + hex(kToken, false),
		"q=" + hex(kToken, true),
		"q=" + hex(kToken.substr(0, 6), true) + hex(kToken.substr(6), false),
		// base64 wrapped at 76 columns by MIME, split by a line break.
		[] {
			std::string e = b64(std::string(50, 'x') + kToken);
			return e.substr(0, 70) + "\r\n" + e.substr(70);
		}(),
		// percent-encoded base64 ('+', '/', '=' escaped in a query).
		"q=" + percent_all(b64("ab" + kToken)),
	};
	for (const std::string& c : carriers)
		EXPECT_EQ(n.find(c), "wiki-token") << c;
	EXPECT_EQ(n.find("x=" + kOther), "project-env/DB_PASSWORD");
}

TEST(NeverSend, FindsNothingWhereNothingIs)
{
	NeverSend n = scanner();
	EXPECT_EQ(n.find("GET /wiki/Main_Page HTTP/1.1\r\nHost: wiki.example.org\r\n\r\n"), std::nullopt);
	EXPECT_EQ(n.find(kToken.substr(0, kToken.size() - 1)), std::nullopt) << "all of it, not a part";
	EXPECT_EQ(n.find(b64(kToken).substr(0, 20)), std::nullopt);
	EXPECT_EQ(n.find("%zz%4\\u12\\x"), std::nullopt) << "half escapes pass as they are";
	EXPECT_EQ(NeverSend().find(kToken), std::nullopt) << "no secret: nothing found";
}

TEST(NeverSend, AStreamFedInPiecesIsScannedAcrossThem)
{
	NeverSend n = scanner();
	std::string whole = "body=" + percent_all(kToken) + "&x=" + b64(kOther);
	for (size_t cut = 0; cut <= whole.size(); cut++) {
		NeverSend::Scan s(n);
		s.feed(whole.substr(0, cut));
		s.feed(whole.substr(cut));
		EXPECT_EQ(s.found(), "wiki-token") << "cut at " << cut;
	}
	// Byte by byte.
	NeverSend::Scan s(n);
	for (char c : "q=" + hex(kOther, true))
		s.feed(std::string_view(&c, 1));
	EXPECT_EQ(s.found(), "project-env/DB_PASSWORD");
}

TEST(NeverSend, ALongSecretIsFoundByItsStart)
{
	// Letters that never repeat a run of kPatternBytes (a linear
	// congruential sequence).
	std::string key(3000, 'k');
	uint32_t x = 12345;
	for (char& c : key) {
		x = x * 1103515245u + 12345u;
		c = static_cast<char>('a' + (x >> 16) % 26);
	}
	NeverSend n({{"pem", key}});
	EXPECT_EQ(n.find("x" + key + "y"), "pem");
	EXPECT_EQ(n.find(b64(key)), "pem");
	EXPECT_EQ(n.find(key.substr(kPatternBytes)), std::nullopt);
}

TEST(NeverSend, Base64InsideIsWhatEveryLongerEncodingCarries)
{
	const std::string v = "0123456789";
	for (unsigned a = 0; a < 3; a++)
		for (const std::string& before :
		     {std::string(a, 'x'), std::string(a, '\xff'), std::string(a + 3, '\0')}) {
			if (before.size() % 3 != a)
				continue;
			for (const std::string& after : {std::string(), std::string("z"), std::string("\x80\x81")}) {
				std::string e = b64(before + v + after);
				EXPECT_NE(e.find(base64_inside(v, a, false)), std::string::npos) << a;
			}
		}
	EXPECT_EQ(base64_inside("abc", 0, false), "YWJj");
	EXPECT_EQ(base64_inside("\xfb\xff", 0, true), "-_");
}

// A secrets file in a directory of its own, removed at the end.
class SecretFiles : public ::testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/airlock-secrets.XXXXXX";
		ASSERT_NE(::mkdtemp(tmpl), nullptr);
		dir_ = tmpl;
	}
	void TearDown() override { std::filesystem::remove_all(dir_); }
	std::string file(const std::string& name, const std::string& text, mode_t mode)
	{
		std::string path = dir_ + "/" + name;
		std::ofstream(path) << text;
		EXPECT_EQ(::chmod(path.c_str(), mode), 0);
		return path;
	}
	Policy policy(const std::string& secrets, const std::string& inject = "{}")
	{
		return policy_test::parse_ok(R"({"version": 1, "name": "t", "secrets": )" + secrets +
					     R"(, "rules": [{"action": "allow", "domain": "a.test", "protocol": "tcp",
			     "http": [{"methods": ["GET"], "path": "/*"}], "inject": )" +
					     inject + "}]}");
	}
	std::string dir_;
};

TEST_F(SecretFiles, AFileIsTrimmedAnEnvFileGivesEachLongValue)
{
	std::string tok = file("token", "  " + kToken + "\n\n", 0600);
	std::string env = file(
		".env",
		"# comment\nexport DB_PASSWORD=\"" + kOther +
			"\"\nSHORT=abc\nAPI_KEY='k-1234567890' \nURL=https://x.test/a # note\n\nBROKEN\n",
		0644);
	Policy p = policy(R"({"tok": {"file": ")" + tok + R"("}, "env": {"env_file": ")" + env + R"("}})");
	auto s = read_secrets(p);
	ASSERT_TRUE(s) << s.rejection().first();
	std::vector<std::string> names;
	for (const auto& v : s->never_send)
		names.push_back(v.name + "=" + v.value);
	EXPECT_EQ(names, (std::vector<std::string>{"env/DB_PASSWORD=" + kOther, "env/API_KEY=k-1234567890",
						   "env/URL=https://x.test/a", "tok=" + kToken}));
	ASSERT_EQ(s->injectable.size(), 1u);
	EXPECT_EQ(s->injectable[0].value, kToken);
}

TEST_F(SecretFiles, AnInjectedSecretOnlyRootMayRead)
{
	std::string tok = file("token", kToken, 0640);
	Policy p = policy(R"({"tok": {"file": ")" + tok + R"("}})", R"({"Authorization": "Bearer ${secret:tok}"})");
	auto s = read_secrets(p);
	ASSERT_FALSE(s);
	EXPECT_EQ(s.rejection().first(),
		  "p.json: secrets/tok: " + tok + ": is injected, so only root may read it: owner uid " +
			  std::to_string(::geteuid()) + ", mode 0640 (chown root and chmod 600)");
	if (::geteuid() == 0) {
		ASSERT_EQ(::chmod(tok.c_str(), 0600), 0);
		EXPECT_TRUE(read_secrets(p));
	}
}

TEST_F(SecretFiles, WhatIsNotASecretsFileIsRefusedNamingIt)
{
	std::string tok = file("token", "short\n", 0600);
	auto one = [&](const std::string& path) {
		auto s = read_secrets(policy(R"({"tok": {"file": ")" + path + R"("}})"));
		return s ? std::string("ok") : s.rejection().first();
	};
	EXPECT_EQ(one(tok), "p.json: secrets/tok: " + tok +
				    ": holds 5 bytes; a secret has at least 8 (shorter ones would be found in ordinary "
				    "requests)");
	std::string link = dir_ + "/link";
	std::filesystem::create_symlink(tok, link);
	EXPECT_EQ(one(link), "p.json: secrets/tok: " + link + ": is a symbolic link (name the file itself)");
	EXPECT_EQ(one(dir_), "p.json: secrets/tok: " + dir_ + ": is not a regular file");
	EXPECT_EQ(one(dir_ + "/none"),
		  "p.json: secrets/tok: " + dir_ + "/none: cannot open: No such file or directory");
	std::string fifo = dir_ + "/fifo";
	ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
	EXPECT_EQ(one(fifo), "p.json: secrets/tok: " + fifo + ": is not a regular file") << "never blocks";
}

}  // namespace
}  // namespace airlock::gate
