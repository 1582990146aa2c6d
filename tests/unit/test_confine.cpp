// What a process airlock starts gives up (confine/): the one list of
// capabilities that `run` drops and `--keep-caps` keeps, a user spec, a
// seccomp filter compiled for a child to load; and the names the SNI gate
// reads from the learned table (kernel/views.h).
#include <gtest/gtest.h>

#include <linux/capability.h>

#include <cstring>
#include <string>

#include "confine/capabilities.h"
#include "confine/identity.h"
#include "confine/seccomp.h"
#include "kernel/views.h"
#include "policy/dnsname.h"
#include "util/error.h"

namespace airlock {
namespace {

TEST(Confine, TheDroppedCapabilitiesAreOneListWithTheirNames)
{
	auto caps = confine::dropped_capabilities();
	ASSERT_EQ(caps.size(), 8u);
	EXPECT_EQ(confine::capability_names(caps),
		  "CAP_NET_RAW, CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, "
		  "CAP_SYS_MODULE, CAP_DAC_READ_SEARCH");
	EXPECT_EQ(caps[0].number, CAP_NET_RAW);
	EXPECT_EQ(caps[7].number, CAP_DAC_READ_SEARCH);
	for (const auto& c : caps)
		EXPECT_LE(c.number, CAP_LAST_CAP) << c.name;
}

TEST(Confine, AUserSpecIsNamesOrIds)
{
	EXPECT_FALSE(confine::resolve_user("").set);
	auto root = confine::resolve_user("0:0");
	EXPECT_TRUE(root.set);
	EXPECT_EQ(root.uid, 0u);
	EXPECT_EQ(root.gid, 0u);
	auto ids = confine::resolve_user("12345:678");
	EXPECT_EQ(ids.uid, 12345u);
	EXPECT_EQ(ids.gid, 678u);
	EXPECT_EQ(confine::resolve_user("root").uid, 0u);
	EXPECT_THROW(confine::resolve_user("no-such-user-of-airlock"), Error);
	EXPECT_THROW(confine::resolve_user("0:no-such-group-of-airlock"), Error);
}

TEST(Confine, ANobodyStandsInForAUserThatDoesNotExist)
{
	auto id = confine::user_or_nobody("no-such-user-of-airlock");
	EXPECT_NE(id.uid, 0u);
	EXPECT_EQ(confine::user_or_nobody("root").uid, 0u);
}

TEST(Confine, ASeccompFilterCompilesForAChildToLoad)
{
	confine::SeccompFilter deny(SCMP_ACT_ALLOW);
	deny.add(SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), {SCMP_A0(SCMP_CMP_EQ, 17)}, "socket rule");
	EXPECT_GT(deny.compile().size(), 4u);
	confine::SeccompFilter allow(SCMP_ACT_ERRNO(EPERM));
	const char* const names[] = {"read", "no_such_call_of_airlock"};
	allow.allow(names);  // a name this architecture lacks is skipped
	allow.add(SCMP_ACT_ALLOW, SCMP_SYS(sendto), {SCMP_A4(SCMP_CMP_EQ, 0)}, "sendto");
	EXPECT_GT(allow.compile().size(), 4u);
	// A rule the filter refuses names itself.
	EXPECT_THROW(allow.add(SCMP_ACT_ERRNO(EPERM), SCMP_SYS(read), {}, "a rule like the default"), Error);
}

al_learned learned_of(const std::string& name)
{
	al_learned v{};
	auto bytes = name_key_bytes(name);
	std::memcpy(v.name.name, bytes.data(), bytes.size());
	v.name.name[bytes.size()] = AL_NAME_END;
	return v;
}

TEST(LearnedNames, ALearnedEntryReadsAsTheQuestionsName)
{
	EXPECT_EQ(kernel::learned_name(learned_of("www.example.com")), "www.example.com");
	EXPECT_EQ(kernel::learned_name(learned_of("a")), "a");
}

TEST(LearnedNames, AnEntryThatDoesNotHoldWholeLabelsReadsAsNone)
{
	al_learned v = learned_of("example.com");
	v.name.name[0] = 0;  // an empty label
	EXPECT_EQ(kernel::learned_name(v), std::nullopt);
	v.name.name[0] = 64;  // longer than a label may be
	EXPECT_EQ(kernel::learned_name(v), std::nullopt);
	al_learned no_end{};
	std::memset(no_end.name.name, 1, sizeof(no_end.name.name));  // \1\1\1...: never AL_NAME_END
	EXPECT_EQ(kernel::learned_name(no_end), std::nullopt);
}

}  // namespace
}  // namespace airlock
