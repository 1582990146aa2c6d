#include "sandbox/launch.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "confine/capabilities.h"
#include "confine/identity.h"
#include "confine/seccomp.h"
#include "util/error.h"
#include "util/mountinfo.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

// Landlock scoping (ABI 6, Linux 6.12) is newer than Debian 12's headers:
// from the kernel's include/uapi/linux/landlock.h.
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#define AL_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define AL_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define AL_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)

namespace airlock {

namespace {

struct al_landlock_ruleset_attr {
	__u64 handled_access_fs;
	__u64 handled_access_net;
	__u64 scoped;
};

static_assert(AF_MAX == kFamilyMax, "socket families: the policy's table and the libc's AF_MAX differ");

// Where the child failed, sent back over a pipe before it exits.
enum Stage : int { kJoin = 1, kMounts, kFork, kLandlock, kSeccomp, kIdentity, kExec };

struct ChildError {
	int stage;
	int err;
};

const char* stage_name(int s)
{
	switch (s) {
	case kJoin:
		return "joining the cgroup";
	case kMounts:
		return "making its mounts";
	case kFork:
		return "starting the command under airlock's init";
	case kLandlock:
		return "Landlock";
	case kSeccomp:
		return "the seccomp filter";
	case kIdentity:
		return "taking the --user identity";
	default:
		return "exec";
	}
}

struct HostMounts {
	std::vector<std::string> detach;   // mount points of cgroup, cgroup2, bpf and proc mounts
	std::vector<std::string> cgroup2;  // mount points of cgroup2, once each
};

// The mounts the command must not see. v1 hierarchies go too: their
// release_agent and tasks files are no business of a sandbox.
HostMounts host_mounts()
{
	HostMounts m;
	for (const auto& e : read_mountinfo()) {
		if (e.fstype != "cgroup2" && e.fstype != "cgroup" && e.fstype != "bpf" && e.fstype != "proc")
			continue;
		if (std::find(m.detach.begin(), m.detach.end(), e.point) == m.detach.end())
			m.detach.push_back(e.point);
		if (e.fstype == "cgroup2" && std::find(m.cgroup2.begin(), m.cgroup2.end(), e.point) == m.cgroup2.end())
			m.cgroup2.push_back(e.point);
	}
	return m;
}

// The filter is compiled here, where libseccomp may allocate; the child only
// loads the instructions.
std::vector<sock_filter> compile_seccomp(uint64_t families, bool io_uring)
{
	confine::SeccompFilter f(SCMP_ACT_ALLOW);
	// The filter is loaded while the child still holds CAP_SYS_ADMIN, so it
	// needs no no_new_privs, and setuid programs inside keep working.
	f.set(SCMP_FLTATR_CTL_NNP, 0, "no_new_privs off");
	// Only the native ABI: an i386 (int 0x80, with socketcall whose arguments
	// a filter cannot read) or x32 system call kills the process.
	f.set(SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "bad-arch action");
	for (int sys : {SCMP_SYS(socket), SCMP_SYS(socketpair)}) {
		// The kernel reads the domain as an int: compare the low 32 bits, so
		// that garbage in the upper half does not slip a family past.
		for (unsigned af = 0; af < kFamilyMax; af++) {
			if (families & (1ull << af))
				continue;
			if (af == AF_NETLINK && (families & (1ull << kNetlinkRouteBit)))
				// Every netlink protocol but NETLINK_ROUTE (0).
				f.add(SCMP_ACT_ERRNO(EPERM), sys,
				      {SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffull, af), SCMP_A2(SCMP_CMP_NE, 0)},
				      "socket rule");
			else
				f.add(SCMP_ACT_ERRNO(EPERM), sys, {SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffull, af)},
				      "socket rule");
		}
		// Families newer than the table, and anything with upper bits set
		// that is not caught above.
		f.add(SCMP_ACT_ERRNO(EPERM), sys, {SCMP_A0(SCMP_CMP_GE, kFamilyMax)}, "socket rule");
	}
	if (!io_uring)
		f.add(SCMP_ACT_ERRNO(EPERM), SCMP_SYS(io_uring_setup), {}, "io_uring rule");
	return f.compile();
}

