// What a reload hands the proxy (gate/inputs.h): written and read back
// byte for byte, whatever the bytes; anything else is refused whole.
#include <gtest/gtest.h>

#include <string>

#include "gate/inputs.h"

namespace airlock::gate {
namespace {

TEST(GateInputs, AreReadBackByteForByte)
{
	Inputs in;
	in.policy_text = "{\"version\": 1, \"name\": \"caf\xc3\xa9\"}\n";
	in.secrets.never_send = {{"env/KEY", std::string("bin\0\xff\x80value", 12)}, {"token", "tok-123456789"}};
	in.secrets.injectable = {{"token", "tok-123456789"}};
	in.upstream_ca = {{3, "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"}, {12, ""}};
	auto back = decode_inputs(encode_inputs(in));
	ASSERT_TRUE(back) << back.rejection().first();
	EXPECT_EQ(back->policy_text, in.policy_text);
	ASSERT_EQ(back->secrets.never_send.size(), 2u);
	EXPECT_EQ(back->secrets.never_send[0].name, "env/KEY");
	EXPECT_EQ(back->secrets.never_send[0].value, in.secrets.never_send[0].value);
	EXPECT_EQ(back->secrets.never_send[1].value, "tok-123456789");
	ASSERT_EQ(back->secrets.injectable.size(), 1u);
	EXPECT_EQ(back->secrets.injectable[0].value, "tok-123456789");
	EXPECT_EQ(back->upstream_ca, in.upstream_ca);
}

TEST(GateInputs, AnythingElseIsRefusedWhole)
{
	std::string good = encode_inputs(Inputs{});
	ASSERT_TRUE(decode_inputs(good));
	for (const char* bad :
	     {"", "[]", "{}", R"({"policy": "zz", "never_send": [], "injectable": [], "upstream_ca": {}})",
	      R"({"policy": "", "never_send": [{"name": "61"}], "injectable": [], "upstream_ca": {}})",
	      R"({"policy": "", "never_send": [], "injectable": [], "upstream_ca": {"x": ""}})",
	      R"({"policy": "", "never_send": [], "injectable": [], "upstream_ca": {"1": "abc"}})"}) {
		auto r = decode_inputs(bad);
		ASSERT_FALSE(r) << bad;
		EXPECT_EQ(r.rejection().first(), "the gate's inputs are not what the agent writes") << bad;
	}
}

}  // namespace
}  // namespace airlock::gate
