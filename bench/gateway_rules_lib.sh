# Sourced by load_bench_gateway.sh and restart_bench_gateway.sh, after they set
# BUILD, RULES and PARTS: BIN (the build's app/), D (a scratch directory under
# /var/tmp, the disk being measured, removed at exit with the DPDK runtime
# directory of PREFIX), GW_PID (a gateway to kill at exit), the rule file
# $D/rules of RULES mixed rules (mixed_rules.py: gateway_bench's rule_mix,
# written outside any timing) cut into PARTS files $D/part.NN, and median().
BIN=$(cd "$BUILD/app" && pwd)
D=$(mktemp -d "/var/tmp/cg_$(basename "$0" .sh)_XXXXXX")
PREFIX=cg-$(basename "$0" .sh)-$$
GW_PID=
cleanup() {
  [ -n "$GW_PID" ] && kill -KILL "$GW_PID" 2>/dev/null || true
  rm -rf "$D" "/var/run/dpdk/$PREFIX"
}
trap cleanup EXIT

python3 "$(dirname "${BASH_SOURCE[0]}")/mixed_rules.py" "$RULES" > "$D/rules"
if [ "$PARTS" -gt 1 ]; then
  split -n "l/$PARTS" -d "$D/rules" "$D/part."
else
  ln -s "$D/rules" "$D/part.00"
fi
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
