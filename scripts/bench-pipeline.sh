#!/usr/bin/env bash
# The pipeline benchmark (bench/pipeline_bench.cpp, issue 10 item 6) and what
# docs/PERFORMANCE.md records beside its figures: machine, compiler, DPDK, load.
#
#   scripts/bench-pipeline.sh [BUILD_DIR] [-- pipeline_bench options]
#       every scenario, JSON in BUILD_DIR/pipeline.json (BUILD_DIR: default build)
#   scripts/bench-pipeline.sh --perf SCENARIO [BUILD_DIR] [-- pipeline_bench options]
#       where the worker's time goes in one scenario (steady, churn, new_flows,
#       ...): perf record on the worker's CPU for 8 s, report by DSO and symbol
#       for the worker thread (apt-get install linux-perf; needs root or
#       kernel.perf_event_paranoid <= 0). Build with -Dcpp_args=-g for
#       per-line annotation (perf annotate -l -i BUILD_DIR/perf-SCENARIO.data).
#
# BUILD_DIR is configured as a release build if it does not exist yet; only
# bench/pipeline_bench is built. The worker runs on CPU 1 (EAL -l 0-1).
set -euo pipefail
cd "$(dirname "$0")/.."

perf_scenario=""
if [ "${1:-}" = "--perf" ]; then
  perf_scenario=${2:?--perf needs a scenario}
  shift 2
fi
dir=build
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  dir=$1
  shift
fi
[ "${1:-}" = "--" ] && shift

if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" -Dbuildtype=release >/dev/null
fi
if [ "$(meson introspect "$dir" --buildoptions | python3 -c \
      'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="buildtype"][0])')" != release ]; then
  echo "bench-pipeline: $dir is not a release build; measure from a release build" >&2
  exit 2
fi
ninja -C "$dir" bench/pipeline_bench >/dev/null
bench="$dir/bench/pipeline_bench"

# Real-time priority where allowed (root): on a shared machine other
# processes otherwise take the worker's CPU from time to time and the
# rounds scatter; the ratios are within a round either way.
rt=()
chrt -f 20 true 2>/dev/null && rt=(chrt -f 20)

echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
     "$(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo)"
echo "compiler: $(c++ --version | head -1); DPDK $(pkg-config --modversion libdpdk)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ -z "$perf_scenario" ]; then
  "${rt[@]}" "$bench" --json "$dir/pipeline.json" "$@"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "JSON: $dir/pipeline.json"
  exit 0
fi

command -v perf >/dev/null || { echo "bench-pipeline: perf not found (apt-get install linux-perf)" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"${rt[@]}" "$bench" --only "$perf_scenario" --runs 1 --seconds 14 --testpmd none "$@" 2>"$log" &
pid=$!
# The scenario's timed window starts after its rules are loaded and its io baseline ran.
for _ in $(seq 600); do
  grep -q "run 1/1: $perf_scenario\$" "$log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
sleep 1.5
data="$dir/perf-$perf_scenario.data"
perf record -q -C 1 -o "$data" -- sleep 8 >/dev/null 2>&1
wait "$pid"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# (perf's own --sort dso leaves libc out here; sum the dso,sym rows instead.)
rows=$(perf report -i "$data" --comm rte-worker-1 --no-children --sort dso,sym --stdio 2>/dev/null |
       grep -E '^ +[0-9]')
echo "worker thread (rte-worker-1), share of all samples on CPU 1, by object:"
awk '{ sub("%", "", $1); by[$2] += $1 } END { for (d in by) printf "  %6.2f%%  %s\n", by[d], d }' <<<"$rows" |
  sort -rn
echo "by symbol:"
head -25 <<<"$rows"
echo "perf data: $data"