// ---- after clone: async-signal-safe code only --------------------------------

void report(int fd, int stage, int err)
{
	ChildError e{stage, err};
	ssize_t ignored = ::write(fd, &e, sizeof(e));
	(void)ignored;
}

bool bad_fs(const char* path)
{
	struct statfs s;
	if (::statfs(path, &s) != 0)
		return false;  // not reachable by this path any more
	auto t = static_cast<unsigned long>(s.f_type);
	return t == CGROUP2_SUPER_MAGIC || t == CGROUP_SUPER_MAGIC || t == BPF_FS_MAGIC || t == PROC_SUPER_MAGIC;
}

// In the child's own mount namespace, after its cgroup namespace exists.
int make_mounts(const std::vector<const char*>& detach, const std::vector<const char*>& cgroup2,
		const std::vector<const char*>& nosymfollow)
{
	if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
		return errno;
	// Stacked mounts come off one by one; a mount gone with its parent no
	// longer resolves to a bad filesystem. Bounded: a path that stays bad is
	// an error, not a loop.
	for (auto it = detach.rbegin(); it != detach.rend(); ++it)
		for (int round = 0; bad_fs(*it); round++)
			if (round == 32 || ::umount2(*it, MNT_DETACH) != 0)
				return round == 32 ? EBUSY : errno;
	for (const char* p : detach)
		if (bad_fs(p))
			return EBUSY;
	// From inside the cgroup namespace: rooted at the sandbox. (Mount
	// options of cgroup2 are global and ignored outside the initial
	// namespace, so none are given.)
	for (const char* p : cgroup2)
		if (::mount("cgroup2", p, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, nullptr) != 0)
			return errno;
	if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, nullptr) != 0)
		return errno;
	// A bind mount of the directory onto itself, then the same flags plus
	// nosymfollow (a remount replaces the per-mount flags: keep the rest).
	for (const char* d : nosymfollow) {
		struct statvfs v;
		if (::statvfs(d, &v) != 0 || ::mount(d, d, nullptr, MS_BIND | MS_REC, nullptr) != 0)
			return errno;
		unsigned long keep = 0;
		for (auto [st, ms] : {std::pair{ST_RDONLY, MS_RDONLY},
				      {ST_NOSUID, MS_NOSUID},
				      {ST_NODEV, MS_NODEV},
				      {ST_NOEXEC, MS_NOEXEC},
				      {ST_NOATIME, MS_NOATIME},
				      {ST_NODIRATIME, MS_NODIRATIME},
				      {ST_RELATIME, MS_RELATIME}})
			if (v.f_flag & st)
				keep |= ms;
		if (::mount(nullptr, d, nullptr, MS_REMOUNT | MS_BIND | MS_NOSYMFOLLOW | keep, nullptr) != 0)
			return errno;
	}
	return 0;
}

struct ChildPlan {
	const LaunchOptions* o;
	confine::Identity who;
	int errfd;
	int procs_fd;  // join: the cgroup's cgroup.procs
	bool namespaces;
	std::vector<const char*> detach, cgroup2, nosymfollow;
	sock_fprog seccomp;
	uint64_t landlock_scoped;
	char** argv;
	char** envp;
};

// The command's own process: Landlock, seccomp, capabilities, identity, exec.
[[noreturn]] void become_command(const ChildPlan& p)
{
	if (p.landlock_scoped) {
		al_landlock_ruleset_attr attr = {0, 0, p.landlock_scoped};
		long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
		if (fd < 0 || syscall(SYS_landlock_restrict_self, static_cast<int>(fd), 0) != 0) {
			report(p.errfd, kLandlock, errno);
			_exit(125);
		}
		::close(static_cast<int>(fd));
	}
	// Without no_new_privs: allowed because CAP_SYS_ADMIN is still held.
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p.seccomp) != 0) {
		report(p.errfd, kSeccomp, errno);
		_exit(125);
	}
	if (!p.o->keep_caps)
		confine::drop_capabilities(confine::dropped_capabilities());
	if (p.who.set) {
		if (int e = confine::take_identity(p.who)) {
			report(p.errfd, kIdentity, e);
			_exit(126);
		}
	}
	syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, nullptr);
	execvpe(p.argv[0], p.argv, p.envp);
	int e = errno;
	report(p.errfd, kExec, e);
	_exit(e == ENOENT ? 127 : 126);
}

