#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "kernel/kernel.h"
#include "util/files.h"
#include "util/mountinfo.h"

namespace it {

namespace fs = std::filesystem;

// ---- environment -------------------------------------------------------------

std::string airlock_bin()
{
	const char* e = std::getenv("AIRLOCK_TEST_BIN");
	return e && *e ? e : AIRLOCK_BIN;
}

std::string fuse_hang_bin()
{
	return AIRLOCK_FUSE_HANG;
}

std::string uring_connect_bin()
{
	return AIRLOCK_URING_CONNECT;
}

std::string source_dir()
{
	return AIRLOCK_SOURCE_DIR;
}

std::string python()
{
	const char* e = std::getenv("AIRLOCK_TEST_PYTHON");
	if (e && *e)
		return e;
	if (::access("/usr/bin/python3", X_OK) == 0)
		return "/usr/bin/python3";
	return "python3";
}

std::string client_script(const std::string& name)
{
	return source_dir() + "/tests/clients/" + name;
}

std::string sink_script()
{
	return source_dir() + "/tests/sink/sink.py";
}

// Where cgroup2 and bpffs are: airlock's own mountinfo reader and bpffs
// check, so that the tests set up exactly what the product would find.
std::string cgroup2_mount()
{
	static std::string cached;
	if (!cached.empty())
		return cached;
	for (const auto& m : airlock::read_mountinfo())
		if (m.fstype == "cgroup2" && m.root == "/") {
			cached = m.point;
			return cached;
		}
	throw std::runtime_error("no cgroup2 mount in /proc/self/mountinfo");
}

void ensure_bpffs()
{
	::mkdir("/sys/fs/bpf", 0700);
	airlock::kernel::ensure_bpffs("/sys/fs/bpf");
}

// ---- utilities ---------------------------------------------------------------

std::string random_hex(size_t n)
{
	static std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(::getpid()) << 32) ^
				   uint64_t(std::chrono::steady_clock::now().time_since_epoch().count())};
	static const char* digits = "0123456789abcdef";
	std::string s;
	for (size_t i = 0; i < n; i++)
		s += digits[rng() & 15];
	return s;
}

std::optional<std::string> try_read_file(const std::string& path)
{
	return airlock::read_file(path);
}

std::string read_file(const std::string& path)
{
	return try_read_file(path).value_or("");
}

void write_file(const std::string& path, const std::string& content)
{
	std::string tmp = path + ".tmp." + random_hex(6);
	{
		std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
		if (!out)
			throw std::runtime_error("cannot write " + tmp);
		out << content;
	}
	if (::rename(tmp.c_str(), path.c_str()) != 0)
		throw std::runtime_error("rename " + tmp + ": " + strerror(errno));
}

bool exists(const std::string& path)
{
	struct stat st;
	return ::stat(path.c_str(), &st) == 0;
}

std::string join(const std::vector<std::string>& v, const std::string& sep)
{
	std::string s;
	for (size_t i = 0; i < v.size(); i++) {
		if (i)
			s += sep;
		s += v[i];
	}
	return s;
}

bool wait_until(const std::function<bool()>& cond, Ms timeout, Ms step)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;
	while (std::chrono::steady_clock::now() < deadline) {
		if (cond())
			return true;
		std::this_thread::sleep_for(step);
	}
	return cond();
}

std::string errno_name(int e)
{
	const char* n = strerrorname_np(e);
	return n ? n : std::to_string(e);
}

size_t count_occurrences(const std::string& hay, const std::string& needle)
{
	if (needle.empty())
		return 0;
	size_t n = 0;
	for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1))
		n++;
	return n;
}

std::string hex_decode(const std::string& hex)
{
	std::string out;
	out.reserve(hex.size() / 2);
	auto val = [](char c) -> int {
		if (c >= '0' && c <= '9')
			return c - '0';
		if (c >= 'a' && c <= 'f')
			return c - 'a' + 10;
		if (c >= 'A' && c <= 'F')
			return c - 'A' + 10;
		return 0;
	};
	for (size_t i = 0; i + 1 < hex.size(); i += 2)
		out += static_cast<char>(val(hex[i]) << 4 | val(hex[i + 1]));
	return out;
}

// ---- processes ---------------------------------------------------------------

int decode_wait_status(int ws)
{
	if (WIFEXITED(ws))
		return WEXITSTATUS(ws);
	if (WIFSIGNALED(ws))
		return 128 + WTERMSIG(ws);
	return -1;
}

std::string Result::describe() const
{
	std::string s = fmt::format("`{}` -> status {}{}", join(argv), status, timed_out ? " (TIMED OUT, killed)" : "");
	if (!out.empty())
		s += "\n--- stdout ---\n" + out.substr(0, 8000);
	if (!err.empty())
		s += "\n--- stderr ---\n" + err.substr(0, 8000);
	return s;
}

