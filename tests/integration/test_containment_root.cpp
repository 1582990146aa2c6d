// uid 0 inside `airlock run` against its own confinement: its cgroup, airlock's
// pins, socket families, system-call ABIs, io_uring, abstract unix sockets and
// signals across the Landlock scope, and what `attach` says about a cgroup
// whose processes could leave it.
//
// Every escape attempt is followed by a connection the policy denies: had any
// attempt moved the process out of its sandbox, that connection would leave
// unjudged and reach the sink.
#include <sys/mount.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "fixture.h"

namespace it {
namespace {

namespace fs = std::filesystem;

// The cgroup2 mount's super options (nsdelegate or not), from mountinfo.
bool nsdelegate_on()
{
	std::ifstream in("/proc/self/mountinfo");
	std::string line;
	while (std::getline(in, line)) {
		auto sep = line.find(" - cgroup2 ");
		if (sep != std::string::npos)
			return line.find("nsdelegate", sep) != std::string::npos;
	}
	return false;
}

// Flips nsdelegate on the host's cgroup2 mount for the life of the object,
// and puts it back (also when an assertion failed half-way).
class NsdelegateToggled {
public:
	NsdelegateToggled() : was_(nsdelegate_on())
	{
		set(!was_);
		ok_ = nsdelegate_on() == !was_;
	}
	~NsdelegateToggled()
	{
		set(was_);
		if (nsdelegate_on() != was_)
			std::cerr << "could not restore nsdelegate=" << was_ << " on " << cgroup2_mount() << "\n";
	}
	bool ok() const { return ok_; }
	bool now() const { return !was_; }

private:
	// Remounting from the initial cgroup namespace sets the global flag.
	static void set(bool on)
	{
		::mount(nullptr, cgroup2_mount().c_str(), nullptr, MS_REMOUNT, on ? "nsdelegate" : "");
	}
	bool was_, ok_ = false;
};

// Processes whose command line holds s (the test's marker), zombies excluded.
std::vector<pid_t> pids_with(const std::string& s)
{
	std::vector<pid_t> found;
	for (const auto& e : fs::directory_iterator("/proc")) {
		std::string n = e.path().filename();
		if (n.find_first_not_of("0123456789") != std::string::npos)
			continue;
		std::string cmd = read_file(e.path().string() + "/cmdline");
		if (cmd.find(s) != std::string::npos && pid_alive(std::stoi(n)))
			found.push_back(std::stoi(n));
	}
	return found;
}

// The cgroup id of a cgroup2 directory is its inode number.
uint64_t inode_of(const std::string& path)
{
	struct stat st {};
	return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// "0::/x/y" of /proc/PID/cgroup, read from the initial cgroup namespace.
std::string cgroup_of(pid_t pid)
{
	std::string c = read_file(fmt::format("/proc/{}/cgroup", pid));
	auto at = c.find("0::");
	return at == std::string::npos ? "" : c.substr(at + 3, c.find('\n', at) - at - 3);
}

class ContainmentRoot : public AirlockTest {
protected:
	std::string name(const std::string& tag) { return "r" + env().id + "-" + tag; }

	// Clients that a user other than root can read.
	std::vector<std::string> py_for_anyone(const std::string& script, const std::vector<std::string>& args)
	{
		if (dir_.empty()) {
			dir_ = env().state_dir + "-anyone";
			fs::create_directories(dir_);
			::chmod(dir_.c_str(), 0755);
		}
		for (const std::string& f : {script, std::string("alclient.py")}) {
			fs::copy_file(client_script(f), dir_ + "/" + f, fs::copy_options::overwrite_existing);
			::chmod((dir_ + "/" + f).c_str(), 0644);
		}
		std::vector<std::string> argv = {python(), dir_ + "/" + script};
		argv.insert(argv.end(), args.begin(), args.end());
		return argv;
	}
	void TearDown() override
	{
		if (!dir_.empty()) {
			std::error_code ec;
			fs::remove_all(dir_, ec);
		}
		AirlockTest::TearDown();
	}

	RunResult run(const std::string& n, const std::vector<std::string>& cmd, const json& policy,
		      std::string user = "", bool keep_caps = false)
	{
		RunSpec s;
		s.policy = env().write_policy(n + ".json", policy);
		s.name = n;
		s.cmd = cmd;
		s.user = user;
		s.keep_caps = keep_caps;
		return env().run(s, 30s);
	}

	// The whole escape catalogue, run as uid 0 next to a sibling sandbox, by
	// `airlock run`, or (via_exec) by `airlock exec` into a sandbox of the
	// daemon's (which joins the cgroup through cgroup.procs).
	void escape_attempts(const std::string& tag, bool via_exec = false)
	{
		std::string mount = cgroup2_mount();
		std::string sib = name(tag + "-sib"), atk = name(tag);
		if (via_exec) {
			Proc& d = env().start(env().airlock_argv({"daemon", "--metrics", "off", "--audit-log",
								  env().audit_path()}),
					      "daemon");
			ASSERT_TRUE(
				wait_until(
					[&] { return d.err().find("watching") != std::string::npos || !d.running(); },
					10s) &&
				d.running())
				<< d.describe();
			Result made = env().airlock({"sandbox", "create", atk, "--policy",
						     env().write_policy("atk.json", base_policy("it-escape"))});
			ASSERT_EQ(made.status, 0) << made.describe();
		}
		RunSpec ss;
		ss.policy = env().write_policy("sib.json", base_policy("it-sib"));
		ss.name = sib;
		ss.cmd = env().py("wait_file.py", {env().path("never"), "60"});
		Proc& sibling = env().start_run(ss);
		ASSERT_TRUE(wait_until([&] { return !cgroup_pids(env().sandbox_cgroup(sib)).empty(); }, 10s))
			<< sibling.describe();

		std::string marker = env().marker("escape-" + tag);
		std::string progress = env().path(tag + "-progress.json"), go = env().path(tag + "-go");
		RunSpec s;
		s.policy = env().write_policy("atk.json", base_policy("it-escape"));
		s.name = atk;
		s.cmd = env().py("escape.py",
				 {"--dest",      dest4(kDenied4, 9020),
				  "--marker",    marker,
				  "--progress",  progress,
				  "--go",        go,
				  "--scope",     env().cgroup_parent,
				  "--cgroup",    mount,
				  "--cgroup",    mount + "/" + env().cgroup_parent,
				  "--cgroup",    env().sandbox_cgroup(sib),
				  "--cgroup-id", "1",
				  "--cgroup-id", std::to_string(inode_of(mount + "/" + env().cgroup_parent)),
				  "--cgroup-id", std::to_string(inode_of(env().sandbox_cgroup(sib))),
				  "--pin",       env().bpf_dir + "/maps/al_latch",
				  "--pin",       env().bpf_dir + "/maps/al_sandboxes"});
		std::vector<std::string> exec_argv = env().airlock_argv({"exec", atk, "--"});
		exec_argv.insert(exec_argv.end(), s.cmd.begin(), s.cmd.end());
		Proc& runner = via_exec ? env().start(env().topo->in_client(exec_argv), "exec-" + atk)
					: env().start_run(s);
		ASSERT_TRUE(wait_until([&] { return exists(progress) || !runner.running(); }, 60s))
			<< runner.describe();
		ASSERT_TRUE(exists(progress)) << runner.describe();
		// Read from outside: where the process really is.
		// The client itself (not its runner, whose command line holds the
		// marker too): every process that runs escape.py.
		std::vector<pid_t> pids;
		for (pid_t p : pids_with(marker))
			if (read_file(fmt::format("/proc/{}/cmdline", p)).rfind(python(), 0) == 0)
				pids.push_back(p);
		ASSERT_FALSE(pids.empty()) << "the escape client is gone";
		std::string inside = env().sandbox_cgroup(atk).substr(mount.size());
		for (pid_t p : pids) {
			std::string cg = cgroup_of(p);
			EXPECT_TRUE(cg == inside || cg.rfind(inside + "/", 0) == 0)
				<< "pid " << p << " is in " << cg << ", outside its sandbox " << inside;
		}
		write_file(go, "");
		auto st = runner.wait(20s);
		ASSERT_TRUE(st) << runner.describe();
		EXPECT_EQ(*st, 0) << runner.describe();
		json out;
		for (const auto& j : json_objects_in(runner.out()))
			if (j.value("client", "") == "escape")
				out = j;
		ASSERT_TRUE(out.is_object()) << runner.describe();
		EXPECT_EQ(out["uid"], 0);
		// Nothing but its own sandbox, and no bpffs.
		EXPECT_EQ(out["cgroup_seen"], "/") << out.dump();
		EXPECT_EQ(out["bpf_mounts"], json::array()) << out.dump();
		EXPECT_EQ(out["opened"], json::array()) << "pins opened: " << out["opened"].dump();
		// Its own cgroup: the root of the cgroup2 it sees, and of the one it
		// mounts itself in a cgroup namespace of its own.
		std::set<std::string> own_procs = {mount + "/cgroup.procs"};
		for (const auto& a : out["attempts"])
			if (a["what"] == "userns-cgroupns" && a["result"] == "mounted")
				own_procs.insert(a["target"].get<std::string>() + "/cgroup.procs");
		for (const auto& a : out["attempts"]) {
			std::string what = a["what"], target = a["target"], res = a["result"];
			if (what == "procs" || what.find("-procs") != std::string::npos) {
				// Writing its own pid into its own cgroup (the only one it
				// sees) is allowed and moves nothing; anything else is refused.
				bool own = own_procs.count(target) > 0;
				if (!own) {
					EXPECT_NE(res, "written") << a.dump();
				}
			}
			if (what == "clone3" && target != mount) {
				EXPECT_NE(res, "born") << a.dump();
			}
			if (what == "handle") {
				// No CAP_DAC_READ_SEARCH, and nothing outside lies below
				// the root of the only cgroup2 mount it has.
				EXPECT_EQ(res, "EPERM") << a.dump();
			}
			if (what == "mount") {
				EXPECT_EQ(res, "EPERM") << a.dump();
			}
			EXPECT_EQ(a["after"], "EPERM") << "a denied connect after " << a.dump();
		}
		for (const auto& m : out["moved"]) {
			std::string p = m;
			EXPECT_TRUE(own_procs.count(p) || p == "clone3:" + mount) << "moved by " << p;
		}
		// The catalogue really ran: the host paths it was given are not
		// there, the userns paths were tried, a connect followed each.
		std::set<std::string> kinds;
		for (const auto& a : out["attempts"])
			kinds.insert(a["what"].get<std::string>());
		for (const char* k : {"procs", "clone3", "handle", "mount", "pin"})
			EXPECT_TRUE(kinds.count(k)) << "no attempt of kind " << k << ": " << out.dump();
		EXPECT_TRUE(kinds.count("userns") || kinds.count("userns-procs")) << out.dump();
		EXPECT_TRUE(kinds.count("userns-cgroupns") || kinds.count("userns-cgroupns-procs")) << out.dump();
		int connects = out["connects"].get<int>();
		EXPECT_GE(connects, 5);
		EXPECT_TRUE(NothingArrived(env(), marker));
		auto lines = env().audit();
		size_t logged = 0;
		for (const auto& j : decisions(lines, Violation("connect4", "no-rule", kDenied4, 9020)))
			logged += j.value("sandbox", "") == atk;
		EXPECT_EQ(logged, static_cast<size_t>(connects)) << dump_lines(lines);
		// The sibling was never joined.
		for (pid_t p : cgroup_pids(env().sandbox_cgroup(sib)))
			EXPECT_EQ(read_file(fmt::format("/proc/{}/cmdline", p)).find(marker), std::string::npos);
		if (via_exec)
			return;  // exec writes no sandbox-start line
		json start;
		for (const auto& j : events(lines, "sandbox-start"))
			if (j.value("sandbox", "") == atk)
				start = j;
		ASSERT_TRUE(start.contains("confinement")) << dump_lines(lines);
		EXPECT_TRUE(start["confinement"]["namespaces"].get<bool>()) << start.dump();
	}

	std::string dir_;
};

TEST_F(ContainmentRoot, UidZeroStaysInItsCgroup)
{
	escape_attempts("asis");
}

TEST_F(ContainmentRoot, UidZeroStaysInItsCgroupWithNsdelegateToggled)
{
	NsdelegateToggled t;
	ASSERT_TRUE(t.ok()) << "could not remount " << cgroup2_mount() << " with nsdelegate=" << t.now();
	escape_attempts("toggled");
}

TEST_F(ContainmentRoot, UidZeroStaysInItsCgroupThroughExec)
{
	escape_attempts("exec", true);
}

// The legitimate twin: uid 0 makes a child cgroup inside its own sandbox
// (the cgroup2 it sees is rooted there), moves into it, and its allowed
// connect delivers; its denied one is still judged.
TEST_F(ContainmentRoot, UidZeroCanUseAChildCgroupOfItsSandbox)
{
	std::string n = name("child");
	std::string a = env().marker("child-a"), d = env().marker("child-d");
	RunResult rr = run(n, env().py("child_cgroup.py", {dest4(kAllowed4, 9021), a, dest4(kDenied4, 9022), d}),
			   base_policy("it-child"));
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	json out = rr.last();
	ASSERT_TRUE(out.value("moved", false)) << rr.describe();
	EXPECT_TRUE(ArrivedIntact(env(), a));
	EXPECT_TRUE(NothingArrived(env(), d));
	EXPECT_TRUE(Logged(env().audit(), Violation("connect4", "no-rule", kDenied4, 9022), n));
}

// airlock's init in the command's PID namespace: a signal sent to `airlock
// run` reaches the command, whose own status comes back; orphans are reaped.
TEST_F(ContainmentRoot, InitForwardsSignalsAndReapsOrphans)
{
	std::string ready = env().path("ready"), got = env().path("got");
	RunSpec s;
	s.policy = env().write_policy("init.json", base_policy("it-init"));
	s.name = name("init");
	s.cmd = {"/bin/sh", "-c",
		 "trap 'echo term > " + got + "; exit 7' TERM; echo > " + ready + "; while :; do sleep 0.05; done"};
	Proc& runner = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return exists(ready) || !runner.running(); }, 10s)) << runner.describe();
	::kill(runner.pid(), SIGTERM);
	auto st = runner.wait(10s);
	ASSERT_TRUE(st) << runner.describe();
	EXPECT_EQ(*st, 7) << runner.describe();
	EXPECT_EQ(read_file(got), "term\n");

