#pragma once
// The sandboxes the daemon's configuration declares: made or attached when
// missing (a cgroup that does not exist yet is retried at each rescan),
// read again on SIGHUP, and systemd told the daemon is ready once each of
// them is enforced.
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/config.h"
#include "ops/request.h"
#include "sandbox/state.h"
#include "util/result.h"

namespace airlock {

class DeclaredSandboxes {
public:
	// Makes (or attaches) a sandbox as a `create` (`attach`) request
	// would; may throw.
	using Make = std::function<Result<nlohmann::json>(const Request&)>;

	// config_file: where the declarations come from ("" for none).
	DeclaredSandboxes(const Paths&, std::string config_file, std::vector<DeclaredSandbox>, Make);

	// Each declared sandbox that has no record is made or attached; what
	// stands in the way is logged once per change.
	void ensure();
	// SIGHUP: the configuration file read again. A rejected one is
	// logged, and the sandboxes it declared before stay.
	void reread();
	// systemd's readiness (Type=notify): sent once every declared sandbox
	// is made or attached and supervised, so that a unit ordered after
	// airlock starts under enforcement. Until then the status names what
	// is missing and why.
	void notify_when_enforcing(const std::function<bool(const std::string&)>& supervised, size_t supervising);

	bool declares(const std::string& name) const;
	const std::string& config_file() const { return config_file_; }

private:
	const Paths& paths_;
	std::string config_file_;
	std::vector<DeclaredSandbox> declared_;
	Make make_;
	std::map<std::string, std::string> errors_;  // name -> last error, logged once
	bool ready_ = false;
	std::string last_status_;
};

}  // namespace airlock
