// Harness of airlock's kernel integration tests.
//
// Every test gets a unique id and, from it, its own network namespaces
// (client alc<id>, sink als<id>, joined by a veth), its own bpffs pin root,
// state directory, cgroup parent and temporary directory. Everything is
// removed in destructors, also when an assertion fails half-way; resources a
// crashed earlier run left behind (its id embeds its pid) are swept at start.
//
// Traffic only ever goes to the test's own namespaces: the client namespace
// has no route but 10.77.0.0/24 and fd77::/64, both on the veth to the sink.
//
// Oracles (THREATS.md, "How a containment test judges"):
//  - the sink: a marker unique to the case is counted in what the sink's
//    sockets received AND in every frame captured on its veth; a denial
//    means 0 anywhere (checked after a later fence datagram has arrived), an
//    allowed case means the intact payload arrived;
//  - the audit log: a decision line with the right hook, reason and dst.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace it {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// Addresses of the topology.
inline constexpr const char* kClient4 = "10.77.0.1";
inline constexpr const char* kAllowed4 = "10.77.0.2";
inline constexpr const char* kDenied4 = "10.77.0.3";
inline constexpr const char* kClient6 = "fd77::1";
inline constexpr const char* kAllowed6 = "fd77::2";
inline constexpr const char* kDenied6 = "fd77::3";
inline constexpr const char* kClientMac = "02:77:00:00:00:01";
inline constexpr const char* kSinkMac = "02:77:00:00:00:02";
// Ports the sink listens on (TCP and UDP): 9000..9039, and the fence port.
inline constexpr int kPortLo = 9000;
inline constexpr int kPortHi = 9039;
inline constexpr int kFencePort = 9099;

// ---- environment ---------------------------------------------------------
std::string airlock_bin();
std::string uring_connect_bin();
std::string fuse_hang_bin();
std::string source_dir();
std::string python();                                // AIRLOCK_TEST_PYTHON, else /usr/bin/python3, else python3
std::string client_script(const std::string& name);  // tests/clients/NAME
std::string sink_script();
std::string cgroup2_mount();  // from /proc/self/mountinfo, never hard-coded
void ensure_bpffs();          // mounts bpffs at /sys/fs/bpf if nothing is there

// ---- small utilities -------------------------------------------------------
std::string random_hex(size_t nchars);
std::string read_file(const std::string& path);  // "" if missing
std::optional<std::string> try_read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);
bool exists(const std::string& path);
std::string join(const std::vector<std::string>& v, const std::string& sep = " ");
// Polls cond every `step` until it holds or `timeout` passes; returns cond().
bool wait_until(const std::function<bool()>& cond, Ms timeout, Ms step = 5ms);
std::string errno_name(int e);
// Bytes helpers for the oracle.
size_t count_occurrences(const std::string& haystack, const std::string& needle);
std::string hex_decode(const std::string& hex);

// ---- processes ---------------------------------------------------------------
struct Result {
	int status = -1;  // exit code, 128+N for signal N, -1 if it could not run
	bool timed_out = false;
	std::string out, err;
	std::vector<std::string> argv;
	std::string describe() const;  // for assertion messages
};
int decode_wait_status(int wstatus);
// Runs argv to completion (SIGKILL after timeout), capturing stdout and stderr.
Result run(const std::vector<std::string>& argv, Ms timeout = 10s, const std::string& input = "");

// A background process started by the test, in a process group of its own;
// its stdout and stderr go to files (never pipes: a process that outlives its
// reader must not get SIGPIPE). wait() notes the exit status but leaves the
// zombie, so the pid (and the group id) stay reserved until the destructor
// SIGKILLs that process and its group, and reaps it. Children get
// PR_SET_PDEATHSIG: if the test process dies, they die too.
class Proc {
public:
	Proc(std::vector<std::string> argv, std::string out_path, std::string err_path);
	~Proc();
	Proc(const Proc&) = delete;
	Proc& operator=(const Proc&) = delete;

