#pragma once
// The proxy's side of the SNI gate: the policy's gated rules, the
// sandbox's learned names, and the agent at the other end of the channel
// (proxy/agent_channel.h), which makes the sockets to gated origins.
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "kernel/views.h"
#include "policy/policy.h"
#include "proxy/world.h"

namespace airlock::proxyd {

class AgentGate : public proxy::Gate {
public:
	AgentGate(boost::asio::io_context& io, const Policy& p, int control_fd, int learned_fd);

	void start() { wait(); }
	// What to do with the gate inputs a reload hands over (gate/inputs.h,
	// as the agent encoded them).
	void on_inputs(std::function<void(std::string)> f) { on_inputs_ = std::move(f); }
	// The SNI gate's rules, from a reloaded policy.
	void set_rules(const Policy&);
	// The recorder stopped: the channel closes, nothing more is waited for.
	void stop();

	const proxy::GateRule* rule(uint16_t index) const override;
	std::string learned_name(const Address& a) const override;
	void connect(int accepted_fd, const proxy::Origin&, std::function<void(int, int)> done) override;
	void violation(const proxy::Origin& o, const std::string& sni, const std::string& reason) override;

private:
	static constexpr size_t kMaxPending = 1024;

	void post(std::function<void(int, int)> done, int fd, int err);
	void wait();
	bool receive();
	void take_inputs(int memfd, uint64_t bytes);

	boost::asio::posix::stream_descriptor channel_;
	kernel::LearnedNames learned_;
	std::unordered_map<uint16_t, proxy::GateRule> rules_;
	std::unordered_map<uint32_t, std::function<void(int, int)>> pending_;
	uint32_t last_id_ = 0;
	std::function<void(std::string)> on_inputs_;
};

}  // namespace airlock::proxyd
