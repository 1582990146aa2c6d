#pragma once
// Domain names as the kernel keys them (al_name_key): labels in reverse
// order, each after its length byte, so that the names below x.y share
// x.y's bytes as a prefix. And DNS type names.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace airlock {

// "www.example.com" -> \3com\7example\3www. The name must be valid (the
// parser checked it): lowercase, dot-separated, no trailing dot.
std::vector<uint8_t> name_key_bytes(const std::string& name);

// The inverse, for events: "" for the root; bytes that are not printable
// ASCII come out as \DDD, as DNS tools write them. nullopt if the bytes do
// not hold whole labels.
std::optional<std::string> name_from_key(const uint8_t* bytes, size_t n);

// "A" -> 1, "AAAA" -> 28 ...; nullopt if airlock does not know the name.
std::optional<uint16_t> dns_type_number(const std::string& type);
// 1 -> "A"; unknown numbers as "TYPE<n>" (RFC 3597).
std::string dns_type_name(uint16_t type);

// Does a domain rule cover a name? "*.x" covers names strictly below x.
bool domain_covers(const std::string& rule_domain, bool wildcard, const std::string& name);

}  // namespace airlock
