#pragma once
// Prometheus metrics of the node agent. Per-sandbox figures are read from
// the kernel's per-CPU counters at each scrape (exact even when events were
// lost); what only user space knows (freeze latency, reloads) is kept in a
// registry here. Query names and destinations are never labels: they go to
// the audit log.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "kernel/kernel.h"
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

class Metrics {
public:
	// Serves /metrics on addr ("127.0.0.1:9464").
	Metrics(const Paths& paths, const std::string& addr);
	void freeze_latency(double seconds) { freeze_->Observe(seconds); }
	void reload(bool ok) { (ok ? reload_ok_ : reload_error_)->Increment(); }

private:
	std::shared_ptr<prometheus::Registry> registry_;
	prometheus::Histogram* freeze_;
	prometheus::Counter* reload_ok_;
	prometheus::Counter* reload_error_;
	std::shared_ptr<KernelCollector> kernel_;
	std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace airlock
