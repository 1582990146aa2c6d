// Domain names as the kernel keys them (policy/dnsname.h), from arbitrary
// bytes, three ways:
//  - the bytes as a policy's domain: the parser accepts exactly the names an
//    independent reading of the rules accepts (letters, digits, '-', '_';
//    labels of 1-63, no '-' at either end; at most 253; "*." in front and one
//    trailing dot allowed; not an address), and normalises them (lowercase,
//    no "*.", no trailing dot). The normalised name encodes to one length
//    byte per label then the label, name_from_key gives the name back, and a
//    name the kernel can match leaves room for AL_NAME_END in
//    AL_DNS_NAME_BYTES; a longer one does not compile. domain_covers holds
//    its definition for the name, its children and lookalikes;
//  - the bytes as a key from the kernel: name_from_key returns nullopt
//    exactly when they do not hold whole labels (1-63 bytes each), and
//    otherwise printable ASCII only, from which every label's bytes come
//    back by reading the escapes (\DDD, \., \\);
//  - DNS type names and numbers: dns_type_name and dns_type_number are
//    inverse on the names airlock knows, and unknown numbers are TYPE<n>.
#include <airlock/abi.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "net/address.h"
#include "policy/compile.h"
#include "policy/dnsname.h"
#include "policy/policy.h"

using namespace airlock;
using airlock::fuzz::broken;
using airlock::fuzz::check;

