#pragma once
// What the agent hands the proxy it starts (ops/proxy.cpp): the sandbox,
// its policy file, the user to become, and the descriptors the proxy finds
// open at exec, by number. One struct for both sides: the agent writes it
// as the proxy's command line with to_argv(), the proxy reads it back with
// from_argv().
#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace airlock::proxyd {

struct ProxyArgs {
	std::string sandbox;
	uint32_t slot = 0;
	std::string policy_file;  // the agent's copy of the sandbox's policy
	std::string user = "airlock-proxy";
	int records_fd = -1;
	int origin_fd = -1;  // the origin table, read-only
	std::vector<int> listen_fds;
	std::vector<int> udp_fds;
	int ca_fd = -1;  // the world's CA (certificate and key, PEM), read and closed at start
	// The channel to the agent (proxy/agent_channel.h): the proxy's counts,
	// and the SNI gate's questions.
	int control_fd = -1;
	// The sandbox's learned addresses, read-only: the SNI gate (a policy
	// with gated rules).
	int learned_fd = -1;

	// The arguments after `airlock proxy`: --OPTION VALUE pairs, the
	// descriptors unset (-1) left out.
	std::vector<std::string> to_argv() const;
	// The same back (also --OPTION=VALUE); a rejection of one line for an
	// unknown or repeated option, a value that is not a number, or a
	// required one missing (--sandbox, --slot, --policy, --records-fd,
	// --origin-fd, --listen-fd).
	static Result<ProxyArgs> from_argv(const std::vector<std::string>& argv);

	bool operator==(const ProxyArgs&) const = default;
};

}  // namespace airlock::proxyd
