#include "gate/never_send.h"

#include <deque>

#include "net/url.h"
#include "util/error.h"

namespace airlock::gate {

std::string base64_inside(std::string_view value, unsigned alignment, bool url_alphabet)
{
	static constexpr char kStd[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static constexpr char kUrl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char* abc = url_alphabet ? kUrl : kStd;
	// Bits of `alignment` bytes before the value, then the value's: a
	// character whose six bits are all the value's is in every text.
	size_t first_bit = 8 * alignment, end_bit = 8 * (alignment + value.size());
	auto bit = [&](size_t i) {
		size_t byte = i / 8 - alignment;
		return (static_cast<unsigned char>(value[byte]) >> (7 - i % 8)) & 1;
	};
	std::string out;
	for (size_t k = (first_bit + 5) / 6; 6 * k + 6 <= end_bit; k++) {
		unsigned v = 0;
		for (size_t i = 6 * k; i < 6 * k + 6; i++)
			v = (v << 1) | bit(i);
		out += abc[v];
	}
	return out;
}

void NeverSend::Automaton::build(const std::vector<std::pair<std::string, int>>& patterns)
{
	// The bytes the patterns use, each a class; every other byte class 0.
	for (const auto& [p, owner] : patterns)
		for (unsigned char c : p)
			if (cls[c] == 0)
				cls[c] = static_cast<uint16_t>(classes++);
	std::vector<int64_t> trie(classes, -1);  // state * classes + class: child or -1
	out.assign(1, -1);
	for (const auto& [p, owner] : patterns) {
		uint32_t s = 0;
		for (unsigned char c : p) {
			int64_t& child = trie[s * classes + cls[c]];
			if (child < 0) {
				child = static_cast<int64_t>(out.size());
				out.push_back(-1);
				trie.resize(out.size() * classes, -1);
			}
			s = static_cast<uint32_t>(trie[s * classes + cls[c]]);
		}
		if (out[s] < 0)
			out[s] = owner;
	}
	// Breadth first: each state's moves are its child's, or its failure
	// state's move (a whole table: a step is one lookup).
	size_t n = out.size();
	next.assign(n * classes, 0);
	std::vector<uint32_t> fail(n, 0);
	std::deque<uint32_t> queue;
	for (uint32_t c = 0; c < classes; c++)
		if (int64_t child = trie[c]; child > 0) {
			next[c] = static_cast<uint32_t>(child);
			queue.push_back(static_cast<uint32_t>(child));
		}
	while (!queue.empty()) {
		uint32_t s = queue.front();
		queue.pop_front();
		if (out[s] < 0)
			out[s] = out[fail[s]];
		for (uint32_t c = 0; c < classes; c++) {
			int64_t child = trie[s * classes + c];
			if (child < 0) {
				next[s * classes + c] = next[fail[s] * classes + c];
				continue;
			}
			auto ch = static_cast<uint32_t>(child);
			fail[ch] = next[fail[s] * classes + c];
			next[s * classes + c] = ch;
			queue.push_back(ch);
		}
	}
}

NeverSend::NeverSend(const std::vector<SecretValue>& secrets)
{
	if (secrets.size() > kMaxSecretValues)
		fail("{} secret values; the gate scans for at most {}", secrets.size(), kMaxSecretValues);
	std::vector<std::pair<std::string, int>> exact, hex;
	for (const SecretValue& s : secrets) {
		int owner = static_cast<int>(names_.size());
		names_.push_back(s.name);
		std::string_view v = std::string_view(s.value).substr(0, kPatternBytes);
		exact.emplace_back(std::string(v), owner);
		for (bool url : {false, true})
			for (unsigned a = 0; a < 3; a++)
				exact.emplace_back(base64_inside(v, a, url), owner);
		static constexpr char kHex[] = "0123456789abcdef";
		std::string h;
		for (unsigned char c : v) {
			h += kHex[c >> 4];
			h += kHex[c & 15];
		}
		hex.emplace_back(std::move(h), owner);
	}
	exact_.build(exact);
	hex_.build(hex);
}

void NeverSend::Scan::step_decoded(unsigned char c)
{
	if (c == '\r' || c == '\n')
		return;
	dec_ = n_->exact_.step(dec_, c);
	unsigned char low = c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c + 32) : c;
	hex_ = n_->hex_.step(hex_, low);
	if (hit_ < 0 && n_->exact_.out[dec_] >= 0)
		hit_ = n_->exact_.out[dec_];
	if (hit_ < 0 && n_->hex_.out[hex_] >= 0)
		hit_ = n_->hex_.out[hex_];
}

// The decoder: %XX, \xXX, \uXXXX (a byte when below 0x100), \/ and \\ are
// the byte they stand for; anything else passes as it is.
void NeverSend::Scan::decoded(unsigned char c)
{
	auto flush = [&] {
		std::string text = std::move(esc_text_);
		esc_ = Esc::None;
		esc_text_.clear();
		for (unsigned char t : text)
			step_decoded(t);
	};
	switch (esc_) {
	case Esc::None:
		break;
	case Esc::Percent:
	case Esc::Hex:
	case Esc::Unicode:
		if (url::hex_value(static_cast<char>(c)) >= 0) {
			esc_text_ += static_cast<char>(c);
			esc_val_ = esc_val_ * 16 + static_cast<uint32_t>(url::hex_value(static_cast<char>(c)));
			if (++esc_len_ == esc_need_) {
				uint32_t v = esc_val_;
				esc_ = Esc::None;
				esc_text_.clear();
				if (v < 0x100)
					step_decoded(static_cast<unsigned char>(v));
			}
			return;
		}
		flush();
		break;
	case Esc::Backslash:
		if (c == 'x' || c == 'u') {
			esc_ = c == 'x' ? Esc::Hex : Esc::Unicode;
			esc_need_ = c == 'x' ? 2 : 4;
			esc_len_ = 0;
			esc_val_ = 0;
			esc_text_ += static_cast<char>(c);
			return;
		}
		if (c == '/' || c == '\\' || c == '"') {
			esc_ = Esc::None;
			esc_text_.clear();
			step_decoded(c);
			return;
		}
		flush();
		break;
	}
	if (c == '%' || c == '\\') {
		esc_ = c == '%' ? Esc::Percent : Esc::Backslash;
		esc_need_ = 2;
		esc_len_ = 0;
		esc_val_ = 0;
		esc_text_.assign(1, static_cast<char>(c));
		return;
	}
	step_decoded(c);
}

void NeverSend::Scan::feed(std::string_view bytes)
{
	if (n_->names_.empty())
		return;
	for (unsigned char c : bytes) {
		raw_ = n_->exact_.step(raw_, c);
		if (hit_ < 0 && n_->exact_.out[raw_] >= 0)
			hit_ = n_->exact_.out[raw_];
		decoded(c);
	}
}

std::optional<std::string> NeverSend::Scan::found() const
{
	if (hit_ < 0)
		return std::nullopt;
	return n_->names_[static_cast<size_t>(hit_)];
}

std::optional<std::string> NeverSend::find(std::string_view bytes) const
{
	Scan s(*this);
	s.feed(bytes);
	return s.found();
}

std::string scrubbed(const NeverSend& n, std::string text)
{
	if (auto found = n.find(text))
		return "(withheld: it carries secret '" + *found + "')";
	return text;
}

}  // namespace airlock::gate
