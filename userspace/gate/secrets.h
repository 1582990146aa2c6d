#pragma once
// The values of a policy's "secrets", read where the policy is applied (by
// root, outside every sandbox) and handed to the sandbox's proxy; never
// to the sandbox, never to a log (docs/gate.md, "Secrets").
//
// file: the whole file, ASCII white space trimmed at both ends, at least
// kMinSecretBytes. env_file: the value of each KEY=VALUE line ("export "
// before it, quotes around it and # comments as a shell or dotenv writes
// them) of kMinSecretBytes or more, each a never-send value named
// "NAME/KEY". A secret a rule injects must be a file that root owns and
// only root may read: the sandbox never holds what the gate adds for it.
// Files are opened without following a symbolic link, regular files only,
// at most kMaxSecretFileBytes.
#include <string>
#include <vector>

#include "gate/never_send.h"
#include "policy/policy.h"
#include "util/result.h"

namespace airlock::gate {

inline constexpr size_t kMaxSecretFileBytes = 1 << 20;

struct Secrets {
	std::vector<SecretValue> never_send;  // every value, env_file ones named NAME/KEY
	std::vector<SecretValue> injectable;  // the file secrets, by the policy's name
};

// Every secret of the policy, or why not: one line naming the file and the
// secret ("POLICY: secrets/NAME: /path: ...").
Result<Secrets> read_secrets(const Policy&);

// A file a policy names for the gate (a secret, an origin's roots, at
// tls.upstream_ca), read whole the way secrets are: a regular file reached
// without a symbolic link at its end, at most kMaxSecretFileBytes; or why
// not, one line.
Result<std::string> read_policy_file(const std::string& path);

// The values of an env file's text (its KEY=VALUE lines), in order.
std::vector<std::pair<std::string, std::string>> env_values(std::string_view text);

}  // namespace airlock::gate