volatile pid_t g_command = 0;

// airlock's init passes on what was sent to it with kill(2) (by airlock run
// or an operator); a terminal's signals reach the command by its process group.
void forward(int sig, siginfo_t* si, void*)
{
	if (g_command > 0 && (si->si_code == SI_USER || si->si_code == SI_QUEUE || si->si_code == SI_TKILL))
		::kill(g_command, sig);
}

// PID 1 of the command's PID namespace: starts the command, forwards
// signals, reaps orphans, and leaves with the command's status (128+N for
// signal N). Its own exit takes every other process of the namespace along.
[[noreturn]] void init_process(const ChildPlan& p)
{
	struct clone_args args;
	std::memset(&args, 0, sizeof(args));
	args.exit_signal = SIGCHLD;
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		report(p.errfd, kFork, errno);
		_exit(125);
	}
	if (pid == 0) {
		struct sigaction dfl;
		std::memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		for (int s = 1; s < NSIG; s++)
			sigaction(s, &dfl, nullptr);
		become_command(p);
	}
	// Nothing of airlock's (maps, rings, the audit log, the error pipe whose
	// read ends at the command's exec) stays open in a process inside the
	// sandbox.
	syscall(SYS_close_range, 3u, ~0u, 0u);
	g_command = static_cast<pid_t>(pid);
	struct sigaction fw;
	std::memset(&fw, 0, sizeof(fw));
	fw.sa_sigaction = forward;
	fw.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&fw.sa_mask);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGCHLD && s != SIGKILL && s != SIGSTOP)
			sigaction(s, &fw, nullptr);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, nullptr);
	for (;;) {
		int st = 0;
		pid_t r = ::wait4(-1, &st, __WALL, nullptr);
		if (r == g_command)
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		if (r < 0 && errno == ECHILD)
			_exit(125);
	}
}

[[noreturn]] void child_main(const ChildPlan& p)
{
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, nullptr);
	if (p.o->join && (::write(p.procs_fd, "0", 1) != 1 || ::unshare(CLONE_NEWCGROUP) != 0)) {
		report(p.errfd, kJoin, errno);
		_exit(125);
	}
	if (!p.namespaces)
		become_command(p);
	if (int e = make_mounts(p.detach, p.cgroup2, p.nosymfollow)) {
		report(p.errfd, kMounts, e);
		_exit(125);
	}
	init_process(p);
}

}  // namespace

LaunchOptions launch_options(const Policy& p)
{
	LaunchOptions lo;
	lo.families = p.families;
	lo.io_uring = p.io_uring;
	// Not where the policy names an abstract socket outside: the scope
	// would refuse it (the sandbox record says the same: abstract_scoped).
	lo.scope_abstract_unix = !allows_outside_abstract(p);
	lo.scope_signal = true;
	lo.nosymfollow = unix_prefix_dirs(p);
	return lo;
}

std::vector<std::string> unix_prefix_dirs(const Policy& p)
{
	std::vector<std::string> out;
	for (const auto& r : p.rules) {
		if (r.action != Action::Allow || !r.unix_target || r.unix_target->abstract || !r.unix_target->prefix)
			continue;
		// "/run/agent/" and "/run/agent/x-" are both under /run/agent.
		const std::string& b = r.unix_target->bytes;
		size_t slash = b.rfind('/');
		std::string dir = slash == 0 || slash == std::string::npos ? std::string("/")
									   : std::string(b.data(), slash);
		std::error_code ec;
		if (std::filesystem::is_directory(dir, ec) && std::find(out.begin(), out.end(), dir) == out.end())
			out.push_back(dir);
	}
	return out;
}