	// 50 orphans that exit at once: none is left a zombie in the namespace.
	RunResult rr = run(name("orphans"),
			   {"/bin/sh", "-c",
			    "for i in $(seq 50); do (true &); done; sleep 0.5; "
			    "grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null | wc -l"},
			   base_policy("it-init"));
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(rr.r.out, "0\n") << rr.describe();
}

// ---- socket families ----------------------------------------------------------

const std::vector<std::string> kRefused = {"netlink",
					   "packet",
					   "rds",
					   "can",
					   "tipc",
					   "bluetooth",
					   "alg",
					   "vsock",
					   "kcm",
					   "smc",
					   "xdp",
					   "socketpair-tipc",
					   "vsock-upper-bits",
					   "io_uring"};

void expect_families(const RunResult& rr, const std::string& who)
{
	json res = rr.last().value("results", json::object());
	ASSERT_FALSE(res.empty()) << rr.describe();
	for (const auto& f : kRefused)
		EXPECT_EQ(res.value(f, ""), "EPERM") << who << ": " << f << " " << res.dump();
	for (const char* f : {"unix", "inet", "inet6", "socketpair-unix", "netlink-route"})
		EXPECT_EQ(res.value(f, ""), "ok") << who << ": " << f << " " << res.dump();
}

std::vector<std::string> all_families()
{
	std::vector<std::string> a = kRefused;
	a.insert(a.end(), {"unix", "inet", "inet6", "socketpair-unix", "netlink-route"});
	return a;
}

