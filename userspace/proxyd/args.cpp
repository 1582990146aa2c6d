#include "proxyd/args.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace airlock::proxyd {

namespace {

template <typename T>
std::optional<T> number(std::string_view s)
{
	T v{};
	auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
	if (ec != std::errc() || end != s.data() + s.size())
		return std::nullopt;
	return v;
}

// One option: where its value goes, whether it may repeat or must be given.
struct Option {
	const char* name;
	bool required;
	std::string ProxyArgs::*text = nullptr;
	uint32_t ProxyArgs::*u32 = nullptr;
	int ProxyArgs::*fd = nullptr;
	std::vector<int> ProxyArgs::*fds = nullptr;
};

const Option kOptions[] = {
	{"--sandbox", true, &ProxyArgs::sandbox},
	{"--slot", true, nullptr, &ProxyArgs::slot},
	{"--policy", true, &ProxyArgs::policy_file},
	{"--user", false, &ProxyArgs::user},
	{"--records-fd", true, nullptr, nullptr, &ProxyArgs::records_fd},
	{"--origin-fd", true, nullptr, nullptr, &ProxyArgs::origin_fd},
	{"--listen-fd", true, nullptr, nullptr, nullptr, &ProxyArgs::listen_fds},
	{"--udp-fd", false, nullptr, nullptr, nullptr, &ProxyArgs::udp_fds},
	{"--ca-fd", false, nullptr, nullptr, &ProxyArgs::ca_fd},
	{"--control-fd", false, nullptr, nullptr, &ProxyArgs::control_fd},
	{"--learned-fd", false, nullptr, nullptr, &ProxyArgs::learned_fd},
};

// Stores value into the option's field; a rejection when it is no value
// of the option's.
std::optional<Rejection> store(ProxyArgs& a, const Option& o, const std::string& value)
{
	if (o.text) {
		a.*o.text = value;
	} else if (o.u32) {
		auto v = number<uint32_t>(value);
		if (!v)
			return Rejection{{fmt::format("{}: '{}' is not a number", o.name, value)}};
		a.*o.u32 = *v;
	} else {
		auto v = number<int>(value);
		if (!v || *v < 0)
			return Rejection{{fmt::format("{}: '{}' is not a descriptor", o.name, value)}};
		if (o.fds)
			(a.*o.fds).push_back(*v);
		else
			a.*o.fd = *v;
	}
	return std::nullopt;
}

}  // namespace

std::vector<std::string> ProxyArgs::to_argv() const
{
	std::vector<std::string> out = {"--sandbox",    sandbox,
					"--slot",       std::to_string(slot),
					"--policy",     policy_file,
					"--user",       user,
					"--records-fd", std::to_string(records_fd),
					"--origin-fd",  std::to_string(origin_fd)};
	auto put = [&](const char* name, int fd) {
		if (fd < 0)
			return;
		out.emplace_back(name);
		out.push_back(std::to_string(fd));
	};
	for (int fd : listen_fds)
		put("--listen-fd", fd);
	for (int fd : udp_fds)
		put("--udp-fd", fd);
	put("--ca-fd", ca_fd);
	put("--control-fd", control_fd);
	put("--learned-fd", learned_fd);
	return out;
}

Result<ProxyArgs> ProxyArgs::from_argv(const std::vector<std::string>& argv)
{
	ProxyArgs a;
	std::vector<const Option*> seen;
	for (size_t i = 0; i < argv.size(); i++) {
		std::string name = argv[i];
		std::optional<std::string> value;
		if (size_t eq = name.find('='); eq != std::string::npos && name.rfind("--", 0) == 0) {
			value = name.substr(eq + 1);
			name.resize(eq);
		}
		const Option* o = nullptr;
		for (const auto& c : kOptions)
			if (name == c.name)
				o = &c;
		if (!o)
			return Rejection{{fmt::format("unknown argument '{}'", argv[i])}};
		if (!value && i + 1 == argv.size())
			return Rejection{{fmt::format("{}: a value is needed", name)}};
		if (!value)
			value = argv[++i];
		if (!o->fds && std::find(seen.begin(), seen.end(), o) != seen.end())
			return Rejection{{fmt::format("{}: given twice", name)}};
		seen.push_back(o);
		if (auto r = store(a, *o, *value))
			return *r;
	}
	for (const auto& o : kOptions)
		if (o.required && std::find(seen.begin(), seen.end(), &o) == seen.end())
			return Rejection{{fmt::format("{} is required", o.name)}};
	return a;
}

}  // namespace airlock::proxyd
