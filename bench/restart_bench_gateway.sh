#!/bin/bash
# Restart of a gateway with a large durable blocklist (issue 12: "10 M rules fit and work"):
# `cuckoogatectl load` of RULES mixed rules (load_bench_gateway.sh's mix) in PARTS loads into
# a `cuckoogate run` with a state directory, SIGTERM, then RUNS restarts on that directory,
# each timed from the start of `cuckoogate run` until `info` answers (the journal replayed
# and every rule back in the lookup tables), with the control thread's CPU time and the
# peak resident memory (VmHWM) of the start.
#
#   bench/restart_bench_gateway.sh [BUILD_DIR=build] [RULES=10000000] [RUNS=3] [MEM_MB=3072] [PARTS=5]
#
# PARTS loads leave PARTS sorted runs in one journal (no compaction: a growing blocklist
# has no dead records), the state a feed loaded in parts leaves. The ports are net_null
# with no-rx=1 (idle): the restart's work is the control thread's. The state directory is
# under /var/tmp (the disk being measured), removed at exit.
set -euo pipefail
BUILD=${1:-build}
RULES=${2:-10000000}
RUNS=${3:-3}
MEM=${4:-3072}
PARTS=${5:-5}
# shellcheck source=bench/gateway_rules_lib.sh
source "$(dirname "$(readlink -f "$0")")/gateway_rules_lib.sh"
printf '[gateway]\ncapacity = %d\n' "$((RULES + RULES / 100 + 1000))" > "$D/gw.toml"

start() { start_gateway "$MEM" net_null0,no-rx=1 net_null1,no-rx=1; }
stop() { stop_gateway; }

start
for f in "$D"/part.*; do "$BIN/cuckoogatectl" -s "$D/gw.sock" load "$f" > /dev/null; done
stop
echo "state directory: $(du -sb "$D/state" | cut -f1) bytes ($(ls "$D/state" | tr '\n' ' '))"
secs=() cpus=() peaks=()
for r in $(seq "$RUNS"); do
  t0=$(date +%s.%N)
  start
  t1=$(date +%s.%N)
  s=$(echo "$t1 - $t0" | bc)
  cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$GW_PID/task/$GW_PID/stat")
  peak=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$GW_PID/status")
  rules=$("$BIN/cuckoogatectl" -s "$D/gw.sock" info | awk '$1 == "rules" {print $2}')
  echo "run $r: restart $s s (control thread $cpu CPU s), peak RSS $peak KiB, $rules rules"
  [ "$rules" = "$RULES" ] || { echo "restart_bench: $rules rules after the restart, $RULES loaded" >&2; exit 1; }
  secs+=("$s") cpus+=("$cpu") peaks+=("$peak")
  stop
done
echo "median: restart $(printf '%s\n' "${secs[@]}" | median) s, control thread $(printf '%s\n' "${cpus[@]}" | median)" \
  "CPU s, peak RSS $(printf '%s\n' "${peaks[@]}" | median) KiB ($RULES rules in $PARTS loads, $RUNS runs," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg))"
