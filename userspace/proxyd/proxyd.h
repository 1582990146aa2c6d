#pragma once
// The proxy process (`airlock proxy`): started by the agent for a sandbox
// whose policy redirects, it runs the world's recorder (proxy/world.h) on
// the descriptors it was handed, as an unprivileged user under its own
// seccomp filter (proxyd/lockdown.h), with the SNI gate's agent channel
// and the stats reporter when the agent gave it one.
#include "proxyd/args.h"

namespace airlock::proxyd {

// Runs until SIGTERM or SIGINT; the exit status. Throws (util/error.h)
// when its descriptors or policy are not what the agent should have
// handed over, or it cannot give up its privileges.
int run(const ProxyArgs&);

}  // namespace airlock::proxyd
