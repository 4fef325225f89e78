#!/usr/bin/env bash
# Side-by-side runs of two pipeline_bench binaries (an A/B of a data-path
# change): ROUNDS rounds, each one single run of A then one of B, so both
# see the same spells of a shared machine. Prints each run's ratio to its
# baseline (taken within the run), its Mpps and the load average, then the
# median ratio of each binary.
#
#   [SCENARIO=steady|new_flows|churn] bench/pipeline_ab.sh ROUNDS BIN_A BIN_B [pipeline_bench options]
#   e.g. bench/pipeline_ab.sh 5 /var/tmp/start/pipeline_bench build/bench/pipeline_bench
#        SCENARIO=new_flows bench/pipeline_ab.sh 5 /var/tmp/start/pipeline_bench build/bench/pipeline_bench
#
# Each run: chrt -f 20 (where allowed) BIN --only SCENARIO --runs 1 --seconds 3
# --testpmd none --rules 1000000, then the options given. SCENARIO (default
# steady) is compared with its target's baseline: steady and churn with io,
# new_flows with io_syn. Release builds only (pipeline_bench warns otherwise).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
rounds=$1 a=$2 b=$3
shift 3
scenario=${SCENARIO:-steady}
case $scenario in  # the target's ratio line and the scenario's Mpps row in pipeline_bench's table
  steady) base=io row="steady state, flows on" ;;
  churn) base=io row="under churn, flows on" ;;
  new_flows) base=io_syn row="new flows only, flows on" ;;
  *) echo "pipeline_ab: SCENARIO must be steady, churn or new_flows" >&2; exit 2 ;;
esac
rt=()
chrt -f 20 true 2>/dev/null && rt=(chrt -f 20)
declare -A ratios=([A]="" [B]="")
for i in $(seq "$rounds"); do
  for x in A B; do
    bin=$a
    [ "$x" = B ] && bin=$b
    out=$("${rt[@]}" "$bin" --only "$scenario" --runs 1 --seconds 3 --testpmd none --rules 1000000 "$@" 2>&1)
    r=$(awk -v s="$scenario" -v b="$base" '$1 == s && $2 == "/" && $3 == b {print $4; exit}' <<<"$out")
    mpps=$(awk -v row="$row" 'index($0, row) {print substr($0, index($0, row) + length(row)) + 0; exit}' <<<"$out")
    echo "$x round $i: $scenario/$base ${r:-?}, $scenario ${mpps:-?} Mpps, load $(cut -d' ' -f1 /proc/loadavg)"
    ratios[$x]+="${r:-} "
  done
done
for x in A B; do
  med=$(tr ' ' '\n' <<<"${ratios[$x]}" | grep -v '^$' | sort -n | awk '{v[NR]=$1} END {print NR ? v[int((NR+1)/2)] : "?"}')
  echo "$x median $scenario/$base: $med"
done
