#include "metrics/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include <prometheus/text_serializer.h>

#include <spdlog/spdlog.h>

#include "events/audit.h"
#include "proxy/world_stats.h"
#include "sandbox/cgroup.h"
#include "sandbox/supervisor.h"
#include "util/files.h"

#ifndef AIRLOCK_VERSION_STRING
#define AIRLOCK_VERSION_STRING "unknown"
#endif

namespace airlock {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

namespace {

MetricFamily family(const char* name, const char* help, MetricType type)
{
	MetricFamily f;
	f.name = name;
	f.help = help;
	f.type = type;
	return f;
}

void add(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value)
{
	ClientMetric m;
	m.label = std::move(labels);
	if (f.type == MetricType::Counter)
		m.counter.value = value;
	else
		m.gauge.value = value;
	f.metric.push_back(std::move(m));
}

// Every family the kernel collector exports, in the order it returns them.
struct KernelFamilies {
	MetricFamily decisions = family("airlock_decisions_total",
					"Decisions by sandbox, hook and verdict (kernel counters)",
					MetricType::Counter);
	MetricFamily violations = family("airlock_violations_total",
					 "Denials (and audited would-be denials) by sandbox and reason",
					 MetricType::Counter);
	MetricFamily dns = family("airlock_dns_queries_total", "DNS queries by sandbox and verdict",
				  MetricType::Counter);
	MetricFamily answers = family(
		"airlock_dns_answers_total",
		"Addresses learned from DNS answers, answers dropped, addresses refused for a full table",
		MetricType::Counter);
	MetricFamily bytes = family("airlock_egress_bytes_total", "Bytes let out at cgroup egress",
				    MetricType::Counter);
	MetricFamily packets = family("airlock_egress_packets_total", "Packets let out at cgroup egress",
				      MetricType::Counter);
	MetricFamily dbytes = family("airlock_egress_denied_bytes_total", "Bytes dropped at cgroup egress",
				     MetricType::Counter);
	MetricFamily lost = family("airlock_events_lost_total", "Events the sandbox's ring buffer could not take",
				   MetricType::Counter);
	MetricFamily suppressed = family(
		"airlock_events_suppressed_total",
		"Events the kernel's rate limit held back, by sandbox and hook (counted, summarised in the audit log)",
		MetricType::Counter);
	MetricFamily helper = family(
		"airlock_bpf_helper_errors_total",
		"BPF helper calls that failed, by sandbox and site (the packet was denied, or nothing was learned "
		"from it)",
		MetricType::Counter);
	MetricFamily frozen = family("airlock_sandbox_frozen", "1 while the sandbox's cgroup is frozen",
				     MetricType::Gauge);
	MetricFamily latched = family("airlock_sandbox_quarantined", "1 while the sandbox's quarantine latch is set",
				      MetricType::Gauge);
	MetricFamily learned = family("airlock_learned_addresses", "Unexpired addresses learned from DNS answers",
				      MetricType::Gauge);
	MetricFamily budget_limit = family("airlock_budget_limit_bytes", "A rule's egress byte budget (the kernel's)",
					   MetricType::Gauge);
	MetricFamily budget_used = family(
		"airlock_budget_used_bytes",
		"What a budgeted rule's destinations were sent, counted in the kernel (from the "
		"sandbox's start, or the reload that changed the limit)",
		MetricType::Gauge);
	MetricFamily px_starts = family("airlock_proxy_starts_total",
					"Starts of the sandbox's proxy (the first, and restarts)", MetricType::Counter);
	MetricFamily px_conns = family("airlock_proxy_connections_total", "Redirected connections the proxy accepted",
				       MetricType::Counter);
	MetricFamily px_closed = family("airlock_proxy_connections_closed_total",
					"Accepted connections closed at once, by reason: no origin filed for them "
					"(unknown-origin), or too many open (busy)",
					MetricType::Counter);
	MetricFamily px_dgrams = family("airlock_proxy_datagrams_total", "Redirected datagrams the proxy received",
					MetricType::Counter);
	MetricFamily px_bytes = family("airlock_proxy_received_bytes_total",
				       "Bytes the proxy read from redirected connections", MetricType::Counter);
	MetricFamily w_requests = family("airlock_world_requests_total",
					 "What the recorder read, by kind: http requests, "
					 "other tcp streams",
					 MetricType::Counter);
	MetricFamily w_dns = family("airlock_world_dns_queries_total", "DNS queries the world answered",
				    MetricType::Counter);
	MetricFamily w_records = family(
		"airlock_world_records_total",
		"Lines of the world's records file, written or dropped (its size cap, a failed write)",
		MetricType::Counter);
	MetricFamily sni = family("airlock_sni_verdicts_total",
				  "Connections of gated rules the SNI gate passed and denied (each denial a violation)",
				  MetricType::Counter);
	MetricFamily http = family("airlock_http_gate_requests_total",
				   "Requests of inspected rules the HTTP gate sent to their origin and answered itself "
				   "(each denial a violation)",
				   MetricType::Counter);
	MetricFamily secrets = family(
		"airlock_secrets_refused_total",
		"Requests refused for carrying one of the policy's secrets (the gate's and the world's)",
		MetricType::Counter);
	MetricFamily count = family("airlock_sandboxes", "Sandboxes on this node", MetricType::Gauge);
	MetricFamily build = family("airlock_build_info", "Version of this agent and of its kernel ABI",
				    MetricType::Gauge);
	MetricFamily info = family("airlock_sandbox_info",
				   "1 per sandbox, with the policy it enforces, its mode and what a violation does",
				   MetricType::Gauge);

