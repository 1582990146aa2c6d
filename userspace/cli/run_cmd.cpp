// `airlock run`: one sandbox, one command, the agent in the foreground.
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
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
#include <filesystem>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "events/audit.h"
#include "kernel/kernel.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
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

uint64_t monotonic_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

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
Child spawn(const std::string& name, const std::string& cgroup_path, const RunOptions& o)
{
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
	args.flags = CLONE_INTO_CGROUP | CLONE_PIDFD | CLONE_NEWCGROUP;
	args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
	args.exit_signal = SIGCHLD;
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
	if (n == sizeof(child_errno))
		spdlog::error("cannot execute {}: {}", o.command[0], std::strerror(child_errno));
	return c;
}

enum class State { Running, Frozen, Killed };

struct Runner {
	kernel::Kernel& k;
	const Paths& paths;
	SandboxRecord rec;
	AuditLog& audit;
	Policy policy;  // what the live bank was compiled from, to name rules
	State state = State::Running;
	bool killed_on_violation = false;

	// dns: the whole record when e is the head of a DNS event.
	void on_event(const al_event& e, const al_dns_event* dns)
	{
		// A reload switched banks: the record names the policy now enforced,
		// and the state directory keeps the text that bank came from.
		if (e.policy_id && e.policy_id != policy_id_of(rec.slot, rec.bank)) {
			if (auto r = load_record(paths, rec.name)) {
				rec = *r;
				if (auto p = parse_policy_file(paths.policy_copy(rec.name, rec.bank)); p.policy)
					policy = *p.policy;
			}
		}
		json j = dns ? dns_json(*dns) : decision_json(e);
		j["policy"] = rec.policy_name;
		if (e.rule != AL_RULE_NONE && e.rule < policy.rules.size())
			j["rule_text"] = describe(policy.rules[e.rule]);
		audit.write(rec.name, j);
		if (!terminal_budget())
			return;
		std::string line = dns ? dns_line(*dns) : decision_line(e);
		if (e.verdict == AL_VERDICT_ALLOW)
			spdlog::info("{}: {}", rec.name, line);
		else
			spdlog::warn("{}: {}", rec.name, line);
	}

	// Learned addresses stay in the kernel this long past their TTL, so
	// that flows let through while they were valid keep going; then they
	// are removed and their table space is free again.
	static constexpr uint64_t kLearnedLingerNs = 600ull * 1000000000ull;
	uint64_t last_sweep = 0;
	void sweep_learned()
	{
		uint64_t now = monotonic_ns();
		if (now - last_sweep < 1000000000ull || now < kLearnedLingerNs)
			return;
		last_sweep = now;
		try {
			k.sweep_learned(rec.slot, now - kLearnedLingerNs);
		} catch (const std::exception& ex) {
			spdlog::warn("{}: sweeping learned addresses: {}", rec.name, ex.what());
		}
	}

	// The audit log takes every event; the terminal at most 20 a second, so
	// a flood cannot make the agent spend its time on a console.
	uint64_t window_start = 0;
	unsigned in_window = 0, suppressed = 0;
	bool terminal_budget()
	{
		uint64_t now = monotonic_ns();
		if (now - window_start >= 1000000000ull) {
			if (suppressed)
				spdlog::warn("{}: {} more decisions in the last second are only in the audit log", rec.name,
					     suppressed);
			window_start = now;
			in_window = suppressed = 0;
		}
		if (in_window < 20) {
			in_window++;
			return true;
		}
		suppressed++;
		return false;
	}

	// SIGHUP sent with kill(2): enforce the policy file again, as `airlock reload` would.
	void reload_from_file()
	{
		auto r = load_record(paths, rec.name);
		if (!r)
			return;
		std::string file = r->policy_file;
		try {
			Policy p = load_policy(file);
			FileLock lock(paths.lock_file());
			auto cur = load_record(paths, rec.name);
			if (!cur)
				return;
			reload_sandbox(k, paths, *cur, p, file);
			rec = *cur;
			policy = p;
			audit.write(rec.name, json{{"event", "reload"}, {"result", "ok"}, {"policy", p.name},
						   {"policy_file", file}, {"by", "SIGHUP"}});
			spdlog::info("{}: reloaded {} on SIGHUP", rec.name, file);
		} catch (const PolicyRejected& e) {
			audit.write(rec.name, json{{"event", "reload"}, {"result", "error"}, {"policy_file", file},
						   {"errors", e.lines()}, {"by", "SIGHUP"}});
			for (const auto& l : e.lines())
				spdlog::error("{}", l);
			spdlog::error("{}: reload rejected; policy '{}' stays enforced", rec.name, rec.policy_name);
		} catch (const std::exception& e) {
			spdlog::error("{}: reload failed: {}; the old policy stays enforced", rec.name, e.what());
		}
	}

