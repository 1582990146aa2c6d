// `airlock proxy`: the proxy of a sandbox that redirects, started by
// `airlock run` and the daemon with the descriptors it needs; hidden from
// --help. Its options are registered here; the command is cli/proxy_cmd.h.
#include <memory>

#include "cli/commands.h"
#include "cli/proxy_cmd.h"

namespace airlock {

void register_proxy(CLI::App& app, Globals& g)
{
	auto o = std::make_shared<ProxyCommand>();
	auto* proxy = app.add_subcommand("proxy", "The proxy of a sandbox that redirects (started by airlock)");
	proxy->group("");  // not for people: `airlock run` and the daemon start it
	proxy->add_option("--sandbox", o->sandbox)->required();
	proxy->add_option("--slot", o->slot)->required();
	proxy->add_option("--policy", o->policy_file)->required();
	proxy->add_option("--user", o->user);
	proxy->add_option("--records-fd", o->records_fd)->required();
	proxy->add_option("--origin-fd", o->origin_fd)->required();
	proxy->add_option("--ca-fd", o->ca_fd);
	proxy->add_option("--control-fd", o->control_fd);
	proxy->add_option("--learned-fd", o->learned_fd);
	proxy->add_option("--listen-fd", o->listen_fds)->required();
	proxy->add_option("--udp-fd", o->udp_fds);
	on_parsed(proxy, g, [o] { return cmd_proxy(*o); });
}

}  // namespace airlock