namespace {

// In the child after fork: no signal mask or dispositions of ours, own
// process group, stdio as given, everything else closed.
[[noreturn]] void exec_child(const std::vector<std::string>& argv, int in_fd, int out_fd, int err_fd)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, nullptr);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			::signal(s, SIG_DFL);
	::setpgid(0, 0);
	// Should the test process die (a crash, kill -9), what it started dies
	// with it; the next run sweeps the namespaces, cgroups and pins.
	::prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (::getppid() == 1)
		_exit(127);
	if (in_fd >= 0)
		::dup2(in_fd, 0);
	::dup2(out_fd, 1);
	::dup2(err_fd, 2);
	::syscall(SYS_close_range, 3u, ~0u, 0u);
	std::vector<char*> av;
	for (const auto& a : argv)
		av.push_back(const_cast<char*>(a.c_str()));
	av.push_back(nullptr);
	::execvp(av[0], av.data());
	dprintf(2, "exec %s: %s\n", av[0], strerror(errno));
	_exit(127);
}

}  // namespace

Result run(const std::vector<std::string>& argv, Ms timeout, const std::string& input)
{
	Result r;
	r.argv = argv;
	int out[2], err[2], in[2];
	if (::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC) || ::pipe2(in, O_CLOEXEC))
		throw std::runtime_error("pipe");
	pid_t pid = ::fork();
	if (pid < 0)
		throw std::runtime_error("fork");
	if (pid == 0)
		exec_child(argv, in[0], out[1], err[1]);
	::close(out[1]);
	::close(err[1]);
	::close(in[0]);
	if (!input.empty()) {
		ssize_t ignored = ::write(in[1], input.data(), input.size());
		(void)ignored;
	}
	::close(in[1]);
	int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
	auto deadline = std::chrono::steady_clock::now() + timeout;
	bool out_open = true, err_open = true, exited = false;
	int ws = 0;
	while (out_open || err_open || !exited) {
		auto left = std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now()).count();
		if (left <= 0) {
			r.timed_out = true;
			break;
		}
		struct pollfd p[3];
		int n = 0;
		int io = -1, ie = -1, ip = -1;
		if (out_open)
			p[io = n++] = {out[0], POLLIN, 0};
		if (err_open)
			p[ie = n++] = {err[0], POLLIN, 0};
		if (!exited && pidfd >= 0)
			p[ip = n++] = {pidfd, POLLIN, 0};
		int rc = ::poll(p, n, static_cast<int>(std::min<long>(left, 100)));
		if (rc < 0 && errno != EINTR)
			break;
		char buf[65536];
		if (io >= 0 && (p[io].revents & (POLLIN | POLLHUP))) {
			ssize_t k = ::read(out[0], buf, sizeof(buf));
			if (k > 0)
				r.out.append(buf, k);
			else
				out_open = false;
		}
		if (ie >= 0 && (p[ie].revents & (POLLIN | POLLHUP))) {
			ssize_t k = ::read(err[0], buf, sizeof(buf));
			if (k > 0)
				r.err.append(buf, k);
			else
				err_open = false;
		}
		if (!exited && (pidfd < 0 || (ip >= 0 && (p[ip].revents & POLLIN)))) {
			if (::waitpid(pid, &ws, WNOHANG) == pid)
				exited = true;
		}
	}
	if (!exited) {
		::kill(pid, SIGKILL);
		::kill(-pid, SIGKILL);  // the group we made for it
		::waitpid(pid, &ws, 0);
	}
	if (pidfd >= 0)
		::close(pidfd);
	::close(out[0]);
	::close(err[0]);
	r.status = r.timed_out ? -1 : decode_wait_status(ws);
	return r;
}

Proc::Proc(std::vector<std::string> argv, std::string out_path, std::string err_path)
    : argv_(std::move(argv)), out_path_(std::move(out_path)), err_path_(std::move(err_path))
{
	int o = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int e = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int n = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (o < 0 || e < 0 || n < 0)
		throw std::runtime_error("cannot open output files for " + join(argv_));
	pid_ = ::fork();
	if (pid_ < 0)
		throw std::runtime_error("fork");
	if (pid_ == 0)
		exec_child(argv_, n, o, e);
	::close(o);
	::close(e);
	::close(n);
	pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
}

Proc::~Proc()
{
	if (pid_ > 0 && !reaped_) {
		// The process and the process group made for it (its forked helpers),
		// never anything else: the leader is reaped only here, so until now
		// its pid, and with it the group id, cannot have been reused.
		::kill(-pid_, SIGKILL);
		::kill(pid_, SIGKILL);
		int ws;
		::waitpid(pid_, &ws, 0);
	}
	if (pidfd_ >= 0)
		::close(pidfd_);
}

