#!/bin/bash
# Bulk load through the whole gateway (issue 12, items 3 and 4): `cuckoogatectl load` of N
# mixed rules (all seven kinds in equal shares, the mix of gateway_bench) into a
# `cuckoogate run` with a durable state directory (the OK comes after the journal's fsync),
# and the gateway's resident memory before and after.
#
#   bench/load_bench_gateway.sh [BUILD_DIR=build] [RULES=1000000] [RUNS=3] [MEM_MB=1024] [PARTS=1]
#
# PARTS > 1 splits the file into that many loads, one after the other (timed together): one
# load holds at most 512 MiB in the gateway (a rule's order key + 100 B), so 10 M rules
# take several loads.
# Each run starts a fresh gateway (capacity RULES + 1 %), reads VmRSS once `info` answers
# (the empty gateway), times the load from the start of cuckoogatectl to its exit, reads
# VmRSS again and the `memory.*` lines of `info`, and stops the gateway. Prints each run
# and the medians: rules/s end to end, and (RSS after - RSS before) / RULES.
# The state directory is under /var/tmp (the disk being measured), removed at exit.
# PERF=FILE: also perf-record the control thread during each run's load into FILE.N
# (needs linux-perf; read with perf report -i FILE.N --no-children).
set -euo pipefail
BUILD=${1:-build}
RULES=${2:-1000000}
RUNS=${3:-3}
MEM=${4:-1024}
PARTS=${5:-1}
# shellcheck source=bench/gateway_rules_lib.sh
source "$(dirname "$(readlink -f "$0")")/gateway_rules_lib.sh"

rss_kib() { awk '$1 == "VmRSS:" {print $2}' "/proc/$1/status"; }
# CPU clock ticks (user + system) of the gateway's main thread, the control thread, and its
# system part alone (page faults: the kernel zeroing the pages new rules take).
ctl_ticks() { awk '{print $14 + $15}' "/proc/$1/task/$1/stat"; }
ctl_sys_ticks() { awk '{print $15}' "/proc/$1/task/$1/stat"; }

CAP=$((RULES + RULES / 100 + 1000))
rates=() perrule=() cpus=()
for r in $(seq "$RUNS"); do
  rm -rf "$D/state" "$D/gw.sock"
  printf '[gateway]\ncapacity = %d\n' "$CAP" > "$D/gw.toml"
  start_gateway "$MEM" net_null0 net_null1
  sleep 0.5
  before=$(rss_kib "$GW_PID")
  c0=$(ctl_ticks "$GW_PID")
  s0=$(ctl_sys_ticks "$GW_PID")
  t0=$(date +%s.%N)
  : > "$D/load.out"
  perf_pid=
  if [ -n "${PERF:-}" ]; then
    perf record -q -t "$GW_PID" -o "$PERF.$r" 2> /dev/null &
    perf_pid=$!
  fi
  for f in "$D"/part.*; do "$BIN/cuckoogatectl" -s "$D/gw.sock" load "$f" >> "$D/load.out"; done
  t1=$(date +%s.%N)
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
  fi
  cpu=$(echo "scale=2; ($(ctl_ticks "$GW_PID") - $c0) / $(getconf CLK_TCK)" | bc)
  sys=$(echo "scale=2; ($(ctl_sys_ticks "$GW_PID") - $s0) / $(getconf CLK_TCK)" | bc)
  sleep 0.5
  after=$(rss_kib "$GW_PID")
  secs=$(echo "$t1 - $t0" | bc)
  rate=$(echo "$RULES / $secs" | bc)
  per=$(echo "($after - $before) * 1024 / $RULES" | bc)
  sed "s/^/run $r: /" "$D/load.out"
  echo "run $r: load $secs s, $rate rules/s (gateway control thread: $cpu CPU s, $sys of them system," \
    "$(echo "$RULES / $cpu" | bc) rules per CPU s); RSS empty $before KiB, loaded $after KiB, $per B/rule"
  cpus+=("$(echo "$RULES / $cpu" | bc)")
  "$BIN/cuckoogatectl" -s "$D/gw.sock" info | grep -E '^(rules|memory\.)' | sed "s/^/run $r:   /" || true
  rates+=("$rate") perrule+=("$per")
  stop_gateway
done
echo "median: $(printf '%s\n' "${rates[@]}" | median) rules/s, $(printf '%s\n' "${cpus[@]}" | median) rules per" \
  "control-thread CPU s, $(printf '%s\n' "${perrule[@]}" | median) B/rule" \
  "($RULES rules, $RUNS runs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
