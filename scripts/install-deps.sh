#!/usr/bin/env bash
# Install exactly the Debian 12 packages cuckoogate needs to build, test and demo.
# Idempotent: installs only what is missing. Debian packages only, nothing else is
# downloaded. Not root: prints the exact command to run and exits non-zero.
set -euo pipefail

PACKAGES=(
  build-essential      # g++ 12 (C++20)
  pkg-config
  meson                # build system (as DPDK itself)
  ninja-build
  python3              # meson, pcap generator
  libdpdk-dev          # DPDK 22.11: EAL, ethdev, net_pcap/net_null PMDs, rte_hash, rcu, telemetry
  dpdk-dev             # dpdk-testpmd: the io-forwarding baseline of the pipeline benchmark
  libpcap-dev          # reading/writing pcaps outside DPDK (tests, generator)
  libxxhash-dev        # XXH3 key hashing
  libgtest-dev         # unit and concurrency tests
  libgmock-dev
  libtomlplusplus-dev  # TOML configuration
  libcli11-dev         # command-line parsing
  nlohmann-json3-dev   # JSON output (stats, benchmarks)
  clang                # libFuzzer targets
  libclang-rt-14-dev   # sanitizer/fuzzer runtimes for clang
  spin                 # model checking the filter's lock-free protocol (suite 'model')
  qemu-user            # running the AArch64 build of the libraries and their tests
  g++-aarch64-linux-gnu  # cross compiler for that AArch64 build
  redis-server         # the sync log that gateways share (tests start their own server)
  libhiredis-dev       # Redis client library for the sync
  libssl-dev           # QUIC Initial decryption (AES-GCM, HKDF)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing Debian packages: ${missing[*]}" >&2
  echo "install-deps: run as root:  apt-get update && DEBIAN_FRONTEND=noninteractive $cmd" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have an empty or stale package list.
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