// Notes the exit status but leaves the zombie (WNOWAIT): see ~Proc.
bool Proc::reap(bool block)
{
	if (status_)
		return true;
	siginfo_t si = {};
	if (::waitid(P_PID, pid_, &si, WEXITED | WNOWAIT | (block ? 0 : WNOHANG)) == 0 && si.si_pid == pid_) {
		status_ = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
		return true;
	}
	return false;
}

std::optional<int> Proc::wait(Ms timeout)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;
	while (!reap(false)) {
		auto left = std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now()).count();
		if (left <= 0)
			return std::nullopt;
		if (pidfd_ >= 0) {
			struct pollfd p = {pidfd_, POLLIN, 0};
			::poll(&p, 1, static_cast<int>(std::min<long>(left, 50)));
		} else {
			std::this_thread::sleep_for(5ms);
		}
	}
	return status_;
}

std::optional<int> Proc::reap_now(Ms timeout)
{
	auto st = wait(timeout);
	if (st && !reaped_) {
		int ws;
		::waitpid(pid_, &ws, 0);
		reaped_ = true;
	}
	return st;
}

bool Proc::running()
{
	return !reap(false);
}

void Proc::signal(int sig)
{
	if (!status_ && pid_ > 0)
		::kill(pid_, sig);
}

std::string Proc::describe() const
{
	std::string s = fmt::format("`{}` pid {} status {}", join(argv_), pid_,
				    status_ ? std::to_string(*status_) : std::string("running"));
	std::string o = out(), e = err();
	if (!o.empty())
		s += "\n--- stdout ---\n" + o.substr(0, 8000);
	if (!e.empty())
		s += "\n--- stderr ---\n" + (e.size() > 8000 ? e.substr(e.size() - 8000) : e);
	return s;
}

// ---- topology ----------------------------------------------------------------

Topology::Topology(const std::string& id)
    : client_ns("alc" + id), sink_ns("als" + id), client_if("vc" + id), sink_if("vs" + id)
{
}

Topology::~Topology()
{
	down();
}

void Topology::up()
{
	auto ip = [](std::vector<std::string> args) {
		args.insert(args.begin(), "ip");
		Result r = run(args, 10s);
		if (r.status != 0)
			throw std::runtime_error("topology: " + r.describe());
	};
	created_ = true;
	ip({"netns", "add", client_ns});
	ip({"netns", "add", sink_ns});
	// The veth is born in the test namespaces: it never exists in the host's.
	// Fixed MACs (each pair lives in its own namespaces) and permanent
	// neighbour entries: no packet ever waits in an ARP/ND queue, so what a
	// client sent has left when its syscall returns, and a later fence
	// cannot overtake it.
	ip({"link", "add", client_if, "address", kClientMac, "netns", client_ns, "type", "veth", "peer", "name",
	    sink_if, "address", kSinkMac, "netns", sink_ns});
	const std::string& c = client_ns;
	const std::string& s = sink_ns;
	ip({"-n", c, "link", "set", "lo", "up"});
	ip({"-n", s, "link", "set", "lo", "up"});
	ip({"-n", c, "addr", "add", "10.77.0.1/24", "dev", client_if});
	ip({"-n", c, "addr", "add", "fd77::1/64", "dev", client_if, "nodad"});
	ip({"-n", s, "addr", "add", "10.77.0.2/24", "dev", sink_if});
	ip({"-n", s, "addr", "add", "10.77.0.3/24", "dev", sink_if});
	ip({"-n", s, "addr", "add", "fd77::2/64", "dev", sink_if, "nodad"});
	ip({"-n", s, "addr", "add", "fd77::3/64", "dev", sink_if, "nodad"});
	ip({"-n", c, "link", "set", client_if, "up"});
	ip({"-n", s, "link", "set", sink_if, "up"});
	for (const char* a : {kAllowed4, kDenied4, kAllowed6, kDenied6})
		ip({"-n", c, "neigh", "replace", a, "lladdr", kSinkMac, "dev", client_if, "nud", "permanent"});
	for (const char* a : {kClient4, kClient6})
		ip({"-n", s, "neigh", "replace", a, "lladdr", kClientMac, "dev", sink_if, "nud", "permanent"});
	// Ping sockets for every gid; TCP Fast Open with data in the SYN
	// (client: 1 enable | 4 no cookie needed; sink: 2 server | 0x200 no cookie).
	auto sysctl = [](const std::string& ns, std::vector<std::string> kv) {
		std::vector<std::string> a = {"ip", "netns", "exec", ns, "sysctl", "-q", "-w"};
		a.insert(a.end(), kv.begin(), kv.end());
		Result r = run(a, 10s);
		if (r.status != 0)
			throw std::runtime_error("topology: " + r.describe());
	};
	sysctl(c, {"net.ipv4.ping_group_range=0 2147483647", "net.ipv4.tcp_fastopen=5"});
	sysctl(s, {"net.ipv4.tcp_fastopen=515"});
	// Safety: the client namespace must have no route beyond the veth subnet.
	Result routes = run({"ip", "-n", c, "route", "show", "default"}, 5s);
	Result routes6 = run({"ip", "-n", c, "-6", "route", "show", "default"}, 5s);
	if (!routes.out.empty() || !routes6.out.empty())
		throw std::runtime_error("topology: the client namespace has a default route");
}

