#include "ops/config.h"

#include <fmt/format.h>

#include <set>

#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "sandbox/state.h"
#include "util/files.h"

namespace airlock {

using nlohmann::json;

namespace {

struct Reader {
	std::string file;
	std::vector<PolicyError> errors;

	void error(const std::string& path, std::string message) { errors.push_back({file, path, std::move(message)}); }

	// Only the listed keys; each one's value a string or a boolean as listed.
	bool object(const json& v, const std::string& path, std::initializer_list<const char*> strings,
		    std::initializer_list<const char*> bools = {}, std::initializer_list<const char*> arrays = {},
		    std::initializer_list<const char*> counts = {})
	{
		if (!v.is_object()) {
			error(path, fmt::format("expected an object, got {}", json_type_name(v)));
			return false;
		}
		for (auto it = v.begin(); it != v.end(); ++it) {
			std::string at = path == "(root)" ? it.key() : path + "/" + it.key();
			auto in = [&](std::initializer_list<const char*> l) {
				for (const char* k : l)
					if (it.key() == k)
						return true;
				return false;
			};
			if (in(strings)) {
				if (!it->is_string())
					error(at, fmt::format("expected a string, got {}", json_type_name(*it)));
				else if (it->get<std::string>().empty())
					error(at, "must not be empty");
			} else if (in(bools)) {
				if (!it->is_boolean())
					error(at, fmt::format("expected a boolean, got {}", json_type_name(*it)));
			} else if (in(counts)) {
				if (!it->is_number_unsigned())
					error(at, fmt::format("expected a whole number, got {}",
							      it->dump(-1, ' ', true).substr(0, 40)));
			} else if (in(arrays)) {
				if (!it->is_array())
					error(at, fmt::format("expected an array, got {}", json_type_name(*it)));
			} else {
				std::string key = json(it.key()).dump(-1, ' ', true);  // ASCII: DEL and beyond escaped
				error(path, fmt::format("unknown key {}", key.substr(0, 80)));
			}
		}
		return true;
	}

	static std::string str(const json& v, const char* key)
	{
		auto it = v.find(key);
		return it != v.end() && it->is_string() ? it->get<std::string>() : "";
	}
};

}  // namespace

Result<DaemonConfig> load_daemon_config(const std::string& file)
{
	auto text = read_file(file);
	if (!text)
		return Rejection{{fmt::format("{}: (root): cannot read", file)}};
	return parse_daemon_config(*text, file);
}

Result<DaemonConfig> parse_daemon_config(const std::string& text, const std::string& file)
{
	Reader r{file, {}};
	auto doc = parse_json_checked(text, file, r.errors);
	DaemonConfig c;
	if (doc && r.object(*doc, "(root)", {"metrics", "policy_dir", "audit_log"}, {}, {"sandboxes"},
			    {"audit_log_max_bytes", "audit_log_keep"})) {
		if (auto it = doc->find("audit_log_max_bytes"); it != doc->end() && it->is_number_unsigned()) {
			c.audit_bound.max_bytes = it->get<uint64_t>();
			if (*c.audit_bound.max_bytes && *c.audit_bound.max_bytes < AuditBound::kMinMaxBytes)
				r.error("audit_log_max_bytes",
					fmt::format("at least {} (or 0: rotated by something else)",
						    AuditBound::kMinMaxBytes));
		}
		if (auto it = doc->find("audit_log_keep"); it != doc->end() && it->is_number_unsigned()) {
			if (it->get<uint64_t>() > 1000)
				r.error("audit_log_keep", "at most 1000");
			else
				c.audit_bound.keep = it->get<unsigned>();
		}
		c.metrics = Reader::str(*doc, "metrics");
		c.policy_dir = Reader::str(*doc, "policy_dir");
		c.audit_log = Reader::str(*doc, "audit_log");
		for (const char* key : {"policy_dir", "audit_log"})
			if (auto v = Reader::str(*doc, key); !v.empty() && v.front() != '/')
				r.error(key, "must be an absolute path");
		std::set<std::string> names;
		if (auto sbs = doc->find("sandboxes"); sbs != doc->end() && sbs->is_array()) {
			for (size_t i = 0; i < sbs->size(); i++) {
				const json& s = (*sbs)[i];
				std::string path = fmt::format("sandboxes/{}", i);
				if (!r.object(s, path, {"name", "policy", "cgroup", "audit_log"}, {"log_allowed"}))
					continue;
				DeclaredSandbox d{Reader::str(s, "name"), Reader::str(s, "policy"),
						  Reader::str(s, "cgroup"), Reader::str(s, "audit_log"),
						  s.contains("log_allowed") && s["log_allowed"].is_boolean() &&
							  s["log_allowed"].get<bool>()};
				if (!d.policy.empty() && d.policy.find('/') != std::string::npos &&
				    d.policy.front() != '/')
					r.error(path + "/policy",
						"a path must be absolute (or give a name in policy_dir)");
				if (!d.policy.empty() && d.policy.find('/') == std::string::npos &&
				    !doc->contains("policy_dir"))
					r.error(path + "/policy",
						"a policy name needs \"policy_dir\"; or give an absolute path");
				if (!d.audit_log.empty() && d.audit_log.front() != '/')
					r.error(path + "/audit_log", "must be an absolute path");
				if (!s.contains("name"))
					r.error(path, "missing key 'name'");
				else if (!d.name.empty() && !valid_sandbox_name(d.name))
					r.error(path + "/name", not_a_sandbox_name(d.name));
				else if (d.name.rfind("ctr-", 0) == 0)
					r.error(path + "/name",
						fmt::format("'{}': names starting with ctr- are the OCI hook's, "
							    "for containers it attaches",
							    d.name));
				else if (!d.name.empty() && !names.insert(d.name).second)
					r.error(path + "/name", fmt::format("sandbox '{}' is declared twice", d.name));
				if (!s.contains("policy"))
					r.error(path, "missing key 'policy'");
				c.sandboxes.push_back(d);
			}
		}
	}
	if (!r.errors.empty()) {
		Rejection no;
		for (const auto& e : r.errors)
			no.lines.push_back(e.str());
		return no;
	}
	return c;
}

}  // namespace airlock
