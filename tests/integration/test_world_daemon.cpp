// World mode under `airlock daemon`: the daemon starts the proxy of each
// sandbox it supervises whose policy needs one, in the network namespace of
// the sandbox's processes, starts it again when it dies, hands it each
// reload, and stops it with the sandbox. Real clients, the real kernel
// rewriting their connects; the destinations are the sink's forbidden
// addresses, whose oracles must see nothing.
#include <signal.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "daemon_fixture.h"
#include "world_fixture.h"

namespace it {
namespace {

class WorldDaemon : public DaemonTest {
protected:
	void SetUp() override
	{
		DaemonTest::SetUp();
		if (HasFatalFailure())
			return;
		records_dir_ = env().path("world");
	}
	std::string records(const std::string& name) const { return records_dir_ + "/" + name + ".jsonl"; }

	// The sandbox's proxy as the daemon's status shows it; null without one.
	json proxy_of(const std::string& name)
	{
		auto st = env().status_of(name);
		if (!st || !st->contains("supervisor") || !(*st)["supervisor"].contains("proxy"))
			return json();
		return (*st)["supervisor"]["proxy"];
	}
	pid_t proxy_pid(const std::string& name)
	{
		json p = proxy_of(name);
		return p.is_object() && p["pid"].is_number() ? p["pid"].get<pid_t>() : -1;
	}

	// `sandbox create NAME` under `policy` through the daemon: the pid of
	// the proxy it started, -1 (a failure added) without one.
	pid_t create(const std::string& name, const json& policy)
	{
		Result c = env().airlock({"sandbox", "create", name, "--policy",
					  env().write_policy(name + ".json", policy), "--audit-log",
					  env().audit_path()});
		if (c.status != 0) {
			ADD_FAILURE() << c.describe();
			return -1;
		}
		pid_t pid = proxy_pid(name);
		if (pid <= 0)
			ADD_FAILURE() << "no proxy: " << env().status().dump();
		return pid;
	}

	// `airlock exec NAME --user USER -- cmd` in the client namespace.
	Result exec_as(const std::string& name, const std::string& user, const std::vector<std::string>& cmd)
	{
		std::vector<std::string> a = env().airlock_argv({"exec", name, "--user", user, "--"});
		a.insert(a.end(), cmd.begin(), cmd.end());
		return env().in_client(a, 20s);
	}

