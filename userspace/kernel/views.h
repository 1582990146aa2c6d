#pragma once
// Typed reads of a slot's tables through a descriptor of one (often a
// read-only one handed to the proxy): what the proxy and the SNI gate look
// up, without a raw map lookup at each place. The views own nothing.
#include <airlock/abi.h>

#include <optional>
#include <string>

#include "net/address.h"

namespace airlock::kernel {

// A slot's origin table: where each redirected flow meant to go, filed by
// the kernel as it connected (TCP) or as its datagram left (UDP).
class OriginView {
public:
	explicit OriginView(int fd) : fd_(fd) {}
	std::optional<al_origin> find(const al_origin_key&) const;

private:
	int fd_;
};

// A slot's learned-address table: the name each address was an answer to.
class LearnedNames {
public:
	explicit LearnedNames(int fd) : fd_(fd) {}
	// The question's name an answer bound the address to; nullopt when
	// none did or the stored name does not read as one.
	std::optional<std::string> name_of(const Address&) const;

private:
	int fd_;
};

// A learned entry's name: its labels, last first, up to AL_NAME_END; nullopt
// for a label out of bounds or a name with no end.
std::optional<std::string> learned_name(const al_learned&);

}  // namespace airlock::kernel
