#!/usr/bin/env bash
# The whole test suite (what `make test` and CI run):
#   1. release build: every suite except 'soak' (unit, concurrency, pcap, gateway);
#      the benchmarks, which no test runs, build in the background meanwhile
#   2. ThreadSanitizer build: the 'concurrency' suite again, kept short there
#   3. ASan/UBSan build: the gateway end-to-end suites ('pcap'), binaries included
#   4. clang ASan/UBSan build: the libFuzzer targets, briefly ('fuzz') and the unit suite
#   5. AArch64 cross build of the DPDK-free libraries, their unit and concurrency tests
#      run under qemu-user (scripts/cross-aarch64.sh); it builds in the
#      background from the start, its tests run at the end
# Every stage builds only the programs its tests run.
# Exits non-zero on any failure; prints meson's summaries and one closing total.
set -uo pipefail
cd "$(dirname "$0")/.."

total_ok=0; total_fail=0; status=0; failed_names=""
run() {  # run <build-dir> <meson test args...>
  local dir=$1; shift
  echo "== $dir: meson test $*"
  # Only the programs the selected tests run (scripts/test-targets.py).
  if ! scripts/build.sh "$dir" "$@"; then
    echo "test.sh: build of $dir failed" >&2; total_fail=$((total_fail + 1)); status=1; return
  fi
  meson test -C "$dir" --no-rebuild --print-errorlogs "$@"
  local rc=$?
  [ $rc -ne 0 ] && status=1
  count "$dir"
}
count() {  # count <build-dir>: add the results of its last meson test run to the totals
  local log="$1/meson-logs/testlog.json"
  if [ -f "$log" ]; then
    local ok fail
    ok=$(grep -c '"result": "OK"' "$log" || true)
    fail=$(grep -Ec '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
    total_ok=$((total_ok + ok)); total_fail=$((total_fail + fail))
    # Named again at the end, with the tail of their output: CI shows only
    # the tail of a long log.
    local names
    names=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t["result"] in ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS"):
        print("  %s: %s %s (%.1f s)" % (sys.argv[2], t["result"], t["name"], t["duration"]))
        for out in ((t.get("stdout") or "") + "\n" + (t.get("stderr") or "")).splitlines()[-25:]:
            print("    | " + out[:300])
' "$log" "$1")
    [ -n "$names" ] && failed_names+="$names"$'\n'
  fi
}

# Dependencies first, once: the background builds below and every stage call
# install-deps.sh too, and two apt-get runs at once would fight over dpkg's lock.
scripts/install-deps.sh || exit 1

# Builds that no test waits for run in the background, niced to 19: they take
# the CPU the other stages leave (their tests mostly wait on gateways, sockets
# and timeouts). Each in its own process group (setsid), ended if test.sh is.
bg_pids=(); bg_logs=()
background() {  # background <command...>
  local log; log=$(mktemp)
  setsid nice -n 19 "$@" >"$log" 2>&1 &
  bg_pids+=($!); bg_logs+=("$log")
}
finish() {  # finish <index> <what>: wait for a background build; 0 if it built
  local rc=0
  wait "${bg_pids[$1]}" || { rc=1; cat "${bg_logs[$1]}"; echo "test.sh: $2 failed" >&2; }
  rm -f "${bg_logs[$1]}"
  return $rc
}
trap 'for p in "${bg_pids[@]}"; do kill -- -"$p" 2>/dev/null; done; exit 130' INT TERM

# 0: the cross build; its tests run under qemu at the end, on their own, so
# that nothing starves their timed loops.
rm -f build-aarch64/meson-logs/testlog.json
background scripts/cross-aarch64.sh --build

run build --no-suite soak
# 1: the rest of the release build: the benchmarks, which no test runs but
# which must keep compiling.
background scripts/build.sh build
run build-tsan --suite concurrency
# Leak checking is off here: DPDK's EAL keeps its allocations until exit. The
# libraries' own leak checks run in build-fuzz. UBSan findings fail the test.
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run build-asan --suite pcap
run build-fuzz --suite fuzz --suite unit
echo "== build: the benchmarks"
finish 1 "the release build (benchmarks)" || { total_fail=$((total_fail + 1)); status=1; }
# The cross build: a failure to build leaves no fresh testlog and counts as one failure.
echo "== build-aarch64: scripts/cross-aarch64.sh"
if finish 0 "the cross build of build-aarch64"; then
  scripts/cross-aarch64.sh || status=1
else
  status=1
fi
if [ -f build-aarch64/meson-logs/testlog.json ]; then count build-aarch64; else total_fail=$((total_fail + 1)); fi

[ -n "$failed_names" ] && printf 'failed tests:\n%s' "$failed_names"
echo "tests: ${total_ok} passed, ${total_fail} failed"
[ $total_fail -ne 0 ] && status=1
exit $status
