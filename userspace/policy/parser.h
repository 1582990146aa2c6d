#pragma once
// The policy file parser, shared by the files that read its parts: the
// rules (parse_rule.cpp), the dns, world and families blocks
// (parse_blocks.cpp) and the document around them (parser.cpp). Every
// mistake is noted with its JSON path and reading goes on, so that a user
// sees all of them at once.
#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "policy/policy.h"
#include "util/text.h"

namespace airlock::policy_parse {

using nlohmann::json;

// A value as it appears in a message: strings quoted, the rest as JSON.
std::string shown(const json& v);

class Parser {
public:
	explicit Parser(std::string file) : file_(std::move(file)) {}

	Result<Policy, PolicyRejection> document(std::string_view text);

	void error(const std::string& path, std::string message)
	{
		errors_.push_back({file_, path.empty() ? "(root)" : path, std::move(message)});
	}

	bool expect(const json& v, const std::string& path, bool ok, const char* what)
	{
		if (!ok)
			error(path, fmt::format("expected {}, got {}", what, json_type_name(v)));
		return ok;
	}

	void unknown_keys(const json& obj, const std::string& path, std::initializer_list<const char*> known)
	{
		for (auto it = obj.begin(); it != obj.end(); ++it) {
			if (std::find_if(known.begin(), known.end(), [&](const char* k) { return it.key() == k; }) ==
			    known.end())
				error(path, fmt::format("unknown key '{}'", printable(it.key())));
		}
	}

	// A key as an error's JSON path shows it: escaped, whatever the file
	// named it (printable() of printable text is itself).
	static std::string join(const std::string& path, const std::string& key)
	{
		return path.empty() ? printable(key) : path + "/" + printable(key);
	}

	// A rule and its parts (parse_rule.cpp).
	std::optional<Cidr> cidr(const json& v, const std::string& path);
	bool domain(const json& v, const std::string& path, Rule& r);
	std::optional<PortRange> port(const json& v, const std::string& path);
	std::optional<UnixTarget> unix_target(const json& v, const std::string& path);
	std::optional<Rule> rule(const json& v, const std::string& path, size_t index);
	void gates(const json& v, const std::string& path, Rule& r);
	std::optional<RedirectTarget> redirect_target(const json& v, const std::string& path);
	void tls(const json& v, const std::string& path, Rule& r);

	// The HTTP gate's part (parse_http.cpp).
	void http_gate(const json& v, const std::string& path, Rule& r);
	std::optional<HttpEntry> http_entry(const json& v, const std::string& path);
	void http_methods(const json& v, const std::string& path, HttpEntry& e);
	void http_path(const json& v, const std::string& path, HttpEntry& e);
	void http_query(const json& v, const std::string& path, HttpEntry& e);
	void http_json(const json& v, const std::string& path, HttpEntry& e);
	std::optional<HttpRate> http_rate(const json& v, const std::string& path);
	std::optional<InjectHeader> inject_header(const std::string& name, const json& v, const std::string& path);
	void secrets(const json& v, const std::string& path, std::vector<SecretSource>& out);
	void check_injects(const Policy& p);

	// The blocks beside the rules (parse_blocks.cpp).
	void world(const json& v, const std::string& path, WorldPolicy& w);
	std::optional<WorldResponse> world_response(const json& v, const std::string& path);
	void dns(const json& v, const std::string& path, DnsPolicy& d);
	void edns(const json& v, const std::string& path, DnsPolicy& d);
	void families(const json& v, const std::string& path, uint64_t& mask);

private:
	// version, name, description, mode, on_violation (parser.cpp).
	void header(const json& doc, Policy& p);

	std::string file_;
	std::vector<PolicyError> errors_;
};

}  // namespace airlock::policy_parse
