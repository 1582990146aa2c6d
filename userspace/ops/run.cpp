// `airlock run` and `airlock exec`: a command in a sandbox, waited for.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "ops/run.h"

#include "events/audit.h"
#include "kernel/kernel.h"
#include "ops/control.h"
#include "ops/ops.h"
#include "ops/proxy.h"
#include "sandbox/cgroup.h"
#include "sandbox/launch.h"
#include "sandbox/sandbox.h"
#include "sandbox/supervisor.h"
#include "util/error.h"
#include "util/exit_code.h"
#include "util/files.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace airlock::ops {

using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// Capabilities do not guard these: bpffs pins and cgroup.procs are files,
// and uid 0 owns them. Without --keep-caps the command sees neither (its
// own mounts), so only --keep-caps leaves them within its reach.
void warn_about_identity(const Paths& paths, const RunOptions& o)
{
	if (o.keep_caps && o.user.empty() && ::geteuid() == 0)
		spdlog::warn(
			"--keep-caps: the command runs as uid 0 in the host's mount namespace: it can open airlock's "
			"pinned maps under {} and move itself out of the sandbox; run it with --user",
			paths.bpf_dir);
	if (o.keep_caps && ::geteuid() == 0)
		spdlog::warn("--keep-caps: the command keeps CAP_NET_RAW; AF_PACKET and AF_XDP sockets bypass every "
			     "cgroup hook");
}

struct Child {
	int pid = -1;
	Fd pidfd;
	Confinement confinement;
};

