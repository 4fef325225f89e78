#!/bin/bash
# Loading IPv4 prefix feeds through the whole gateway (issue 12, items 1 and 4):
# `cuckoogatectl load --format cidr --as src` of N distinct prefixes into a fresh
# `cuckoogate run` (net_null ports, a durable state directory: the OK comes after
# the journal's fsync), then `flush src` of them all. One line per N:
#
#   bench/cidr_load_bench.sh [BUILD_DIR=build] [SHAPE=24] N...
#
# SHAPE 24: N /24s, consecutive networks from 1.0.0.0 (Spamhaus-like feeds list
# /24s and shorter). SHAPE mixed: lengths /8../32 in the shares of FireHOL level 1
# style lists (mostly /24 and /32-free /25../31 included), spread over the space.
# Prints load and flush seconds, rules/s, and the gateway's memory.prefixes.
set -euo pipefail
BUILD=${1:-build}
SHAPE=${2:-24}
shift 2 || true
[ $# -gt 0 ] || set -- 20000 80000 1100000
# shellcheck source=bench/gateway_lib.sh
source "$(dirname "$(readlink -f "$0")")/gateway_lib.sh"

for n in "$@"; do
  python3 - "$n" "$SHAPE" > "$D/feed" <<'PY'
import random, sys
n, shape = int(sys.argv[1]), sys.argv[2]
rng = random.Random(1)
if shape == "24":
    for i in range(n):
        a = (1 << 16) + i  # the /24 network number: 1.0.0.0/24 onwards
        print("%d.%d.%d.0/24" % (a >> 16, (a >> 8) & 255, a & 255))
else:
    seen = set()
    lens = [8] * 1 + [12] * 2 + [16] * 8 + [20] * 10 + [22] * 14 + [23] * 10 + [24] * 45 + [26] * 4 + [28] * 4 + [30] * 2
    while len(seen) < n:
        l = rng.choice(lens)
        a = rng.getrandbits(32) & ((0xffffffff << (32 - l)) & 0xffffffff)
        if (a, l) in seen:
            continue
        seen.add((a, l))
        print("%d.%d.%d.%d/%d" % (a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255, l))
PY
  rm -rf "$D/state" "$D/gw.sock"
  printf '[gateway]\ncapacity = %d\n' "$((n + n / 100 + 1000))" > "$D/gw.toml"
  start_gateway 1024 net_null0 net_null1
  t0=$(date +%s.%N)
  "$BIN/cuckoogatectl" -s "$D/gw.sock" load --format cidr --as src "$D/feed" > "$D/load.out"
  t1=$(date +%s.%N)
  mem=$("$BIN/cuckoogatectl" -s "$D/gw.sock" info | awk '$1 == "memory.prefixes" {print $2}')
  rules=$("$BIN/cuckoogatectl" -s "$D/gw.sock" info | awk '$1 == "rules" {print $2}')
  t2=$(date +%s.%N)
  "$BIN/cuckoogatectl" -s "$D/gw.sock" flush src > /dev/null
  t3=$(date +%s.%N)
  load=$(echo "$t1 - $t0" | bc)
  flush=$(echo "$t3 - $t2" | bc)
  echo "N=$n shape=$SHAPE: rules=$rules load ${load}s ($(echo "$n / $load" | bc) rules/s)," \
    "flush ${flush}s, memory.prefixes $mem B"
  stop_gateway
done