	// The kernel latch is the source of truth: events only make us look sooner.
	void check_latch()
	{
		if (state != State::Running)
			return;
		al_latch l = k.latch(rec.slot);
		if (!l.violated_ns)
			return;
		auto sb = k.sandbox(rec.cgroup_id);
		uint8_t action = sb ? sb->on_violation : uint8_t(AL_ON_VIOLATION_FREEZE);
		if (action == AL_ON_VIOLATION_KILL) {
			cgroup::kill(rec.cgroup);
			bool empty = cgroup::wait_empty(rec.cgroup, 5s);
			uint64_t lat = monotonic_ns() - l.violated_ns;
			state = State::Killed;
			killed_on_violation = true;
			audit.write(rec.name, json{{"event", "killed"}, {"by", "policy"}, {"latency_us", lat / 1000},
						   {"complete", empty}});
			spdlog::warn("{}: killed on violation, {:.3f} ms after it", rec.name, lat / 1e6);
			return;
		}
		cgroup::freeze(rec.cgroup);
		bool frozen = cgroup::wait_frozen(rec.cgroup, true, 5s);
		uint64_t lat = monotonic_ns() - l.violated_ns;
		if (!frozen) {
			spdlog::error("{}: cgroup.events did not report frozen 1 within 5 s", rec.name);
			audit.write(rec.name, json{{"event", "freeze-failed"}, {"latency_us", lat / 1000}});
			return;
		}
		state = State::Frozen;
		audit.write(rec.name, json{{"event", "frozen"}, {"latency_us", lat / 1000}});
		spdlog::warn("{}: frozen {:.3f} ms after the violation; `airlock thaw {}` or `airlock kill {}`",
			     rec.name, lat / 1e6, rec.name, rec.name);
	}

	void check_thawed()
	{
		if (state != State::Frozen)
			return;
		auto ev = cgroup::events(rec.cgroup);
		if (ev && ev->populated && !ev->frozen) {
			state = State::Running;
			// cgroup.kill unfreezes on its way to killing: that is no thaw.
			std::error_code ec;
			if (!std::filesystem::exists(paths.kill_marker(rec.name), ec))
				spdlog::info("{}: thawed", rec.name);
		}
	}
};

int ring_cb(void* ctx, void* data, size_t size)
{
	if (size < sizeof(al_event))
		return 0;
	al_event e;
	std::memcpy(&e, data, sizeof(e));
	auto* r = static_cast<Runner*>(ctx);
	if ((e.kind == AL_EVENT_DNS_QUERY || e.kind == AL_EVENT_DNS_ANSWER) && size >= sizeof(al_dns_event)) {
		al_dns_event d;
		std::memcpy(&d, data, sizeof(d));
		r->on_event(d.base, &d);
	} else {
		r->on_event(e, nullptr);
	}
	if (e.latched)
		r->check_latch();
	return 0;
}

int exit_status_of(const siginfo_t& si)
{
	if (si.si_code == CLD_EXITED)
		return si.si_status;
	return 128 + si.si_status;
}

}  // namespace

