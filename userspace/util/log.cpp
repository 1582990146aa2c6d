#include "util/log.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace airlock {

namespace {

// RFC 3339 in UTC with microseconds, as in the audit log.
std::string rfc3339(spdlog::log_clock::time_point t)
{
	auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
	std::time_t secs = static_cast<std::time_t>(us / 1000000);
	std::tm tm{};
	::gmtime_r(&secs, &tm);
	return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:06}Z", tm, us % 1000000);
}

const char* level_name(spdlog::level::level_enum l)
{
	switch (l) {
	case spdlog::level::trace:
		return "trace";
	case spdlog::level::debug:
		return "debug";
	case spdlog::level::info:
		return "info";
	case spdlog::level::warn:
		return "warning";
	case spdlog::level::err:
		return "error";
	case spdlog::level::critical:
		return "critical";
	default:
		return "info";
	}
}

// syslog(3) priorities, which the journal reads from a "<N>" prefix.
int priority(spdlog::level::level_enum l)
{
	switch (l) {
	case spdlog::level::trace:
	case spdlog::level::debug:
		return 7;
	case spdlog::level::info:
		return 6;
	case spdlog::level::warn:
		return 4;
	case spdlog::level::err:
		return 3;
	case spdlog::level::critical:
		return 2;
	default:
		return 6;
	}
}

class Formatter final : public spdlog::formatter {
public:
	Formatter(LogFormat format, bool timestamps, bool journal)
	    : format_(format), timestamps_(timestamps), journal_(journal)
	{
	}
	void format(const spdlog::details::log_msg& m, spdlog::memory_buf_t& dest) override
	{
		std::string_view text(m.payload.data(), m.payload.size());
		std::string line;
		if (format_ == LogFormat::Json) {
			nlohmann::ordered_json j = {{"ts", rfc3339(m.time)},
						    {"level", level_name(m.level)},
						    {"msg", text}};
			line = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
		} else if (journal_) {
			line = fmt::format("<{}>airlock {}: {}", priority(m.level), level_name(m.level), text);
		} else if (timestamps_) {
			line = fmt::format("{} airlock {}: {}", rfc3339(m.time), level_name(m.level), text);
		} else {
			line = fmt::format("airlock {}: {}", level_name(m.level), text);
		}
		line += '\n';
		dest.append(line.data(), line.data() + line.size());
	}
	std::unique_ptr<spdlog::formatter> clone() const override
	{
		return std::make_unique<Formatter>(format_, timestamps_, journal_);
	}

private:
	LogFormat format_;
	bool timestamps_;
	bool journal_;
};

}  // namespace

std::optional<LogFormat> parse_log_format(std::string_view s)
{
	if (s == "text")
		return LogFormat::Text;
	if (s == "json")
		return LogFormat::Json;
	return std::nullopt;
}

bool stderr_is_journal()
{
	const char* js = std::getenv("JOURNAL_STREAM");
	if (!js)
		return false;
	unsigned long long dev = 0, ino = 0;
	if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2)
		return false;
	struct stat st {};
	return ::fstat(2, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

void setup_logging(LogFormat format, bool timestamps)
{
	auto logger = spdlog::get("airlock");
	if (!logger) {
		logger = spdlog::stderr_logger_mt("airlock");
		spdlog::set_default_logger(logger);
	}
	logger->set_formatter(std::make_unique<Formatter>(format, timestamps, stderr_is_journal()));
}

}  // namespace airlock
