// What user space calls the kernel's values and objects: the names of the ABI
// enums (audit log, status, Prometheus labels) and the pin names of maps and
// programs.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "events/audit.h"
#include "kernel/kernel.h"

namespace airlock {
namespace {

// Values 0..n-1 each have a name, non-empty and distinct from the others'
// and from "unknown".
void expect_own_names(const char* what, unsigned n, const char* (*name)(unsigned), unsigned first = 0)
{
	std::set<std::string> seen;
	for (unsigned v = first; v < n; v++) {
		std::string s = name(v);
		EXPECT_FALSE(s.empty()) << what << " " << v << " has no name";
		EXPECT_NE(s, "unknown") << what << " " << v;
		EXPECT_TRUE(seen.insert(s).second) << what << " " << v << ": '" << s << "' names another value too";
	}
}

TEST(AbiNames, EveryValueBelowMaxHasItsOwnName)
{
	constexpr unsigned hooks = 0 AL_HOOKS(AL_COUNT_ONE);
	static_assert(hooks <= AL_HOOK_MAX);
	expect_own_names("hook", hooks, hook_name);
	// The counters leave room for hooks to come: no name yet.
	for (unsigned h = hooks; h <= AL_HOOK_MAX; h++)
		EXPECT_STREQ(hook_name(h), "unknown") << h;
	expect_own_names("verdict", AL_VERDICT_MAX, verdict_name);
	expect_own_names("reason", AL_REASON_MAX, reason_name);
	// Nothing done to the task is never written out: its name is empty.
	EXPECT_STREQ(signal_name(AL_SIGNAL_NONE), "");
	expect_own_names("signal", AL_SIGNAL_MAX, signal_name, AL_SIGNAL_NONE + 1);
	expect_own_names("site", AL_ERR_SITE_MAX, err_site_name);
	for (auto f : {hook_name, verdict_name, reason_name, signal_name, err_site_name})
		EXPECT_STREQ(f(1000), "unknown");
}

// The names as audit logs, docs, dashboards and alert rules know them.
TEST(AbiNames, NamesAreTheOnesLogsAndMetricsUse)
{
	std::vector<std::string> hooks, verdicts, reasons, signals, sites;
	for (unsigned v = 0; v < AL_HOOK_MAX; v++)
		hooks.push_back(hook_name(v));
	for (unsigned v = 0; v < AL_VERDICT_MAX; v++)
		verdicts.push_back(verdict_name(v));
	for (unsigned v = 0; v < AL_REASON_MAX; v++)
		reasons.push_back(reason_name(v));
	for (unsigned v = 0; v < AL_SIGNAL_MAX; v++)
		signals.push_back(signal_name(v));
	for (unsigned v = 0; v < AL_ERR_SITE_MAX; v++)
		sites.push_back(err_site_name(v));
	EXPECT_EQ(hooks, (std::vector<std::string>{"sock_create", "connect4", "connect6", "sendmsg4", "sendmsg6",
						   "egress", "ingress", "connect_unix", "sendmsg_unix", "socket",
						   "unknown", "unknown"}));
	EXPECT_EQ(verdicts, (std::vector<std::string>{"allow", "deny", "audit"}));
	EXPECT_EQ(reasons,
		  (std::vector<std::string>{"rule-allow",     "no-rule",      "rule-deny",       "quarantined",
					    "raw-socket",     "icmp-socket",  "source-route",    "routing-header",
					    "fragment",       "malformed",    "no-sandbox",      "protocol",
					    "dns-allow",      "dns-resolver", "dns-tcp",         "dns-malformed",
					    "dns-name",       "dns-type",     "dns-length",      "dns-rate",
					    "dns-table",      "learned",      "dns-unsolicited", "dns-edns",
					    "dns-off-chain",  "unix-path",    "unix-scoped",     "busy",
					    "refused",        "unix-own",     "family",          "helper",
					    "redirect",       "no-proxy",     "proxy-port",      "redirect-udp",
					    "not-redirected", "loopback-dev", "budget",          "redirect-family"}));
	EXPECT_EQ(signals, (std::vector<std::string>{"", "stopped", "killed", "signal-failed"}));
	EXPECT_EQ(sites,
		  (std::vector<std::string>{"ipv4-header", "ipv4-option", "ipv6-header", "ipv6-extension", "l4-ports",
					    "dns-tcp-header", "dns-tcp-length", "dns-query", "dns-answer"}));
}

// The reasons that let a call or a packet through, as the summary of
// suppressed events and the docs (verdicts.md) name them; the hooks with
// names are the known ones.
TEST(AbiNames, AllowingReasonsAndKnownHooks)
{
	std::vector<std::string> allowing;
	for (unsigned r = 0; r < AL_REASON_MAX + 2; r++)
		if (reason_allows(r))
			allowing.emplace_back(reason_name(r));
	EXPECT_EQ(allowing, (std::vector<std::string>{"rule-allow", "dns-allow", "learned", "unix-scoped", "unix-own",
						      "redirect"}));
	for (unsigned h = 0; h <= AL_HOOK_MAX; h++)
		EXPECT_EQ(hook_known(h), std::string(hook_name(h)) != "unknown") << h;
	EXPECT_TRUE(hook_known(AL_HOOK_SOCKET));
	EXPECT_FALSE(hook_known(AL_HOOK_SOCKET + 1));
}

// Each name of the form, and none twice.
template <typename Pins>
std::set<std::string> expect_pin_names(const Pins& pins, const char* form)
{
	const std::regex re(form);
	std::set<std::string> names;
	for (const auto& p : pins) {
		EXPECT_TRUE(std::regex_match(p.name, re)) << p.name << " is not of the form " << form;
		EXPECT_TRUE(names.insert(p.name).second) << p.name << " is pinned twice";
	}
	return names;
}

TEST(PinNames, MapPinsAreUniqueAndNamedAlSomething)
{
	auto names = expect_pin_names(kernel::kMapPins, "al_[a-z_]+");
	// One pin per field of Maps, each field pinned once.
	static_assert(kernel::kMapPinCount * sizeof(Fd) == sizeof(kernel::Maps));
	for (size_t i = 0; i < kernel::kMapPins.size(); i++)
		for (size_t j = i + 1; j < kernel::kMapPins.size(); j++)
			EXPECT_NE(kernel::kMapPins[i].field, kernel::kMapPins[j].field)
				<< kernel::kMapPins[i].name << " and " << kernel::kMapPins[j].name;
	// An agent that adopts the pins creates the inner maps of a slot from
	// these.
	for (const char* t :
	     {"al_ring_template", "al_pending_template", "al_learned_template", "al_unix_bound_template"})
		EXPECT_TRUE(names.count(t)) << t << " is not pinned";
}

TEST(PinNames, ProgramPinsAreUniqueAndNamedAlSomething)
{
	expect_pin_names(kernel::kProgs, "al_[a-z0-9_]+");
	EXPECT_STREQ(kernel::kProgs[kernel::Egress].name, "al_egress");
	EXPECT_STREQ(kernel::kProgs[kernel::SendmsgUnix].name, "al_sendmsg_unix");
}

}  // namespace
}  // namespace airlock
