#!/usr/bin/env bash
# Installs what airlock needs to build and test, from Debian 12's packages.
set -euo pipefail
PACKAGES=(
  build-essential cmake pkg-config clang clang-14 clang-tidy libclang-rt-14-dev llvm bpftool libbpf-dev libelf-dev zlib1g-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev prometheus-cpp-dev libboost1.81-dev libsystemd-dev help2man bash-completion
  liburing-dev libseccomp-dev iproute2 util-linux procps python3 curl
  bind9-dnsutils dnsmasq-base iodine dns2tcp prometheus
  qemu-system-x86 busybox-static cpio
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
