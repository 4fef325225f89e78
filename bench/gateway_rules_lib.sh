# shellcheck shell=bash
# Sourced by load_bench_gateway.sh and restart_bench_gateway.sh, after they set
# BUILD, RULES and PARTS: gateway_lib.sh's BIN, D, PREFIX, GW_PID, median(),
# start_gateway and stop_gateway, and the rule file $D/rules of RULES mixed rules
# (mixed_rules.py: gateway_bench's rule_mix, written outside any timing) cut into
# PARTS files $D/part.NN.
# shellcheck source=bench/gateway_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gateway_lib.sh"

python3 "$(dirname "${BASH_SOURCE[0]}")/mixed_rules.py" "$RULES" > "$D/rules"
if [ "$PARTS" -gt 1 ]; then
  split -n "l/$PARTS" -d "$D/rules" "$D/part."
else
  ln -s "$D/rules" "$D/part.00"
fi
