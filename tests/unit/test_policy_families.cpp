// The "families" and "io_uring" keys: what the seccomp filter of every
// process airlock starts is built from.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <string>
#include <vector>

#include "policy/policy.h"
#include "policy_errors.h"

namespace airlock {
namespace {

std::string doc(const std::string& extra)
{
	return R"({"version": 1, "name": "t", "rules": [])" + extra + "}";
}

std::vector<std::string> errors_of(const std::string& text)
{
	auto r = parse_policy_text(text, "p.json");
	std::vector<std::string> out;
	for (const auto& e : errors_in(r))
		out.push_back(e.str());
	EXPECT_EQ(r.ok(), out.empty()) << text;
	return out;
}

Policy parse_ok(const std::string& text)
{
	auto r = parse_policy_text(text, "p.json");
	for (const auto& e : errors_in(r))
		ADD_FAILURE() << e.str();
	return r ? *r : Policy{};
}

TEST(PolicyFamilies, DefaultIsExactlyInetInet6UnixAndNetlinkRoute)
{
	Policy p = parse_ok(doc(""));
	EXPECT_EQ(p.families, (1ull << AF_INET) | (1ull << AF_INET6) | (1ull << AF_UNIX) | (1ull << kNetlinkRouteBit));
	EXPECT_EQ(family_names(p.families), (std::vector<std::string>{"unix", "inet", "inet6", "netlink-route"}));
	EXPECT_EQ(parse_ok(doc(R"(, "families": ["netlink-route"])")).families, 1ull << kNetlinkRouteBit);
	EXPECT_FALSE(p.io_uring);
}

TEST(PolicyFamilies, ListReplacesTheDefault)
{
	Policy p = parse_ok(doc(R"(, "families": ["inet", "netlink"])"));
	EXPECT_EQ(p.families, (1ull << AF_INET) | (1ull << AF_NETLINK));
	EXPECT_EQ(parse_ok(doc(R"(, "families": [])")).families, 0u);
}

TEST(PolicyFamilies, TableMatchesLinuxSocketH)
{
	static_assert(AF_MAX == kFamilyMax, "a family of linux/socket.h has no name in the table");
	const std::pair<const char*, int> known[] = {
		{"unix", AF_UNIX},
		{"inet", AF_INET},
		{"inet6", AF_INET6},
		{"netlink", AF_NETLINK},
		{"packet", AF_PACKET},
		{"vsock", AF_VSOCK},
		{"xdp", AF_XDP},
		{"tipc", AF_TIPC},
		{"rds", AF_RDS},
		{"smc", AF_SMC},
		{"kcm", AF_KCM},
		{"bluetooth", AF_BLUETOOTH},
		{"can", AF_CAN},
		{"alg", AF_ALG},
		{"qipcrtr", AF_QIPCRTR},
		{"mctp", AF_MCTP},
		{"ieee802154", AF_IEEE802154},
		{"ib", AF_IB},
		{"mpls", AF_MPLS},
		{"key", AF_KEY},
	};
	for (auto [name, af] : known) {
		EXPECT_EQ(family_number(name), af) << name;
		EXPECT_STREQ(family_name(static_cast<unsigned>(af)), name);
	}
	for (unsigned af = 1; af < kFamilyMax; af++)
		EXPECT_NE(family_name(af), nullptr) << af;
	EXPECT_EQ(family_name(0), nullptr);
	EXPECT_EQ(family_name(kFamilyMax), nullptr);
}

TEST(PolicyFamilies, ExactErrors)
{
	EXPECT_EQ(errors_of(doc(R"(, "families": ["inet", "vsocks"])")),
		  (std::vector<std::string>{"p.json: families/1: 'vsocks' is not a socket family airlock knows (inet, "
					    "inet6, unix, netlink-route, netlink, packet, vsock, ...)"}));
	EXPECT_EQ(
		errors_of(doc(R"(, "families": ["unspec", "INET"])")),
		(std::vector<std::string>{
			"p.json: families/0: 'unspec' is not a socket family airlock knows (inet, inet6, unix, "
			"netlink-route, netlink, packet, vsock, ...)",
			"p.json: families/1: 'INET' is not a socket family airlock knows (inet, inet6, unix, netlink-route, "
			"netlink, packet, vsock, ...)"}));
	EXPECT_EQ(errors_of(doc(R"(, "families": "inet")")),
		  (std::vector<std::string>{"p.json: families: expected an array, got a string"}));
	EXPECT_EQ(errors_of(doc(R"(, "families": [2])")),
		  (std::vector<std::string>{"p.json: families/0: expected a string, got an integer"}));
}

TEST(PolicyIoUring, Values)
{
	EXPECT_TRUE(parse_ok(doc(R"(, "io_uring": true)")).io_uring);
	EXPECT_FALSE(parse_ok(doc(R"(, "io_uring": false)")).io_uring);
	EXPECT_EQ(errors_of(doc(R"(, "io_uring": 1)")),
		  (std::vector<std::string>{"p.json: io_uring: expected a boolean, got an integer"}));
}

}  // namespace
}  // namespace airlock
