#pragma once
// How large an audit log may grow: airlock rotates it by size and keeps a
// bounded number of old files, so that no sandbox can fill a disk through it.
#include <cstdint>
#include <optional>

namespace airlock {

struct AuditBound {
	static constexpr uint64_t kDefaultMaxBytes = 64ull << 20;
	static constexpr unsigned kDefaultKeep = 4;
	static constexpr uint64_t kMinMaxBytes = 4096;  // a few lines at least
	// Unset: the default, or what the daemon was told. max_bytes 0: airlock
	// never rotates (an external logrotate does).
	std::optional<uint64_t> max_bytes;
	std::optional<unsigned> keep;

	uint64_t max() const { return max_bytes.value_or(kDefaultMaxBytes); }
	unsigned kept() const { return keep.value_or(kDefaultKeep); }
	// This bound, with what it leaves unset taken from fallback.
	AuditBound over(const AuditBound& fallback) const
	{
		return {max_bytes ? max_bytes : fallback.max_bytes, keep ? keep : fallback.keep};
	}
	// Both set.
	AuditBound resolved() const { return {max(), kept()}; }
};

}  // namespace airlock
