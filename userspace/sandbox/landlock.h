#pragma once
// What the running kernel's Landlock offers. Landlock's scopes are the
// kernel's own answer to "may this process reach that one": ABI 6 (Linux
// 6.12) scopes abstract unix sockets and signals to the sandboxing domain.
namespace airlock {

inline constexpr int kLandlockAbiScope = 6;

// The Landlock ABI version, 0 if Landlock is absent or disabled.
int landlock_abi();

}  // namespace airlock
