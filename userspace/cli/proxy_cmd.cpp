// `airlock proxy`: its arguments in, the proxy process (proxyd/) run on
// them.
#include "cli/proxy_cmd.h"

#include "proxyd/proxyd.h"
#include "util/error.h"

namespace airlock {

int cmd_proxy(const ProxyCommand& c)
{
	return proxyd::run(c);
}

int cmd_proxy(const std::vector<std::string>& args)
{
	auto parsed = proxyd::ProxyArgs::from_argv(args);
	if (!parsed)
		fail("airlock proxy: {}", parsed.rejection().first());
	return proxyd::run(*parsed);
}

}  // namespace airlock