namespace {

using Labels = std::vector<std::string>;

// The rules of a domain name as docs/policy.md gives them, written apart
// from the parser: the normalised name, or nullopt.
std::optional<std::string> expected_name(std::string s, bool& wildcard)
{
	for (char& c : s)
		if (c >= 'A' && c <= 'Z')
			c = static_cast<char>(c - 'A' + 'a');
	if (!s.empty() && s.back() == '.')
		s.pop_back();
	wildcard = s.rfind("*.", 0) == 0;
	if (wildcard)
		s.erase(0, 2);
	if (s.empty() || s.size() > 253 || parse_address(s))
		return std::nullopt;
	size_t len = 0;
	for (size_t i = 0; i <= s.size(); i++) {
		if (i == s.size() || s[i] == '.') {
			if (len == 0 || len > 63 || s[i - 1] == '-' || s[i - len] == '-')
				return std::nullopt;
			len = 0;
			continue;
		}
		unsigned char c = static_cast<unsigned char>(s[i]);
		if (!(std::isalnum(c) || c == '-' || c == '_'))
			return std::nullopt;
		len++;
	}
	return s;
}

// The labels of a key, from the last to the first; nullopt if the bytes do
// not hold whole labels.
std::optional<Labels> key_labels(std::string_view key)
{
	Labels out;
	size_t p = 0;
	while (p < key.size()) {
		size_t len = static_cast<unsigned char>(key[p]);
		if (len == 0 || len > 63 || p + 1 + len > key.size())
			return std::nullopt;
		out.insert(out.begin(), std::string(key.substr(p + 1, len)));
		p += 1 + len;
	}
	return out;
}

// A name as name_from_key writes it, read back into its labels.
std::optional<Labels> read_escaped(std::string_view s)
{
	Labels out(1);
	for (size_t i = 0; i < s.size(); i++) {
		char c = s[i];
		if (c == '.') {
			out.emplace_back();
		} else if (c != '\\') {
			out.back() += c;
		} else if (i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
			   std::isdigit(static_cast<unsigned char>(s[i + 2])) &&
			   std::isdigit(static_cast<unsigned char>(s[i + 3]))) {
			int v = (s[i + 1] - '0') * 100 + (s[i + 2] - '0') * 10 + (s[i + 3] - '0');
			if (v > 255)
				return std::nullopt;
			out.back() += static_cast<char>(v);
			i += 3;
		} else if (i + 1 < s.size()) {
			out.back() += s[++i];
		} else {
			return std::nullopt;
		}
	}
	if (s.empty())
		out.clear();
	return out;
}

void as_policy_domain(std::string_view bytes)
{
	nlohmann::json doc = {{"version", 1}, {"name", "n"}, {"rules", {{{"action", "allow"}}}}};
	doc["rules"][0]["domain"] = std::string(bytes);
	std::string text = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
	// What the parser saw: invalid UTF-8 became U+FFFD, which no name holds.
	std::string seen = nlohmann::json::parse(text)["rules"][0]["domain"].get<std::string>();
	bool wildcard = false;
	std::optional<std::string> want = expected_name(seen, wildcard);

	auto parsed = parse_policy_text(text, "fuzz.json");
	if (parsed.ok() != want.has_value())
		broken(want ? "the parser refuses a valid name" : "the parser accepts an invalid name", seen);
	if (!want)
		return;
	const Rule& r = parsed->rules.at(0);
	check(r.domain == want && r.wildcard == wildcard, "a domain is normalised", seen);
	const std::string& name = *r.domain;

	std::vector<uint8_t> key = name_key_bytes(name);
	check(key.size() == name.size() + 1, "a key is one byte longer than its name", name);
	auto labels = key_labels(std::string_view(reinterpret_cast<const char*>(key.data()), key.size()));
	check(labels.has_value(), "a key holds whole labels", name);
	std::string joined;
	for (const auto& l : *labels)
		joined += (joined.empty() ? "" : ".") + l;
	check(joined == name, "a key holds the name's labels in reverse order", name);
	auto back = name_from_key(key.data(), key.size());
	check(back == name, "name_from_key(name_key_bytes(name)) == name", name);

	// The kernel's key: the name's bytes, then AL_NAME_END for an exact name.
	auto compiled = compile_policy(*parsed, 1);
	bool fits = key.size() + 1 <= AL_DNS_NAME_BYTES;
	check(fits == (name.size() <= AL_DNS_NAME_MAX), "AL_DNS_NAME_MAX is what fits AL_DNS_NAME_BYTES", name);
	check(compiled.ok() == fits, "a name compiles exactly when its key fits", name);
	if (fits) {
		const CompiledName& e = compiled->names.at(0);
		check(e.value.name_len == key.size() && std::equal(key.begin(), key.end(), e.key.name),
		      "the compiled key is name_key_bytes", name);
		check(wildcard || e.key.name[key.size()] == AL_NAME_END, "an exact name's key ends in AL_NAME_END",
		      name);
	}

	check(domain_covers(name, false, name) && !domain_covers(name, true, name), "x is not *.x", name);
	check(domain_covers(name, true, "a." + name) && !domain_covers(name, false, "a." + name), "*.x covers a.x only",
	      name);
	check(!domain_covers(name, true, "a" + name) && !domain_covers(name, false, "a" + name), "*.x is not ax", name);
}

void as_kernel_key(std::string_view bytes)
{
	auto want = key_labels(bytes);
	auto got = name_from_key(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
	check(got.has_value() == want.has_value(), "nullopt exactly when the bytes do not hold whole labels");
	if (!got)
		return;
	for (unsigned char c : *got)
		if (c < 0x21 || c >= 0x7f)
			broken("a decoded name is printable ASCII", *got);
	if (read_escaped(*got) != want)
		broken("the escapes give every label's bytes back", *got);
}

void as_dns_type(std::string_view bytes)
{
	if (bytes.size() >= 2) {
		uint16_t n = static_cast<uint16_t>(static_cast<uint8_t>(bytes[0]) << 8 |
						   static_cast<uint8_t>(bytes[1]));
		std::string name = dns_type_name(n);
		auto num = dns_type_number(name);
		check(num ? *num == n : name == "TYPE" + std::to_string(n), "dns_type_name: a known name or TYPE<n>",
		      name);
	}
	std::string s(bytes);
	if (auto num = dns_type_number(s))
		check(dns_type_name(*num) == s, "dns_type_name(dns_type_number(s)) == s", s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	std::string_view bytes(reinterpret_cast<const char*>(data), size);
	as_policy_domain(bytes);
	as_kernel_key(bytes);
	as_dns_type(bytes);
	return 0;
}
