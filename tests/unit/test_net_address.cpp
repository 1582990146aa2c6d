// Addresses as the kernel side stores them: parse, normalise, format, mask.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

#include "net/address.h"

namespace airlock {
namespace {

Address v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	Address x;
	x.family = AL_FAMILY_IPV4;
	x.bytes = {a, b, c, d};
	return x;
}

Address v6(std::array<uint8_t, 16> bytes)
{
	Address x;
	x.family = AL_FAMILY_IPV6;
	x.bytes = bytes;
	return x;
}

Address addr(const char* text)
{
	auto a = parse_address(text);
	EXPECT_TRUE(a.has_value()) << text;
	return a.value_or(Address{});
}

Cidr cidr(const char* text, uint8_t len)
{
	return Cidr{addr(text), len};
}

TEST(ParseAddress, Ipv4)
{
	auto a = parse_address("10.1.2.3");
	ASSERT_TRUE(a);
	EXPECT_EQ(a->family, AL_FAMILY_IPV4);
	EXPECT_EQ(a->bits(), 32);
	EXPECT_EQ(*a, v4(10, 1, 2, 3));
	// IPv4 lives in the first four bytes; the rest stays zero.
	for (size_t i = 4; i < 16; i++)
		EXPECT_EQ(a->bytes[i], 0) << i;

	EXPECT_EQ(parse_address("0.0.0.0"), v4(0, 0, 0, 0));
	EXPECT_EQ(parse_address("255.255.255.255"), v4(255, 255, 255, 255));
	EXPECT_EQ(parse_address("127.0.0.1"), v4(127, 0, 0, 1));
}

TEST(ParseAddress, Ipv6)
{
	auto a = parse_address("2001:db8::1");
	ASSERT_TRUE(a);
	EXPECT_EQ(a->family, AL_FAMILY_IPV6);
	EXPECT_EQ(a->bits(), 128);
	EXPECT_EQ(*a, v6({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));

	EXPECT_EQ(parse_address("::"), v6({}));
	EXPECT_EQ(parse_address("::1"), v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
	EXPECT_EQ(parse_address("FD00:EC2::254"), parse_address("fd00:ec2::254"));
	EXPECT_EQ(parse_address("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
		  v6({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
}

TEST(ParseAddress, V4MappedIsIpv4)
{
	// ::ffff:a.b.c.d is IPv4 for airlock, in either spelling.
	EXPECT_EQ(parse_address("::ffff:10.0.0.1"), v4(10, 0, 0, 1));
	EXPECT_EQ(parse_address("::FFFF:10.0.0.1"), v4(10, 0, 0, 1));
	EXPECT_EQ(parse_address("::ffff:a00:1"), v4(10, 0, 0, 1));
	EXPECT_EQ(parse_address("0:0:0:0:0:ffff:c0a8:101"), v4(192, 168, 1, 1));
	EXPECT_EQ(parse_address("::ffff:0.0.0.0"), v4(0, 0, 0, 0));
	auto a = parse_address("::ffff:169.254.169.254");
	ASSERT_TRUE(a);
	EXPECT_EQ(a->family, AL_FAMILY_IPV4);
	for (size_t i = 4; i < 16; i++)
		EXPECT_EQ(a->bytes[i], 0) << i;
}

TEST(ParseAddress, NotMappedStaysIpv6)
{
	// Only ::ffff:0:0/96 is IPv4-mapped: these look similar and are not.
	for (const char* s :
	     {"::1.2.3.4", "::ffff:0:1.2.3.4", "64:ff9b::1.2.3.4", "1::ffff:1.2.3.4", "::fffe:1.2.3.4", "::ffff"}) {
		auto a = parse_address(s);
		ASSERT_TRUE(a) << s;
		EXPECT_EQ(a->family, AL_FAMILY_IPV6) << s;
	}
}

TEST(ParseAddress, Garbage)
{
	for (const char* s : {"",
			      " ",
			      "abc",
			      "localhost",
			      "1.2.3",
			      "1.2.3.4.5",
			      "256.0.0.1",
			      "1.2.3.-4",
			      "1.2.3.4 ",
			      " 1.2.3.4",
			      "1.2.3.4/32",
			      "10.0.0.0/8",
			      "::/0",
			      "1.2.3.4:80",
			      "[::1]",
			      "::g",
			      "1:2:3:4:5:6:7:8:9",
			      "12345::",
			      ":::",
			      "1::2::3",
			      "fe80::1%eth0",
			      "0x7f.0.0.1",
			      "::ffff:1.2.3",
			      "::ffff:256.1.1.1"}) {
		EXPECT_FALSE(parse_address(s).has_value()) << "'" << s << "'";
	}
}

// inet_pton reads a C string: without the check, "10.0.0.1\0garbage" would
// parse as 10.0.0.1.
TEST(ParseAddress, EmbeddedNulIsGarbage)
{
	using namespace std::string_literals;
	EXPECT_FALSE(parse_address("10.0.0.1\0garbage"s).has_value());
	EXPECT_FALSE(parse_address("::1\0garbage"s).has_value());
}

TEST(Normalise, MappedToIpv4AndOthersUntouched)
{
	Address mapped = v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7});
	EXPECT_TRUE(is_v4_mapped(mapped));
	EXPECT_EQ(normalise(mapped), v4(192, 0, 2, 7));

	Address plain = v6({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7});
	EXPECT_FALSE(is_v4_mapped(plain));
	EXPECT_EQ(normalise(plain), plain);

	Address four = v4(192, 0, 2, 7);
	EXPECT_FALSE(is_v4_mapped(four));
	EXPECT_EQ(normalise(four), four);
	// An IPv4 Address whose bytes happen to look mapped is still just IPv4.
	Address odd = four;
	odd.bytes = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4};
	EXPECT_FALSE(is_v4_mapped(odd));
}

TEST(FormatAddress, RoundTrips)
{
	EXPECT_EQ(format_address(v4(10, 1, 2, 3)), "10.1.2.3");
	EXPECT_EQ(format_address(v4(0, 0, 0, 0)), "0.0.0.0");
	EXPECT_EQ(format_address(addr("2001:db8::1")), "2001:db8::1");
	EXPECT_EQ(format_address(addr("2001:0DB8:0000:0000:0000:0000:0000:0001")), "2001:db8::1");
	EXPECT_EQ(format_address(addr("::")), "::");
	EXPECT_EQ(format_address(addr("::1")), "::1");
	// Mapped input comes out as IPv4 because parsing normalised it.
	EXPECT_EQ(format_address(addr("::ffff:10.0.0.1")), "10.0.0.1");
	// An un-normalised mapped address formats as inet_ntop writes it.
	EXPECT_EQ(format_address(v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1})), "::ffff:10.0.0.1");

	for (const char* s : {"192.168.0.1", "fd00:ec2::254", "fe80::1:2", "2001:db8:0:1::"})
		EXPECT_EQ(format_address(addr(s)), s);
}

TEST(FormatCidr, AddressSlashLength)
{
	EXPECT_EQ(format_cidr(cidr("10.0.0.0", 8)), "10.0.0.0/8");
	EXPECT_EQ(format_cidr(cidr("::", 0)), "::/0");
	EXPECT_EQ(format_cidr(cidr("2001:db8::", 32)), "2001:db8::/32");
	EXPECT_EQ(format_cidr(cidr("169.254.169.254", 32)), "169.254.169.254/32");
}

TEST(Mask, Ipv4)
{
	Address a = v4(10, 171, 205, 239);
	EXPECT_EQ(mask(a, 32), a);
	EXPECT_EQ(mask(a, 24), v4(10, 171, 205, 0));
	EXPECT_EQ(mask(a, 16), v4(10, 171, 0, 0));
	EXPECT_EQ(mask(a, 12), v4(10, 160, 0, 0));
	EXPECT_EQ(mask(a, 9), v4(10, 128, 0, 0));
	EXPECT_EQ(mask(a, 8), v4(10, 0, 0, 0));
	EXPECT_EQ(mask(a, 1), v4(0, 0, 0, 0));
	EXPECT_EQ(mask(v4(200, 1, 1, 1), 1), v4(128, 0, 0, 0));
	EXPECT_EQ(mask(a, 0), v4(0, 0, 0, 0));
	EXPECT_EQ(mask(a, 31), v4(10, 171, 205, 238));
	EXPECT_EQ(mask(a, 0).family, AL_FAMILY_IPV4);
}

TEST(Mask, Ipv6)
{
	Address a = addr("2001:db8:abcd:ef01:2345:6789:abcd:ef01");
	EXPECT_EQ(mask(a, 128), a);
	EXPECT_EQ(mask(a, 64), addr("2001:db8:abcd:ef01::"));
	EXPECT_EQ(mask(a, 48), addr("2001:db8:abcd::"));
	EXPECT_EQ(mask(a, 36), addr("2001:db8:a000::"));
	EXPECT_EQ(mask(a, 12), addr("2000::"));
	EXPECT_EQ(mask(a, 127), addr("2001:db8:abcd:ef01:2345:6789:abcd:ef00"));
	EXPECT_EQ(mask(a, 0), addr("::"));
	EXPECT_EQ(mask(a, 0).family, AL_FAMILY_IPV6);
}

TEST(Contains, CidrAndAddress)
{
	Cidr ten = cidr("10.0.0.0", 8);
	EXPECT_TRUE(contains(ten, addr("10.0.0.0")));
	EXPECT_TRUE(contains(ten, addr("10.255.255.255")));
	EXPECT_TRUE(contains(ten, addr("10.1.2.3")));
	EXPECT_FALSE(contains(ten, addr("11.0.0.0")));
	EXPECT_FALSE(contains(ten, addr("9.255.255.255")));

	Cidr host = cidr("192.0.2.7", 32);
	EXPECT_TRUE(contains(host, addr("192.0.2.7")));
	EXPECT_FALSE(contains(host, addr("192.0.2.6")));

	Cidr odd = cidr("172.16.0.0", 12);
	EXPECT_TRUE(contains(odd, addr("172.31.255.255")));
	EXPECT_FALSE(contains(odd, addr("172.32.0.0")));

	Cidr all4 = cidr("0.0.0.0", 0);
	EXPECT_TRUE(contains(all4, addr("255.255.255.255")));
	EXPECT_TRUE(contains(all4, addr("::ffff:1.2.3.4")));
	EXPECT_FALSE(contains(all4, addr("::1")));

	Cidr all6 = cidr("::", 0);
	EXPECT_TRUE(contains(all6, addr("2001:db8::1")));
	EXPECT_TRUE(contains(all6, addr("::")));
	// IPv4 and IPv6 are kept apart: ::/0 never matches an IPv4 address,
	// not even one written as ::ffff:a.b.c.d.
	EXPECT_FALSE(contains(all6, addr("0.0.0.0")));
	EXPECT_FALSE(contains(all6, addr("10.0.0.1")));
	EXPECT_FALSE(contains(all6, addr("::ffff:10.0.0.1")));

	Cidr doc6 = cidr("2001:db8::", 32);
	EXPECT_TRUE(contains(doc6, addr("2001:db8:ffff::1")));
	EXPECT_FALSE(contains(doc6, addr("2001:db9::")));

	// Same bytes, other family: no match.
	Address ten_as_v6 = addr("10.0.0.1");
	ten_as_v6.family = AL_FAMILY_IPV6;
	EXPECT_FALSE(contains(ten, ten_as_v6));
}

TEST(Contains, CidrAndCidr)
{
	Cidr eight = cidr("10.0.0.0", 8);
	Cidr sixteen = cidr("10.1.0.0", 16);
	Cidr other = cidr("11.1.0.0", 16);
	EXPECT_TRUE(contains(eight, sixteen));
	EXPECT_FALSE(contains(sixteen, eight));
	EXPECT_TRUE(contains(eight, eight));
	EXPECT_TRUE(contains(sixteen, sixteen));
	EXPECT_FALSE(contains(eight, other));
	EXPECT_FALSE(contains(sixteen, cidr("10.2.0.0", 16)));
	EXPECT_TRUE(contains(cidr("0.0.0.0", 0), other));
	EXPECT_TRUE(contains(sixteen, cidr("10.1.2.3", 32)));
	EXPECT_FALSE(contains(sixteen, cidr("10.2.2.3", 32)));

	Cidr v6_32 = cidr("2001:db8::", 32);
	Cidr v6_64 = cidr("2001:db8:1:2::", 64);
	EXPECT_TRUE(contains(v6_32, v6_64));
	EXPECT_FALSE(contains(v6_64, v6_32));
	EXPECT_TRUE(contains(cidr("::", 0), v6_64));
	EXPECT_FALSE(contains(v6_64, cidr("2001:db8:1:3::", 64)));

	// Never across families, whichever is wider.
	EXPECT_FALSE(contains(cidr("::", 0), eight));
	EXPECT_FALSE(contains(cidr("0.0.0.0", 0), v6_64));
	EXPECT_FALSE(contains(cidr("::", 0), cidr("0.0.0.0", 0)));
}

TEST(FromRaw, ZeroesIpv4Tail)
{
	uint8_t raw[16];
	for (int i = 0; i < 16; i++)
		raw[i] = static_cast<uint8_t>(0xa0 + i);

	Address four = from_raw(AL_FAMILY_IPV4, raw);
	EXPECT_EQ(four.family, AL_FAMILY_IPV4);
	EXPECT_EQ(four, v4(0xa0, 0xa1, 0xa2, 0xa3));
	for (size_t i = 4; i < 16; i++)
		EXPECT_EQ(four.bytes[i], 0) << i;
	// So it compares equal to the same address parsed from text.
	uint8_t ten[16] = {10, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8};
	EXPECT_EQ(from_raw(AL_FAMILY_IPV4, ten), addr("10.0.0.1"));

	Address six = from_raw(AL_FAMILY_IPV6, raw);
	EXPECT_EQ(six.family, AL_FAMILY_IPV6);
	for (size_t i = 0; i < 16; i++)
		EXPECT_EQ(six.bytes[i], raw[i]) << i;
}

// What the SNI gate never connects to: the host's, the link's, a group's
// addresses, in every form; the edges just outside each range are global.
TEST(LocalScope, HostLinkAndGroupAddressesInEveryForm)
{
	for (const char* s : {"0.0.0.0", "0.1.2.3", "127.0.0.1", "127.255.255.254", "169.254.169.254", "169.254.0.0",
			      "224.0.0.1", "239.255.255.255", "255.255.255.255", "::", "::1", "fe80::1", "febf:ffff::1",
			      "ff02::1", "ff0e::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0"}) {
		auto a = parse_address(s);
		ASSERT_TRUE(a) << s;
		EXPECT_TRUE(is_local_scope(*a)) << s;
	}
	for (const char* s : {"1.0.0.0", "126.255.255.255", "128.0.0.0", "169.253.255.255", "169.255.0.0",
			      "223.255.255.255", "240.0.0.0", "255.255.255.254", "10.77.0.2", "203.0.113.10", "::2",
			      "fec0::1", "fe7f::1", "fd77::2", "2001:db8::1", "::ffff:10.77.0.2"}) {
		auto a = parse_address(s);
		ASSERT_TRUE(a) << s;
		EXPECT_FALSE(is_local_scope(*a)) << s;
	}
	// An address as the kernel hands it over (not parsed, so not
	// normalised): v4-mapped in an IPv6 family.
	Address mapped;
	mapped.family = AL_FAMILY_IPV6;
	mapped.bytes = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
	EXPECT_TRUE(is_local_scope(mapped));
	mapped.bytes[12] = 10;
	EXPECT_FALSE(is_local_scope(mapped));
}

}  // namespace
}  // namespace airlock
