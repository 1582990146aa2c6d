#pragma once
// cgroup v2: where it is mounted, ids, levels, and the freezer/kill files.
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "util/fd.h"

namespace airlock::cgroup {

// The cgroup2 mount point, from /proc/self/mountinfo (hybrid hosts mount it
// at /sys/fs/cgroup/unified). Throws if there is none.
const std::string& mount_point();

// Absolute path of a cgroup given relative to the mount.
std::string path_of(const std::string& relative);
// The cgroup of a process, as an absolute path.
std::string of_pid(int pid);

uint64_t id_of(const std::string& path);  // the kernel's cgroup id (inode)
int level_of(const std::string& path);    // 0 for the root

struct Events {
	bool populated = false;
	bool frozen = false;
};
std::optional<Events> events(const std::string& path);
// cgroup.events held open to be watched: its descriptor reports EPOLLPRI
// when the file changes, and each read_events re-arms that.
Fd open_events(const std::string& path);
std::optional<Events> read_events(int fd);
// What a freeze and a kill wait for: frozen 1 (or nothing left to freeze),
// and populated 0 (or the cgroup gone).
bool settled_frozen(const std::optional<Events>&);
bool settled_empty(const std::optional<Events>&);

void freeze(const std::string& path);
// Sends SIGCONT to the processes of the subtree, then unfreezes: the kernel
// stops a task in its violating call with SIGSTOP (a process the sandbox
// stopped itself is resumed as well).
void thaw(const std::string& path);
void kill(const std::string& path);
// SIGCONT to every process of the subtree; returns how many.
size_t resume_stopped(const std::string& path);
// The processes of a cgroup and its descendants, as cgroup.procs lists
// them now (a pid may be gone, or reused, by the time it is used); at most
// `max` of them.
std::vector<int> pids_within(const std::string& path, size_t max = SIZE_MAX);
// The ids of a cgroup and of its descendants (those that exist now).
std::set<uint64_t> ids_within(const std::string& path);

// Waits until cgroup.events says frozen (or not, or unpopulated): the file
// is read again at a short interval for the first 100 ms (its notification
// can come 10 ms late), then on the kernel's notification. Returns false on
// timeout.
bool wait_frozen(const std::string& path, bool frozen, std::chrono::milliseconds timeout);
bool wait_empty(const std::string& path, std::chrono::milliseconds timeout);

// mkdir; fails if it exists. Parents are created.
void create(const std::string& path);
// Removes a cgroup tree bottom-up; it must hold no process.
void remove(const std::string& path);

}  // namespace airlock::cgroup
