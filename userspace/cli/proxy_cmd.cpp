// `airlock proxy`: its arguments in, the proxy process (proxyd/) run on
// them. The agent writes them (ProxyArgs::to_argv) and the proxy reads them
// back with the same struct (from_argv), so the two never disagree on an
// option.
#include "cli/proxy_cmd.h"

#include "cli/commands.h"
#include "proxyd/args.h"
#include "proxyd/proxyd.h"
#include "util/error.h"

namespace airlock {

int cmd_proxy(const std::vector<std::string>& args)
{
	auto parsed = proxyd::ProxyArgs::from_argv(args);
	if (!parsed)
		fail("airlock proxy: {}", parsed.rejection().first());
	return proxyd::run(*parsed);
}

void register_proxy(CLI::App& app, Globals& g)
{
	auto* proxy = app.add_subcommand("proxy", "The proxy of a sandbox that redirects (started by airlock)");
	proxy->group("");         // not for people: `airlock run` and the daemon start it
	proxy->prefix_command();  // every argument after it is ProxyArgs::from_argv's
	on_parsed(proxy, g, [proxy] { return cmd_proxy(proxy->remaining()); });
}

}  // namespace airlock
