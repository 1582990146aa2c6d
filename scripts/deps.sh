#!/usr/bin/env bash
# Installs what airlock needs from Debian 12's packages, the missing ones only.
#   scripts/deps.sh run    to build airlock and run it (the quick start)
#   scripts/deps.sh        that, and what the tests need (test tools, servers,
#                          podman, qemu, the sanitizers' runtime)
set -euo pipefail
RUN_PACKAGES=(
  build-essential cmake pkg-config clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev prometheus-cpp-dev libboost1.81-dev libsystemd-dev
  libseccomp-dev libssl-dev help2man iproute2 util-linux procps python3 curl
)
TEST_PACKAGES=(
  clang-14 clang-tidy clang-format-14 libclang-rt-14-dev libgtest-dev libgmock-dev liburing-dev bash-completion
  bind9-dnsutils dnsmasq-base iodine dns2tcp prometheus podman runc yamllint nftables
  qemu-system-x86 busybox-static cpio mitmproxy ccache libboost-url1.81-dev
  git nodejs python3-requests
)
case "${1:-all}" in
  run) packages=("${RUN_PACKAGES[@]}") ;;
  all) packages=("${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "scripts/deps.sh: '$1' is not a set of packages (run, or nothing for all)" >&2; exit 1 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # One line per package as it is set up: progress, not two silent minutes.
  apt-get install -y -q --no-install-recommends "${missing[@]}" | grep --line-buffered -E '^Setting up ' || true
  for p in "${missing[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      { echo "scripts/deps.sh: $p did not install" >&2; exit 1; }
  done
fi