TEST_F(ContainmentRoot, OtherFamiliesAreRefusedForRoot)
{
	RunResult rr = run(name("fam"), env().py("families.py", all_families()), base_policy("it-fam"));
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(rr.last().value("uid", -1), 0);
	expect_families(rr, "root");
}

TEST_F(ContainmentRoot, OtherFamiliesAreRefusedForNobody)
{
	RunResult rr = run(name("famn"), py_for_anyone("families.py", all_families()), base_policy("it-fam"), "nobody");
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_NE(rr.last().value("uid", 0), 0);
	expect_families(rr, "nobody");
}

// The filter is there with --keep-caps too: only the namespaces go.
TEST_F(ContainmentRoot, OtherFamiliesAreRefusedWithKeepCaps)
{
	RunResult rr = run(name("famk"), env().py("families.py", all_families()), base_policy("it-fam"), "", true);
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	expect_families(rr, "keep-caps");
}

// A real program that needs rtnetlink (iproute2's `ip`, and glibc's
// getaddrinfo) works with the default, and fails once the policy leaves
// netlink-route out.
TEST_F(ContainmentRoot, NetlinkWhenThePolicyAllowsIt)
{
	RunResult ok = run(name("nl"), {"ip", "-o", "addr"}, base_policy("it-netlink"));
	EXPECT_EQ(ok.r.status, 0) << ok.describe();
	// The veth of the test's client namespace, with its address.
	EXPECT_NE(ok.r.out.find(std::string(kClient4) + "/24"), std::string::npos) << ok.describe();
	json p = base_policy("it-netlink");
	p["families"] = {"inet", "inet6", "unix"};
	RunResult no = run(name("nl0"), {"ip", "-o", "addr"}, p);
	EXPECT_NE(no.r.status, 0) << no.describe();
	EXPECT_NE(no.r.err.find("Operation not permitted"), std::string::npos) << no.describe();
}

