#pragma once
// The daemon's control socket, client side: one JSON request per connection,
// one JSON line back ({"ok": true, "message": ...} or {"error": ...}), or for
// `events` the audit lines themselves. The socket is root's alone.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ops/request.h"
#include "sandbox/state.h"
#include "util/result.h"
#include "util/fd.h"

namespace airlock {

std::string control_socket(const Paths&);

// A connection to the daemon of this state directory; invalid when none
// listens there. Other failures throw.
Fd daemon_connect(const Paths&);

// Sends one request and reads the answer. nullopt: no daemon runs. An
// {"error"} answer with policy errors is a Rejection; other errors throw.
std::optional<Result<nlohmann::json>> daemon_call(const Paths&, const Request& request);
// The same for a request that names no policy: any error throws.
std::optional<nlohmann::json> daemon_ask(const Paths&, const Request& request);

}  // namespace airlock
