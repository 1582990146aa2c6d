#include "util/mountinfo.h"

#include <sstream>

#include "util/files.h"

namespace airlock {

namespace {

// mountinfo escapes space, tab, newline and backslash as \ and three octal digits.
std::string unescape(const std::string& s)
{
	std::string out;
	for (size_t i = 0; i < s.size(); i++) {
		auto octal = [&](size_t j) { return j < s.size() && s[j] >= '0' && s[j] <= '7'; };
		if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
			out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
			i += 3;
		} else {
			out += s[i];
		}
	}
	return out;
}

}  // namespace

std::vector<MountEntry> parse_mountinfo(const std::string& text)
{
	std::vector<MountEntry> out;
	std::istringstream in(text);
	for (std::string line; std::getline(in, line);) {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		auto sep = line.find(" - ");
		if (sep == std::string::npos)
			continue;
		std::istringstream head(line.substr(0, sep)), tail(line.substr(sep + 3));
		std::string id, parent, dev, root, point, fstype, source, super;
		head >> id >> parent >> dev >> root >> point;
		tail >> fstype >> source >> super;
		out.push_back({unescape(root), unescape(point), fstype, super});
	}
	return out;
}

std::vector<MountEntry> read_mountinfo(const std::string& path)
{
	auto text = read_file(path);
	return text ? parse_mountinfo(*text) : std::vector<MountEntry>{};
}

}  // namespace airlock