void Topology::down() noexcept
{
	if (!created_)
		return;
	created_ = false;
	try {
		// Deleting a namespace deletes the veth pair with it.
		run({"ip", "netns", "del", client_ns}, 10s);
		run({"ip", "netns", "del", sink_ns}, 10s);
	} catch (...) {
	}
}

int Topology::socket_in_client(int domain, int type, int protocol) const
{
	int fd = -1, err = 0;
	std::string path = client_ns_path();
	// setns(CLONE_NEWNET) affects only the calling thread: a short-lived one.
	std::thread t([&] {
		int ns = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
			err = errno;
			if (ns >= 0)
				::close(ns);
			return;
		}
		::close(ns);
		fd = ::socket(domain, type | SOCK_CLOEXEC, protocol);
		if (fd < 0)
			err = errno;
	});
	t.join();
	if (fd < 0)
		throw std::runtime_error("socket in " + client_ns + ": " + errno_name(err));
	return fd;
}

std::vector<std::string> Topology::in_client(const std::vector<std::string>& argv) const
{
	std::vector<std::string> a = {"nsenter", "--net=" + client_ns_path(), "--"};
	a.insert(a.end(), argv.begin(), argv.end());
	return a;
}

// ---- sink --------------------------------------------------------------------

Sink::Sink(const std::string& dir, const std::string& tag, SinkOptions o) : o_(std::move(o))
{
	log_ = dir + "/sink-" + tag + ".jsonl";
	ready_ = dir + "/sink-" + tag + ".ready";
	out_ = dir + "/sink-" + tag + ".out";
	err_ = dir + "/sink-" + tag + ".err";
}

Sink::~Sink()
{
	if (proc_ && proc_->running()) {
		proc_->signal(SIGTERM);
		if (!proc_->wait(1s))
			proc_->signal(SIGKILL);
	}
	proc_.reset();
}

void Sink::start(Ms timeout)
{
	std::vector<std::string> a;
	if (o_.use_ip_netns_exec)
		a = {"ip", "netns", "exec", o_.netns};
	else
		a = {"nsenter", "--net=/run/netns/" + o_.netns, "--"};
	std::vector<std::string> rest = {python(), "-u",    sink_script(), "--log", log_,         "--ready",
					 ready_,   "--tcp", o_.tcp_ports,  "--udp", o_.udp_ports, "--max-seconds",
					 "300"};
	a.insert(a.end(), rest.begin(), rest.end());
	for (const auto& addr : o_.addrs) {
		a.push_back("--addr");
		a.push_back(addr);
	}
	if (!o_.iface.empty()) {
		a.push_back("--iface");
		a.push_back(o_.iface);
	}
	proc_ = std::make_unique<Proc>(a, out_, err_);
	bool ok = wait_until([&] { return exists(ready_) || !proc_->running(); }, timeout);
	if (!ok || !exists(ready_))
		throw std::runtime_error("sink did not become ready: " + proc_->describe());
}

void Sink::refresh()
{
	int fd = ::open(log_.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	std::string chunk;
	char buf[1 << 16];
	ssize_t n;
	while ((n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(offset_))) > 0) {
		chunk.append(buf, n);
		offset_ += n;
	}
	::close(fd);
	partial_ += chunk;
	size_t start = 0;
	for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', start)) {
		std::string line = partial_.substr(start, nl - start);
		start = nl + 1;
		json j = json::parse(line, nullptr, false);
		if (j.is_discarded() || !j.is_object())
			continue;
		std::string kind = j.value("kind", "");
		if (kind == "frame") {
			if (j.value("dir", "in") != "out")
				frames_in_.push_back(hex_decode(j.value("hex", "")));
			continue;
		}
		// Data arrives as latin-1 text: back to bytes.
		auto bytes = [&](const json& v) {
			std::string out;
			if (!v.is_string())
				return out;
			std::string u = v.get<std::string>();
			for (size_t i = 0; i < u.size(); i++) {
				unsigned char c = u[i];
				if (c < 0x80) {
					out += static_cast<char>(c);
				} else if ((c & 0xe0) == 0xc0 && i + 1 < u.size()) {
					out += static_cast<char>(((c & 0x1f) << 6) | (u[i + 1] & 0x3f));
					i++;
				}
			}
			return out;
		};
		if (kind == "tcp")
			tcp_[j.value("conn", 0L)] += bytes(j["data"]);
		else if (kind == "udp")
			udp_.push_back(bytes(j["data"]));
		else if (kind == "tcp-open")
			tcp_[j.value("conn", 0L)];
		other_.push_back(line.size() > 300 ? line.substr(0, 300) + "..." : line);
	}
	partial_.erase(0, start);
}

