#pragma once
// `airlock proxy`: started by the agent for a sandbox whose policy
// redirects; not a command for people.
#include <cstdint>
#include <string>
#include <vector>

namespace airlock {

struct ProxyCommand {
	std::string sandbox;
	uint32_t slot = 0;
	std::string policy_file;  // the agent's copy of the sandbox's policy
	std::string user = "airlock-proxy";
	int records_fd = -1;
	int origin_fd = -1;
	std::vector<int> listen_fds;
	std::vector<int> udp_fds;
	int ca_fd = -1;  // the world's CA (certificate and key, PEM), read and closed at start
	// The channel to the agent (proxy/agent_channel.h): the proxy's counts,
	// and the SNI gate's questions.
	int control_fd = -1;
	// The sandbox's learned addresses, read-only: the SNI gate (a policy
	// with gated rules).
	int learned_fd = -1;
};

int cmd_proxy(const ProxyCommand&);

}  // namespace airlock