TEST_F(ContainmentRoot, IoUringSocketIsRefusedByDefault)
{
	std::string m = env().marker("uring-default");
	RunResult rr = run(name("ur"), {uring_connect_bin(), "tcp", kAllowed4, "9023", m}, base_policy("it-uring"));
	json r = rr.last();
	EXPECT_FALSE(r.value("ok", true)) << rr.describe();
	EXPECT_EQ(Errno(r), "EPERM") << rr.describe();
	EXPECT_TRUE(NothingArrived(env(), m));
}

// System calls of another ABI (i386 through int 0x80, x32) kill the process
// before they can create anything: the filter reads only x86_64 numbers.
TEST_F(ContainmentRoot, ForeignSyscallAbisAreKilled)
{
	for (const char* abi : {"i386", "x32"}) {
		Result base = it::run({AIRLOCK_ABI_ESCAPE, abi});
		RunResult rr = run(name(std::string("abi-") + abi), {AIRLOCK_ABI_ESCAPE, abi}, base_policy("it-abi"));
		EXPECT_EQ(rr.r.out.find("abi_escape"), std::string::npos) << rr.describe();
		if (std::string(abi) == "i386" && base.status == 128 + SIGSEGV) {
			// This machine has no int 0x80 path at all (32-bit emulation
			// off, or a hypervisor that refuses the gate: a general
			// protection fault, outside a sandbox too). Nothing to escape
			// through; inside, the same fault, and no socket.
			std::cerr << "[ abi ] int 0x80 faults outside a sandbox here: no i386 path to close\n";
			EXPECT_EQ(rr.r.status, 128 + SIGSEGV) << rr.describe();
			continue;
		}
		// Outside a sandbox the path exists (it returns, whatever it returns).
		EXPECT_EQ(base.status, 0) << base.describe();
		EXPECT_EQ(rr.r.status, 128 + SIGSYS) << abi << ": " << rr.describe();
	}
}