size_t Sink::count_data(const std::string& marker)
{
	refresh();
	size_t n = 0;
	for (const auto& [id, s] : tcp_)
		n += count_occurrences(s, marker);
	for (const auto& d : udp_)
		n += count_occurrences(d, marker);
	return n;
}

size_t Sink::count_frames(const std::string& marker)
{
	refresh();
	size_t n = 0;
	for (const auto& f : frames_in_)
		n += count_occurrences(f, marker);
	return n;
}

std::vector<std::string> Sink::payloads_with(const std::string& marker)
{
	refresh();
	std::vector<std::string> out;
	for (const auto& [id, s] : tcp_)
		if (s.find(marker) != std::string::npos)
			out.push_back(s);
	for (const auto& d : udp_)
		if (d.find(marker) != std::string::npos)
			out.push_back(d);
	return out;
}

bool Sink::arrived_intact(const std::string& payload)
{
	for (const auto& p : payloads_with(payload))
		if (p == payload)
			return true;
	return false;
}

bool Sink::wait_data(const std::string& marker, size_t n, Ms timeout)
{
	return wait_until([&] { return count_data(marker) >= n; }, timeout);
}

bool Sink::wait_frames(const std::string& marker, size_t n, Ms timeout)
{
	return wait_until([&] { return count_frames(marker) >= n; }, timeout);
}

bool Sink::wait_intact(const std::string& payload, Ms timeout)
{
	return wait_until([&] { return arrived_intact(payload); }, timeout);
}

size_t Sink::tcp_connections()
{
	refresh();
	return tcp_.size();
}

std::string Sink::summary(size_t max_lines)
{
	refresh();
	std::string s = fmt::format("sink log {}: {} tcp connections, {} datagrams, {} incoming frames\n", log_,
				    tcp_.size(), udp_.size(), frames_in_.size());
	size_t from = other_.size() > max_lines ? other_.size() - max_lines : 0;
	for (size_t i = from; i < other_.size(); i++)
		s += "  " + other_[i] + "\n";
	if (proc_)
		s += "sink stderr: " + proc_->err().substr(0, 2000) + "\n";
	return s;
}

// ---- audit log -----------------------------------------------------------------

std::string Match::describe() const
{
	json j = json::object();
	if (hook)
		j["hook"] = *hook;
	if (verdict)
		j["verdict"] = *verdict;
	if (reason)
		j["reason"] = *reason;
	if (dst)
		j["dst"] = *dst;
	if (protocol)
		j["protocol"] = *protocol;
	if (family)
		j["family"] = *family;
	if (port)
		j["port"] = *port;
	if (violation)
		j["violation"] = *violation;
	if (latched)
		j["latched"] = *latched;
	return j.dump();
}

std::vector<json> read_json_lines(const std::string& path)
{
	std::vector<json> out;
	std::string text = read_file(path);
	std::istringstream in(text);
	std::string line;
	while (std::getline(in, line)) {
		if (line.empty())
			continue;
		json j = json::parse(line, nullptr, false);
		if (!j.is_discarded())
			out.push_back(std::move(j));
	}
	return out;
}

json read_json_object(const std::string& path)
{
	auto t = try_read_file(path);
	if (!t)
		return json::object();
	json j = json::parse(*t, nullptr, false);
	return j.is_object() ? j : json::object();
}

bool field_is(const json& j, const char* key, const std::optional<std::string>& want)
{
	if (!want)
		return true;
	return j.contains(key) && j[key].is_string() && j[key].get<std::string>() == *want;
}

std::vector<json> json_objects_in(const std::string& text)
{
	std::vector<json> out;
	std::istringstream in(text);
	std::string line;
	while (std::getline(in, line)) {
		json j = json::parse(line, nullptr, false);
		if (!j.is_discarded() && j.is_object())
			out.push_back(std::move(j));
	}
	return out;
}

std::vector<json> decisions(const std::vector<json>& lines, const Match& m)
{
	std::vector<json> out;
	auto str_eq = field_is;
	for (const auto& j : lines) {
		if (!j.is_object() || j.value("event", "") != "decision")
			continue;
		if (!str_eq(j, "hook", m.hook) || !str_eq(j, "verdict", m.verdict) || !str_eq(j, "reason", m.reason) ||
		    !str_eq(j, "dst", m.dst) || !str_eq(j, "protocol", m.protocol) || !str_eq(j, "family", m.family))
			continue;
		if (m.port && !(j.contains("port") && j["port"].is_number() && j["port"].get<int>() == *m.port))
			continue;
		if (m.violation && !(j.contains("violation") && j["violation"] == *m.violation))
			continue;
		if (m.latched && !(j.contains("latched") && j["latched"] == *m.latched))
			continue;
		out.push_back(j);
	}
	return out;
}

