// `airlock run`: one sandbox, one command, the agent in the foreground.
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <grp.h>
#include <pwd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "events/audit.h"
#include "kernel/kernel.h"
#include "ops/control.h"
#include "ops/ops.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/supervisor.h"
#include "util/error.h"
#include "util/files.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace airlock {

using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// What a sandboxed process could use to step around cgroup hooks (AF_PACKET
// needs CAP_NET_RAW) or to undo them (bpf, cgroup moves, ptrace of the agent).
const int kDroppedCaps[] = {CAP_NET_RAW, CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE,
			    CAP_SYS_MODULE};

void drop_caps_in_child()
{
	for (int cap : kDroppedCaps)
		prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2] = {};
	if (syscall(SYS_capget, &hdr, data) == 0) {
		for (int cap : kDroppedCaps)
			data[cap / 32].inheritable &= ~(1u << (cap % 32));
		syscall(SYS_capset, &hdr, data);
	}
}

struct Identity {
	bool set = false;
	uid_t uid = 0;
	gid_t gid = 0;
};

// Resolved before the clone: the child may only make async-signal-safe calls.
Identity resolve_user(const std::string& spec)
{
	Identity id;
	if (spec.empty())
		return id;
	id.set = true;
	std::string user = spec.substr(0, spec.find(':'));
	std::string group = spec.find(':') == std::string::npos ? "" : spec.substr(spec.find(':') + 1);
	auto numeric = [](const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; };
	if (numeric(user)) {
		id.uid = static_cast<uid_t>(std::stoul(user));
		struct passwd* pw = getpwuid(id.uid);
		id.gid = pw ? pw->pw_gid : static_cast<gid_t>(id.uid);
	} else {
		struct passwd* pw = getpwnam(user.c_str());
		if (!pw)
			fail("--user: no user named '{}'", user);
		id.uid = pw->pw_uid;
		id.gid = pw->pw_gid;
	}
	if (numeric(group)) {
		id.gid = static_cast<gid_t>(std::stoul(group));
	} else if (!group.empty()) {
		struct group* gr = getgrnam(group.c_str());
		if (!gr)
			fail("--user: no group named '{}'", group);
		id.gid = gr->gr_gid;
	}
	return id;
}

bool cgroup_mount_has_nsdelegate()
{
	std::ifstream in("/proc/self/mountinfo");
	std::string line;
	while (std::getline(in, line)) {
		auto sep = line.find(" - cgroup2 ");
		if (sep != std::string::npos && line.find("nsdelegate", sep) != std::string::npos)
			return true;
	}
	return false;
}

struct Child {
	int pid = -1;
	Fd pidfd;
};

