// The world's DNS (proxy/dns.h): what it reads of a query, what it answers,
// and the table of names it binds. Real clients ask it in
// test_world_recorder.cpp (dig, UDP and TCP) and World.* (glibc, dig,
// Python, through the kernel).
#include <gtest/gtest.h>

#include <string>

#include "proxy/dns.h"

namespace airlock::proxy {
namespace {

std::string be16(unsigned v)
{
	return {static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
}

// A query: header (ID 0xabcd, FLAGS, QDCOUNT qd), then BODY as given.
std::string message(unsigned flags, unsigned qd, const std::string& body)
{
	return be16(0xabcd) + be16(flags) + be16(qd) + be16(0) + be16(0) + be16(0) + body;
}

std::string question(const std::string& wire_name, unsigned type, unsigned cls = 1)
{
	return wire_name + be16(type) + be16(cls);
}

const std::string kName = std::string("\3api\7example\3com\0", 17);

TEST(WorldDns, AQuestionIsReadAsSent)
{
	DnsQuery q = parse_dns_query(message(0x0100, 1, question(std::string("\3A.b\4\\x\x01y\0", 10), 16)));
	ASSERT_FALSE(q.ignore);
	EXPECT_EQ(q.problem, DnsRcode::NoError);
	EXPECT_EQ(q.id, 0xabcd);
	EXPECT_EQ(q.name, "A\\.b.\\\\x\\001y");
	EXPECT_EQ(q.qtype, 16);
	EXPECT_EQ(dns_type_name(q.qtype), "TXT");
	EXPECT_EQ(dns_type_name(65534), "TYPE65534");
	EXPECT_EQ(parse_dns_query(message(0, 1, question(std::string(1, '\0'), 2))).name, ".");
}

TEST(WorldDns, WhatIsNotAQueryOrCannotBeReadIsSaidSo)
{
	EXPECT_TRUE(parse_dns_query(std::string(11, '\0')).ignore);
	EXPECT_TRUE(parse_dns_query(message(0x8180, 1, question(kName, 1))).ignore);                   // a response
	EXPECT_EQ(parse_dns_query(message(0x2800, 1, question(kName, 1))).problem, DnsRcode::NotImp);  // UPDATE
	EXPECT_EQ(parse_dns_query(message(0, 2, question(kName, 1) + question(kName, 1))).problem, DnsRcode::FormErr);
	EXPECT_EQ(parse_dns_query(message(0, 0, "")).problem, DnsRcode::FormErr);
	// A compression pointer, a label of 64, a name past 255, a cut question.
	EXPECT_EQ(parse_dns_query(message(0, 1, question("\3api\xc0\x0c", 1))).problem, DnsRcode::FormErr);
	EXPECT_EQ(parse_dns_query(message(0, 1, question("\x40" + std::string(64, 'a') + std::string(1, '\0'), 1)))
			  .problem,
		  DnsRcode::FormErr);
	std::string longname;
	for (int i = 0; i < 5; i++)
		longname += "\x3f" + std::string(63, 'a');
	EXPECT_EQ(parse_dns_query(message(0, 1, question(longname + std::string(1, '\0'), 1))).problem,
		  DnsRcode::FormErr);
	EXPECT_EQ(parse_dns_query(message(0, 1, kName + be16(1))).problem, DnsRcode::FormErr);
}

TEST(WorldDns, TheAnswers)
{
	NameTable t;
	std::string qa = question(kName, 1);
	DnsAnswer a = answer_dns_query(parse_dns_query(message(0x0100, 1, qa)), t);
	EXPECT_EQ(a.rcode, DnsRcode::NoError);
	EXPECT_EQ(a.answer, "198.18.0.1");
	// ID, QR AA RD RA, one question, one answer; the question as sent; the
	// A record by a pointer to it, TTL 300, 198.18.0.1.
	std::string want = be16(0xabcd) + be16(0x8580) + be16(1) + be16(1) + be16(0) + be16(0) + qa + be16(0xc00c) +
			   be16(1) + be16(1) + be16(0) + be16(300) + be16(4) + std::string("\xc6\x12\x00\x01", 4);
	EXPECT_EQ(a.wire, want);

	DnsAnswer aaaa = answer_dns_query(parse_dns_query(message(0, 1, question(kName, 28))), t);
	EXPECT_EQ(aaaa.rcode, DnsRcode::NoError);
	EXPECT_EQ(aaaa.wire.substr(6, 2), be16(0));  // no answer
	EXPECT_EQ(answer_dns_query(parse_dns_query(message(0, 1, question(kName, 1, 3))), t).rcode, DnsRcode::Refused);
	DnsAnswer ptr = answer_dns_query(
		parse_dns_query(
			message(0, 1, question(std::string("\0011\0010\00218\003198\7in-addr\4arpa\0", 25), 12))),
		t);
	EXPECT_EQ(ptr.answer, "api.example.com");
	EXPECT_EQ(ptr.wire.substr(ptr.wire.size() - kName.size()), kName);
	DnsAnswer none = answer_dns_query(
		parse_dns_query(
			message(0, 1, question(std::string("\0012\0010\00218\003198\7in-addr\4arpa\0", 25), 12))),
		t);
	EXPECT_EQ(none.rcode, DnsRcode::NxDomain);
	DnsAnswer notimp = answer_dns_query(parse_dns_query(message(0x2900, 1, qa)), t);
	EXPECT_EQ(notimp.wire,
		  be16(0xabcd) + be16(0xa984) + std::string(8, '\0'));  // opcode and RD copied, no question
}

TEST(WorldDns, TheTableBindsOneAddressPerNameAndForgetsTheOldestPastItsCapacity)
{
	NameTable t(2);
	EXPECT_EQ(format_address(t.bind("a.example")), "198.18.0.1");
	EXPECT_EQ(format_address(t.bind("b.example")), "198.18.0.2");
	EXPECT_EQ(format_address(t.bind("A.Example")), "198.18.0.1");
	EXPECT_EQ(t.name_of(*parse_address("198.18.0.1")), "a.example");
	EXPECT_EQ(format_address(t.bind("c.example")), "198.18.0.1");  // a's, the oldest
	EXPECT_EQ(t.name_of(*parse_address("198.18.0.1")), "c.example");
	EXPECT_EQ(t.size(), 2u);
	EXPECT_EQ(format_address(t.bind("a.example")), "198.18.0.2");  // a new name again, b's address
	EXPECT_EQ(t.name_of(*parse_address("198.18.0.3")), "");
	EXPECT_EQ(t.name_of(*parse_address("10.0.0.1")), "");
	NameTable big(NameTable::kMaxCapacity);
	for (size_t i = 0; i + 1 < NameTable::kMaxCapacity; i++)
		big.bind("n" + std::to_string(i));
	EXPECT_EQ(format_address(big.bind("last")), "198.19.255.254");
}

}  // namespace
}  // namespace airlock::proxy