std::vector<json> events(const std::vector<json>& lines, const std::string& event)
{
	std::vector<json> out;
	for (const auto& j : lines)
		if (j.is_object() && j.value("event", "") == event)
			out.push_back(j);
	return out;
}

std::string dump_lines(const std::vector<json>& lines, size_t max)
{
	std::string s;
	size_t from = lines.size() > max ? lines.size() - max : 0;
	if (from)
		s += fmt::format("  ... {} earlier lines\n", from);
	for (size_t i = from; i < lines.size(); i++)
		s += "  " + lines[i].dump() + "\n";
	return s.empty() ? "  (empty)\n" : s;
}

// ---- cgroups, /proc, bpftool ---------------------------------------------------

int free_port()
{
	int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
	    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0)
		throw std::runtime_error("no free port on 127.0.0.1");
	::close(s);
	return ntohs(a.sin_port);
}

std::optional<std::map<std::string, std::string>> cgroup_events(const std::string& cgroup)
{
	auto text = try_read_file(cgroup + "/cgroup.events");
	if (!text)
		return std::nullopt;
	std::map<std::string, std::string> m;
	std::istringstream in(*text);
	std::string k, v;
	while (in >> k >> v)
		m[k] = v;
	return m;
}

std::vector<pid_t> cgroup_pids(const std::string& cgroup)
{
	std::vector<pid_t> out;
	std::istringstream in(read_file(cgroup + "/cgroup.procs"));
	pid_t p;
	while (in >> p)
		out.push_back(p);
	return out;
}

void remove_cgroup_tree(const std::string& path) noexcept
{
	try {
		if (!exists(path))
			return;
		std::error_code ec;
		for (const auto& e : fs::directory_iterator(path, ec))
			if (e.is_directory(ec))
				remove_cgroup_tree(e.path().string());
		if (exists(path + "/cgroup.kill")) {
			std::ofstream(path + "/cgroup.kill") << "1";
			wait_until(
				[&] {
					auto ev = cgroup_events(path);
					return !ev || (*ev)["populated"] == "0";
				},
				5s);
		}
		::rmdir(path.c_str());
	} catch (...) {
	}
}

bool pid_alive(pid_t pid)
{
	auto stat = try_read_file(fmt::format("/proc/{}/stat", pid));
	if (!stat)
		return false;
	auto rp = stat->rfind(')');
	if (rp == std::string::npos || rp + 2 >= stat->size())
		return false;
	char st = (*stat)[rp + 2];
	return st != 'Z' && st != 'X';
}

char pid_state(pid_t pid)
{
	auto stat = try_read_file(fmt::format("/proc/{}/stat", pid));
	if (!stat)
		return '?';
	auto rp = stat->rfind(')');
	if (rp == std::string::npos || rp + 2 >= stat->size())
		return '?';
	return (*stat)[rp + 2];
}

std::string pid_wchan(pid_t pid)
{
	return read_file(fmt::format("/proc/{}/wchan", pid));
}

long read_counter(const std::string& path)
{
	std::string s = read_file(path);
	try {
		return s.empty() ? -1 : std::stol(s);
	} catch (...) {
		return -1;
	}
}

std::map<std::string, long> pinned_prog_ids(const std::string& bpf_dir)
{
	std::map<std::string, long> out;
	std::error_code ec;
	for (const auto& e : fs::directory_iterator(bpf_dir + "/progs", ec)) {
		Result r = run({"bpftool", "-j", "prog", "show", "pinned", e.path().string()}, 10s);
		if (r.status != 0)
			continue;
		json j = json::parse(r.out, nullptr, false);
		if (j.is_object() && j.contains("id"))
			out[e.path().filename().string()] = j["id"].get<long>();
	}
	return out;
}

json base_policy(const std::string& name, const std::string& on_violation, const std::string& mode)
{
	std::string ports = fmt::format("{}-{}", kPortLo, kPortHi);
	return json{{"version", 1},
		    {"name", name},
		    {"mode", mode},
		    {"on_violation", on_violation},
		    {"rules",
		     json::array(
			     {json{{"action", "allow"}, {"cidr", "10.77.0.2/32"}, {"ports", json::array({ports})}},
			      json{{"action", "allow"}, {"cidr", "fd77::2/128"}, {"ports", json::array({ports})}}})}};
}

// ---- stale resources of dead test processes -------------------------------------

namespace {

std::atomic<int> g_counter{0};

// ids are <pid:6 hex><counter:2 hex>: a resource whose pid is dead is stale.
bool stale_id(const std::string& id)
{
	if (id.size() != 8)
		return false;
	pid_t pid = static_cast<pid_t>(std::stol(id.substr(0, 6), nullptr, 16));
	if (pid == ::getpid())
		return false;
	return !pid_alive(pid);  // gone, or a zombie nobody reaped yet
}

}  // namespace