// The child is born inside the sandbox cgroup (CLONE_INTO_CGROUP): there is
// no moment at which it runs unenforced. It inherits only stdio.
//
// A cgroup that has been through cgroup.kill (`airlock exec` into a sandbox
// killed earlier) SIGKILLs every child cloned into it on this kernel, so
// there (existing) the child moves itself in through cgroup.procs before it
// makes its cgroup namespace and execs: the command is enforced from its first
// instruction either way; only airlock's own code ran outside.
Child spawn(const std::string& name, const std::string& cgroup_path, const RunOptions& o, bool existing = false)
{
	Fd procs;
	if (existing) {
		procs.reset(::open((cgroup_path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
		if (!procs.valid())
			fail_errno("open " + cgroup_path + "/cgroup.procs");
	}
	Identity who = resolve_user(o.user);
	Fd cg(::open(cgroup_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!cg.valid())
		fail_errno("open cgroup " + cgroup_path);
	int errpipe[2];
	if (::pipe2(errpipe, O_CLOEXEC) != 0)
		fail_errno("pipe");

	std::vector<char*> argv;
	for (const auto& a : o.command)
		argv.push_back(const_cast<char*>(a.c_str()));
	argv.push_back(nullptr);
	// The command learns where it is: inside its cgroup namespace its own
	// cgroup reads as "/".
	std::vector<std::string> env_store = {"AIRLOCK_SANDBOX=" + name, "AIRLOCK_CGROUP=" + cgroup_path};
	std::vector<char*> envp;
	for (auto& e : env_store)
		envp.push_back(e.data());
	for (char** e = environ; *e; e++)
		if (std::strncmp(*e, "AIRLOCK_SANDBOX=", 16) != 0 && std::strncmp(*e, "AIRLOCK_CGROUP=", 15) != 0)
			envp.push_back(*e);
	envp.push_back(nullptr);

	int pidfd = -1;
	struct clone_args args;
	std::memset(&args, 0, sizeof(args));
	// A cgroup namespace rooted at the sandbox: even a root process inside
	// cannot move itself to a cgroup outside it (the kernel checks the
	// destination against the namespace root, whatever the file modes say).
	args.flags = existing ? CLONE_PIDFD : CLONE_INTO_CGROUP | CLONE_PIDFD | CLONE_NEWCGROUP;
	args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
	args.exit_signal = SIGCHLD;
	if (!existing)
		args.cgroup = static_cast<uint64_t>(cg.get());
	long pid = ::syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		int e = errno;
		::close(errpipe[0]);
		::close(errpipe[1]);
		fail_errno("clone3 into " + cgroup_path, e);
	}
	if (pid == 0) {
		// Only async-signal-safe calls from here to exec.
		sigset_t all;
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, nullptr);
		if (existing && (::write(procs.get(), "0", 1) != 1 || ::unshare(CLONE_NEWCGROUP) != 0)) {
			int e = -errno;  // negative: joining the cgroup failed, not the exec
			ssize_t ignored = ::write(errpipe[1], &e, sizeof(e));
			(void)ignored;
			_exit(kExitAirlockError);
		}
		if (!o.keep_caps)
			drop_caps_in_child();
		if (who.set) {
			gid_t g = who.gid;
			if (setgroups(1, &g) != 0 || setresgid(g, g, g) != 0 || setresuid(who.uid, who.uid, who.uid) != 0) {
				int e = errno;
				ssize_t ignored = ::write(errpipe[1], &e, sizeof(e));
				(void)ignored;
				_exit(kExitCannotExecute);
			}
		}
		syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
		execvpe(argv[0], argv.data(), envp.data());
		int e = errno;
		ssize_t ignored = ::write(errpipe[1], &e, sizeof(e));
		(void)ignored;
		_exit(e == ENOENT ? kExitNotFound : kExitCannotExecute);
	}
	::close(errpipe[1]);
	int child_errno = 0;
	ssize_t n = ::read(errpipe[0], &child_errno, sizeof(child_errno));
	::close(errpipe[0]);
	Child c;
	c.pid = static_cast<int>(pid);
	c.pidfd.reset(pidfd);
	if (n == sizeof(child_errno) && child_errno < 0)
		spdlog::error("cannot join cgroup {}: {}", cgroup_path, std::strerror(-child_errno));
	else if (n == sizeof(child_errno))
		spdlog::error("cannot execute {}: {}", o.command[0], std::strerror(child_errno));
	return c;
}

int exit_status_of(const siginfo_t& si)
{
	if (si.si_code == CLD_EXITED)
		return si.si_status;
	return 128 + si.si_status;
}

// Capabilities do not guard these: bpffs pins and cgroup.procs are files,
// and uid 0 owns them.
void warn_about_identity(const Paths& paths, const RunOptions& o)
{
	if (o.user.empty() && ::geteuid() == 0)
		spdlog::warn("the command runs as uid 0: it can open airlock's pinned maps under {}{}; run it with --user",
			     paths.bpf_dir,
			     cgroup_mount_has_nsdelegate() ? ""
							   : " and, as the cgroup2 mount lacks nsdelegate, move itself out "
							     "of the sandbox");
	if (o.keep_caps && ::geteuid() == 0)
		spdlog::warn("--keep-caps: the command keeps CAP_NET_RAW; AF_PACKET and AF_XDP sockets bypass every "
			     "cgroup hook");
}

// Signals become events on a descriptor; the child gets them unblocked.
Fd block_signals()
{
	sigset_t mask;
	sigemptyset(&mask);
	for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD})
		sigaddset(&mask, s);
	sigprocmask(SIG_BLOCK, &mask, nullptr);
	return Fd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
}

// Until the child exits: events of the sandbox (when this process supervises
// it), signals passed on to the child, SIGHUP sent with kill(2) to on_hup.
siginfo_t wait_child(Child& child, int sigfd, Supervisor* sup, const std::function<void()>& on_hup)
{
	Fd ep(::epoll_create1(EPOLL_CLOEXEC));
	auto add = [&](int fd, uint64_t tag) {
		struct epoll_event ev = {};
		ev.events = EPOLLIN;
		ev.data.u64 = tag;
		if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
			fail_errno("epoll_ctl");
	};
	if (sup)
		add(sup->epoll_fd(), 1);
	add(child.pidfd.get(), 2);
	add(sigfd, 3);
	siginfo_t si{};
	for (bool exited = false; !exited;) {
		struct epoll_event evs[4];
		// The timeout only bounds how late a latch set while the ring was
		// full is noticed; every event wakes us at once.
		int n = ::epoll_wait(ep.get(), evs, 4, 200);
		if (n < 0 && errno != EINTR)
			fail_errno("epoll_wait");
		if (sup)
			sup->poll();
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == 2) {
				if (::waitid(static_cast<idtype_t>(P_PIDFD), child.pidfd.get(), &si, WEXITED) == 0)
					exited = true;
			} else if (evs[i].data.u64 == 3) {
				struct signalfd_siginfo ssi;
				while (::read(sigfd, &ssi, sizeof(ssi)) == sizeof(ssi)) {
					// Passed on only when sent with kill(2): a terminal's ^C
					// already reached the child through its process group.
					if (ssi.ssi_signo == SIGHUP && ssi.ssi_code == SI_USER && on_hup)
						on_hup();
					else if (ssi.ssi_signo != SIGCHLD && ssi.ssi_code == SI_USER)
						::kill(child.pid, ssi.ssi_signo);
				}
			}
		}
	}
	return si;
}

