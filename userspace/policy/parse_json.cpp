// JSON as policy files (and the daemon's configuration) are read: a
// syntax error with its line and column, every repeated key.
#include "policy/parser.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/text.h"

namespace airlock {

using nlohmann::json;

std::string policy_parse::shown(const json& v)
{
	if (v.is_string())
		return "'" + printable(v.get<std::string>()) + "'";
	std::string s = v.dump();
	return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string json_type_name(const json& v)
{
	if (v.is_string())
		return "a string";
	if (v.is_boolean())
		return "a boolean";
	if (v.is_number_integer() || v.is_number_unsigned())
		return "an integer";
	if (v.is_number())
		return "a number";
	if (v.is_array())
		return "an array";
	if (v.is_object())
		return "an object";
	return "null";
}

namespace {

// nlohmann keeps the last of two equal keys without a word. In a policy that
// would let a second "action" or "mode" quietly override the first, so a
// SAX pass follows where it is and notes every repeated key. (Not a parse
// callback: nlohmann's callback parser scans the enclosing array after each
// element, quadratic in the number of rules.)
class DuplicateKeys : public nlohmann::json_sax<json> {
public:
	struct Duplicate {
		std::string path, key;  // path of the object holding the key
	};

	bool start_object(std::size_t) override
	{
		stack_.push_back({true});
		return true;
	}
	bool start_array(std::size_t) override
	{
		stack_.push_back({false});
		return true;
	}
	bool key(string_t& k) override
	{
		Frame& top = stack_.back();
		top.key = k;
		if (!top.keys.insert(top.key).second)
			found.push_back({path_of_top(), top.key});
		return true;
	}
	bool end_object() override { return end(); }
	bool end_array() override { return end(); }
	bool null() override { return element_done(); }
	bool boolean(bool) override { return element_done(); }
	bool number_integer(number_integer_t) override { return element_done(); }
	bool number_unsigned(number_unsigned_t) override { return element_done(); }
	bool number_float(number_float_t, const string_t&) override { return element_done(); }
	bool string(string_t&) override { return element_done(); }
	bool binary(binary_t&) override { return element_done(); }
	// Where the text stops being JSON: a syntax error, or a number out of
	// range (which json::parse throws as out_of_range, without a position).
	bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception& e) override
	{
		error_byte = byte;
		error = e.what();
		return false;
	}

	std::vector<Duplicate> found;
	size_t error_byte = 0;
	std::string error;  // "[json.exception...] ..."

private:
	struct Frame {
		bool object;
		std::set<std::string> keys{};
		std::string key{};  // object: the key whose value is being read
		size_t index = 0;   // array: elements read so far
	};

	bool element_done()
	{
		if (!stack_.empty() && !stack_.back().object)
			stack_.back().index++;
		return true;
	}

	bool end()
	{
		stack_.pop_back();
		return element_done();
	}

	std::string path_of_top() const
	{
		std::string p;
		for (size_t i = 0; i + 1 < stack_.size(); i++) {
			const Frame& f = stack_[i];
			std::string part = f.object ? printable(f.key) : std::to_string(f.index);
			if (!p.empty())
				p += '/';
			p += part;
		}
		return p;
	}

	std::vector<Frame> stack_;
};

}  // namespace

std::optional<json> parse_json_checked(std::string_view text, const std::string& file_label,
				       std::vector<PolicyError>& errors)
{
	DuplicateKeys dups;
	if (!json::sax_parse(text, &dups)) {
		// Line and column from the byte offset nlohmann reports.
		size_t off = std::min<size_t>(dups.error_byte ? dups.error_byte - 1 : 0, text.size());
		size_t line = 1 + std::count(text.begin(), text.begin() + off, '\n');
		size_t nl = text.rfind('\n', off ? off - 1 : 0);
		size_t col = nl == std::string_view::npos || off == 0 ? off + 1 : off - nl;
		// "[json.exception...] parse error at line L, column C: REASON",
		// "[json.exception...] REASON"
		const std::string& what = dups.error;
		auto at = what.find("column ");
		auto colon = at == std::string::npos ? std::string::npos : what.find(": ", at);
		auto bracket = what.find("] ");
		std::string reason = colon != std::string::npos     ? what.substr(colon + 2)
				     : bracket != std::string::npos ? what.substr(bracket + 2)
								    : what;
		std::replace(reason.begin(), reason.end(), '\n', ' ');
		// nlohmann quotes the bytes it last read as they are: escape them.
		errors.push_back({fmt::format("{}:{}:{}", file_label, line, col), "(root)",
				  "invalid JSON: " + printable(reason)});
		return std::nullopt;
	}
	json doc = json::parse(text);
	for (const auto& d : dups.found)
		errors.push_back({file_label, d.path.empty() ? "(root)" : d.path,
				  fmt::format("duplicate key '{}'", printable(d.key))});
	return doc;
}

}  // namespace airlock
