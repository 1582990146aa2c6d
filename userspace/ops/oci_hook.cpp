#include "ops/oci_hook.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sandbox/cgroup.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/text.h"

namespace airlock::ops {

namespace {

using nlohmann::json;

bool is_policy_name(const std::string& s)
{
	static const std::regex re("[A-Za-z0-9][A-Za-z0-9._-]{0,127}");
	return std::regex_match(s, re);
}

}  // namespace

std::string container_cgroup(int pid)
{
	if (!std::filesystem::exists("/proc/" + std::to_string(pid)))
		fail("its process {} does not exist", pid);
	std::string cg = cgroup::of_pid(pid);
	if (cgroup::level_of(cg) <= 0)
		fail("its process {} is in the root cgroup: the container has no cgroup of its own", pid);
	std::ifstream procs(cg + "/cgroup.procs");
	if (!procs)
		fail("cannot read {}/cgroup.procs", cg);
	std::vector<int> others;
	for (int p; procs >> p;)
		if (p != pid)
			others.push_back(p);
	if (!others.empty())
		fail("its cgroup {} holds {} other process{} (pid {}): not the container's own (are the runtime's "
		     "cgroups disabled?); airlock does not enforce a shared cgroup",
		     cg, others.size(), others.size() == 1 ? "" : "es", others.front());
	return cg;
}

std::string container_sandbox_name(const std::string& id)
{
	// Ids of 64 hex digits (podman, CRI-O, containerd) are known by their
	// first 12, as `podman ps` shows them; shorter ones, chosen by a
	// person, whole.
	std::string name = "ctr-" + (id.size() <= 59 ? id : id.substr(0, 12));
	return valid_sandbox_name(name) ? name : "";
}

std::variant<OciHookPlan, std::string> plan_oci_hook(std::string_view state, const std::string& default_policy)
{
	json j = json::parse(state, nullptr, false);
	if (!j.is_object())
		return std::string("the container state on standard input is not a JSON object (is this run by an OCI "
				   "runtime's hook?)");
	OciHookPlan p;
	if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty())
		return std::string("the container state has no \"id\"");
	p.container = j["id"].get<std::string>();
	std::string who = "container " + printable(p.container);
	p.name = container_sandbox_name(p.container);
	if (p.name.empty())
		return fmt::format("{}: its id is not one airlock names a sandbox after (A-Z a-z 0-9 . _ -, starting "
				   "with a letter or digit)", who);
	if (!j.contains("status") || !j["status"].is_string())
		return fmt::format("{}: the state has no \"status\"", who);
	std::string status = j["status"].get<std::string>();

	if (j.contains("annotations") && !j["annotations"].is_null()) {
		const json& a = j["annotations"];
		if (!a.is_object())
			return fmt::format("{}: \"annotations\" is not an object", who);
		if (a.contains(kPolicyAnnotation)) {
			if (!a[kPolicyAnnotation].is_string())
				return fmt::format("{}: annotation {} is not a string", who, kPolicyAnnotation);
			std::string v = a[kPolicyAnnotation].get<std::string>();
			if (!is_policy_name(v))
				return fmt::format("{}: annotation {}='{}' is not a policy name (a name in the daemon's "
						   "policy directory: 1-128 of A-Z a-z 0-9 . _ -; a container never names "
						   "a file)",
						   who, kPolicyAnnotation, printable(v));
			p.policy = v;
			p.policy_from_annotation = true;
		}
	}
	if (p.policy.empty())
		p.policy = default_policy;
	if (p.policy.empty())
		return p;  // Nothing: no annotation, no default

	if (status == "stopped") {
		p.action = OciHookPlan::Action::Stopped;
		return p;
	}
	if (status != "creating" && status != "created")
		return fmt::format("{}: its status is '{}': airlock oci-hook belongs to the createRuntime or prestart "
				   "stage, before the container's program runs",
				   who, printable(status));
	if (!j.contains("pid") || !j["pid"].is_number_integer() || j["pid"].get<long long>() <= 0 ||
	    j["pid"].get<long long>() > 0x3fffffff)
		return fmt::format("{}: the state has no \"pid\" of the container's process", who);
	p.pid = static_cast<int>(j["pid"].get<long long>());
	p.action = OciHookPlan::Action::Attach;
	return p;
}

}  // namespace airlock::ops
