#!/usr/bin/env bash
# Side-by-side steady-state runs of two pipeline_bench binaries (an A/B of a
# data-path change): ROUNDS rounds, each one single run of A then one of B,
# so both see the same spells of a shared machine. Prints each run's
# steady / io ratio (taken within the run), its Mpps and the load average,
# then the median ratio of each binary.
#
#   bench/pipeline_ab.sh ROUNDS BIN_A BIN_B [pipeline_bench options]
#   e.g. bench/pipeline_ab.sh 5 /var/tmp/start/pipeline_bench build/bench/pipeline_bench
#
# Each run: chrt -f 20 (where allowed) BIN --only steady --runs 1 --seconds 3
# --testpmd none --rules 1000000, then the options given. Release builds only
# (pipeline_bench warns otherwise).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
rounds=$1 a=$2 b=$3
shift 3
rt=()
chrt -f 20 true 2>/dev/null && rt=(chrt -f 20)
declare -A ratios=([A]="" [B]="")
for i in $(seq "$rounds"); do
  for x in A B; do
    bin=$a
    [ "$x" = B ] && bin=$b
    out=$("${rt[@]}" "$bin" --only steady --runs 1 --seconds 3 --testpmd none --rules 1000000 "$@" 2>&1)
    r=$(awk '/^  steady +\/ io / {print $4; exit}' <<<"$out")
    mpps=$(awk '/steady state, flows on/ {print $5; exit}' <<<"$out")
    echo "$x round $i: steady/io ${r:-?}, steady ${mpps:-?} Mpps, load $(cut -d' ' -f1 /proc/loadavg)"
    ratios[$x]+="${r:-} "
  done
done
for x in A B; do
  med=$(tr ' ' '\n' <<<"${ratios[$x]}" | grep -v '^$' | sort -n | awk '{v[NR]=$1} END {print NR ? v[int((NR+1)/2)] : "?"}')
  echo "$x median steady/io: $med"
done
