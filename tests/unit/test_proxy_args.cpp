// What the agent hands the proxy it starts: one struct, written as the
// proxy's command line by the agent (ops/proxy.cpp) and read back by the
// proxy (proxyd/args.h); a bad command line is one clear line.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "proxyd/args.h"

namespace airlock {
namespace {

using proxyd::ProxyArgs;

ProxyArgs full()
{
	ProxyArgs a;
	a.sandbox = "web";
	a.slot = 17;
	a.policy_file = "/var/lib/airlock/policies/web.0.json";
	a.user = "airlock-proxy";
	a.records_fd = 3;
	a.origin_fd = 4;
	a.listen_fds = {5, 6};
	a.udp_fds = {7, 8};
	a.ca_fd = 9;
	a.control_fd = 10;
	a.learned_fd = 11;
	return a;
}

TEST(ProxyArgs, TheAgentWritesWhatTheProxyReadsBack)
{
	ProxyArgs a = full();
	auto back = ProxyArgs::from_argv(a.to_argv());
	ASSERT_TRUE(back.ok()) << back.rejection().first();
	EXPECT_EQ(*back, a);
}

TEST(ProxyArgs, DescriptorsNotHandedOverAreLeftOutAndReadBackUnset)
{
	ProxyArgs a = full();
	a.udp_fds.clear();
	a.ca_fd = -1;
	a.learned_fd = -1;
	auto argv = a.to_argv();
	for (const char* absent : {"--udp-fd", "--ca-fd", "--learned-fd"})
		EXPECT_EQ(std::find(argv.begin(), argv.end(), absent), argv.end()) << absent;
	auto back = ProxyArgs::from_argv(argv);
	ASSERT_TRUE(back.ok()) << back.rejection().first();
	EXPECT_EQ(*back, a);
}

TEST(ProxyArgs, TheCommandLineIsOptionValuePairsInTheHandoverOrder)
{
	ProxyArgs a = full();
	a.udp_fds = {7};
	a.ca_fd = -1;
	a.control_fd = 8;
	a.learned_fd = -1;
	std::vector<std::string> want = {"--sandbox",    "web",         "--slot",       "17",
					 "--policy",     a.policy_file, "--user",       "airlock-proxy",
					 "--records-fd", "3",           "--origin-fd",  "4",
					 "--listen-fd",  "5",           "--listen-fd",  "6",
					 "--udp-fd",     "7",           "--control-fd", "8"};
	EXPECT_EQ(a.to_argv(), want);
}

TEST(ProxyArgs, AnOptionMayCarryItsValueAfterAnEqualsSign)
{
	auto a = ProxyArgs::from_argv(
		{"--sandbox=web", "--slot=2", "--policy=/p.json", "--records-fd=3", "--origin-fd=4", "--listen-fd=5"});
	ASSERT_TRUE(a.ok()) << a.rejection().first();
	EXPECT_EQ(a->sandbox, "web");
	EXPECT_EQ(a->slot, 2u);
	EXPECT_EQ(a->listen_fds, std::vector<int>{5});
	EXPECT_EQ(a->user, "airlock-proxy");  // the default
	EXPECT_EQ(a->control_fd, -1);
}

// Each bad command line: the one line it is rejected with.
TEST(ProxyArgs, ABadCommandLineIsOneClearLine)
{
	std::vector<std::string> good = full().to_argv();
	auto with = [&](std::vector<std::string> extra) {
		auto v = good;
		v.insert(v.end(), extra.begin(), extra.end());
		return v;
	};
	auto without = [&](const std::string& option) {
		std::vector<std::string> v;
		for (size_t i = 0; i < good.size(); i += 2)
			if (good[i] != option) {
				v.push_back(good[i]);
				v.push_back(good[i + 1]);
			}
		return v;
	};
	struct Case {
		std::vector<std::string> argv;
		std::string line;
	} cases[] = {
		{with({"--verbose"}), "unknown argument '--verbose'"},
		{with({"extra"}), "unknown argument 'extra'"},
		{with({"--udp-fd"}), "--udp-fd: a value is needed"},
		{with({"--ca-fd", "12"}), "--ca-fd: given twice"},
		{with({"--udp-fd", "x"}), "--udp-fd: 'x' is not a descriptor"},
		{with({"--udp-fd", "-1"}), "--udp-fd: '-1' is not a descriptor"},
		{without("--listen-fd"), "--listen-fd is required"},
		{without("--sandbox"), "--sandbox is required"},
		{without("--origin-fd"), "--origin-fd is required"},
		{{"--slot", "seventeen"}, "--slot: 'seventeen' is not a number"},
		{{"--slot", "4294967296"}, "--slot: '4294967296' is not a number"},
		{{}, "--sandbox is required"},
	};
	for (const auto& c : cases) {
		auto r = ProxyArgs::from_argv(c.argv);
		ASSERT_FALSE(r.ok()) << c.line;
		EXPECT_EQ(r.rejection().lines, std::vector<std::string>{c.line});
	}
}

}  // namespace
}  // namespace airlock
