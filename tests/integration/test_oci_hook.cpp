// Containers enforced from their first instruction: podman (with runc)
// runs `airlock oci-hook` at the createRuntime stage, when the container's
// cgroup exists and holds only the runtime's init process; the hook has the
// daemon attach that cgroup before the container's program starts. The
// containers run an image imported from a busybox-static rootfs, in the
// test's client namespace: what they send can only reach the test's sink.
//
// podman here keeps everything of its own under the test's directory
// (storage, run and tmp directories, its configuration, the hooks
// directory) and its cgroups under the test's cgroup parent, in every
// hierarchy: nothing of the host's containers is touched.
#include <signal.h>

#include <filesystem>

#include <fmt/format.h>

#include "daemon_fixture.h"
#include "util/mountinfo.h"

namespace it {
namespace {

namespace fs = std::filesystem;

constexpr const char* kImage = "localhost/airlock-it-busybox:latest";

// Every cgroup mount point, v1 hierarchies included (podman makes the
// parent in each).
std::vector<std::string> cgroup_mounts()
{
	std::vector<std::string> out;
	for (const auto& m : airlock::read_mountinfo())
		if (m.fstype == "cgroup" || m.fstype == "cgroup2")
			out.push_back(m.point);
	return out;
}

class Podman {
public:
	explicit Podman(Env& env) : env_(env), dir_(env.path("podman")), cgroup_parent_(env.cgroup_parent + "-podman")
	{
		fs::create_directories(dir_ + "/hooks");
		write_file(dir_ + "/containers.conf", "[containers]\n"
						      "default_ulimits = []\n"
						      "[engine]\n"
						      "runtime = \"runc\"\n"
						      "cgroup_manager = \"cgroupfs\"\n"
						      "events_logger = \"file\"\n");
		// The image: busybox-static and nothing else.
		std::string rootfs = dir_ + "/rootfs";
		fs::create_directories(rootfs + "/bin");
		fs::copy_file("/bin/busybox", rootfs + "/bin/busybox");
		for (const char* applet : {"sh", "nc", "echo", "cat", "sleep"})
			fs::create_symlink("busybox", rootfs + "/bin/" + applet);
		Result r = sh(fmt::format("tar -C {} -c . | {} import - {}", rootfs, join(argv({})), kImage), 120s);
		if (r.status != 0)
			throw std::runtime_error("podman import failed: " + r.describe());
	}
	~Podman()
	{
		run(argv({"rm", "--all", "--force", "--time", "0"}), 60s);
		// Its cgroups, in every hierarchy: the containers' are gone with them.
		for (const auto& m : cgroup_mounts())
			remove_cgroup_tree(m + "/" + cgroup_parent_);
	}

	// The hook, as a podman hooks directory describes it.
	void install_hook(const std::vector<std::string>& hook_args, bool always)
	{
		json hook = {{"version", "1.0.0"},
			     {"hook", {{"path", airlock_bin()}, {"args", env_.airlock_argv(hook_args)}}},
			     {"stages", {"createRuntime"}}};
		hook["hook"]["args"][0] = "airlock";
		if (always)
			hook["when"] = {{"always", true}};
		else
			hook["when"] = {{"annotations", {{"^io\\.airlock\\.policy$", ".*"}}}};
		write_file(dir_ + "/hooks/airlock.json", hook.dump(2));
	}

	std::vector<std::string> argv(const std::vector<std::string>& args) const
	{
		std::vector<std::string> a = {"env",          "CONTAINERS_CONF=" + dir_ + "/containers.conf",
					      "podman",       "--root",
					      dir_ + "/root", "--runroot",
					      dir_ + "/run",  "--tmpdir",
					      dir_ + "/tmp",  "--storage-driver",
					      "vfs",          "--hooks-dir",
					      dir_ + "/hooks"};
		a.insert(a.end(), args.begin(), args.end());
		return a;
	}