void sweep_stale()
{
	static std::once_flag once;
	std::call_once(once, [] {
		std::regex ns_re("^al[cs]([0-9a-f]{8})$");
		std::regex dir_re("^airlock-it-([0-9a-f]{8})$");
		std::error_code ec;
		std::smatch m;
		for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
			std::string n = e.path().filename().string();
			if (std::regex_match(n, m, ns_re) && stale_id(m[1]))
				run({"ip", "netns", "del", n}, 10s);
		}
		std::string mount;
		try {
			mount = cgroup2_mount();
		} catch (...) {
		}
		for (const std::string& parent :
		     {mount, std::string("/sys/fs/bpf"), std::string("/run"), std::string("/tmp")}) {
			if (parent.empty())
				continue;
			for (const auto& e : fs::directory_iterator(parent, ec)) {
				std::string n = e.path().filename().string();
				if (!std::regex_match(n, m, dir_re) || !stale_id(m[1]))
					continue;
				if (parent == mount)
					remove_cgroup_tree(e.path().string());
				else
					fs::remove_all(e.path(), ec);
			}
		}
	});
}

// ---- Env -------------------------------------------------------------------------

std::string RunResult::describe() const
{
	return r.describe();
}

Env::Env(bool with_topology, bool with_sink) : with_topology_(with_topology), with_sink_(with_sink)
{
	id = fmt::format("{:06x}{:02x}", static_cast<unsigned>(::getpid()) & 0xffffff, g_counter++ & 0xff);
	tmp = "/tmp/airlock-it-" + id;
	bpf_dir = "/sys/fs/bpf/airlock-it-" + id;
	state_dir = "/run/airlock-it-" + id;
	cgroup_parent = "airlock-it-" + id;
}

Env::~Env()
{
	teardown();
}

void Env::setup()
{
	if (::geteuid() != 0)
		throw std::runtime_error("the kernel integration tests must run as root");
	sweep_stale();
	ensure_bpffs();
	cgroup2_mount();
	std::error_code ec;
	fs::remove_all(tmp, ec);
	fs::create_directories(tmp);
	if (with_topology_) {
		topo = std::make_unique<Topology>(id);
		topo->up();
		if (with_sink_) {
			std::string ports = fmt::format("{}-{},{}", kPortLo, kPortHi, kFencePort);
			sink = std::make_unique<Sink>(tmp, "main",
						      SinkOptions{topo->sink_ns,
								  topo->sink_if,
								  {kAllowed4, kDenied4, kAllowed6, kDenied6},
								  ports,
								  ports});
			sink->start();
		}
	}
}

void Env::teardown() noexcept
{
	// 1. Processes this test started, by their PID only.
	for (auto& p : procs_)
		p.reset();
	procs_.clear();
	sink.reset();
	// 2. Whatever is left in this test's cgroups (sandboxed clients, daemons).
	try {
		remove_cgroup_tree(cgroup2_mount() + "/" + cgroup_parent);
	} catch (...) {
	}
	// 3. Pins (rm -rf on bpffs unpins), state, namespaces, files.
	std::error_code ec;
	fs::remove_all(bpf_dir, ec);
	fs::remove_all(state_dir, ec);
	topo.reset();
	const char* keep = std::getenv("AIRLOCK_IT_KEEP");
	if (!(keep && *keep == '1'))
		fs::remove_all(tmp, ec);
}

std::string Env::marker(const std::string& tag)
{
	return fmt::format("AIRLOCK-MARK-{}-{}-{}", tag, id, random_hex(12));
}

std::string Env::write_policy(const std::string& file, const json& policy)
{
	return write_text(file, policy.dump(2) + "\n");
}

std::string Env::write_text(const std::string& file, const std::string& text)
{
	std::string p = path(file);
	write_file(p, text);
	return p;
}

std::string Env::sandbox_cgroup(const std::string& name) const
{
	return cgroup2_mount() + "/" + cgroup_parent + "/" + name;
}

std::vector<std::string> Env::airlock_argv(const std::vector<std::string>& args) const
{
	std::vector<std::string> a = {airlock_bin(), "--bpf-dir",       bpf_dir,      "--state-dir",
				      state_dir,     "--cgroup-parent", cgroup_parent};
	a.insert(a.end(), args.begin(), args.end());
	return a;
}

Result Env::airlock(const std::vector<std::string>& args, Ms timeout)
{
	return it::run(airlock_argv(args), timeout);
}

json Env::status()
{
	Result r = airlock({"status", "--json"});
	if (r.status != 0)
		throw std::runtime_error("airlock status failed: " + r.describe());
	json j = json::parse(r.out, nullptr, false);
	if (j.is_discarded())
		throw std::runtime_error("airlock status --json printed no JSON: " + r.describe());
	return j;
}