	pid_t pid() const { return pid_; }
	// Exit status (decoded), or nullopt if it is still running after timeout.
	std::optional<int> wait(Ms timeout);
	bool running();
	std::optional<int> status() const { return status_; }
	void signal(int sig);
	// Waits for the exit and reaps the process for real, like a supervisor
	// would (a zombie still looks alive to kill(pid, 0)).
	std::optional<int> reap_now(Ms timeout);
	std::string out() const { return read_file(out_path_); }
	std::string err() const { return read_file(err_path_); }
	const std::vector<std::string>& argv() const { return argv_; }
	std::string describe() const;

private:
	bool reap(bool block);
	std::vector<std::string> argv_;
	std::string out_path_, err_path_;
	pid_t pid_ = -1;
	int pidfd_ = -1;
	std::optional<int> status_;
	bool reaped_ = false;
};

// ---- network topology --------------------------------------------------------
class Topology {
public:
	explicit Topology(const std::string& id);
	~Topology();  // down()
	void up();    // throws std::runtime_error with the failing command
	void down() noexcept;

	std::string client_ns, sink_ns, client_if, sink_if;
	std::string client_ns_path() const { return "/run/netns/" + client_ns; }
	std::string sink_ns_path() const { return "/run/netns/" + sink_ns; }
	// A socket created in the client namespace by the test process itself
	// (not in any sandbox): for fences and control traffic.
	int socket_in_client(int domain, int type, int protocol = 0) const;
	// argv prefix that runs a command in a namespace without remounting /sys.
	std::vector<std::string> in_client(const std::vector<std::string>& argv) const;

private:
	bool created_ = false;
};

// ---- the sink ----------------------------------------------------------------
struct SinkOptions {
	std::string netns;  // namespace name
	std::string iface;  // capture interface
	std::vector<std::string> addrs;
	std::string tcp_ports, udp_ports;
	bool use_ip_netns_exec = true;  // false: nsenter (e.g. a sink on lo of the client ns)
};

class Sink {
public:
	Sink(const std::string& dir, const std::string& tag, SinkOptions o);
	~Sink();
	void start(Ms timeout = 10s);  // throws if not ready in time

	// Re-reads what the sink appended since the last call.
	void refresh();
	// Occurrences of marker in received TCP streams (per connection) and UDP
	// datagrams, and in captured incoming frames.
	size_t count_data(const std::string& marker);
	size_t count_frames(const std::string& marker);
	size_t count(const std::string& marker) { return count_data(marker) + count_frames(marker); }
	// Whole TCP streams / datagrams that contain marker.
	std::vector<std::string> payloads_with(const std::string& marker);
	// True once some TCP stream or datagram is exactly `payload`.
	bool arrived_intact(const std::string& payload);
	bool wait_data(const std::string& marker, size_t n, Ms timeout);
	bool wait_frames(const std::string& marker, size_t n, Ms timeout);
	bool wait_intact(const std::string& payload, Ms timeout);
	size_t tcp_connections();
	std::string summary(size_t max_lines = 40);  // non-frame lines, for failure dumps
	const std::string& log_path() const { return log_; }
	Proc* proc() { return proc_.get(); }

private:
	SinkOptions o_;
	std::string log_, ready_, out_, err_;
	std::unique_ptr<Proc> proc_;
	size_t offset_ = 0;
	std::string partial_;
	std::map<long, std::string> tcp_;     // conn -> stream
	std::vector<std::string> udp_;        // datagrams
	std::vector<std::string> frames_in_;  // decoded incoming frames
	std::vector<std::string> other_;      // raw non-frame lines
};

// ---- the audit log -----------------------------------------------------------
struct Match {
	std::optional<std::string> hook, verdict, reason, dst, protocol, family;
	std::optional<int> port;
	std::optional<bool> violation, latched;
	std::string describe() const;
};
std::vector<json> read_json_lines(const std::string& path);
// The JSON object in a file, or {} if the file is missing or not one yet
// (progress files that a client replaces as it goes).
json read_json_object(const std::string& path);
// The JSON objects among the lines of text (a client's stdout); other lines are skipped.
std::vector<json> json_objects_in(const std::string& text);
// j[key] is the string want, or want is not set.
bool field_is(const json& j, const char* key, const std::optional<std::string>& want);
std::vector<json> decisions(const std::vector<json>& lines, const Match& m);
std::vector<json> events(const std::vector<json>& lines, const std::string& event);
std::string dump_lines(const std::vector<json>& lines, size_t max = 60);