	std::string records_dir_;
};

std::vector<std::string> curl(const std::vector<std::string>& args)
{
	std::vector<std::string> a = {"curl", "-sS", "--noproxy", "*", "--max-time", "10"};
	a.insert(a.end(), args.begin(), args.end());
	return a;
}

// A sandbox made through the daemon gets its proxy from the daemon: its
// commands (as root and as nobody, plain HTTP and TLS under the world's CA,
// which exec hands them) land in the recorder; the proxy killed is started
// again and the next connection is recorded; the sandbox deleted, the proxy
// (stopped, deaf to SIGTERM) is killed without the delete waiting for it,
// and its CA bundle is gone.
TEST_F(WorldDaemon, TheDaemonStartsRestartsAndStopsTheProxyOfASandboxItMakes)
{
	// In the client namespace: a command `airlock exec` starts from there
	// shares its loopback with the proxy's listeners.
	start_daemon({}, true);
	std::string name = "wd" + env().id;
	pid_t first = create(name, world_policy(records_dir_));
	ASSERT_GT(first, 0);
	json px = proxy_of(name);
	std::string ca = px.value("ca_file", "");
	ASSERT_FALSE(ca.empty()) << px.dump();
	struct stat st {};
	ASSERT_EQ(::stat(ca.c_str(), &st), 0) << ca;

	std::string mp = env().marker("post"), mt = env().marker("tls"), mn = env().marker("nobody");
	RunResult rr = exec(name, curl({"-d", "body=" + mp, "http://203.0.113.10/submit"}));
	EXPECT_EQ(rr.r.status, 0) << rr.r.describe();
	// The world's CA reaches the command through CURL_CA_BUNDLE and the like.
	rr = exec(name, curl({"-w", " curl=%{http_code}", fmt::format("https://{}:9443/{}", kDenied4, mt)}));
	EXPECT_EQ(rr.r.status, 0) << rr.r.describe();
	EXPECT_NE(rr.r.out.find("airlock world: recorded\n curl=200"), std::string::npos) << rr.r.out;
	Result nobody = exec_as(name, "nobody", curl({fmt::format("http://[{}]:9001/{}", kDenied6, mn)}));
	EXPECT_EQ(nobody.status, 0) << nobody.describe();

	auto lines = wait_records(records(name), 3);
	auto post = record_with(lines, "body", mp);
	ASSERT_TRUE(post) << read_file(records(name));
	EXPECT_EQ(post->value("sandbox", ""), name);
	EXPECT_EQ(post->value("dst", ""), "203.0.113.10");
	EXPECT_EQ(post->value("port", 0), 80);
	EXPECT_EQ(post->value("method", ""), "POST");
	auto tls = record_with(lines, "path", mt);
	ASSERT_TRUE(tls) << read_file(records(name));
	EXPECT_EQ(tls->value("dst", ""), kDenied4);
	EXPECT_EQ(tls->value("port", 0), 9443);
	EXPECT_EQ(tls->value("tls", false), true);
	auto six = record_with(lines, "path", mn);
	ASSERT_TRUE(six) << read_file(records(name));
	EXPECT_EQ(six->value("dst", ""), kDenied6);
	EXPECT_EQ(six->value("port", 0), 9001);

	// Killed, it is started again by the daemon, and records again.
	ASSERT_EQ(::kill(first, SIGKILL), 0);
	pid_t second = -1;
	ASSERT_TRUE(wait_until([&] { return (second = proxy_pid(name)) > 0 && second != first; }, 10s))
		<< proxy_of(name).dump();
	std::string ma = env().marker("again");
	rr = exec(name, curl({fmt::format("http://{}:9002/{}", kDenied4, ma)}));
	EXPECT_EQ(rr.r.status, 0) << rr.r.describe();
	lines = wait_records(records(name), 4);
	EXPECT_TRUE(record_with(lines, "path", ma)) << read_file(records(name));

	// A command started in another network namespace would find no proxy
	// on its loopback: refused with one line, before it runs.
	Result elsewhere = env().airlock({"exec", name, "--", "true"});
	EXPECT_EQ(elsewhere.status, 125) << elsewhere.describe();  // airlock's own error, the command never ran
	EXPECT_NE(elsewhere.err.find("its proxy listens in network namespace net:["), std::string::npos)
		<< elsewhere.err;

	// A proxy that does not go at SIGTERM (stopped here) is not waited
	// for: the delete returns while it is still there, and the daemon's
	// loop kills it 2 s later.
	ASSERT_EQ(::kill(second, SIGSTOP), 0);
	ASSERT_TRUE(wait_until([&] { return pid_state(second) == 'T'; }, 5s));
	Result d = env().airlock({"sandbox", "delete", name});
	ASSERT_EQ(d.status, 0) << d.describe();
	EXPECT_TRUE(pid_alive(second)) << "the delete waited for the proxy to die";
	EXPECT_TRUE(wait_until([&] { return !pid_alive(second); }, 10s));
	EXPECT_NE(::stat(ca.c_str(), &st), 0) << ca << " is left behind";
	for (const auto& m : {mp, mt, mn, ma})
		EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
}

// An attached cgroup's processes live in a network namespace of their own
// (a container's): the daemon makes the proxy's listeners there, so that
// the connects rewritten to its loopback land in the recorder. The port is
// of the daemon's range, never of that namespace's, which its processes
// may set (to make a host service's port a proxy port).
TEST_F(WorldDaemon, AnAttachedCgroupsProxyListensInItsProcessesNamespace)
{
	start_daemon();  // in the host's namespace; the cgroup's processes are in the client's
	Result narrow = env().in_client({"sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=20000 20001"});
	ASSERT_EQ(narrow.status, 0) << narrow.describe();
	unsigned low = 0, high = 0;
	std::istringstream(read_file("/proc/sys/net/ipv4/ip_local_port_range")) >> low >> high;
	ASSERT_GT(high, 20001u);
	std::string cg = make_cgroup("world");
	std::string release = env().path("release");
	Proc& holder = env().start(inside(cg, env().py("wait_file.py", {release, "60"})), "holder");
	ASSERT_TRUE(wait_until([&] { return !cgroup_pids(cg).empty() || !holder.running(); }, 10s))
		<< holder.describe();
	std::string name = "wa" + env().id;
	std::string policy = env().write_policy("world.json", world_policy(records_dir_));
	Result a = env().airlock(
		{"attach", "--cgroup", cg, "--policy", policy, "--name", name, "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	ASSERT_GT(proxy_pid(name), 0) << env().status().dump();
	unsigned port = proxy_of(name).value("port", 0u);
	EXPECT_GE(port, low) << env().status().dump();
	EXPECT_LE(port, high) << env().status().dump();

	std::string m = env().marker("attached");
	Result r = run(inside(cg, curl({"-w", " curl=%{http_code}", fmt::format("http://{}:9003/{}", kDenied4, m)})),
		       20s);
	EXPECT_EQ(r.status, 0) << r.describe();
	EXPECT_NE(r.out.find(" curl=200"), std::string::npos) << r.out;
	auto lines = wait_records(records(name), 1);
	auto j = record_with(lines, "path", m);
	ASSERT_TRUE(j) << read_file(records(name));
	EXPECT_EQ(j->value("dst", ""), kDenied4);
	EXPECT_EQ(j->value("port", 0), 9003);
	EXPECT_TRUE(NothingArrived(env(), m));

	pid_t pid = proxy_pid(name);
	Result d = env().airlock({"detach", name});
	ASSERT_EQ(d.status, 0) << d.describe();
	EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 5s));
	write_file(release, "");
	EXPECT_EQ(holder.wait(10s), std::optional<int>(0)) << holder.describe();
}

// A reload is the daemon's to follow: a policy that now redirects to the
// world gets its proxy started, another world starts it again on the new
// one, a policy that no longer redirects has it stopped.
TEST_F(WorldDaemon, AReloadStartsRestartsOrStopsTheProxyAsTheNewPolicyNeeds)
{
	start_daemon({}, true);
	std::string name = "wr" + env().id;
	std::string plain = env().write_policy("plain.json", base_policy("it-plain"));
	json wp = world_policy(records_dir_);
	wp["name"] = "it-world-reload";
	std::string world = env().write_policy("world.json", wp);
	Result c = env().airlock({"sandbox", "create", name, "--policy", plain, "--audit-log", env().audit_path()});
	ASSERT_EQ(c.status, 0) << c.describe();
	EXPECT_TRUE(proxy_of(name).is_null()) << proxy_of(name).dump();

	Result r = env().airlock({"reload", name, world});
	ASSERT_EQ(r.status, 0) << r.describe();
	pid_t pid = proxy_pid(name);
	ASSERT_GT(pid, 0) << env().status().dump();
	std::string m = env().marker("reloaded");
	RunResult rr = exec(name, curl({fmt::format("http://{}:9004/{}", kDenied4, m)}));
	EXPECT_EQ(rr.r.status, 0) << rr.r.describe();
	auto lines = wait_records(records(name), 1);
	EXPECT_TRUE(record_with(lines, "path", m)) << read_file(records(name));
	EXPECT_TRUE(NothingArrived(env(), m));

	// Another world (an answer of its own): the proxy starts again on it.
	json wp2 = wp;
	wp2["world"]["responses"][0]["body"] = "from the second fixture\n";
	r = env().airlock({"reload", name, env().write_policy("world2.json", wp2)});
	ASSERT_EQ(r.status, 0) << r.describe();
	pid_t again = proxy_pid(name);
	ASSERT_GT(again, 0) << env().status().dump();
	EXPECT_NE(again, pid);
	EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 5s));
	rr = exec(name, curl({fmt::format("http://{}:9005/fixture", kDenied4)}));
	EXPECT_EQ(rr.r.status, 0) << rr.r.describe();
	EXPECT_EQ(rr.r.out, "from the second fixture\n") << rr.r.describe();

