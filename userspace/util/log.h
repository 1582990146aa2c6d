#pragma once
// airlock's log lines on stderr, in one of two formats:
//   text  "airlock LEVEL: message", with an RFC 3339 time in front when
//         asked (the daemon); to the journal (JOURNAL_STREAM names stderr)
//         without the time, which the journal records itself, and with the
//         level as a syslog priority prefix ("<4>") that it understands.
//   json  one object per line: {"ts", "level", "msg"}, for log shippers.
#include <optional>
#include <string_view>

namespace airlock {

enum class LogFormat { Text, Json };

std::optional<LogFormat> parse_log_format(std::string_view);
void setup_logging(LogFormat, bool timestamps);
// Whether stderr is a stream of the journal's (systemd's JOURNAL_STREAM).
bool stderr_is_journal();

}  // namespace airlock