// ---- one test's world --------------------------------------------------------
struct RunSpec {
	std::string policy;  // path
	std::string name;    // sandbox name
	std::vector<std::string> cmd;
	bool log_allowed = false;
	bool keep_caps = false;
	std::string user;          // --user, when not empty
	bool in_client_ns = true;  // nsenter --net=/run/netns/alc<id>
	std::string audit_log;     // default: Env::audit_path()
};

struct RunResult {
	Result r;
	std::vector<json> out_json;  // JSON lines of stdout
	json last() const { return out_json.empty() ? json() : out_json.back(); }
	std::string describe() const;
};

class Env {
public:
	explicit Env(bool with_topology = true, bool with_sink = true);
	~Env();
	Env(const Env&) = delete;
	Env& operator=(const Env&) = delete;

	// Creates everything; throws std::runtime_error on any failure (the
	// fixture turns that into a test failure: a test that cannot set up fails).
	void setup();

	std::string id, tmp, bpf_dir, state_dir, cgroup_parent;
	std::unique_ptr<Topology> topo;
	std::unique_ptr<Sink> sink;

	std::string path(const std::string& name) const { return tmp + "/" + name; }
	std::string audit_path() const { return path("audit.jsonl"); }
	std::vector<json> audit() const { return read_json_lines(audit_path()); }
	std::string marker(const std::string& tag);  // AIRLOCK-MARK-<tag>-<id>-<random>
	std::string write_policy(const std::string& file, const json& policy);
	std::string write_text(const std::string& file, const std::string& text);
	std::string sandbox_cgroup(const std::string& name) const;

	std::vector<std::string> airlock_argv(const std::vector<std::string>& args) const;
	Result airlock(const std::vector<std::string>& args, Ms timeout = 15s);
	json status();  // `airlock status --json`, parsed; throws on failure
	std::optional<json> status_of(const std::string& name);

	std::vector<std::string> py(const std::string& script, const std::vector<std::string>& args) const;
	std::vector<std::string> run_argv(const RunSpec& s) const;
	Proc& start_run(const RunSpec& s);  // in the background; owned by Env
	RunResult run(const RunSpec& s, Ms timeout = 20s);
	// A command in the client namespace, outside any sandbox.
	Result in_client(const std::vector<std::string>& argv, Ms timeout = 10s);
	Proc& start(const std::vector<std::string>& argv, const std::string& tag);

	// Sends an allowed datagram from outside every sandbox, through the same
	// veth, and waits until the sink has both received it and captured it:
	// anything sent before it has then been seen. Returns false on timeout.
	bool fence(Ms timeout = 5s);
	bool fence_to(int family, const std::string& addr, int port, Sink& s, Ms timeout);

	std::string dump();  // everything useful after a failure

private:
	void teardown() noexcept;
	bool with_topology_, with_sink_;
	std::vector<std::unique_ptr<Proc>> procs_;
	std::vector<std::string> run_logs_;
	int seq_ = 0;
};

// Sweeps what dead earlier test processes left behind (netns, cgroups, pins).
void sweep_stale();

// Kills every process of a cgroup subtree and removes it, deepest first.
void remove_cgroup_tree(const std::string& path) noexcept;
std::optional<std::map<std::string, std::string>> cgroup_events(const std::string& cgroup);
// A TCP port on 127.0.0.1 that nothing listens on (bound, read, closed).
int free_port();
std::vector<pid_t> cgroup_pids(const std::string& cgroup);

// The host pid of the process in cgroup whose pid in its own PID namespace
// (the last of /proc/PID/status NSpid) is inner; -1 if none.
pid_t host_pid_of(const std::string& cgroup, pid_t inner);

// /proc/PID: does it still exist (zombies count as gone)? Is it frozen?
bool pid_alive(pid_t pid);
char pid_state(pid_t pid);
std::string pid_wchan(pid_t pid);
long read_counter(const std::string& path);  // heartbeat files

// The pinned program ids under <bpf_dir>/progs, from bpftool.
std::map<std::string, long> pinned_prog_ids(const std::string& bpf_dir);

// A standard policy: allow 10.77.0.2 and fd77::2 on kPortLo..kPortHi (TCP+UDP).
json base_policy(const std::string& name, const std::string& on_violation = "deny",
		 const std::string& mode = "enforce");
inline std::string dest4(const std::string& a, int port)
{
	return a + ":" + std::to_string(port);
}
inline std::string dest6(const std::string& a, int port)
{
	return "[" + a + "]:" + std::to_string(port);
}

}  // namespace it
