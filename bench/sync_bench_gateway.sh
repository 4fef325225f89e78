#!/bin/bash
# Catch-up of a restarted gateway through the whole gateway (docs/PERFORMANCE.md, "Redis
# sync"): what sync_bench does not measure, the Blocklist's own cost per applied change
# (filter, exact set, rule store, journal). A private redis-server (Unix socket, no
# persistence) gets N `add` entries; then, RUNS times, a `cuckoogate run` with a fresh state
# directory starts and catches up; the time from its start until its `stats` show the
# stream's last ID as applied is taken, and the same for an empty stream (start-up alone).
#
#   bench/sync_bench_gateway.sh [BUILD_DIR=build] [ENTRIES=200000] [RUNS=3]
#
# Prints each run and the medians; catch-up rate = ENTRIES / (median full - median empty), and
# the gateway's control thread's CPU seconds per million entries (its CPU time at the moment
# the last entry was applied, minus the same for the empty stream): the steadier figure on a
# shared machine.
set -euo pipefail
BUILD=${1:-build}
ENTRIES=${2:-200000}
RUNS=${3:-3}
BIN=$(cd "$BUILD/app" && pwd)
D=$(mktemp -d /tmp/cg_sync_gw_bench_XXXXXX)
PREFIX=cg-sync-gw-bench-$$
REDIS_PID=
GW_PID=
cleanup() {
  [ -n "$GW_PID" ] && kill -KILL "$GW_PID" 2>/dev/null || true
  if [ -n "$REDIS_PID" ]; then kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true; fi
  rm -rf "$D" "/var/run/dpdk/$PREFIX"
}
trap cleanup EXIT

redis-server --port 0 --unixsocket "$D/r.sock" --dir "$D" --save '' --appendonly no \
  --daemonize no > "$D/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 100); do redis-cli -s "$D/r.sock" PING > /dev/null 2>&1 && break; sleep 0.05; done

# The backlog, written with redis-cli --pipe (RESP built here, outside any timing).
python3 - "$ENTRIES" > "$D/cmds.resp" <<'EOF'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
def cmd(*a):
    s = b'*%d\r\n' % len(a)
    for x in a:
        x = x.encode()
        s += b'$%d\r\n%s\r\n' % (len(x), x)
    return s
for i in range(n):
    out.write(cmd("XADD", "cuckoogate:rules", "*", "op", "add", "rule",
                  "src 10.%d.%d.%d" % ((i >> 16) & 255, (i >> 8) & 255, i & 255)))
out.write(cmd("XADD", "empty:rules", "*", "op", "add", "rule", "host one.example"))
EOF
redis-cli -s "$D/r.sock" --pipe < "$D/cmds.resp" > /dev/null

# One start: seconds until the gateway has applied the stream's last entry.
one() {
  local stream=$1
  rm -rf "$D/state" "$D/gw.sock"
  printf '[sync]\nredis = "unix://%s/r.sock"\nstream = "%s"\nsnapshot_interval = 0\n' "$D" "$stream" > "$D/gw.toml"
  local last
  last=$(redis-cli -s "$D/r.sock" XINFO STREAM "$stream" | sed -n '/last-generated-id/{n;p}')
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN/cuckoogate" run --config "$D/gw.toml" --ctl "$D/gw.sock" --state-dir "$D/state" --gateway-id bench \
    -- --no-huge --no-pci --no-shconf -m 512 --vdev=net_null0 --vdev=net_null1 --file-prefix="$PREFIX" \
    --log-level=lib.eal:error > "$D/gw.out" 2>&1 &
  GW_PID=$!
  until [ "$("$BIN/cuckoogatectl" -s "$D/gw.sock" stats 2>/dev/null | awk '$1 == "sync.last_applied_id" {print $2}')" = "$last" ]; do
    sleep 0.02
  done
  t1=$(date +%s.%N)
  # CPU ticks (user + system) of the main thread: the control thread, which applies the stream.
  local ticks
  ticks=$(awk '{print $14 + $15}' "/proc/$GW_PID/task/$GW_PID/stat")
  kill -TERM "$GW_PID"
  wait "$GW_PID" 2> /dev/null || true
  GW_PID=
  rm -rf "/var/run/dpdk/$PREFIX"
  echo "$(echo "$t1 - $t0" | bc) $(echo "scale=3; $ticks / $(getconf CLK_TCK)" | bc)"
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

full=() empty=() cfull=() cempty=()
for r in $(seq "$RUNS"); do
  read -r e ce <<< "$(one empty:rules)"
  read -r f cf <<< "$(one cuckoogate:rules)"
  echo "run $r: start-up alone $e s ($ce CPU s), start-up + catch-up of $ENTRIES entries $f s ($cf CPU s of the control thread)"
  empty+=("$e") cempty+=("$ce")
  full+=("$f") cfull+=("$cf")
done
me=$(printf '%s\n' "${empty[@]}" | median)
mf=$(printf '%s\n' "${full[@]}" | median)
mce=$(printf '%s\n' "${cempty[@]}" | median)
mcf=$(printf '%s\n' "${cfull[@]}" | median)
echo "median: start-up $me s, with catch-up $mf s: $(echo "$ENTRIES / ($mf - $me)" | bc) entries/s applied by the gateway"
echo "control thread: $(echo "scale=3; ($mcf - $mce) * 1000000 / $ENTRIES" | bc) CPU s per million entries" \
  "($(echo "$ENTRIES / ($mcf - $mce)" | bc) entries per CPU s)"
