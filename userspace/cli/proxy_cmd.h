#pragma once
// `airlock proxy`: started by the agent for a sandbox whose policy
// redirects; not a command for people. The process itself is proxyd/.
#include <string>
#include <vector>

namespace airlock {

// The arguments after `airlock proxy`, as ops/proxy.cpp writes them
// (proxyd::ProxyArgs::to_argv); a bad one fails with one line.
int cmd_proxy(const std::vector<std::string>& args);

}  // namespace airlock
