#include "proxy/world_stats.h"

#include <nlohmann/json.hpp>

namespace airlock::proxy {

std::string proxy_counts_json(const ProxyCounts& c)
{
	nlohmann::json j;
	j["proxy_starts"] = c.starts;
	for (const auto& f : kStatsFields)
		j[f.name] = c.stats.*f.member;
	return j.dump();
}

std::optional<ProxyCounts> parse_proxy_counts(const std::string& text)
{
	auto j = nlohmann::json::parse(text, nullptr, false);
	if (!j.is_object())
		return std::nullopt;
	auto get = [&](const char* key, uint64_t& out) {
		auto it = j.find(key);
		if (it == j.end() || !it->is_number_unsigned())
			return false;
		out = it->get<uint64_t>();
		return true;
	};
	ProxyCounts c;
	if (!get("proxy_starts", c.starts))
		return std::nullopt;
	for (const auto& f : kStatsFields)
		if (!get(f.name, c.stats.*f.member))
			return std::nullopt;
	return c;
}

}  // namespace airlock::proxy
