// `airlock world show`: what a sandbox tried in its simulated world, from
// the recorder's records file.
#include <sys/stat.h>

#include <cerrno>
#include <fstream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "proxy/records.h"
#include "sandbox/state.h"
#include "util/error.h"

namespace airlock {

std::string world_records_path(const std::string& arg, const std::string& dir)
{
	struct stat st{};
	if (arg.find('/') != std::string::npos || ::stat(arg.c_str(), &st) == 0 || !valid_sandbox_name(arg))
		return arg;
	return dir + "/" + arg + ".jsonl";
}

int cmd_world_show(const std::string& records, const std::string& sandbox, bool json)
{
	struct stat st{};
	int err = ::stat(records.c_str(), &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
	std::ifstream in;
	if (!err) {
		in.open(records);
		err = in ? 0 : errno;
	}
	if (err)
		fail_errno(fmt::format("world show: cannot open {}", records), err);
	proxy::ShowOptions o;
	o.sandbox = sandbox;
	o.json = json;
	proxy::ShowResult r = proxy::show_records(in, records, o);
	if (in.bad())
		fail("world show: cannot read {}", records);
	for (const auto& e : r.errors)
		fmt::print(stderr, "{}\n", e);
	fmt::print("{}", r.out);
	return kExitOk;
}

}  // namespace airlock
