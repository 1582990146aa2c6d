// What `airlock oci-hook` makes of a container's OCI state: the policy (the
// annotation, else the default, else nothing), the sandbox name, the stage,
// and one exact line for every state it will not act on.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "ops/oci_hook.h"

namespace {

using airlock::ops::OciHookPlan;
using airlock::ops::plan_oci_hook;
using Action = OciHookPlan::Action;
using nlohmann::json;

const std::string kId = "02fcfc6add05058227cc852c5ab94f516aa13b2c0dd97855796e9d9fe3ade13c";

json state(const std::string& status = "creating", json annotations = json::object())
{
	return {{"ociVersion", "1.0.2-dev"},
		{"id", kId},
		{"status", status},
		{"pid", 4242},
		{"bundle", "/b"},
		{"annotations", std::move(annotations)}};
}

OciHookPlan plan(const json& s, const std::string& def = "")
{
	auto r = plan_oci_hook(s.dump(), airlock::ops::OciHookOptions{def, {}});
	if (!r) {
		ADD_FAILURE() << s.dump() << ": " << r.rejection().first();
		return {};
	}
	return *r;
}

std::string error_of(const std::string& text, const std::string& def = "agent")
{
	auto r = plan_oci_hook(text, airlock::ops::OciHookOptions{def, {}});
	if (!r)
		return r.rejection().first();
	return "(planned)";
}

TEST(OciHookPlan, NoAnnotationAndNoDefaultIsNothing)
{
	auto p = plan(state());
	EXPECT_EQ(p.action, Action::Nothing);
	EXPECT_EQ(plan({{"id", kId}, {"status", "creating"}, {"pid", 1}, {"annotations", nullptr}}).action,
		  Action::Nothing);
	// Not even a state the hook could act on is an error then.
	EXPECT_EQ(plan(state("running")).action, Action::Nothing);
}

TEST(OciHookPlan, TheAnnotationNamesThePolicyAndTheIdTheSandbox)
{
	auto p = plan(state("creating", {{"io.airlock.policy", "research-agent"}}), "default-one");
	EXPECT_EQ(p.action, Action::Attach);
	EXPECT_EQ(p.policy, "research-agent");
	EXPECT_TRUE(p.policy_from_annotation);
	EXPECT_EQ(p.pid, 4242);
	EXPECT_EQ(p.container, kId);
	EXPECT_EQ(p.name, "ctr-02fcfc6add05");
	// Any other status than "creating" is a later stage: too late, or inside the container.
	EXPECT_EQ(error_of(state("created", {{"io.airlock.policy", "a"}}).dump()),
		  "container " + kId +
			  ": its status is 'created': airlock oci-hook belongs to the createRuntime or "
			  "prestart stage, before the container's program runs");
}

TEST(OciHookPlan, OnlyAllowedPoliciesMayBeChosenByAnnotation)
{
	airlock::ops::OciHookOptions o{"agent", {"agent", "research"}};
	auto ok = plan_oci_hook(state("creating", {{"io.airlock.policy", "research"}}).dump(), o);
	ASSERT_TRUE(ok.ok());
	EXPECT_EQ(ok->policy, "research");
	auto no = plan_oci_hook(state("creating", {{"io.airlock.policy", "audit-learn"}}).dump(), o);
	ASSERT_FALSE(no.ok());
	EXPECT_EQ(no.rejection().first(), "container " + kId +
						  ": annotation io.airlock.policy='audit-learn' is not a policy "
						  "containers may choose here (agent, research)");
	// The default is the operator's: not limited by the list.
	auto def = plan_oci_hook(state().dump(), airlock::ops::OciHookOptions{"strict", {"agent"}});
	ASSERT_TRUE(def.ok());
	EXPECT_EQ(def->policy, "strict");
}

TEST(OciHookPlan, APodsInfrastructureContainerIsLeftAlone)
{
	for (const char* key : {"io.kubernetes.cri.container-type", "io.kubernetes.cri-o.ContainerType"}) {
		auto p = plan(state("creating", {{"io.airlock.policy", "agent"}, {key, "sandbox"}}), "agent");
		EXPECT_EQ(p.action, Action::Nothing) << key;
		auto c = plan(state("creating", {{"io.airlock.policy", "agent"}, {key, "container"}}), "agent");
		EXPECT_EQ(c.action, Action::Attach) << key;
	}
}

TEST(OciHookPlan, TheDefaultPolicyTakesAContainerWithoutTheAnnotation)
{
	auto p = plan(state(), "agent");
	EXPECT_EQ(p.action, Action::Attach);
	EXPECT_EQ(p.policy, "agent");
	EXPECT_FALSE(p.policy_from_annotation);
	EXPECT_EQ(plan(state(), "/etc/airlock/policies/agent.json").policy, "/etc/airlock/policies/agent.json");
}

TEST(OciHookPlan, AShortIdIsTheNameWholeALongOneByItsFirst12)
{
	json s = state();
	s["id"] = "agent-run-0001";
	EXPECT_EQ(plan(s, "p").name, "ctr-agent-run-0001");
	s["id"] = std::string(59, 'a');
	EXPECT_EQ(plan(s, "p").name, "ctr-" + std::string(59, 'a'));
	// 64 hex digits: the first 12; any other long id: its first 38 and a
	// hash of the whole, so that ids alike in their first characters differ.
	s["id"] = std::string(64, 'b');
	EXPECT_EQ(plan(s, "p").name, "ctr-bbbbbbbbbbbb");
	s["id"] = std::string(59, 'x') + "-run-1";
	std::string one = plan(s, "p").name;
	s["id"] = std::string(59, 'x') + "-run-2";
	std::string two = plan(s, "p").name;
	EXPECT_NE(one, two);
	EXPECT_EQ(one.rfind("ctr-" + std::string(38, 'x') + "-", 0), 0u) << one;
	EXPECT_EQ(one.size(), 4 + 38 + 1 + 16u);
	EXPECT_EQ(plan(s, "p").name, two) << "the same id, the same name";
	// An id a sandbox cannot be named after, with no policy for it: nothing, not an error.
	s["id"] = "a+b";
	EXPECT_EQ(plan(s).action, Action::Nothing);
}

TEST(OciHookPlan, AStoppedContainerIsLeftToTheDaemon)
{
	auto p = plan(state("stopped"), "agent");
	EXPECT_EQ(p.action, Action::Stopped);
}

TEST(OciHookPlan, AnAnnotationThatIsNotAPolicyNameIsRefused)
{
	const std::string who = "container " + kId + ": ";
	EXPECT_EQ(
		error_of(state("creating", {{"io.airlock.policy", "/etc/passwd"}}).dump()),
		who + "annotation io.airlock.policy='/etc/passwd' is not a policy name (a name in the daemon's policy "
		      "directory: 1-128 of A-Z a-z 0-9 . _ -; a container never names a file)");
	for (const char* bad : {"../x", "a/b", ".hidden", "", "x y", "a\nb"})
		EXPECT_NE(error_of(state("creating", {{"io.airlock.policy", bad}}).dump()).find("is not a policy name"),
			  std::string::npos)
			<< bad;
	EXPECT_EQ(error_of(state("creating", {{"io.airlock.policy", 7}}).dump()),
		  who + "annotation io.airlock.policy is not a string");
	EXPECT_EQ(error_of(state("creating", {{"io.airlock.policy", std::string(129, 'p')}}).dump())
				  .find("is not a policy name") != std::string::npos,
		  true);
}

TEST(OciHookPlan, StatesItCannotActOnAreOneLineEach)
{
	const std::string who = "container " + kId + ": ";
	EXPECT_EQ(error_of("not json"),
		  "the container state on standard input is not a JSON object (is this run by an OCI runtime's hook?)");
	EXPECT_EQ(error_of("[]"),
		  "the container state on standard input is not a JSON object (is this run by an OCI runtime's hook?)");
	EXPECT_EQ(error_of(R"({"status":"creating","pid":1})"), "the container state has no \"id\"");
	EXPECT_EQ(error_of(R"({"id":"a/b","status":"creating","pid":1})"),
		  "container a/b: its id is not one airlock names a sandbox after (A-Z a-z 0-9 . _ -)");
	EXPECT_EQ(error_of(R"({"id":"x\u0001","status":"creating","pid":1})"),
		  "container x\\x01: its id is not one airlock names a sandbox after (A-Z a-z 0-9 . _ -)");
	EXPECT_EQ(error_of(json{{"id", kId}, {"pid", 1}}.dump()), who + "the state has no \"status\"");
	EXPECT_EQ(error_of(state("running").dump()),
		  who + "its status is 'running': airlock oci-hook belongs to the createRuntime or prestart stage, "
			"before the container's program runs");
	json s = state();
	s.erase("pid");
	EXPECT_EQ(error_of(s.dump()), who + "the state has no \"pid\" of the container's process");
	s["pid"] = 0;
	EXPECT_EQ(error_of(s.dump()), who + "the state has no \"pid\" of the container's process");
	s["pid"] = "12";
	EXPECT_EQ(error_of(s.dump()), who + "the state has no \"pid\" of the container's process");
	s = state();
	s["annotations"] = "x";
	EXPECT_EQ(error_of(s.dump()), who + "\"annotations\" is not an object");
}

}  // namespace