	// `podman run` of cmd in the test's client namespace, with input on its
	// standard input; the container's id is written to cidfile.
	Result run_container(const std::vector<std::string>& opts, const std::vector<std::string>& cmd,
			     const std::string& input, const std::string& cidfile)
	{
		std::vector<std::string> a = {"run",
					      "--rm",
					      "-i",
					      "--network",
					      "ns:" + env_.topo->client_ns_path(),
					      "--cgroup-parent",
					      "/" + cgroup_parent_,
					      "--cidfile",
					      cidfile};
		a.insert(a.end(), opts.begin(), opts.end());
		a.push_back(kImage);
		a.insert(a.end(), cmd.begin(), cmd.end());
		std::error_code ec;
		fs::remove(cidfile, ec);  // podman refuses to overwrite one
		return it::run(argv(a), 60s, input);
	}

private:
	static Result sh(const std::string& script, Ms timeout) { return it::run({"/bin/sh", "-c", script}, timeout); }
	static Result run(const std::vector<std::string>& a, Ms timeout = 30s) { return it::run(a, timeout); }
	Env& env_;
	std::string dir_, cgroup_parent_;
};

class OciHook : public DaemonTest {
protected:
	void SetUp() override
	{
		DaemonTest::SetUp();
		if (HasFatalFailure())
			return;
		try {
			podman = std::make_unique<Podman>(env());
		} catch (const std::exception& e) {
			FAIL() << "podman could not be set up (a test that cannot set up fails): " << e.what();
		}
		fs::create_directories(env().path("policies"));
		env().write_policy("policies/agent.json", base_policy("agent"));
	}
	void TearDown() override
	{
		podman.reset();  // before the test's namespaces and cgroups go
		DaemonTest::TearDown();
	}

	Proc& start_daemon_with_policies()
	{
		return start_daemon({"--policy-dir", env().path("policies"), "--audit-log", env().audit_path()});
	}

	// The sandbox a container's id names (ctr- and its first 12 characters).
	std::string sandbox_of(const std::string& cidfile)
	{
		std::string id = read_file(cidfile);
		while (!id.empty() && (id.back() == '\n' || id.back() == ' '))
			id.pop_back();
		return id.size() > 59 ? "ctr-" + id.substr(0, 12) : "ctr-" + id;
	}

	// nc, as the container's own program: its first act is this connect.
	static std::vector<std::string> nc_to(const std::string& addr, int port)
	{
		return {"nc", "-w", "2", addr, std::to_string(port)};
	}

