#!/usr/bin/env bash
# The whole test suite (what `make test` and CI run):
#   1. release build: every suite except 'soak' (unit, concurrency, pcap, gateway)
#   2. ThreadSanitizer build: the 'concurrency' suite again, kept short there
#   3. ASan/UBSan build: the gateway end-to-end suites ('pcap'), binaries included
#   4. clang ASan/UBSan build: the libFuzzer targets, briefly ('fuzz') and the unit suite
#   5. AArch64 cross build of the DPDK-free libraries, their unit and concurrency tests
#      run under qemu-user (scripts/cross-aarch64.sh)
# Exits non-zero on any failure; prints meson's summaries and one closing total.
set -uo pipefail
cd "$(dirname "$0")/.."

total_ok=0; total_fail=0; status=0
run() {  # run <build-dir> <meson test args...>
  local dir=$1; shift
  echo "== $dir: meson test $*"
  # The release build is built whole (the benchmarks too, so that they keep
  # compiling); the others build only the programs their tests run.
  local select=("$@")
  [ "$dir" = build ] && select=()
  if ! scripts/build.sh "$dir" "${select[@]}"; then
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
  fi
}

run build --no-suite soak
run build-tsan --suite concurrency
# Leak checking is off here: DPDK's EAL keeps its allocations until exit. The
# libraries' own leak checks run in build-fuzz. UBSan findings fail the test.
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run build-asan --suite pcap
run build-fuzz --suite fuzz --suite unit
# The cross build: a failure to build leaves no fresh testlog and counts as one failure.
echo "== build-aarch64: scripts/cross-aarch64.sh"
rm -f build-aarch64/meson-logs/testlog.json
scripts/cross-aarch64.sh || status=1
if [ -f build-aarch64/meson-logs/testlog.json ]; then count build-aarch64; else total_fail=$((total_fail + 1)); fi

echo "tests: ${total_ok} passed, ${total_fail} failed"
[ $total_fail -ne 0 ] && status=1
exit $status
