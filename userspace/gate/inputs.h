#pragma once
// What a sandbox's proxy needs of a policy to serve the HTTP gate and to
// scan for secrets, beyond the policy itself: the secrets' values and the
// origins' extra roots (tls.upstream_ca). Read by root, outside every
// sandbox: by the proxy before it drops its privileges, when it starts;
// by the agent, when a reload hands the proxy a new policy (the proxy can
// no longer read a file by then). On that channel they travel as one JSON
// text in a sealed memfd (proxy/agent_channel.h), the policy's own text
// with them.
#include <cstdint>
#include <map>
#include <string>

#include "gate/secrets.h"
#include "policy/policy.h"
#include "util/result.h"

namespace airlock::gate {

// At most this much on the channel: the policy file, every secret file and
// every upstream_ca, each bounded by kMaxSecretFileBytes.
inline constexpr size_t kMaxInputsBytes = 64u << 20;

struct Inputs {
	std::string policy_text;                      // the policy file as read
	Secrets secrets;                              // read_secrets
	std::map<unsigned, std::string> upstream_ca;  // by rule index: tls.upstream_ca's text
};

// The secrets and the roots of an already parsed policy, read; or why
// not, one line naming the file.
Result<Inputs> read_inputs(const Policy&, std::string policy_text);

std::string encode_inputs(const Inputs&);
// The text encode_inputs wrote, or why it is not.
Result<Inputs> decode_inputs(std::string_view);

}  // namespace airlock::gate