	std::vector<MetricFamily> all() const
	{
		return {decisions,  violations, dns,       answers,  bytes,      packets,      dbytes,      lost,
			suppressed, helper,     frozen,    latched,  learned,    budget_limit, budget_used, px_starts,
			px_conns,   px_closed,  px_dgrams, px_bytes, w_requests, w_dns,        w_records,   sni,
			http,       secrets,    count,     info,     build};
	}
};

// What the kernel holds for one sandbox, read in one go.
struct SandboxReading {
	al_counters c{};
	al_latch l{};
	std::optional<al_sandbox> entry;
	std::vector<kernel::Kernel::Budget> budgets;
	size_t live = 0;  // learned addresses not expired
};

void add_kernel(KernelFamilies& f, const SandboxRecord& r, const SandboxReading& k)
{
	const al_counters& c = k.c;
	const std::string& s = r.name;
	if (k.entry)
		add(f.info,
		    {{"sandbox", s},
		     {"policy", r.policy_name},
		     {"mode", k.entry->flags & AL_SB_AUDIT ? "audit" : "enforce"},
		     {"on_violation", k.entry->on_violation == AL_ON_VIOLATION_KILL     ? "kill"
				      : k.entry->on_violation == AL_ON_VIOLATION_FREEZE ? "freeze"
											: "deny"}},
		    1);
	for (unsigned h = 0; h < AL_HOOK_MAX; h++) {
		if (!hook_known(h))
			continue;
		for (unsigned v = 0; v < AL_VERDICT_MAX; v++)
			add(f.decisions, {{"sandbox", s}, {"hook", hook_name(h)}, {"verdict", verdict_name(v)}},
			    static_cast<double>(c.decisions[h][v]));
	}
	// What the latch stops afterwards is the violation's consequence,
	// not another violation.
	// Every kind from the sandbox's start, at 0 until it happens: a
	// series that appears only with its first violation is missed by
	// increase() and rate().
	for (unsigned i = 0; i < AL_REASON_MAX; i++)
		if (i != AL_REASON_QUARANTINED && !reason_allows(i))
			add(f.violations, {{"sandbox", s}, {"kind", reason_name(i)}},
			    static_cast<double>(c.reasons[i]));
	add(f.dns, {{"sandbox", s}, {"verdict", "allow"}}, static_cast<double>(c.dns_queries_allowed));
	add(f.dns, {{"sandbox", s}, {"verdict", "deny"}}, static_cast<double>(c.dns_queries_denied));
	add(f.answers, {{"sandbox", s}, {"result", "learned"}}, static_cast<double>(c.dns_answers_learned));
	add(f.answers, {{"sandbox", s}, {"result", "dropped"}}, static_cast<double>(c.dns_answers_dropped));
	add(f.answers, {{"sandbox", s}, {"result", "table_full"}}, static_cast<double>(c.dns_learn_full));
	add(f.answers, {{"sandbox", s}, {"result", "off_chain"}}, static_cast<double>(c.dns_records_off_chain));
	add(f.bytes, {{"sandbox", s}}, static_cast<double>(c.egress_bytes));
	add(f.packets, {{"sandbox", s}}, static_cast<double>(c.egress_packets));
	add(f.dbytes, {{"sandbox", s}}, static_cast<double>(c.denied_bytes));
	add(f.lost, {{"sandbox", s}}, static_cast<double>(c.events_lost));
	for (unsigned h = 0; h < AL_HOOK_MAX; h++) {
		uint64_t n = 0;
		for (unsigned i = 0; i < AL_REASON_MAX; i++)
			n += c.suppressed[h][i];
		if (hook_known(h))
			add(f.suppressed, {{"sandbox", s}, {"hook", hook_name(h)}}, static_cast<double>(n));
	}
	for (unsigned i = 0; i < AL_ERR_SITE_MAX; i++)
		add(f.helper, {{"sandbox", s}, {"site", err_site_name(i)}}, static_cast<double>(c.helper_errors[i]));
	auto ev = cgroup::events(r.cgroup);
	add(f.frozen, {{"sandbox", s}}, ev && ev->frozen ? 1 : 0);
	add(f.latched, {{"sandbox", s}}, k.l.violated_ns ? 1 : 0);
	add(f.learned, {{"sandbox", s}}, static_cast<double>(k.live));
	for (const auto& b : k.budgets) {
		std::string rule = std::to_string(b.rule);
		add(f.budget_limit, {{"sandbox", s}, {"rule", rule}}, static_cast<double>(b.limit));
		add(f.budget_used, {{"sandbox", s}, {"rule", rule}}, static_cast<double>(b.used));
	}
}

// The proxy's counts, as the agent that runs it last wrote them (figures
// the proxy claims).
void add_proxy(KernelFamilies& f, const std::string& s, const proxy::ProxyCounts& pc)
{
	const auto& w = pc.stats;
	auto d = [](uint64_t v) { return static_cast<double>(v); };
	add(f.px_starts, {{"sandbox", s}}, d(pc.starts));
	add(f.px_conns, {{"sandbox", s}}, d(w.connections));
	add(f.px_closed, {{"sandbox", s}, {"reason", "unknown-origin"}}, d(w.unknown));
	add(f.px_closed, {{"sandbox", s}, {"reason", "busy"}}, d(w.refused_busy));
	add(f.px_dgrams, {{"sandbox", s}}, d(w.datagrams));
	add(f.px_bytes, {{"sandbox", s}}, d(w.bytes_in));
	add(f.w_requests, {{"sandbox", s}, {"kind", "http"}}, d(w.http_requests));
	add(f.w_requests, {{"sandbox", s}, {"kind", "tcp"}}, d(w.tcp_streams));
	add(f.w_dns, {{"sandbox", s}}, d(w.dns_queries));
	add(f.w_records, {{"sandbox", s}, {"result", "written"}}, d(w.records_written));
	add(f.w_records, {{"sandbox", s}, {"result", "dropped"}}, d(w.records_dropped));
	add(f.sni, {{"sandbox", s}, {"verdict", "pass"}}, d(w.sni_passed));
	add(f.sni, {{"sandbox", s}, {"verdict", "deny"}}, d(w.sni_denied));
	add(f.http, {{"sandbox", s}, {"verdict", "pass"}}, d(w.http_passed));
	add(f.http, {{"sandbox", s}, {"verdict", "deny"}}, d(w.http_denied));
	add(f.secrets, {{"sandbox", s}}, d(w.secrets_refused));
}

}  // namespace

std::vector<MetricFamily> KernelCollector::Collect() const
{
	std::lock_guard<std::mutex> lock(mu_);
	KernelFamilies f;
	add(f.build, {{"version", AIRLOCK_VERSION_STRING}, {"abi", std::to_string(AL_ABI_VERSION)}}, 1);

	std::vector<SandboxRecord> records;
	try {
		records = load_records(paths_);
		if (!records.empty() && !k_)
			k_.emplace(kernel::Kernel::adopt(paths_.bpf_dir));
	} catch (const std::exception& e) {
		spdlog::warn("metrics: {}", e.what());
		records.clear();
	}
	add(f.count, {}, static_cast<double>(records.size()));
	uint64_t now = monotonic_ns();
	for (const auto& r : records) {
		SandboxReading k;
		try {
			k.c = k_->counters(r.slot);
			k.budgets = k_->budgets(r.slot);
			k.l = k_->latch(r.slot);
			k.entry = k_->sandbox(r.cgroup_id);
			for (const auto& e : k_->learned(r.slot))
				k.live += e.value.expires_ns > now;
		} catch (const std::exception& e) {
			spdlog::warn("metrics: sandbox {}: {}", r.name, e.what());
			continue;
		}
		add_kernel(f, r, k);
		// None without a proxy.
		auto text = read_file(paths_.proxy_stats(r.name));
		if (auto pc = text ? proxy::parse_proxy_counts(*text) : std::nullopt)
			add_proxy(f, r.name, *pc);
	}
	return f.all();
}

// The process_* series every Prometheus client exports, from /proc/self.
std::vector<MetricFamily> ProcessCollector::Collect() const
{
	std::vector<MetricFamily> out;
	std::string stat = read_file("/proc/self/stat").value_or("");
	// The fields after the command name, which is in parentheses and may
	// hold anything: state is field 3, utime 14, stime 15, starttime 22,
	// vsize 23, rss 24.
	auto close = stat.rfind(')');
	if (close == std::string::npos)
		return out;
	std::istringstream in(stat.substr(close + 2));
	std::vector<std::string> f(1, "");  // f[3] is field 3
	f.resize(3);
	for (std::string v; in >> v;)
		f.push_back(v);
	if (f.size() < 25)
		return out;
	double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
	double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
	auto num = [&](size_t i) { return std::strtod(f[i].c_str(), nullptr); };
	auto cpu = family("process_cpu_seconds_total", "User and system CPU time spent, in seconds",
			  MetricType::Counter);
	add(cpu, {}, (num(14) + num(15)) / tick);
	auto rss = family("process_resident_memory_bytes", "Resident memory size, in bytes", MetricType::Gauge);
	add(rss, {}, num(24) * page);
	auto vsz = family("process_virtual_memory_bytes", "Virtual memory size, in bytes", MetricType::Gauge);
	add(vsz, {}, num(23));
	double boot = 0;
	std::istringstream st(read_file("/proc/stat").value_or(""));
	for (std::string key; st >> key;)
		if (key == "btime") {
			st >> boot;
			break;
		}
	auto start = family("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds",
			    MetricType::Gauge);
	add(start, {}, boot + num(22) / tick);
	size_t fds = 0;
	std::error_code ec;
	for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
	     !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
		fds++;
	auto open = family("process_open_fds", "Open file descriptors", MetricType::Gauge);
	add(open, {}, static_cast<double>(fds));
	struct rlimit rl {};
	auto max = family("process_max_fds", "Limit on open file descriptors", MetricType::Gauge);
	if (::getrlimit(RLIMIT_NOFILE, &rl) == 0)
		add(max, {}, static_cast<double>(rl.rlim_cur));
	return {cpu, rss, vsz, start, open, max};
}

Metrics::Metrics(const Paths& paths, const std::string& addr)
    : registry_(std::make_shared<prometheus::Registry>()), kernel_(std::make_shared<KernelCollector>(paths))
{
	auto& hist = prometheus::BuildHistogram()
			     .Name("airlock_freeze_latency_seconds")
			     .Help("From the violation (the kernel's latch) to cgroup.events reporting frozen 1")
			     .Register(*registry_);
	freeze_ = &hist.Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
									0.01, 0.025, 0.1, 1});
	reloads_ = &prometheus::BuildCounter()
			    .Name("airlock_policy_reloads_total")
			    .Help("Policy reloads by the daemon, by sandbox and result")
			    .Register(*registry_);
	server_ = std::make_unique<MetricsServer>(addr, [this] { return render(); });
}

Metrics::~Metrics()
{
	server_.reset();  // no scrape runs past here
}

std::string Metrics::render() const
{
	std::vector<MetricFamily> all = registry_->Collect();
	for (const auto* c : {static_cast<const prometheus::Collectable*>(kernel_.get()),
			      static_cast<const prometheus::Collectable*>(&process_)}) {
		auto more = c->Collect();
		all.insert(all.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
	}
	return prometheus::TextSerializer().Serialize(all);
}

void Metrics::track(const std::string& sandbox)
{
	if (tracked_.count(sandbox))
		return;
	tracked_[sandbox] = {&reloads_->Add({{"sandbox", sandbox}, {"result", "ok"}}),
			     &reloads_->Add({{"sandbox", sandbox}, {"result", "error"}})};
}

void Metrics::untrack(const std::string& sandbox)
{
	auto it = tracked_.find(sandbox);
	if (it == tracked_.end())
		return;
	reloads_->Remove(it->second.first);
	reloads_->Remove(it->second.second);
	tracked_.erase(it);
}

void Metrics::reload(const std::string& sandbox, bool ok)
{
	track(sandbox);
	auto& [good, bad] = tracked_[sandbox];
	(ok ? good : bad)->Increment();
}

}  // namespace airlock