// scope_abstract: what the sandbox's record says (exec into an existing
// one); by default, what its policy says.
Child spawn(const Paths& paths, const std::string& name, const std::string& cgroup_path, const RunOptions& o,
	    const Policy& policy, bool existing = false, std::optional<bool> scope_abstract = std::nullopt,
	    std::vector<std::string> env = {})
{
	// Before the command can use what it keeps: where the sandbox's
	// sockets are looked for when it is removed.
	if (o.keep_caps)
		write_file_atomic(paths.privileged_marker(name), "keep-caps\n");
	LaunchOptions lo = launch_options(policy);
	lo.env = std::move(env);
	lo.name = name;
	lo.cgroup = cgroup_path;
	lo.join = existing;
	lo.command = o.command;
	lo.user = o.user;
	lo.keep_caps = o.keep_caps;
	if (scope_abstract)
		lo.scope_abstract_unix = *scope_abstract;
	Launched l = launch(lo);
	return Child{l.pid, std::move(l.pidfd), std::move(l.confinement)};
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
siginfo_t wait_child(Child& child, int sigfd, Supervisor* sup, const std::function<void()>& on_hup,
		     SandboxProxy* proxy = nullptr)
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
	// The proxy's exit (tag 4), and what it asks and reports (5): new
	// descriptors with each start of the proxy (after its death, or a
	// reload), their tags carrying the start's generation, so that an event
	// of a proxy already replaced is ignored.
	uint64_t generation = 0;
	auto proxy_tag = [&](uint64_t tag) { return tag | (generation << 8); };
	auto watch_proxy = [&] {
		if (!proxy || proxy->generation() == generation)
			return;
		generation = proxy->generation();
		if (proxy->pidfd() >= 0)
			add(proxy->pidfd(), proxy_tag(4));
		if (proxy->control_fd() >= 0)
			add(proxy->control_fd(), proxy_tag(5));
	};
	watch_proxy();
	siginfo_t si{};
	for (bool exited = false; !exited;) {
		struct epoll_event evs[8];
		// The timeout only bounds how late a latch set while the ring was
		// full is noticed; every event wakes us at once.
		int n = ::epoll_wait(ep.get(), evs, 8, 200);
		if (n < 0 && errno != EINTR)
			fail_errno("epoll_wait");
		if (sup) {
			try {
				sup->follow_outside_reload();
			} catch (const std::exception& e) {
				spdlog::error("{}: following a reload: {}", sup->record().name, e.what());
			}
			sup->poll();
		}
		if (proxy)
			proxy->tend();  // a proxy that is down, once its time came
		for (int i = 0; i < n; i++) {
			if (proxy && evs[i].data.u64 == proxy_tag(4) && proxy->generation() == generation) {
				// Its pidfd and channel close (and leave the set) once it
				// is reaped; watch_proxy() adds the next one's.
				proxy->reap();
			} else if (proxy && evs[i].data.u64 == proxy_tag(5) && proxy->generation() == generation) {
				proxy->serve();
				if (sup)
					sup->poll();  // a denied connection set the latch: the freeze starts now
			} else if (evs[i].data.u64 == 2) {
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
		watch_proxy();
	}
	return si;
}

// `airlock run` while a daemon runs: the daemon makes and supervises the
// sandbox (its events, freeze, metrics); this process spawns, waits and
// asks for the sandbox's removal.
int run_via_daemon(const Paths& paths, const RunOptions& o, const Policy& policy, const std::string& name,
		   const std::string& audit_path, int sigfd)
{
	std::string policy_file = std::filesystem::absolute(o.policy_file).lexically_normal().string();
	Request req = Request::of(Request::Cmd::Create, name);
	req.policy = policy_file;
	req.audit_log = std::filesystem::absolute(audit_path).string();
	req.audit_bound = o.audit_bound;
	req.log_allowed = o.log_allowed;
	req.runner_pid = ::getpid();
	auto made = daemon_call(paths, req);
	if (!made)
		fail("the airlock daemon went away");
	if (!*made) {
		for (const auto& l : made->rejection().lines)
			spdlog::error("{}", l);
		return kExitAirlockError;
	}
	std::string cg = (**made)["cgroup"].get<std::string>();
	spdlog::info("sandbox {} in {}, supervised by the airlock daemon", name, cg);
	auto remove = [&]() -> std::optional<nlohmann::json> {
		auto current = load_record(paths, name);
		if (!current || current->cgroup != cg)
			return nlohmann::json{{"gone", true}};  // deleted by the operator
		auto r = daemon_ask(paths, Request::of(Request::Cmd::Delete, name));
		if (!r && load_record(paths, name))
			ops::remove(paths, name);  // the daemon is gone: nobody else will
		return r;
	};
	Child child;
	try {
		child = spawn(paths, name, cg, o, policy);
	} catch (...) {
		remove();
		throw;
	}
	auto made_rec = load_record(paths, name);
	AuditLog audit(audit_path, made_rec ? made_rec->audit_bound : o.audit_bound);
	audit.write(name, json{{"event", "sandbox-start"},
			       {"cgroup", cg},
			       {"pid", child.pid},
			       {"command", o.command},
			       {"supervisor", "daemon"},
			       {"confinement", child.confinement.to_json()}});
	siginfo_t si = wait_child(child, sigfd, nullptr, [&] {
		try {
			auto r = daemon_call(paths, reload_request(name, policy_file));
			if (r && *r)
				spdlog::info("{}", (*r)->value("message", ""));
			else if (r)
				for (const auto& l : r->rejection().lines)
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

int exec(const Paths& paths, const std::string& name, const RunOptions& o)
{
	auto st = daemon_ask(paths, Request::of(Request::Cmd::Status));
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
	// The sandbox's policy file, for what the filter of the new process allows.
	auto loaded = load_policy_or_report(sb["policy_file"].get<std::string>());
	if (!loaded)
		return kExitAirlockError;
	warn_about_identity(paths, o);
	Fd sigfd = block_signals();
	auto started = std::filesystem::file_time_type::clock::now();
	bool scoped = sb.contains("unix") && sb["unix"].value("abstract", "") == "landlock-scoped";
	// The sandbox's proxy listens on loopback in one network namespace: a
	// command started in another would find nothing at its redirects.
	std::vector<std::string> env;
	if (sb.contains("supervisor") && sb["supervisor"].contains("proxy")) {
		const auto& px = sb["supervisor"]["proxy"];
		struct stat st {};
		uint64_t here = ::stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
		uint64_t there = px.value("netns", uint64_t{0});
		if (there != 0 && here != there)
			fail("sandbox '{}': its proxy listens in network namespace net:[{}], and this is net:[{}]: run "
			     "airlock exec in the daemon's network namespace",
			     name, there, here);
		if (std::string ca = px.value("ca_file", ""); !ca.empty())
			env = proxy::ca_environment(ca);
	}
	Child child = spawn(paths, name, sb["cgroup"].get<std::string>(), o, *loaded, true, scoped, std::move(env));
	siginfo_t si = wait_child(child, sigfd.get(), nullptr, nullptr);
	int status = exit_status_of(si);
	if (killed_by_sigkill(si)) {
		// Killed: by the daemon on a violation, or by `airlock kill`?
		auto after = daemon_ask(paths, Request::of(Request::Cmd::Status));
		for (const auto& s : after ? (*after)["status"]["sandboxes"] : nlohmann::json::array())
			if (s["name"] == name && s.contains("supervisor") &&
			    s["supervisor"].value("killed_on_violation", false))
				return kExitKilledOnViolation;
		std::error_code ec;
		auto marked = std::filesystem::last_write_time(paths.kill_marker(name), ec);
		if (!ec && marked >= started)
			return kExitKilledByOperator;
	}
	return status;
}

int run(const Paths& paths, const RunOptions& o)
{
	auto loaded = load_policy_or_report(o.policy_file);
	if (!loaded)
		return kExitAirlockError;
	Policy policy = std::move(*loaded);
	warn_about_identity(paths, o);
	std::string name = o.name.empty() ? fmt::format("{}-{}", policy.name, ::getpid()) : o.name;
	std::string audit_path = o.audit_log.empty() ? "/var/log/airlock/audit.jsonl" : o.audit_log;
	Fd sigfd = block_signals();
	// A policy that redirects needs its proxy, which this process starts
	// and watches: it supervises the sandbox itself.
	bool with_proxy = needs_proxy(policy);
	if (!o.standalone && !with_proxy && daemon_ask(paths, Request::of(Request::Cmd::Ping)))
		return run_via_daemon(paths, o, policy, name, audit_path, sigfd.get());
	AuditLog audit(audit_path, o.audit_bound);

	make_dirs(paths.state_dir);
	std::optional<kernel::Kernel> k;
	SandboxRecord rec;
	{
		FileLock lock(paths.lock_file());
		k.emplace(kernel::Kernel::load_or_adopt(paths.bpf_dir, load_records(paths).empty()));
		CreateOptions co{name,       policy, o.policy_file, audit_path,   o.log_allowed,
				 ::getpid(), "",     false,         o.audit_bound};
		rec = create_sandbox(*k, paths, co);
	}
	spdlog::info("sandbox {} in {} (cgroup id {}), policy '{}' {} on_violation {}; programs {}", name, rec.cgroup,
		     rec.cgroup_id, policy.name, to_string(policy.mode), to_string(policy.on_violation),
		     k->adopted() ? "adopted from pins" : "loaded and pinned");

	std::unique_ptr<Supervisor> sup;
	std::unique_ptr<SandboxProxy> proxy;
	try {
		sup = std::make_unique<Supervisor>(*k, paths, rec, policy);
		if (with_proxy) {
			proxy = std::make_unique<SandboxProxy>(*k, paths, rec, policy);
			// A connection the SNI gate denied is a violation: the audit
			// log has it, the latch takes the sandbox's on_violation.
			proxy->on_violation = [&k, &sup, &rec](const json& j) {
				json e = j;
				e["latched"] = k->set_latch(rec.slot, rec.cgroup_id);
				sup->audit().write(rec.name, e);
				bool http = e.value("event", "") == "http-gate";
				spdlog::warn("{}: denied by the {} gate: {}:{} '{}': {}", rec.name,
					     http ? "HTTP" : "SNI", e.value("dst", ""), e.value("port", 0),
					     e.value(http ? "host" : "sni", ""), e.value("reason", ""));
			};
			sup->on_reload = [&proxy, &sup](bool ok) {
				if (ok && proxy)
					proxy->set_policy(sup->policy(), sup->record().bank);
			};
		}
	} catch (...) {
		proxy.reset();
		sup.reset();
		FileLock lock(paths.lock_file());
		destroy_sandbox(*k, paths, rec);
		throw;
	}

	Child child;
	try {
		std::vector<std::string> env;
		if (proxy && !proxy->ca_file().empty())
			env = proxy::ca_environment(proxy->ca_file());
		child = spawn(paths, name, rec.cgroup, o, policy, false, std::nullopt, std::move(env));
	} catch (...) {
		proxy.reset();
		sup.reset();
		FileLock lock(paths.lock_file());
		destroy_sandbox(*k, paths, rec);
		throw;
	}
	audit.write(name, json{{"event", "sandbox-start"},
			       {"cgroup", rec.cgroup},
			       {"cgroup_id", rec.cgroup_id},
			       {"policy", policy.name},
			       {"policy_file", rec.policy_file},
			       {"pid", child.pid},
			       {"command", o.command},
			       {"confinement", child.confinement.to_json()}});

	siginfo_t si = wait_child(
		child, sigfd.get(), sup.get(), [&] { sup->reload_from_file("SIGHUP"); }, proxy.get());
	bool killed_on_violation = sup->killed_on_violation();
	proxy.reset();  // writes its last records
	sup.reset();    // reads what is left in the ring

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

}  // namespace airlock::ops
