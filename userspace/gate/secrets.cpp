#include "gate/secrets.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "util/fd.h"

namespace airlock::gate {

namespace {

bool space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view s)
{
	while (!s.empty() && space(s.front()))
		s.remove_prefix(1);
	while (!s.empty() && space(s.back()))
		s.remove_suffix(1);
	return s;
}

struct FileRead {
	std::string text;
	struct stat st {};
};

// The file, read whole: a regular file reached without a symbolic link at
// its end, at most kMaxSecretFileBytes.
Result<FileRead> read_secret_file(const std::string& path)
{
	Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
	if (!fd.valid())
		return Rejection{{errno == ELOOP ? std::string("is a symbolic link (name the file itself)")
						 : fmt::format("cannot open: {}", std::strerror(errno))}};
	FileRead f;
	if (::fstat(fd.get(), &f.st) != 0)
		return Rejection{{fmt::format("cannot stat: {}", std::strerror(errno))}};
	if (!S_ISREG(f.st.st_mode))
		return Rejection{{"is not a regular file"}};
	if (static_cast<uint64_t>(f.st.st_size) > kMaxSecretFileBytes)
		return Rejection{
			{fmt::format("is {} bytes; a secrets file has at most {}", f.st.st_size, kMaxSecretFileBytes)}};
	char buf[65536];
	for (;;) {
		ssize_t n = ::read(fd.get(), buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return Rejection{{fmt::format("cannot read: {}", std::strerror(errno))}};
		if (n == 0)
			break;
		f.text.append(buf, static_cast<size_t>(n));
		if (f.text.size() > kMaxSecretFileBytes)
			return Rejection{{fmt::format("grew past {} bytes while read", kMaxSecretFileBytes)}};
	}
	return f;
}

bool injected(const Policy& p, const std::string& name)
{
	for (const Rule& r : p.rules)
		if (r.http)
			for (const InjectHeader& h : r.http->inject)
				for (const InjectPart& part : h.value)
					if (part.secret && part.text == name)
						return true;
	return false;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> env_values(std::string_view text)
{
	std::vector<std::pair<std::string, std::string>> out;
	while (!text.empty()) {
		size_t nl = text.find('\n');
		std::string_view line = trim(text.substr(0, nl));
		text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
		if (line.rfind("export ", 0) == 0)
			line = trim(line.substr(7));
		size_t eq = line.find('=');
		if (line.empty() || line.front() == '#' || eq == std::string_view::npos || eq == 0)
			continue;
		std::string_view key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
		if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
		    value.back() == value.front()) {
			value = value.substr(1, value.size() - 2);
		} else if (size_t hash = value.find(" #"); hash != std::string_view::npos) {
			value = trim(value.substr(0, hash));
		}
		out.emplace_back(std::string(key), std::string(value));
	}
	return out;
}

Result<std::string> read_policy_file(const std::string& path)
{
	auto f = read_secret_file(path);
	if (!f)
		return f.rejection();
	return std::move(f->text);
}

Result<Secrets> read_secrets(const Policy& p)
{
	Secrets out;
	for (const SecretSource& s : p.secrets) {
		auto where = [&](const std::string& why) {
			return Rejection{{fmt::format("{}: secrets/{}: {}: {}", p.source, s.name, s.path, why)}};
		};
		auto f = read_secret_file(s.path);
		if (!f)
			return where(f.rejection().first());
		if (!s.env_file) {
			std::string value(trim(f->text));
			if (value.size() < kMinSecretBytes)
				return where(
					fmt::format("holds {} bytes; a secret has at least {} (shorter ones would be "
						    "found in ordinary requests)",
						    value.size(), kMinSecretBytes));
			if (injected(p, s.name)) {
				if (f->st.st_uid != 0 || (f->st.st_mode & 077) != 0)
					return where(
						fmt::format("is injected, so only root may read it: owner uid {}, mode "
							    "{:04o} (chown root and chmod 600)",
							    f->st.st_uid, f->st.st_mode & 07777));
				if (value.find_first_of("\r\n", 0) != std::string::npos)
					return where("is injected in a header, and holds a line break");
			}
			out.never_send.push_back({s.name, value});
			out.injectable.push_back({s.name, std::move(value)});
			continue;
		}
		for (auto& [key, value] : env_values(f->text))
			if (value.size() >= kMinSecretBytes)
				out.never_send.push_back({s.name + "/" + key, std::move(value)});
	}
	if (out.never_send.size() > kMaxSecretValues)
		return Rejection{{fmt::format("{}: secrets: {} values; the gate scans for at most {}", p.source,
					      out.never_send.size(), kMaxSecretValues)}};
	return out;
}

}  // namespace airlock::gate