bool killed_by_sigkill(const siginfo_t& si)
{
	return si.si_code == CLD_KILLED && si.si_status == SIGKILL;
}

// `airlock run` while a daemon runs: the daemon makes and supervises the
// sandbox (its events, freeze, metrics); this process spawns, waits and
// asks for the sandbox's removal.
int run_via_daemon(const Paths& paths, const RunOptions& o, const std::string& name, const std::string& audit_path,
		   int sigfd)
{
	std::string policy_file = std::filesystem::absolute(o.policy_file).lexically_normal().string();
	json req = {{"cmd", "create"},
		    {"name", name},
		    {"policy", policy_file},
		    {"audit_log", std::filesystem::absolute(audit_path).string()},
		    {"log_allowed", o.log_allowed},
		    {"runner_pid", ::getpid()}};
	put_audit_bound(req, o.audit_bound);
	auto made = daemon_call(paths, req);
	if (!made)
		fail("the airlock daemon went away");
	std::string cg = (*made)["cgroup"].get<std::string>();
	spdlog::info("sandbox {} in {}, supervised by the airlock daemon", name, cg);
	auto remove = [&]() -> std::optional<nlohmann::json> {
		auto current = load_record(paths, name);
		if (!current || current->cgroup != cg)
			return nlohmann::json{{"gone", true}};  // deleted by the operator
		auto r = daemon_call(paths, {{"cmd", "delete"}, {"name", name}});
		if (!r && load_record(paths, name))
			ops::remove(paths, name);  // the daemon is gone: nobody else will
		return r;
	};
	Child child;
	try {
		child = spawn(name, cg, o);
	} catch (...) {
		remove();
		throw;
	}
	auto made_rec = load_record(paths, name);
	AuditLog audit(audit_path, made_rec ? made_rec->audit_bound : o.audit_bound);
	audit.write(name, json{{"event", "sandbox-start"}, {"cgroup", cg}, {"pid", child.pid}, {"command", o.command},
			       {"supervisor", "daemon"}});
	siginfo_t si = wait_child(child, sigfd, nullptr, [&] {
		try {
			auto r = daemon_call(paths, {{"cmd", "reload"}, {"name", name}, {"policy", policy_file}});
			if (r)
				spdlog::info("{}", r->value("message", ""));
		} catch (const PolicyRejected& e) {
			for (const auto& l : e.lines())
				spdlog::error("{}", l);
		} catch (const std::exception& e) {
			spdlog::error("reload: {}", e.what());
		}
	});
	std::error_code ec;
	bool by_operator = std::filesystem::exists(paths.kill_marker(name), ec);
	// Asked only when the daemon cannot say (it is gone) and it could matter.
	bool latched = false;
	if (killed_by_sigkill(si) && !daemon_connect(paths).valid())
		if (auto rec = load_record(paths, name))
			latched = kernel::Kernel::adopt(paths.bpf_dir).latch(rec->slot).violated_ns != 0;
	auto removed = remove();
	bool on_violation = removed ? removed->value("killed_on_violation", false) : latched && killed_by_sigkill(si);
	by_operator = by_operator || (removed && removed->value("gone", false));
	int status = on_violation ? kExitKilledOnViolation : by_operator ? kExitKilledByOperator : exit_status_of(si);
	audit.write(name, json{{"event", "sandbox-exit"}, {"status", status}, {"command_status", exit_status_of(si)}});
	spdlog::info("sandbox {} removed; exit status {}", name, status);
	return status;
}

}  // namespace