// The filter is loaded while CAP_SYS_ADMIN is still held, so no_new_privs
// stays off: a setuid program run by --user nobody still gets its euid
// (passwd -S reads /etc/shadow only then), exactly as outside a sandbox.
TEST_F(ContainmentRoot, SetuidProgramsStillWork)
{
	Result outside = it::run({"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "passwd", "-S"});
	Result nnp = it::run(
		{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--no-new-privs", "passwd", "-S"});
	ASSERT_EQ(outside.status, 0) << outside.describe();
	ASSERT_NE(outside.out, nnp.out) << "passwd -S does not tell setuid from no_new_privs here";
	RunResult rr = run(name("suid"), {"passwd", "-S"}, base_policy("it-suid"), "nobody");
	EXPECT_EQ(rr.r.status, 0) << rr.describe();
	EXPECT_EQ(rr.r.out, outside.out) << rr.describe();
	RunResult st = run(name("nnp"), {"grep", "-E", "^(NoNewPrivs|Seccomp):", "/proc/self/status"},
			   base_policy("it-suid"), "nobody");
	EXPECT_EQ(st.r.out, "NoNewPrivs:\t0\nSeccomp:\t2\n") << st.describe();
}

// ---- Landlock scopes ---------------------------------------------------------------

TEST_F(ContainmentRoot, AbstractSocketOutsideTheSandboxIsRefused)
{
	std::string sock = "al-" + env().id + "-outside", ready = env().path("ready"), got = env().path("got");
	std::string m = env().marker("abstract-out");
	Proc& l = env().start(env().topo->in_client(env().py("abstract.py", {"listen", sock, ready, got, "30"})),
			      "listener");
	ASSERT_TRUE(wait_until([&] { return exists(ready); }, 10s)) << l.describe();
	// The path works from outside any sandbox, so a refusal inside means something.
	std::string probe = env().marker("abstract-probe");
	Result p = env().in_client(env().py("abstract.py", {"connect", sock, probe}));
	ASSERT_TRUE(wait_until([&] { return read_file(got).find(probe) != std::string::npos; }, 5s)) << p.describe();

	RunResult rr = run(name("abs"), env().py("abstract.py", {"connect", sock, m}), base_policy("it-abs"));
	EXPECT_EQ(Errno(rr.last()), "EPERM") << rr.describe();
	json conf = events(env().audit(), "sandbox-start").back()["confinement"];
	EXPECT_TRUE(conf["landlock"]["applied"].get<bool>()) << conf.dump();
	EXPECT_EQ(conf["landlock"]["scoped"], json::array({"abstract_unix_socket", "signal"})) << conf.dump();
	// A later probe from outside arrives: the listener was there all along.
	std::string fence = env().marker("abstract-fence");
	env().in_client(env().py("abstract.py", {"connect", sock, fence}));
	ASSERT_TRUE(wait_until([&] { return read_file(got).find(fence) != std::string::npos; }, 5s));
	EXPECT_EQ(count_occurrences(read_file(got), m), 0u) << read_file(got);
}

TEST_F(ContainmentRoot, AbstractSocketInsideTheSameSandboxWorks)
{
	std::string m = env().marker("abstract-in");
	RunResult rr = run(name("absin"), env().py("abstract.py", {"pair", "al-" + env().id + "-in", m}),
			   base_policy("it-absin"));
	EXPECT_TRUE(rr.last().value("ok", false)) << rr.describe();
	EXPECT_EQ(rr.last().value("received", ""), m) << rr.describe();
}

TEST_F(ContainmentRoot, TwoSandboxesCannotReachEachOthersAbstractSockets)
{
	std::string sock = "al-" + env().id + "-a", ready = env().path("ready-a"), got = env().path("got-a");
	RunSpec s;
	s.policy = env().write_policy("a.json", base_policy("it-a"));
	s.name = name("a");
	s.cmd = env().py("abstract.py", {"listen", sock, ready, got, "15"});
	Proc& a = env().start_run(s);
	ASSERT_TRUE(wait_until([&] { return exists(ready); }, 10s)) << a.describe();
	std::string m = env().marker("abstract-b");
	RunResult rr = run(name("b"), env().py("abstract.py", {"connect", sock, m}), base_policy("it-b"));
	EXPECT_EQ(Errno(rr.last()), "EPERM") << rr.describe();
	EXPECT_EQ(count_occurrences(read_file(got), m), 0u);
}

// Signals: with --keep-caps (the host's PID namespace, so the target is
// visible) uid 0 still cannot signal a process outside its sandbox; its own
// child it can.
TEST_F(ContainmentRoot, SignalOutsideTheSandboxIsRefused)
{
	Proc& victim = env().start({"sleep", "30"}, "victim");
	ASSERT_TRUE(victim.running()) << victim.describe();
	RunResult rr = run(name("sig"), env().py("abstract.py", {"kill", std::to_string(victim.pid())}),
			   base_policy("it-sig"), "", true);
	EXPECT_EQ(Errno(rr.last()), "EPERM") << rr.describe();
	EXPECT_TRUE(victim.running()) << "the process outside the sandbox got the signal";
	RunResult own = run(name("sigown"), env().py("abstract.py", {"kill-own"}), base_policy("it-sig"));
	EXPECT_TRUE(own.last().value("ok", false)) << own.describe();
	EXPECT_EQ(own.last().value("child_signal", 0), SIGTERM) << own.describe();
}

// ---- attach -------------------------------------------------------------------------

class AttachWarning : public ContainmentRoot {
protected:
	// A cgroup of the test's own holding one process started by argv.
	std::string cgroup_with(const std::string& tag, const std::vector<std::string>& argv, pid_t* pid)
	{
		std::string cg = cgroup2_mount() + "/" + env().cgroup_parent + "/att-" + tag;
		fs::create_directories(cg);
		std::string script = "echo $$ > " + cg + "/cgroup.procs && exec \"$@\"";
		std::vector<std::string> a = {"/bin/sh", "-c", script, "sh"};
		a.insert(a.end(), argv.begin(), argv.end());
		Proc& p = env().start(a, "att-" + tag);
		// In the cgroup, and exec'd as far as the final sleep.
		EXPECT_TRUE(wait_until(
			[&]() -> bool {
				auto pids = cgroup_pids(cg);
				return pids.size() == 1 && pids[0] == p.pid() &&
				       read_file(fmt::format("/proc/{}/comm", p.pid())) == "sleep\n";
			},
			5s));
		*pid = p.pid();
		return cg;
	}
	Result attach(const std::string& cg, const std::string& n)
	{
		std::string pol = env().write_policy(n + ".json", base_policy("it-att"));
		Result r = env().airlock(
			{"attach", "--cgroup", cg, "--policy", pol, "--name", n, "--audit-log", env().audit_path()});
		env().airlock({"detach", n});
		return r;
	}
};

TEST_F(AttachWarning, RootWithTheHostsMountsIsWarnedAbout)
{
	pid_t pid = 0;
	std::string cg = cgroup_with("root", {"sleep", "30"}, &pid);
	Result r = attach(cg, name("att-root"));
	EXPECT_EQ(r.status, 0) << r.describe();
	EXPECT_NE(r.err.find(fmt::format("process {} could leave the sandbox: it holds CAP_SYS_ADMIN", pid)),
		  std::string::npos)
		<< r.describe();
}

TEST_F(AttachWarning, RootWithoutCapSysAdminIsWarnedAboutItsMounts)
{
	pid_t pid = 0;
	std::string cg = cgroup_with("rootnc",
				     {"setpriv", "--bounding-set=-sys_admin", "--inh-caps=-all", "sleep", "30"}, &pid);
	Result r = attach(cg, name("att-rootnc"));
	EXPECT_EQ(r.status, 0) << r.describe();
	EXPECT_NE(r.err.find(fmt::format("process {} could leave the sandbox: it runs as uid 0 and sees a cgroup2 "
					 "mount rooted outside it",
					 pid)),
		  std::string::npos)
		<< r.describe();
}

TEST_F(AttachWarning, NobodyIsNotWarnedAbout)
{
	pid_t pid = 0;
	std::string cg = cgroup_with("nobody",
				     {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "sleep", "30"},
				     &pid);
	Result r = attach(cg, name("att-nobody"));
	EXPECT_EQ(r.status, 0) << r.describe();
	EXPECT_EQ(r.err.find("could leave the sandbox"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace it