int landlock_abi()
{
	long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, AL_LANDLOCK_CREATE_RULESET_VERSION);
	return v > 0 ? static_cast<int>(v) : 0;
}

int exit_status_of(const siginfo_t& si)
{
	if (si.si_code == CLD_EXITED)
		return si.si_status;
	return 128 + si.si_status;
}

bool killed_by_sigkill(const siginfo_t& si)
{
	return (si.si_code == CLD_KILLED && si.si_status == SIGKILL) ||
	       (si.si_code == CLD_EXITED && si.si_status == 128 + SIGKILL);
}

nlohmann::json Confinement::to_json() const
{
	nlohmann::json scopes = nlohmann::json::array();
	if (landlock_scoped & AL_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)
		scopes.push_back("abstract_unix_socket");
	if (landlock_scoped & AL_LANDLOCK_SCOPE_SIGNAL)
		scopes.push_back("signal");
	return {{"namespaces", namespaces},
		{"cgroup_mounts", cgroup_mounts},
		{"detached", detached},
		{"nosymfollow", nosymfollow},
		{"families", family_names(families)},
		{"io_uring", io_uring},
		{"landlock", {{"abi", landlock_abi}, {"applied", landlock_scoped != 0}, {"scoped", scopes}}}};
}

namespace {

// The Landlock scopes the options ask for, where this kernel has them.
uint64_t landlock_scopes(const LaunchOptions& o, int abi)
{
	uint64_t wanted = (o.scope_abstract_unix ? AL_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET : 0) |
			  (o.scope_signal ? AL_LANDLOCK_SCOPE_SIGNAL : 0);
	if (wanted && abi >= 6)
		return wanted;
	if (wanted) {
		static bool warned = false;
		if (!warned)
			spdlog::warn(
				"this kernel has Landlock ABI {} (scoping needs 6, Linux 6.12): abstract unix sockets "
				"and signals outside the sandbox are not scoped",
				abi);
		warned = true;
	}
	return 0;
}

// The mounts the child detaches and makes afresh, named in c; the plan's
// strings point into c.
void plan_mounts(const LaunchOptions& o, Confinement& c, ChildPlan& plan)
{
	HostMounts mounts = host_mounts();
	if (mounts.cgroup2.empty())
		fail("no cgroup2 mount in /proc/self/mountinfo");
	c.cgroup_mounts = mounts.cgroup2;
	c.detached = mounts.detach;
	for (const auto& m : c.detached)
		plan.detach.push_back(m.c_str());
	for (const auto& m : c.cgroup_mounts)
		plan.cgroup2.push_back(m.c_str());
	c.nosymfollow = o.nosymfollow;
	for (const auto& d : c.nosymfollow)
		plan.nosymfollow.push_back(d.c_str());
}

// The command's argv and environment, made before the clone.
struct CommandLine {
	std::vector<char*> argv;
	std::vector<std::string> env_store;
	std::vector<char*> envp;
};

void make_command_line(const LaunchOptions& o, CommandLine& cl)
{
	for (const auto& a : o.command)
		cl.argv.push_back(const_cast<char*>(a.c_str()));
	cl.argv.push_back(nullptr);
	// The command learns where it is: inside its cgroup namespace its own
	// cgroup reads as "/".
	cl.env_store = {"AIRLOCK_SANDBOX=" + o.name, "AIRLOCK_CGROUP=" + o.cgroup};
	cl.env_store.insert(cl.env_store.end(), o.env.begin(), o.env.end());
	cl.envp.reserve(cl.env_store.size() + 1);
	for (auto& e : cl.env_store)
		cl.envp.push_back(e.data());
	// The environment's own, but for the names set above.
	auto overridden = [&](const char* e) {
		for (const auto& s : cl.env_store)
			if (std::strncmp(e, s.c_str(), s.find('=') + 1) == 0)
				return true;
		return false;
	};
	for (char** e = environ; *e; e++)
		if (!overridden(*e))
			cl.envp.push_back(*e);
	cl.envp.push_back(nullptr);
}

// Clones the child into the cgroup (cg_fd) and runs it on the plan; the
// child's pidfd is stored in *pidfd. The error pipe's ends are closed on a
// failure.
long clone_child(const LaunchOptions& o, const ChildPlan& plan, int cg_fd, int errpipe[2], int* pidfd)
{
	struct clone_args args;
	std::memset(&args, 0, sizeof(args));
	// Born inside the sandbox cgroup (CLONE_INTO_CGROUP): there is no moment
	// at which it runs unenforced. A cgroup that has been through cgroup.kill
	// (`airlock exec` into a sandbox killed earlier) SIGKILLs every child
	// cloned into it on this kernel, so there the child moves itself in
	// through cgroup.procs before it makes its cgroup namespace: the command
	// is enforced from its first instruction either way.
	//
	// The cgroup namespace is rooted at the sandbox; with nsdelegate the
	// kernel refuses moves across it, and without it the private mount of
	// cgroup2 leaves nothing outside the sandbox to move to.
	args.flags = CLONE_PIDFD | (o.join ? 0 : CLONE_INTO_CGROUP | CLONE_NEWCGROUP) |
		     (plan.namespaces ? CLONE_NEWNS | CLONE_NEWPID : 0);
	args.pidfd = reinterpret_cast<uint64_t>(pidfd);
	args.exit_signal = SIGCHLD;
	if (!o.join)
		args.cgroup = static_cast<uint64_t>(cg_fd);
	long pid = ::syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		int e = errno;
		::close(errpipe[0]);
		::close(errpipe[1]);
		fail_errno("clone3 into " + o.cgroup, e);
	}
	if (pid == 0)
		child_main(plan);
	return pid;
}

}  // namespace