int cmd_exec(const Paths& paths, const std::string& name, const RunOptions& o)
{
	auto st = daemon_call(paths, {{"cmd", "status"}});
	if (!st)
		fail("no airlock daemon runs for {}: `airlock exec` runs commands in sandboxes the daemon supervises",
		     paths.state_dir);
	nlohmann::json sb;
	for (const auto& s : (*st)["status"]["sandboxes"])
		if (s["name"] == name)
			sb = s;
	if (sb.is_null())
		fail("no sandbox named '{}' (airlock status lists them)", name);
	if (sb["latched"].get<bool>())
		fail("sandbox '{}' is quarantined since its violation: `airlock thaw {}` first", name, name);
	if (sb["state"] == "gone")
		fail("sandbox '{}': its cgroup {} is gone", name, sb["cgroup"].get<std::string>());
	if (sb["state"] == "frozen")
		fail("sandbox '{}' is frozen: `airlock thaw {}` first", name, name);
	warn_about_identity(paths, o);
	Fd sigfd = block_signals();
	auto started = std::filesystem::file_time_type::clock::now();
	Child child = spawn(name, sb["cgroup"].get<std::string>(), o, true);
	siginfo_t si = wait_child(child, sigfd.get(), nullptr, nullptr);
	int status = exit_status_of(si);
	if (killed_by_sigkill(si)) {
		// Killed: by the daemon on a violation, or by `airlock kill`?
		auto after = daemon_call(paths, {{"cmd", "status"}});
		for (const auto& s : after ? (*after)["status"]["sandboxes"] : nlohmann::json::array())
			if (s["name"] == name && s.contains("supervisor") && s["supervisor"].value("killed_on_violation", false))
				return kExitKilledOnViolation;
		std::error_code ec;
		auto marked = std::filesystem::last_write_time(paths.kill_marker(name), ec);
		if (!ec && marked >= started)
			return kExitKilledByOperator;
	}
	return status;
}

int cmd_run(const Paths& paths, const RunOptions& o)
{
	auto loaded = load_policy_or_report(o.policy_file);
	if (!loaded)
		return kExitAirlockError;
	Policy policy = std::move(*loaded);
	warn_about_identity(paths, o);
	std::string name = o.name.empty() ? fmt::format("{}-{}", policy.name, ::getpid()) : o.name;
	std::string audit_path = o.audit_log.empty() ? "/var/log/airlock/audit.jsonl" : o.audit_log;
	Fd sigfd = block_signals();
	if (!o.standalone && daemon_call(paths, {{"cmd", "ping"}}))
		return run_via_daemon(paths, o, name, audit_path, sigfd.get());
	AuditLog audit(audit_path, o.audit_bound);

	make_dirs(paths.state_dir);
	std::optional<kernel::Kernel> k;
	SandboxRecord rec;
	{
		FileLock lock(paths.lock_file());
		k.emplace(kernel::Kernel::load_or_adopt(paths.bpf_dir, load_records(paths).empty()));
		CreateOptions co{name, policy, o.policy_file, audit_path, o.log_allowed, ::getpid(), "", false};
		co.audit_bound = o.audit_bound;
		rec = create_sandbox(*k, paths, co);
	}
	spdlog::info("sandbox {} in {} (cgroup id {}), policy '{}' {} on_violation {}; programs {}", name, rec.cgroup,
		     rec.cgroup_id, policy.name, to_string(policy.mode), to_string(policy.on_violation),
		     k->adopted() ? "adopted from pins" : "loaded and pinned");

	std::unique_ptr<Supervisor> sup;
	try {
		sup = std::make_unique<Supervisor>(*k, paths, rec, policy);
	} catch (...) {
		FileLock lock(paths.lock_file());
		destroy_sandbox(*k, paths, rec);
		throw;
	}

	Child child;
	try {
		child = spawn(name, rec.cgroup, o);
	} catch (...) {
		sup.reset();
		FileLock lock(paths.lock_file());
		destroy_sandbox(*k, paths, rec);
		throw;
	}
	audit.write(name, json{{"event", "sandbox-start"}, {"cgroup", rec.cgroup}, {"cgroup_id", rec.cgroup_id},
			       {"policy", policy.name}, {"policy_file", rec.policy_file}, {"pid", child.pid},
			       {"command", o.command}});

	siginfo_t si = wait_child(child, sigfd.get(), sup.get(), [&] { sup->reload_from_file("SIGHUP"); });
	bool killed_on_violation = sup->killed_on_violation();
	sup.reset();  // reads what is left in the ring

	int status = exit_status_of(si);
	std::error_code ec;
	bool by_operator = std::filesystem::exists(paths.kill_marker(name), ec);
	if (killed_on_violation)
		status = kExitKilledOnViolation;
	else if (by_operator)
		status = kExitKilledByOperator;
	{
		// Unless someone removed it meanwhile (its slot may be another's now).
		FileLock lock(paths.lock_file());
		if (auto cur = load_record(paths, name); cur && cur->cgroup_id == rec.cgroup_id)
			destroy_sandbox(*k, paths, *cur);
	}
	audit.write(name, json{{"event", "sandbox-exit"}, {"status", status}, {"command_status", exit_status_of(si)}});
	spdlog::info("sandbox {} removed; exit status {}", name, status);
	return status;
}

}  // namespace airlock