std::optional<json> Env::status_of(const std::string& name)
{
	json j = status();
	if (j.contains("sandboxes") && j["sandboxes"].is_array())
		for (const auto& s : j["sandboxes"])
			if (s.value("name", "") == name)
				return s;
	return std::nullopt;
}

std::vector<std::string> Env::py(const std::string& script, const std::vector<std::string>& args) const
{
	std::vector<std::string> a = {python(), "-u", client_script(script)};
	a.insert(a.end(), args.begin(), args.end());
	return a;
}

std::vector<std::string> Env::run_argv(const RunSpec& s) const
{
	std::vector<std::string> a;
	if (s.in_client_ns) {
		if (!topo)
			throw std::runtime_error("run_argv: no topology");
		a = {"nsenter", "--net=" + topo->client_ns_path()};
	}
	auto al = airlock_argv({"run", "--policy", s.policy, "--name", s.name, "--audit-log",
				s.audit_log.empty() ? audit_path() : s.audit_log});
	a.insert(a.end(), al.begin(), al.end());
	if (s.log_allowed)
		a.push_back("--log-allowed");
	if (s.keep_caps)
		a.push_back("--keep-caps");
	if (!s.user.empty()) {
		a.push_back("--user");
		a.push_back(s.user);
	}
	a.push_back("--");
	a.insert(a.end(), s.cmd.begin(), s.cmd.end());
	return a;
}

Proc& Env::start(const std::vector<std::string>& argv, const std::string& tag)
{
	std::string base = path(fmt::format("{}-{}", tag, seq_++));
	procs_.push_back(std::make_unique<Proc>(argv, base + ".out", base + ".err"));
	run_logs_.push_back(base);
	return *procs_.back();
}

Proc& Env::start_run(const RunSpec& s)
{
	return start(run_argv(s), "run-" + s.name);
}

RunResult Env::run(const RunSpec& s, Ms timeout)
{
	Proc& p = start_run(s);
	RunResult rr;
	rr.r.argv = p.argv();
	auto st = p.wait(timeout);
	if (!st) {
		rr.r.timed_out = true;
		p.signal(SIGKILL);
		p.wait(5s);
	}
	rr.r.status = st ? *st : -1;
	rr.r.out = p.out();
	rr.r.err = p.err();
	rr.out_json = json_objects_in(rr.r.out);
	return rr;
}

Result Env::in_client(const std::vector<std::string>& argv, Ms timeout)
{
	return it::run(topo->in_client(argv), timeout);
}

bool Env::fence_to(int family, const std::string& addr, int port, Sink& s, Ms timeout)
{
	std::string m = fmt::format("AIRLOCK-FENCE-{}-{}", id, random_hex(12));
	int fd = topo->socket_in_client(family, SOCK_DGRAM);
	struct sockaddr_storage ss = {};
	socklen_t len;
	if (family == AF_INET6) {
		auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		inet_pton(AF_INET6, addr.c_str(), &a->sin6_addr);
		len = sizeof(*a);
	} else {
		auto* a = reinterpret_cast<sockaddr_in*>(&ss);
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		inet_pton(AF_INET, addr.c_str(), &a->sin_addr);
		len = sizeof(*a);
	}
	auto deadline = std::chrono::steady_clock::now() + timeout;
	bool ok = false;
	while (!ok && std::chrono::steady_clock::now() < deadline) {
		::sendto(fd, m.data(), m.size(), 0, reinterpret_cast<sockaddr*>(&ss), len);
		ok = wait_until([&] { return s.count_data(m) >= 1 && s.count_frames(m) >= 1; }, 500ms);
	}
	::close(fd);
	return ok;
}

bool Env::fence(Ms timeout)
{
	if (!topo || !sink)
		return false;
	return fence_to(AF_INET, kAllowed4, kFencePort, *sink, timeout) &&
	       fence_to(AF_INET6, kAllowed6, kFencePort, *sink, timeout);
}

std::string Env::dump()
{
	std::string s = fmt::format("==== airlock integration test {} (tmp {}) ====\n", id, tmp);
	for (auto& p : procs_)
		if (p)
			s += "---- process: " + p->describe() + "\n";
	s += "---- audit log " + audit_path() + ":\n" + dump_lines(audit());
	if (sink)
		s += "---- " + sink->summary();
	return s;
}

}  // namespace it

namespace it {

pid_t host_pid_of(const std::string& cgroup, pid_t inner)
{
	for (pid_t h : cgroup_pids(cgroup)) {
		std::string st = read_file(fmt::format("/proc/{}/status", h));
		auto at = st.find("NSpid:");
		std::string line = at == std::string::npos ? "" : st.substr(at, st.find('\n', at) - at);
		if (!line.empty() && std::stoi(line.substr(line.find_last_of(" \t") + 1)) == inner)
			return h;
	}
	return -1;
}

}  // namespace it
