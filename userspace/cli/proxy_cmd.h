#pragma once
// `airlock proxy`: started by the agent for a sandbox whose policy
// redirects; not a command for people. The process itself is proxyd/.
#include <string>
#include <vector>

#include "proxyd/args.h"

namespace airlock {

// What the agent hands over (proxyd/args.h), option by option.
using ProxyCommand = proxyd::ProxyArgs;

int cmd_proxy(const ProxyCommand&);
// The arguments after `airlock proxy`, as ops/proxy.cpp writes them
// (ProxyArgs::to_argv); a bad one fails with one line.
int cmd_proxy(const std::vector<std::string>& args);

}  // namespace airlock