	r = env().airlock({"reload", name, plain});
	ASSERT_EQ(r.status, 0) << r.describe();
	EXPECT_TRUE(proxy_of(name).is_null()) << proxy_of(name).dump();
	EXPECT_TRUE(wait_until([&] { return !pid_alive(again); }, 5s));
	Result d = env().airlock({"sandbox", "delete", name});
	EXPECT_EQ(d.status, 0) << d.describe();
}

// A proxy port is one proxy's on the whole host, and the daemon picks it
// from its own range. A sandbox whose network namespace hands out one port
// only, another sandbox's proxy port, does not get that one: its proxy
// listens on another port of the daemon's range, and the first sandbox's
// redirected connections go on, no violation, no freeze (a port taken over
// would make them proxy-port violations).
TEST_F(WorldDaemon, ASandboxCannotTakeAnotherSandboxsProxyPort)
{
	start_daemon({}, true);
	std::string first = "wp" + env().id;
	json wp = world_policy(records_dir_, "freeze");
	ASSERT_GT(create(first, wp), 0);
	int port = proxy_of(first).value("port", 0);
	ASSERT_GT(port, 0) << env().status().dump();

	// A network namespace of its own, whose only local port is that one.
	std::string cg = make_cgroup("thief");
	std::string ready = env().path("thief-ready"), release = env().path("thief-release");
	std::string script = fmt::format(
		"set -e; ip link set lo up; sysctl -q -w net.ipv4.ip_local_port_range='{0} {0}'; "
		"python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])' "
		"> '{1}.tmp'; mv '{1}.tmp' '{1}'; exec python3 {2} '{3}' 60",
		port, ready, env().py("wait_file.py", {})[2], release);
	Proc& thief = env().start({"/bin/sh", "-c",
				   "echo $$ > \"$0/cgroup.procs\" && exec unshare -n /bin/sh -c \"$1\"", cg, script},
				  "thief");
	ASSERT_TRUE(wait_until([&] { return exists(ready) || !thief.running(); }, 10s)) << thief.describe();
	ASSERT_EQ(read_file(ready), std::to_string(port) + "\n") << "the namespace hands out another port";
	std::string second = "wt" + env().id;
	Result a = env().airlock({"attach", "--cgroup", cg, "--policy", env().write_policy("world2.json", wp), "--name",
				  second, "--audit-log", env().audit_path()});
	ASSERT_EQ(a.status, 0) << a.describe();
	EXPECT_EQ(a.out.find("its proxy"), std::string::npos) << a.describe();
	EXPECT_GT(proxy_pid(second), 0) << env().status().dump();
	int other = proxy_of(second).value("port", 0);
	EXPECT_GT(other, 0) << env().status().dump();
	EXPECT_NE(other, port) << env().status().dump();

	std::string m = env().marker("port");
	RunResult rr = exec(first, curl({fmt::format("http://{}:9006/{}", kDenied4, m)}));
	EXPECT_EQ(rr.r.status, 0) << rr.r.describe();
	auto lines = wait_records(records(first), 1);
	EXPECT_TRUE(record_with(lines, "path", m)) << read_file(records(first));
	auto st = env().status_of(first);
	ASSERT_TRUE(st);
	EXPECT_EQ(st->value("latched", true), false) << st->dump();
	EXPECT_EQ(proxy_of(first).value("port", 0), port);
	EXPECT_EQ(CountViolations(env().audit()), 0u) << dump_lines(env().audit());
	EXPECT_TRUE(NothingArrived(env(), m));
	write_file(release, "");
	EXPECT_EQ(thief.wait(10s), std::optional<int>(0)) << thief.describe();
}

