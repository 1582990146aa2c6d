// The HTTP gate's canonical form of a request target (net/url.h): what is
// decoded, what stays encoded, what is refused and why, and what goes
// upstream.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/url.h"

namespace airlock::url {
namespace {

std::string canon(const std::string& t)
{
	auto r = canonical_target(t);
	if (!r)
		return "refused: " + r.rejection().message;
	return r->serialized();
}

TEST(Url, UnreservedBytesAreDecodedOnceOthersStayEncodedInUpperCase)
{
	EXPECT_EQ(canon("/wiki/Main_Page"), "/wiki/Main_Page");
	EXPECT_EQ(canon("/wiki/%4d%61in"), "/wiki/Main");
	EXPECT_EQ(canon("/a%7eb%2D%5F%2E"), "/a~b-_.");
	EXPECT_EQ(canon("/a%3ab%3Fc%40"), "/a%3Ab%3Fc%40");
	EXPECT_EQ(canon("/caf%c3%a9"), "/caf%C3%A9");
	// A byte that has no place in a path unencoded is encoded.
	EXPECT_EQ(canon("/a b{c}\"d|"), "/a%20b%7Bc%7D%22d%7C");
	EXPECT_EQ(canon(std::string("/caf\xc3\xa9")), "/caf%C3%A9");
	// Sub-delimiters, ':' and '@' stay as they are; paths keep their case.
	EXPECT_EQ(canon("/x;v=1/a:b@c!$&'()*+,="), "/x;v=1/a:b@c!$&'()*+,=");
	EXPECT_EQ(canon("/WIKI/X"), "/WIKI/X");
	EXPECT_EQ(canon("/"), "/");
	EXPECT_EQ(canon("/wiki/"), "/wiki/");
}

TEST(Url, ThePathBypassesAreRefused)
{
	const std::vector<std::pair<std::string, std::string>> cases = {
		{"/wiki/%2e%2e/admin", "a '..' segment"},
		{"/wiki/%2E%2E/admin", "a '..' segment"},
		{"/wiki/.%2e/admin", "a '..' segment"},
		{"/wiki/../admin", "a '..' segment"},
		{"/wiki/./x", "a '.' segment"},
		{"/wiki/%2e/x", "a '.' segment"},
		{"/wiki/..;a=b/admin", "a '..' segment"},
		{"/wiki/.;/admin", "a '.' segment"},
		{"/wiki/..", "a '..' segment"},
		{"/wiki/..%2fadmin", "an encoded '/' (%2F)"},
		{"/wiki%2fx", "an encoded '/' (%2F)"},
		{"/wiki%2Fx", "an encoded '/' (%2F)"},
		{"/wiki%5cx", "an encoded '\\' (%5C)"},
		{"/wiki%00.html", "an encoded NUL (%00)"},
		{"/wiki\\..\\admin", "a '\\' (servers differ on whether it separates segments)"},
		{"/wiki//admin", "an empty segment ('//')"},
		{"//wiki/x", "an empty segment ('//')"},
		{"/wiki/%252e%252e/admin", "a double-encoded '.'"},
		{"/wiki/%252f", "a double-encoded '/'"},
		{"/wiki/%255c", "a double-encoded '\\'"},
		{"/wiki/%2500", "a double-encoded NUL"},
		{"/wiki/%25252f", "a double-encoded '%'"},
		{"/wiki/%25%32%66", "a double-encoded '/'"},
		{"/wiki/%", "a '%' not followed by two hex digits"},
		{"/wiki/%2", "a '%' not followed by two hex digits"},
		{"/wiki/%zz", "a '%' not followed by two hex digits"},
		{"/wiki/x#frag", "a '#' (a fragment is never sent)"},
		{"wiki/x", "the target is not a path starting with '/'"},
		{"*", "the target is not a path starting with '/'"},
		{"http://wiki.example.org/x", "the target is not a path starting with '/'"},
		{"", "the target is not a path starting with '/'"},
	};
	for (const auto& [target, why] : cases)
		EXPECT_EQ(canon(target), "refused: " + why) << target;
}

TEST(Url, MalformedAndRefusedAreToldApart)
{
	EXPECT_EQ(canonical_target("/a%zz").rejection().kind, TargetProblem::Malformed);
	EXPECT_EQ(canonical_target("/a#b").rejection().kind, TargetProblem::Malformed);
	EXPECT_EQ(canonical_target(std::string("/a\0b", 4)).rejection().message, "a control byte (0x00)");
	EXPECT_EQ(canonical_target("/a\tb").rejection().message, "a control byte (0x09)");
	EXPECT_EQ(canonical_target("/a\x7f").rejection().kind, TargetProblem::Malformed);
	EXPECT_EQ(canonical_target("/a/../b").rejection().kind, TargetProblem::Path);
	EXPECT_EQ(canonical_target("/a%2fb").rejection().kind, TargetProblem::Path);
}

TEST(Url, TheQueryIsDecodedAndWrittenBackUnambiguously)
{
	auto t = canonical_target("/w/index.php?action=view&title=A+B%2bC&&flag&%61ction=raw&e=");
	ASSERT_TRUE(t);
	EXPECT_EQ(t->path, "/w/index.php");
	ASSERT_EQ(t->query.size(), 5u);
	EXPECT_EQ(t->query[0], (QueryParam{"action", "view", true}));
	EXPECT_EQ(t->query[1], (QueryParam{"title", "A B+C", true}));
	EXPECT_EQ(t->query[2], (QueryParam{"flag", "", false}));
	EXPECT_EQ(t->query[3], (QueryParam{"action", "raw", true})) << "a name is decoded like a value";
	EXPECT_EQ(t->query[4], (QueryParam{"e", "", true}));
	// '+' and %2B cannot be read two ways upstream: a space is %20.
	EXPECT_EQ(t->serialized(), "/w/index.php?action=view&title=A%20B%2BC&flag&action=raw&e=");
	EXPECT_EQ(canon("/x?"), "/x?");
	EXPECT_EQ(canon("/x?a=%00"), "refused: an encoded NUL (%00) in the query");
	EXPECT_EQ(canon("/x?a=%g0"), "refused: a '%' not followed by two hex digits in the query");
	EXPECT_EQ(canon("/x?a=1#f"), "refused: a '#' (a fragment is never sent)");
	EXPECT_EQ(canon(std::string("/x?a\0=1", 8)), "refused: a control byte (0x00) in the query");
	// A path-like query is the query's: never judged as the path.
	EXPECT_EQ(canon("/x?next=/../admin"), "/x?next=%2F..%2Fadmin");
}

TEST(Url, APolicyPathIsCanonicalOrSaysWhatIsNot)
{
	EXPECT_EQ(path_problem("/wiki/"), std::nullopt);
	EXPECT_EQ(path_problem("/"), std::nullopt);
	EXPECT_EQ(path_problem("wiki"), "it does not start with '/'");
	EXPECT_EQ(path_problem("/a//b"), "an empty segment ('//')");
	EXPECT_EQ(path_problem("/a/./b"), "a '.' segment");
	EXPECT_EQ(path_problem("/a/..;x/b"), "a '..' segment");
}

TEST(Url, EncodeComponentLeavesTheUnreservedAlone)
{
	EXPECT_EQ(encode_component("aZ09-._~"), "aZ09-._~");
	EXPECT_EQ(encode_component("a b+/?&=%"), "a%20b%2B%2F%3F%26%3D%25");
	EXPECT_EQ(encode_component(std::string("\0\xff", 2)), "%00%FF");
}

}  // namespace
}  // namespace airlock::url