int cmd_run(const Paths& paths, const RunOptions& o)
{
	Policy policy;
	try {
		policy = load_policy(o.policy_file);
	} catch (const PolicyRejected& e) {
		for (const auto& l : e.lines())
			fmt::print(stderr, "{}\n", l);
		return kExitAirlockError;
	}
	// Capabilities do not guard these: bpffs pins and cgroup.procs are files,
	// and uid 0 owns them.
	if (o.user.empty() && ::geteuid() == 0)
		spdlog::warn("the command runs as uid 0: it can open airlock's pinned maps under {}{}; run it with --user",
			     paths.bpf_dir,
			     cgroup_mount_has_nsdelegate() ? ""
							   : " and, as the cgroup2 mount lacks nsdelegate, move itself out "
							     "of the sandbox");
	if (o.keep_caps && ::geteuid() == 0)
		spdlog::warn("--keep-caps: the command keeps CAP_NET_RAW; AF_PACKET and AF_XDP sockets bypass every "
			     "cgroup hook");
	std::string name = o.name.empty() ? fmt::format("{}-{}", policy.name, ::getpid()) : o.name;
	std::string audit_path = o.audit_log.empty() ? "/var/log/airlock/audit.jsonl" : o.audit_log;
	AuditLog audit(audit_path);

	// Signals become events on a descriptor; the child gets them unblocked.
	sigset_t mask;
	sigemptyset(&mask);
	for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD})
		sigaddset(&mask, s);
	sigprocmask(SIG_BLOCK, &mask, nullptr);
	Fd sigfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));

	make_dirs(paths.state_dir);
	std::optional<kernel::Kernel> k;
	SandboxRecord rec;
	{
		FileLock lock(paths.lock_file());
		k.emplace(kernel::Kernel::load_or_adopt(paths.bpf_dir, load_records(paths).empty()));
		CreateOptions co{name, policy, o.policy_file, audit_path, o.log_allowed, ::getpid()};
		rec = create_sandbox(*k, paths, co);
	}
	spdlog::info("sandbox {} in {} (cgroup id {}), policy '{}' {} on_violation {}; programs {}", name, rec.cgroup,
		     rec.cgroup_id, policy.name, to_string(policy.mode), to_string(policy.on_violation),
		     k->adopted() ? "adopted from pins" : "loaded and pinned");

	Runner runner{*k, paths, rec, audit, policy};
	Fd ringfd = k->ring(rec.slot);
	ring_buffer* rb = ringfd.valid() ? ring_buffer__new(ringfd.get(), ring_cb, &runner, nullptr) : nullptr;
	if (!rb) {
		FileLock lock(paths.lock_file());
		destroy_sandbox(*k, paths, rec);
		fail("cannot open the event ring of sandbox {}", name);
	}

	Child child;
	try {
		child = spawn(name, rec.cgroup, o);
	} catch (...) {
		ring_buffer__free(rb);
		FileLock lock(paths.lock_file());
		destroy_sandbox(*k, paths, rec);
		throw;
	}
	audit.write(name, json{{"event", "sandbox-start"}, {"cgroup", rec.cgroup}, {"cgroup_id", rec.cgroup_id},
			       {"policy", policy.name}, {"policy_file", rec.policy_file}, {"pid", child.pid},
			       {"command", o.command}});

	Fd ep(::epoll_create1(EPOLL_CLOEXEC));
	auto add = [&](int fd, uint64_t tag) {
		struct epoll_event ev = {};
		ev.events = EPOLLIN;
		ev.data.u64 = tag;
		if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
			fail_errno("epoll_ctl");
	};
	add(ring_buffer__epoll_fd(rb), 1);
	add(child.pidfd.get(), 2);
	add(sigfd.get(), 3);

	siginfo_t si{};
	bool exited = false;
	while (!exited) {
		struct epoll_event evs[4];
		// The timeout only bounds how late a latch set while the ring was
		// full is noticed; every event wakes us at once.
		int n = ::epoll_wait(ep.get(), evs, 4, 200);
		if (n < 0 && errno != EINTR)
			fail_errno("epoll_wait");
		ring_buffer__consume(rb);
		runner.check_latch();
		runner.check_thawed();
		runner.sweep_learned();
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == 2) {
				if (::waitid(static_cast<idtype_t>(P_PIDFD), child.pidfd.get(), &si, WEXITED) == 0)
					exited = true;
			} else if (evs[i].data.u64 == 3) {
				struct signalfd_siginfo ssi;
				while (::read(sigfd.get(), &ssi, sizeof(ssi)) == sizeof(ssi)) {
					// Passed on only when sent with kill(2): a terminal's ^C
					// already reached the child through its process group.
					if (ssi.ssi_signo == SIGHUP && ssi.ssi_code == SI_USER)
						runner.reload_from_file();
					else if (ssi.ssi_signo != SIGCHLD && ssi.ssi_code == SI_USER)
						::kill(child.pid, ssi.ssi_signo);
				}
			}
		}
	}
	ring_buffer__consume(rb);
	ring_buffer__free(rb);

	int status = exit_status_of(si);
	std::error_code ec;
	bool by_operator = std::filesystem::exists(paths.kill_marker(name), ec);
	if (runner.killed_on_violation)
		status = kExitKilledOnViolation;
	else if (by_operator)
		status = kExitKilledByOperator;
	{
		FileLock lock(paths.lock_file());
		destroy_sandbox(*k, paths, rec);
	}
	audit.write(name, json{{"event", "sandbox-exit"}, {"status", status}, {"command_status", exit_status_of(si)}});
	spdlog::info("sandbox {} removed; exit status {}", name, status);
	return status;
}

}  // namespace airlock
