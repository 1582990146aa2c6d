#include "policy/dnsname.h"

#include <array>
#include <utility>

#include <fmt/format.h>

namespace airlock {

namespace {

const std::array<std::pair<const char*, uint16_t>, 14> kTypes = {{
	{"A", 1},
	{"NS", 2},
	{"CNAME", 5},
	{"SOA", 6},
	{"NULL", 10},
	{"PTR", 12},
	{"MX", 15},
	{"TXT", 16},
	{"AAAA", 28},
	{"SRV", 33},
	{"SVCB", 64},
	{"HTTPS", 65},
	{"ANY", 255},
	{"CAA", 257},
}};

std::vector<std::string> labels_of(const std::string& name)
{
	std::vector<std::string> out;
	size_t start = 0;
	while (start <= name.size()) {
		size_t dot = name.find('.', start);
		if (dot == std::string::npos)
			dot = name.size();
		out.push_back(name.substr(start, dot - start));
		start = dot + 1;
	}
	return out;
}

}  // namespace

std::vector<uint8_t> name_key_bytes(const std::string& name)
{
	std::vector<uint8_t> out;
	if (name.empty())
		return out;
	auto labels = labels_of(name);
	for (auto it = labels.rbegin(); it != labels.rend(); ++it) {
		out.push_back(static_cast<uint8_t>(it->size()));
		out.insert(out.end(), it->begin(), it->end());
	}
	return out;
}

std::optional<std::string> name_from_key(const uint8_t* bytes, size_t n)
{
	std::vector<std::string> labels;
	size_t p = 0;
	while (p < n) {
		size_t len = bytes[p];
		if (len == 0 || len > 63 || p + 1 + len > n)
			return std::nullopt;
		std::string label;
		for (size_t i = 0; i < len; i++) {
			unsigned char c = bytes[p + 1 + i];
			if (c == '.' || c == '\\')
				label += std::string("\\") + static_cast<char>(c);
			else if (c >= 0x21 && c < 0x7f)
				label += static_cast<char>(c);
			else
				label += fmt::format("\\{:03d}", c);
		}
		labels.push_back(std::move(label));
		p += 1 + len;
	}
	std::string out;
	for (auto it = labels.rbegin(); it != labels.rend(); ++it) {
		if (!out.empty())
			out += '.';
		out += *it;
	}
	return out;
}

std::optional<uint16_t> dns_type_number(const std::string& type)
{
	for (const auto& [name, num] : kTypes)
		if (type == name)
			return num;
	return std::nullopt;
}

std::string dns_type_name(uint16_t type)
{
	for (const auto& [name, num] : kTypes)
		if (type == num)
			return name;
	return fmt::format("TYPE{}", type);
}

bool domain_covers(const std::string& rule_domain, bool wildcard, const std::string& name)
{
	if (!wildcard)
		return name == rule_domain;
	return name.size() > rule_domain.size() + 1 &&
	       name.compare(name.size() - rule_domain.size(), std::string::npos, rule_domain) == 0 &&
	       name[name.size() - rule_domain.size() - 1] == '.';
}

}  // namespace airlock
