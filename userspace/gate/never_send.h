#pragma once
// Never-send: every byte an inspected request would send (its request line,
// headers and body, before credentials are injected) is scanned for every
// secret the policy names, and a request that carries one is refused
// before anything goes upstream (docs/gate.md, "Secrets").
//
// A secret is looked for as it is and as the encodings an agent reaches
// for would carry it: base64 (standard and URL alphabets, each of the three
// alignments a value can have inside a longer encoding) and hex (either
// case). Each is looked for in the bytes as sent and in the bytes decoded
// once: %XX, the escapes of JSON and JavaScript strings (\uXXXX, \xXX, \/),
// with line breaks dropped (base64 wrapped at 76 columns). A long secret is
// looked for by its first kPatternBytes bytes: sending all of it sends those.
//
// One automaton (Aho-Corasick, a table per state over the bytes the
// patterns use) for all of them: a scan costs the same per byte whatever
// the number of secrets. A Scan is fed a stream in pieces (a body as it
// arrives): a secret split across two pieces is found.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::gate {

struct SecretValue {
	std::string name;   // the policy's name, the only thing a record or a log names
	std::string value;  // never written anywhere
};

inline constexpr size_t kPatternBytes = 64;
inline constexpr size_t kMaxSecretValues = 256;

class NeverSend {
public:
	NeverSend() = default;  // no secret: nothing is ever found
	// Values shorter than kMinSecretBytes (policy.h) are the caller's to
	// refuse or leave out; at most kMaxSecretValues.
	explicit NeverSend(const std::vector<SecretValue>& secrets);

	bool empty() const { return names_.empty(); }

	// A stream scanned as it is fed.
	class Scan {
	public:
		explicit Scan(const NeverSend& n) : n_(&n) {}
		void feed(std::string_view bytes);
		// The name of the first secret found so far.
		std::optional<std::string> found() const;

	private:
		void decoded(unsigned char c);
		void step_decoded(unsigned char c);
		const NeverSend* n_;
		uint32_t raw_ = 0, dec_ = 0, hex_ = 0;  // automaton states
		int hit_ = -1;                          // the secret found, or -1
		// The decoder: what an escape read so far holds.
		enum class Esc : uint8_t { None, Percent, Backslash, Hex, Unicode } esc_ = Esc::None;
		uint8_t esc_len_ = 0, esc_need_ = 0;
		uint32_t esc_val_ = 0;
		std::string esc_text_;  // its bytes, passed on as they are if it is not one
	};

	// The name of a secret bytes carries, whole.
	std::optional<std::string> find(std::string_view bytes) const;

private:
	struct Automaton {
		std::vector<uint16_t> cls = std::vector<uint16_t>(256, 0);
		uint32_t classes = 1;
		std::vector<uint32_t> next;  // state * classes + class
		std::vector<int32_t> out;    // state: a secret whose pattern ends here, or -1
		void build(const std::vector<std::pair<std::string, int>>& patterns);
		uint32_t step(uint32_t s, unsigned char c) const { return next[s * classes + cls[c]]; }
	};
	Automaton exact_;  // raw, base64: on the bytes and the decoded bytes
	Automaton hex_;    // lower-case hex: on the decoded bytes in lower case
	std::vector<std::string> names_;
};

// text as a record or a log may show it: itself, or, when it carries a
// secret (a Host, a path, a refusal's detail quoting the request), a
// placeholder naming the secret.
std::string scrubbed(const NeverSend&, std::string text);

// The base64 of value as it appears inside any longer base64 text that
// carries it at alignment 0, 1 or 2 (the characters every such text has).
std::string base64_inside(std::string_view value, unsigned alignment, bool url_alphabet);

}  // namespace airlock::gate