// The daemon's exit stops its proxies and clears their kernel entries: a
// redirected connect then fails closed (EPERM, no-proxy), never reaching
// the destination, and the daemon exits 0.
TEST_F(WorldDaemon, TheDaemonsExitStopsItsProxiesAndRedirectsFailClosed)
{
	Proc& daemon = start_daemon({}, true);
	std::string name = "we" + env().id;
	pid_t pid = create(name, world_policy(records_dir_));
	ASSERT_GT(pid, 0);
	ASSERT_EQ(::kill(daemon.pid(), SIGTERM), 0);
	EXPECT_EQ(daemon.wait(10s), std::optional<int>(0)) << daemon.describe();
	EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 5s));

	std::string m = env().marker("exited");
	Result r = run(inside(env().sandbox_cgroup(name), env().py("world_client.py", {dest4(kDenied4, 9007), m})),
		       20s);
	ASSERT_EQ(r.status, 0) << r.describe();
	json res;
	for (const auto& j : json_objects_in(r.out))
		if (j.contains("results"))
			res = j["results"][0];
	EXPECT_EQ(res.value("ok", true), false) << r.out;
	EXPECT_EQ(res.value("errno", ""), "EPERM") << r.out;
	EXPECT_TRUE(NothingArrived(env(), m));
}

// What fails while the daemon starts a proxy again (here its records
// directory is a file) stops that proxy, not the daemon: it goes on, and
// starts the proxy within a retry's 10 s once it can.
TEST_F(WorldDaemon, AProxyThatCannotStartAgainIsRetriedAndTheDaemonGoesOn)
{
	Proc& daemon = start_daemon({}, true);
	std::string name = "wf" + env().id;
	pid_t pid = create(name, world_policy(records_dir_));
	ASSERT_GT(pid, 0);
	std::string aside = records_dir_ + ".aside";
	std::filesystem::rename(records_dir_, aside);
	write_file(records_dir_, "not a directory\n");
	ASSERT_EQ(::kill(pid, SIGKILL), 0);
	ASSERT_TRUE(wait_until(
		[&] {
			return daemon.err().find(name + ": the proxy is down (starting it again: ") !=
			       std::string::npos;
		},
		10s))
		<< daemon.describe();
	EXPECT_TRUE(daemon.running()) << daemon.describe();
	EXPECT_EQ(proxy_pid(name), -1) << env().status().dump();

	std::filesystem::remove(records_dir_);
	std::filesystem::rename(aside, records_dir_);
	pid_t again = -1;
	ASSERT_TRUE(wait_until([&] { return (again = proxy_pid(name)) > 0; }, 15s)) << daemon.describe();
	std::string m = env().marker("retried");
	RunResult rr = exec(name, curl({fmt::format("http://{}:9008/{}", kDenied4, m)}));
	EXPECT_EQ(rr.r.status, 0) << rr.r.describe();
	auto lines = wait_records(records(name), 1);
	EXPECT_TRUE(record_with(lines, "path", m)) << read_file(records(name));
	EXPECT_TRUE(NothingArrived(env(), m));
}

}  // namespace
}  // namespace it
