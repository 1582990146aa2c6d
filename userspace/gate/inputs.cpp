#include "gate/inputs.h"

#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "net/url.h"  // hex_value

namespace airlock::gate {

using json = nlohmann::json;

Result<Inputs> read_inputs(const Policy& p, std::string policy_text)
{
	Inputs in;
	in.policy_text = std::move(policy_text);
	auto secrets = read_secrets(p);
	if (!secrets)
		return secrets.rejection();
	in.secrets = std::move(*secrets);
	for (const Rule& r : p.rules) {
		if (!r.http || r.http->upstream_ca.empty())
			continue;
		auto text = read_policy_file(r.http->upstream_ca);
		if (!text)
			return Rejection{{fmt::format("{}: rules[{}].tls.upstream_ca: {}: {}", p.source, r.index,
						      r.http->upstream_ca, text.rejection().first())}};
		in.upstream_ca[r.index] = std::move(*text);
	}
	return in;
}

namespace {

// Bytes as hex: a secret, a policy need not be UTF-8, which JSON strings are.
std::string hex(std::string_view b)
{
	static const char* digits = "0123456789abcdef";
	std::string out;
	out.reserve(b.size() * 2);
	for (unsigned char c : b) {
		out += digits[c >> 4];
		out += digits[c & 15];
	}
	return out;
}

bool unhex(const json& j, std::string& out)
{
	if (!j.is_string())
		return false;
	const auto& s = j.get_ref<const std::string&>();
	if (s.size() % 2)
		return false;
	out.clear();
	out.reserve(s.size() / 2);
	for (size_t i = 0; i < s.size(); i += 2) {
		int hi = url::hex_value(s[i]), lo = url::hex_value(s[i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out += static_cast<char>(hi * 16 + lo);
	}
	return true;
}

json values(const std::vector<SecretValue>& v)
{
	json a = json::array();
	for (const auto& s : v)
		a.push_back({{"name", hex(s.name)}, {"value", hex(s.value)}});
	return a;
}

bool read_values(const json& j, const char* key, std::vector<SecretValue>& out)
{
	if (!j.contains(key) || !j[key].is_array())
		return false;
	for (const auto& s : j[key]) {
		SecretValue v;
		if (!s.is_object() || !s.contains("name") || !s.contains("value") || !unhex(s["name"], v.name) ||
		    !unhex(s["value"], v.value))
			return false;
		out.push_back(std::move(v));
	}
	return true;
}

}  // namespace

std::string encode_inputs(const Inputs& in)
{
	json ca = json::object();
	for (const auto& [index, pem] : in.upstream_ca)
		ca[std::to_string(index)] = hex(pem);
	json j{{"policy", hex(in.policy_text)},
	       {"never_send", values(in.secrets.never_send)},
	       {"injectable", values(in.secrets.injectable)},
	       {"upstream_ca", ca}};
	return j.dump();
}

Result<Inputs> decode_inputs(std::string_view text)
{
	const Rejection bad{{"the gate's inputs are not what the agent writes"}};
	json j = json::parse(text, nullptr, false);
	Inputs in;
	if (!j.is_object() || !j.contains("policy") || !unhex(j["policy"], in.policy_text) ||
	    !read_values(j, "never_send", in.secrets.never_send) ||
	    !read_values(j, "injectable", in.secrets.injectable) || !j.contains("upstream_ca") ||
	    !j["upstream_ca"].is_object())
		return bad;
	for (const auto& [key, pem] : j["upstream_ca"].items()) {
		unsigned index = 0;
		auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
		std::string text;
		if (ec != std::errc() || end != key.data() + key.size() || !unhex(pem, text))
			return bad;
		in.upstream_ca[index] = std::move(text);
	}
	return in;
}

}  // namespace airlock::gate