Launched launch(const LaunchOptions& o)
{
	Launched out;
	Confinement& c = out.confinement;
	c.namespaces = !o.keep_caps;
	c.families = o.families;
	c.io_uring = o.io_uring;
	c.landlock_abi = landlock_abi();
	c.landlock_scoped = landlock_scopes(o, c.landlock_abi);

	ChildPlan plan{};
	plan.o = &o;
	plan.who = confine::resolve_user(o.user);
	plan.namespaces = c.namespaces;
	plan.landlock_scoped = c.landlock_scoped;
	std::vector<sock_filter> filter = compile_seccomp(o.families, o.io_uring);
	plan.seccomp.len = static_cast<unsigned short>(filter.size());
	plan.seccomp.filter = filter.data();
	if (c.namespaces)
		plan_mounts(o, c, plan);

	Fd procs;
	if (o.join) {
		procs.reset(::open((o.cgroup + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
		if (!procs.valid())
			fail_errno("open " + o.cgroup + "/cgroup.procs");
	}
	plan.procs_fd = procs.get();
	Fd cg(::open(o.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!cg.valid())
		fail_errno("open cgroup " + o.cgroup);

	CommandLine cl;
	make_command_line(o, cl);
	plan.argv = cl.argv.data();
	plan.envp = cl.envp.data();

	int errpipe[2];
	if (::pipe2(errpipe, O_CLOEXEC) != 0)
		fail_errno("pipe");
	plan.errfd = errpipe[1];

	int pidfd = -1;
	long pid = clone_child(o, plan, cg.get(), errpipe, &pidfd);
	::close(errpipe[1]);
	ChildError err{};
	ssize_t n = ::read(errpipe[0], &err, sizeof(err));
	::close(errpipe[0]);
	out.pid = static_cast<int>(pid);
	out.pidfd.reset(pidfd);
	if (n == sizeof(err)) {
		if (err.stage == kExec)
			spdlog::error("cannot execute {}: {}", o.command[0], std::strerror(err.err));
		else if (err.stage == kJoin)
			spdlog::error("cannot join cgroup {}: {}", o.cgroup, std::strerror(err.err));
		else
			spdlog::error("cannot start {}: {}: {}", o.command[0], stage_name(err.stage),
				      std::strerror(err.err));
	}
	return out;
}

}  // namespace airlock