	std::unique_ptr<Podman> podman;
};

TEST_F(OciHook, AContainersFirstConnectIsDeniedAndRecordedAndAnAllowedOnePasses)
{
	Proc& daemon = start_daemon_with_policies();
	podman->install_hook({"oci-hook"}, false);
	std::string denied = env().marker("oci-deny");
	std::string allowed = env().marker("oci-allow");

	Result d = podman->run_container({"--annotation", "io.airlock.policy=agent"}, nc_to(kDenied4, 9001), denied,
					 env().path("denied.cid"));
	// nc fails (podman does not always pass on what so short-lived a
	// container wrote to stderr: the kernel's verdict is read from the
	// audit log, and the sink below).
	EXPECT_EQ(d.status, 1) << "nc's connect must fail: " << d.describe() << daemon.describe();
	std::string name = sandbox_of(env().path("denied.cid"));
	EXPECT_TRUE(LoggedSoon(Violation("connect4", "no-rule", kDenied4, 9001), name)) << daemon.describe();

	Result a = podman->run_container({"--annotation", "io.airlock.policy=agent"}, nc_to(kAllowed4, 9000), allowed,
					 env().path("allowed.cid"));
	EXPECT_EQ(a.status, 0) << a.describe() << daemon.describe();
	EXPECT_TRUE(ArrivedIntact(env(), allowed));
	ASSERT_TRUE(env().fence());
	EXPECT_TRUE(NothingArrived(env(), denied));

	// Attached before the program ran: the sandbox's first line is
	// "attached", its cgroup the container's own (named by its id).
	std::string id = read_file(env().path("denied.cid"));
	std::vector<json> mine;
	for (const auto& j : env().audit())
		if (j.value("sandbox", "") == name)
			mine.push_back(j);
	ASSERT_FALSE(mine.empty());
	EXPECT_EQ(mine.front().value("event", ""), "attached") << dump_lines(mine);
	EXPECT_NE(mine.front().value("cgroup", "").find(id.substr(0, 64)), std::string::npos) << dump_lines(mine);
	EXPECT_EQ(mine.front().value("policy", ""), "agent");

	// Both containers ended and podman removed their cgroups: the daemon
	// lets go of their sandboxes, saying why.
	std::string allowed_name = sandbox_of(env().path("allowed.cid"));
	ASSERT_TRUE(wait_until([&] { return !env().status_of(name) && !env().status_of(allowed_name); }, 5s))
		<< env().status().dump();
	bool said = false;
	for (const auto& j : events(env().audit(), "detached"))
		said |= j.value("sandbox", "") == name && j.value("reason", "") == "its cgroup was removed";
	EXPECT_TRUE(said) << dump_lines(env().audit());
}

TEST_F(OciHook, ADefaultPolicyEnforcesAContainerWithoutTheAnnotation)
{
	Proc& daemon = start_daemon_with_policies();
	podman->install_hook({"oci-hook", "--default-policy", "agent"}, true);
	std::string denied = env().marker("oci-default");
	Result d = podman->run_container({}, nc_to(kDenied4, 9002), denied, env().path("c.cid"));
	EXPECT_EQ(d.status, 1) << d.describe() << daemon.describe();
	EXPECT_TRUE(LoggedSoon(Violation("connect4", "no-rule", kDenied4, 9002), sandbox_of(env().path("c.cid"))));
	ASSERT_TRUE(env().fence());
	EXPECT_TRUE(NothingArrived(env(), denied));
}

TEST_F(OciHook, WithoutAnnotationOrDefaultTheHookLeavesTheContainerAlone)
{
	start_daemon_with_policies();
	podman->install_hook({"oci-hook"}, true);  // runs for every container
	std::string m = env().marker("oci-free");
	Result r = podman->run_container({}, nc_to(kDenied4, 9003), m, env().path("c.cid"));
	EXPECT_EQ(r.status, 0) << r.describe();
	// The oracle can fail: unenforced, the "denied" destination is reached.
	EXPECT_TRUE(ArrivedIntact(env(), m));
	EXPECT_TRUE(env().status()["sandboxes"].empty()) << env().status().dump();
}

TEST_F(OciHook, WithoutADaemonAnAnnotatedContainerNeverStarts)
{
	podman->install_hook({"oci-hook"}, false);
	std::string m = env().marker("oci-nodaemon");
	Result r = podman->run_container({"--annotation", "io.airlock.policy=agent"}, nc_to(kAllowed4, 9004), m,
					 env().path("c.cid"));
	EXPECT_NE(r.status, 0) << r.describe();
	EXPECT_NE(r.err.find("airlock oci-hook: container "), std::string::npos) << r.describe();
	EXPECT_NE(r.err.find("no airlock daemon answers at " + env().state_dir +
			     "/control.sock to enforce policy 'agent' (annotation io.airlock.policy); the container "
			     "is not started unenforced"),
		  std::string::npos)
		<< r.describe();
	// Not even the allowed destination: the program never ran.
	ASSERT_TRUE(env().fence());
	EXPECT_TRUE(NothingArrived(env(), m));
	EXPECT_EQ(env().sink->count(m), 0u);
}

TEST_F(OciHook, AnAnnotationThatIsNotAKnownPolicyNameStopsTheContainer)
{
	start_daemon_with_policies();
	podman->install_hook({"oci-hook"}, false);
	struct Case {
		std::string value, says;
	};
	std::vector<Case> cases = {
		{"/etc/passwd", "annotation io.airlock.policy='/etc/passwd' is not a policy name"},
		{"../policies/agent", "annotation io.airlock.policy='../policies/agent' is not a policy name"},
		{"missing", "the daemon refused: no policy named 'missing' in " + env().path("policies")},
	};
	for (const auto& c : cases) {
		std::string m = env().marker("oci-bad");
		Result r = podman->run_container({"--annotation", "io.airlock.policy=" + c.value},
						 nc_to(kAllowed4, 9005), m, env().path("c.cid"));
		EXPECT_NE(r.status, 0) << c.value << ": " << r.describe();
		EXPECT_NE(r.err.find(c.says), std::string::npos) << c.value << ": " << r.describe();
		EXPECT_NE(r.err.find("the container is not started"), std::string::npos) << r.describe();
		ASSERT_TRUE(env().fence());
		EXPECT_TRUE(NothingArrived(env(), m)) << c.value;
	}
	EXPECT_TRUE(env().status()["sandboxes"].empty()) << env().status().dump();
}

// A container started again under its id (podman start, a restart policy)
// gets its cgroup made again at once: it is enforced again, not refused
// because the ended run's sandbox is still there.
TEST_F(OciHook, AContainerStartedAgainAtOnceIsEnforcedAgain)
{
	Proc& daemon = start_daemon_with_policies();
	podman->install_hook({"oci-hook"}, false);
	Result c = it::run(podman->argv({"create", "--name", "again-" + env().id, "--network",
					 "ns:" + env().topo->client_ns_path(), "--cgroup-parent",
					 "/" + env().cgroup_parent + "-podman", "--annotation",
					 "io.airlock.policy=agent", "localhost/airlock-it-busybox:latest", "nc", "-w",
					 "1", kDenied4, "9006"}),
			   60s);
	ASSERT_EQ(c.status, 0) << c.describe();
	std::string id = c.out.substr(0, c.out.find('\n'));
	for (int run = 0; run < 2; run++) {
		Result r = it::run(podman->argv({"start", "--attach", "again-" + env().id}), 60s);
		EXPECT_EQ(r.status, 1) << "run " << run << ": " << r.describe() << daemon.describe();
	}
	size_t attached = 0;
	for (const auto& j : events(env().audit(), "attached"))
		attached += j.value("sandbox", "") == "ctr-" + id.substr(0, 12);
	EXPECT_EQ(attached, 2u) << dump_lines(env().audit());
	size_t denied = 0;
	for (const auto& j : decisions(env().audit(), Violation("connect4", "no-rule", kDenied4, 9006)))
		denied += j.value("sandbox", "") == "ctr-" + id.substr(0, 12);
	EXPECT_EQ(denied, 2u) << dump_lines(env().audit());
}

// A sandbox that already decides for a cgroup above the container's (an
// operator's attach of a whole slice) is not overruled by a policy a
// container chose for itself: the deeper sandbox would decide instead.
TEST_F(OciHook, AContainerBelowAnotherSandboxIsRefused)
{
	start_daemon_with_policies();
	std::string slice = make_cgroup("slice");
	std::string cg = slice + "/ctr";
	ASSERT_EQ(::mkdir(cg.c_str(), 0755), 0);
	Result a = env().airlock({"attach", "--cgroup", slice, "--policy", env().path("policies/agent.json"), "--name",
				  "slice" + env().id});
	ASSERT_EQ(a.status, 0) << a.describe();
	Proc& p = env().start({"/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec sleep 60", cg}, "p");
	ASSERT_TRUE(wait_until([&] { return cgroup_pids(cg).size() == 1; }, 5s));
	json state = {{"ociVersion", "1.0.2"},
		      {"id", "below0001"},
		      {"status", "creating"},
		      {"pid", p.pid()},
		      {"annotations", {{"io.airlock.policy", "agent"}}}};
	Result r = it::run(env().airlock_argv({"oci-hook"}), 10s, state.dump());
	EXPECT_EQ(r.status, 1) << r.describe();
	EXPECT_NE(r.err.find(
			  fmt::format("airlock oci-hook: container below0001: its cgroup {} is below sandbox 'slice{}' "
				      "({}), whose policy decides there",
				      cg, env().id, slice)),
		  std::string::npos)
		<< r.describe();
	EXPECT_FALSE(env().status_of("ctr-below0001"));
}

// Without podman: a cgroup that holds other processes than the container's
// is not the container's own, and is not enforced in its place.
TEST_F(OciHook, ACgroupSharedWithOtherProcessesIsRefused)
{
	start_daemon_with_policies();
	std::string cg = make_cgroup("shared");
	Proc& a = env().start({"/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec sleep 60", cg}, "a");
	Proc& b = env().start({"/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec sleep 60", cg}, "b");
	ASSERT_TRUE(wait_until([&] { return cgroup_pids(cg).size() == 2; }, 5s));
	json state = {{"ociVersion", "1.0.2"},    {"id", "shared0001"},
		      {"status", "creating"},     {"pid", a.pid()},
		      {"bundle", "/nonexistent"}, {"annotations", {{"io.airlock.policy", "agent"}}}};
	Result r = it::run(env().airlock_argv({"oci-hook"}), 10s, state.dump());
	EXPECT_EQ(r.status, 1) << r.describe();
	EXPECT_NE(r.err.find(fmt::format("airlock oci-hook: container shared0001: its cgroup {} holds 1 other process "
					 "(pid {}): not the container's own",
					 cg, b.pid())),
		  std::string::npos)
		<< r.describe();
	EXPECT_TRUE(env().status()["sandboxes"].empty());

	// The same state with the second process gone is the container's own.
	b.signal(SIGKILL);
	ASSERT_TRUE(wait_until([&] { return cgroup_pids(cg).size() == 1; }, 5s));
	r = it::run(env().airlock_argv({"oci-hook"}), 10s, state.dump());
	EXPECT_EQ(r.status, 0) << r.describe();
	auto st = env().status_of("ctr-shared0001");
	ASSERT_TRUE(st) << env().status().dump();
	EXPECT_EQ(st->value("cgroup", ""), cg);
}

}  // namespace
}  // namespace it
