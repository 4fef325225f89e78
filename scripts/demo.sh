#!/usr/bin/env bash
# `make demo`: replay the bundled capture against the bundled blocklist through
# DPDK net_pcap vdevs (no NIC, no hugepages) and print the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build
mkdir -p build/demo
exec build/app/cuckoogate replay \
  --rules config/demo.rules \
  --in pcaps/demo.pcap \
  --out build/demo/passed.pcap \
  --drop build/demo/dropped.pcap \
  --stats-json build/demo/summary.json
