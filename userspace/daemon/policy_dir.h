#pragma once
// The daemon's policy directory: policies by name (`--policy web` for
// DIR/web.json), each file checked when the daemon starts and when it is
// written, so that a mistake shows before a sandbox asks for it.
#include <string>
#include <utility>

namespace airlock {

class PolicyDir {
public:
	// dir: absolute; "" for none.
	explicit PolicyDir(std::string dir) : dir_(std::move(dir)) {}

	bool empty() const { return dir_.empty(); }
	const std::string& path() const { return dir_; }

	// A policy argument: a file by its path, or a name in the directory.
	// Throws what names neither.
	std::string resolve(const std::string& arg) const;
	// Every policy file in it, in order of name.
	void check_all() const;
	// A file in `dir` was written or replaced, which no sandbox uses:
	// checked if it is a policy of this directory.
	void changed(const std::string& dir, const std::string& path) const;

private:
	static void check(const std::string& path);

	std::string dir_;
};

}  // namespace airlock
