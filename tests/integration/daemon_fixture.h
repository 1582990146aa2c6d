#pragma once
// Tests of the node agent: a daemon for the test's state directory, cgroups
// made the way a container runtime makes them, commands run inside them.
#include <sys/stat.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixture.h"

namespace it {

class DaemonTest : public AirlockTest {
protected:
	// A cgroup made the way a container runtime would: mkdir under the
	// test's own parent, no airlock involved.
	std::string make_cgroup(const std::string& leaf)
	{
		std::string parent = cgroup2_mount() + "/" + env().cgroup_parent;
		::mkdir(parent.c_str(), 0755);
		std::string cg = parent + "/" + leaf;
		if (::mkdir(cg.c_str(), 0755) != 0)
			throw std::runtime_error("mkdir " + cg + ": " + errno_name(errno));
		return cg;
	}

	// `airlock daemon` for this test's state directory, ready when it says
	// so; in_client: in the client namespace (where commands it runs start).
	Proc& start_daemon(std::vector<std::string> extra = {}, bool in_client = false)
	{
		std::vector<std::string> args = {"daemon"};
		if (std::find(extra.begin(), extra.end(), "--metrics") == extra.end())
			args.insert(args.end(), {"--metrics", "off"});
		args.insert(args.end(), extra.begin(), extra.end());
		std::vector<std::string> argv = env().airlock_argv(args);
		Proc& d = env().start(in_client ? env().topo->in_client(argv) : argv, "daemon");
		if (!wait_until([&] { return d.err().find("watching") != std::string::npos || !d.running(); }, 10s) ||
		    !d.running())
			throw std::runtime_error("the daemon did not start: " + d.describe());
		return d;
	}

	// A decision line the daemon writes once it has read the sandbox's ring.
	::testing::AssertionResult LoggedSoon(const Match& m, const std::string& sandbox)
	{
		wait_until([&] { return !decisions(env().audit(), m).empty(); }, 5s);
		return Logged(env().audit(), m, sandbox);
	}

	// `airlock exec NAME -- cmd`, started in the client namespace.
	RunResult exec(const std::string& name, const std::vector<std::string>& cmd, Ms timeout = 15s)
	{
		std::vector<std::string> a = env().airlock_argv({"exec", name, "--"});
		a.insert(a.end(), cmd.begin(), cmd.end());
		RunResult rr;
		rr.r = env().in_client(a, timeout);
		rr.out_json = json_objects_in(rr.r.out);
		return rr;
	}

	// argv that puts itself into cgroup cg, then runs cmd in the client namespace.
	std::vector<std::string> inside(const std::string& cg, const std::vector<std::string>& cmd)
	{
		std::vector<std::string> a = {"nsenter",
					      "--net=" + env().topo->client_ns_path(),
					      "/bin/sh",
					      "-c",
					      "echo $$ > \"$0/cgroup.procs\" && shift && exec \"$@\"",
					      cg,
					      "-"};
		a.insert(a.end(), cmd.begin(), cmd.end());
		return a;
	}
};

}  // namespace it
