// The GoogleTest side of the harness: a fixture that gives each test its own
// world (harness.h), and the two oracles as assertion helpers.
//
// Nothing here ever skips: a test that cannot set itself up fails.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <memory>

#include "harness.h"

namespace it {

class AirlockTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		env_ = std::make_unique<Env>(with_topology(), with_sink());
		try {
			env_->setup();
		} catch (const std::exception& e) {
			FAIL() << "test setup failed (a test that cannot set up fails, it never skips): " << e.what();
		}
	}
	void TearDown() override
	{
		if (HasFailure() && env_)
			std::cerr << env_->dump();
		env_.reset();
	}
	virtual bool with_topology() const { return true; }
	virtual bool with_sink() const { return true; }

	Env& env() { return *env_; }
	std::unique_ptr<Env> env_;
};

// ---- the sink oracle -----------------------------------------------------------

// Denied: after a later fence has arrived, the marker is nowhere at the sink:
// not in any TCP stream or datagram, not in any captured frame.
inline ::testing::AssertionResult NothingArrived(Env& env, const std::string& marker, Sink* sink = nullptr)
{
	Sink& s = sink ? *sink : *env.sink;
	if (!sink && !env.fence())
		return ::testing::AssertionFailure()
		       << "the fence datagram never reached the sink: absence means nothing";
	size_t d = s.count_data(marker), f = s.count_frames(marker);
	if (d || f)
		return ::testing::AssertionFailure() << "LEAK: marker " << marker << " reached the sink: " << d
						     << " times in received data, " << f << " times in captured frames";
	return ::testing::AssertionSuccess();
}

// The TCP sockets to a remote port in the client namespace (or the one
// mounted at netns), but those in TIME-WAIT (nothing left to send), one
// `ss` line each: "" when none. A sandbox's socket left after the sandbox
// is gone could send what its egress refused, with no program left to
// refuse it.
inline std::string TcpSocketsTo(Env& env, int port, const std::string& netns = "")
{
	std::vector<std::string> ss = {"ss",    "-Htan",   "state",
				       "all",   "exclude", "time-wait",
				       "dport", "=",       ":" + std::to_string(port)};
	Result r;
	if (netns.empty()) {
		r = env.in_client(ss);
	} else {
		ss.insert(ss.begin(), {"nsenter", "--net=" + netns, "--"});
		r = run(ss);
	}
	return r.status == 0 ? r.out : "ss failed: " + r.describe();
}

// Allowed: the exact payload arrived as one TCP stream or one datagram.
inline ::testing::AssertionResult ArrivedIntact(Env& env, const std::string& payload, Ms timeout = 5s)
{
	if (env.sink->wait_intact(payload, timeout))
		return ::testing::AssertionSuccess();
	auto partial = env.sink->payloads_with(payload);
	return ::testing::AssertionFailure()
	       << "legitimate payload " << payload << " did not arrive intact within " << timeout.count() << " ms ("
	       << partial.size() << " streams/datagrams contain it; " << env.sink->count_frames(payload) << " frames)";
}

// ---- the audit oracle ------------------------------------------------------------

inline ::testing::AssertionResult Logged(const std::vector<json>& lines, Match m, const std::string& sandbox = "")
{
	auto found = decisions(lines, m);
	if (!sandbox.empty()) {
		std::vector<json> f2;
		for (const auto& j : found)
			if (j.value("sandbox", "") == sandbox)
				f2.push_back(j);
		found = f2;
	}
	if (found.empty())
		return ::testing::AssertionFailure()
		       << "no audit decision line matches " << m.describe()
		       << (sandbox.empty() ? "" : " for sandbox " + sandbox) << "; the log has:\n"
		       << dump_lines(lines, 30);
	return ::testing::AssertionSuccess();
}

// A violation: verdict deny, violation true, with the given hook/reason/dst.
inline Match Violation(const std::string& hook, const std::string& reason, std::optional<std::string> dst,
		       std::optional<int> port = std::nullopt)
{
	Match m;
	m.hook = hook;
	m.verdict = "deny";
	m.reason = reason;
	m.dst = std::move(dst);
	m.port = port;
	m.violation = true;
	return m;
}

// No decision line other than "allow" names dst:port.
// A decision of the audit log that is not a violation.
inline Match not_a_violation(const char* hook, const char* verdict, const char* reason, const std::string& dst,
			     int port)
{
	Match m;
	m.hook = hook;
	m.verdict = verdict;
	m.reason = reason;
	m.dst = dst;
	m.port = port;
	m.violation = false;
	return m;
}

inline ::testing::AssertionResult NoViolationFor(const std::vector<json>& lines, const std::string& dst, int port)
{
	for (const auto& j : lines) {
		if (j.value("event", "") != "decision")
			continue;
		if (j.value("dst", json()).is_string() && j["dst"] == dst && j.value("port", -1) == port &&
		    j.value("verdict", "") != "allow")
			return ::testing::AssertionFailure()
			       << "a legitimate destination " << dst << ":" << port << " got a violation: " << j.dump();
	}
	return ::testing::AssertionSuccess();
}

inline size_t CountViolations(const std::vector<json>& lines)
{
	size_t n = 0;
	for (const auto& j : lines)
		if (j.value("event", "") == "decision" && j.value("violation", false))
			n++;
	return n;
}

// ---- client results ---------------------------------------------------------------

// The per-attempt result carrying marker, from any JSON line of the client(s).
inline json ResultFor(const RunResult& rr, const std::string& marker)
{
	for (const auto& line : rr.out_json)
		if (line.is_object() && line.contains("results") && line["results"].is_array())
			for (const auto& r : line["results"])
				if (r.value("marker", "") == marker)
					return r;
	return json();
}

// Several client commands, one after the other, as one sandboxed command.
inline std::vector<std::string> Sequence(const std::vector<std::vector<std::string>>& cmds)
{
	std::string script;
	for (const auto& c : cmds) {
		if (!script.empty())
			script += "; ";
		for (const auto& a : c) {
			std::string q = "'";
			for (char ch : a)
				q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
			script += q + "' ";
		}
	}
	return {"/bin/sh", "-c", script};
}

inline std::string Errno(const json& r)
{
	if (!r.is_object() || !r.contains("errno") || r["errno"].is_null())
		return "";
	return r["errno"].get<std::string>();
}

inline bool Ok(const json& r)
{
	return r.is_object() && r.value("ok", false);
}

}  // namespace it
