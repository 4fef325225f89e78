# shellcheck shell=bash
# Sourced by the gateway benchmarks (load, restart, cidr_load) after they set
# BUILD: BIN (the build's app/), D (a scratch directory under /var/tmp, the
# disk being measured, removed at exit with the DPDK runtime directory of
# PREFIX), GW_PID (a gateway to kill at exit), median(), and
#   start_gateway MEM_MB VDEV VDEV   a `cuckoogate run` on $D/gw.toml, $D/gw.sock and
#                                    $D/state, returning once `info` answers
#   stop_gateway                     SIGTERM, wait, and its runtime directory removed
BIN=$(cd "$BUILD/app" && pwd)
D=$(mktemp -d "/var/tmp/cg_$(basename "$0" .sh)_XXXXXX")
PREFIX=cg-$(basename "$0" .sh)-$$
GW_PID=
cleanup() {
  if [ -n "$GW_PID" ]; then kill -KILL "$GW_PID" 2>/dev/null || true; fi
  rm -rf "$D" "/var/run/dpdk/$PREFIX"
}
trap cleanup EXIT

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

start_gateway() {
  "$BIN/cuckoogate" run --config "$D/gw.toml" --ctl "$D/gw.sock" --state-dir "$D/state" \
    -- --no-huge --no-pci --no-shconf -m "$1" --vdev="$2" --vdev="$3" --file-prefix="$PREFIX" \
    --log-level=lib.eal:error > "$D/gw.out" 2>&1 &
  GW_PID=$!
  until "$BIN/cuckoogatectl" -s "$D/gw.sock" info > /dev/null 2>&1; do
    kill -0 "$GW_PID" 2>/dev/null || { cat "$D/gw.out"; exit 1; }
    sleep 0.05
  done
}

stop_gateway() {
  kill -TERM "$GW_PID"
  wait "$GW_PID" 2>/dev/null || true
  GW_PID=
  rm -rf "/var/run/dpdk/$PREFIX"
}
