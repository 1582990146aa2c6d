#pragma once
// Prometheus metrics of the node agent. Per-sandbox figures are read from
// the kernel's per-CPU counters at each scrape (exact even when events were
// lost); what only user space knows (freeze latency, reloads) is kept in a
// registry here. Query names and destinations are never labels: they go to
// the audit log.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "kernel/kernel.h"
#include "metrics/http_server.h"
#include "sandbox/state.h"

namespace airlock {

// Reads the state directory and the pinned maps at each scrape.
class KernelCollector : public prometheus::Collectable {
public:
	explicit KernelCollector(Paths paths) : paths_(std::move(paths)) {}
	std::vector<prometheus::MetricFamily> Collect() const override;

private:
	Paths paths_;
	mutable std::mutex mu_;
	mutable std::optional<kernel::Kernel> k_;
};

// process_cpu_seconds_total and the other process_* series, from /proc/self.
class ProcessCollector : public prometheus::Collectable {
public:
	std::vector<prometheus::MetricFamily> Collect() const override;
};

class Metrics {
public:
	// Serves /metrics on addr ("127.0.0.1:9464"); throws naming the address
	// when it cannot listen there.
	Metrics(const Paths& paths, const std::string& addr);
	~Metrics();
	Metrics(const Metrics&) = delete;
	Metrics& operator=(const Metrics&) = delete;
	void freeze_latency(double seconds) { freeze_->Observe(seconds); }
	// A sandbox's reload series exist, at 0, from track() until untrack().
	void track(const std::string& sandbox);
	void untrack(const std::string& sandbox);
	void reload(const std::string& sandbox, bool ok);

private:
	std::string render() const;

	std::shared_ptr<prometheus::Registry> registry_;
	prometheus::Histogram* freeze_;
	prometheus::Family<prometheus::Counter>* reloads_;
	std::map<std::string, std::pair<prometheus::Counter*, prometheus::Counter*>> tracked_;  // ok, error
	std::shared_ptr<KernelCollector> kernel_;
	ProcessCollector process_;
	std::unique_ptr<MetricsServer> server_;  // last: stopped first
};

}  // namespace airlock
