#pragma once
// The daemon's control socket, client side: one JSON request per connection,
// one JSON line back ({"ok": true, "message": ...} or {"error": ...}), or for
// `events` the audit lines themselves. The socket is root's alone.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sandbox/state.h"
#include "util/fd.h"

namespace airlock {

std::string control_socket(const Paths&);

// A connection to the daemon of this state directory; invalid when none
// listens there. Other failures throw.
Fd daemon_connect(const Paths&);

// Sends one request and reads the answer. nullopt: no daemon runs. An
// {"error"} answer throws: PolicyRejected when it carries policy errors.
std::optional<nlohmann::json> daemon_call(const Paths&, const nlohmann::json& request);

}  // namespace airlock
