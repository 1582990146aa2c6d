#include "ops/oci_hook.h"

#include <algorithm>
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

std::optional<std::string> container_sandbox_name(const std::string& id)
{
	if (id.size() <= 59) {
		std::string name = "ctr-" + id;
		if (!valid_sandbox_name(name))
			return std::nullopt;
		return name;
	}
	bool hex64 = id.size() == 64 && std::all_of(id.begin(), id.end(), [](unsigned char c) {
			     return std::isdigit(c) || (c >= 'a' && c <= 'f');
		     });
	if (hex64)
		return "ctr-" + id.substr(0, 12);
	if (!valid_sandbox_name("ctr-" + id.substr(0, 59)) || !std::all_of(id.begin(), id.end(), [](unsigned char c) {
		    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
	    }))
		return std::nullopt;
	uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits: the same name for the same id
	for (unsigned char c : id)
		h = (h ^ c) * 1099511628211ull;
	return fmt::format("ctr-{}-{:016x}", id.substr(0, 38), h);
}

namespace {

// The infrastructure container of a pod (the pause container), which runs
// nothing of the workload: CRI-O and containerd say so in annotations.
bool infrastructure_container(const json& annotations)
{
	for (const char* key : {"io.kubernetes.cri.container-type", "io.kubernetes.cri-o.ContainerType"})
		if (annotations.contains(key) && annotations[key].is_string() &&
		    annotations[key].get<std::string>() == "sandbox")
			return true;
	return false;
}

}  // namespace

Result<OciHookPlan> plan_oci_hook(std::string_view state, const OciHookOptions& options)
{
	auto no = [](std::string line) { return Rejection{{std::move(line)}}; };
	json j = json::parse(state, nullptr, false);
	if (!j.is_object())
		return no(
			std::string("the container state on standard input is not a JSON object (is this run by an OCI "
				    "runtime's hook?)"));
	OciHookPlan p;
	if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty())
		return no(std::string("the container state has no \"id\""));
	p.container = j["id"].get<std::string>();
	std::string who = "container " + printable(p.container);
	if (!j.contains("status") || !j["status"].is_string())
		return no(fmt::format("{}: the state has no \"status\"", who));
	std::string status = j["status"].get<std::string>();

	json annotations = json::object();
	if (j.contains("annotations") && !j["annotations"].is_null()) {
		if (!j["annotations"].is_object())
			return no(fmt::format("{}: \"annotations\" is not an object", who));
		annotations = j["annotations"];
	}
	if (annotations.contains(kPolicyAnnotation)) {
		if (!annotations[kPolicyAnnotation].is_string())
			return no(fmt::format("{}: annotation {} is not a string", who, kPolicyAnnotation));
		std::string v = annotations[kPolicyAnnotation].get<std::string>();
		if (!is_policy_name(v))
			return no(fmt::format(
				"{}: annotation {}='{}' is not a policy name (a name in the daemon's policy "
				"directory: 1-128 of A-Z a-z 0-9 . _ -; a container never names a file)",
				who, kPolicyAnnotation, printable(v)));
		if (!options.allowed.empty() &&
		    std::find(options.allowed.begin(), options.allowed.end(), v) == options.allowed.end()) {
			std::string list;
			for (const auto& a : options.allowed)
				list += (list.empty() ? "" : ", ") + a;
			return no(fmt::format("{}: annotation {}='{}' is not a policy containers may choose here ({})",
					      who, kPolicyAnnotation, printable(v), list));
		}
		p.policy = v;
		p.policy_from_annotation = true;
	}
	if (p.policy.empty())
		p.policy = options.default_policy;
	if (p.policy.empty() || infrastructure_container(annotations))
		return p;  // Nothing

	auto name = container_sandbox_name(p.container);
	if (!name)
		return no(fmt::format("{}: its id is not one airlock names a sandbox after (A-Z a-z 0-9 . _ -)", who));
	p.name = *name;
	if (status == "stopped") {
		p.action = OciHookPlan::Action::Stopped;
		return p;
	}
	// createRuntime and prestart see "creating"; later stages run inside
	// the container or after its program started.
	if (status != "creating")
		return no(
			fmt::format("{}: its status is '{}': airlock oci-hook belongs to the createRuntime or prestart "
				    "stage, before the container's program runs",
				    who, printable(status)));
	if (!j.contains("pid") || !j["pid"].is_number_integer() || j["pid"].get<long long>() <= 0 ||
	    j["pid"].get<long long>() > 0x3fffffff)
		return no(fmt::format("{}: the state has no \"pid\" of the container's process", who));
	p.pid = static_cast<int>(j["pid"].get<long long>());
	p.action = OciHookPlan::Action::Attach;
	return p;
}

}  // namespace airlock::ops
