#include "ops/world_records.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>

#include <fmt/format.h>

#include "sandbox/state.h"
#include "util/error.h"

namespace airlock::ops {

std::string world_records_path(const std::string& arg, const std::string& dir)
{
	struct stat st {};
	if (arg.find('/') != std::string::npos || ::stat(arg.c_str(), &st) == 0 || !valid_sandbox_name(arg))
		return arg;
	return dir + "/" + arg + ".jsonl";
}

proxy::ShowResult read_world_records(const std::string& records, const proxy::ShowOptions& o)
{
	struct stat st {};
	int err = ::stat(records.c_str(), &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
	std::ifstream in;
	if (!err) {
		in.open(records);
		err = in ? 0 : errno;
	}
	if (err)
		fail_errno(fmt::format("world show: cannot open {}", records), err);
	proxy::ShowResult r = proxy::show_records(in, records, o);
	if (in.bad())
		fail("world show: cannot read {}", records);
	return r;
}

}  // namespace airlock::ops
