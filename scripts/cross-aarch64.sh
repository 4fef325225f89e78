#!/usr/bin/env bash
# AArch64 build of the DPDK-free libraries (filter/, app/keys/, app/store/, app/prefix/) and
# their unit and concurrency tests, cross-compiled with g++-aarch64-linux-gnu and
# run under qemu-aarch64 (Debian qemu-user). Part of `make test`.
#
# What it proves: the code builds for AArch64 (no x86-only intrinsic, flag or
# layout assumption) and its logic passes the same tests there. What it does
# not prove: the memory orders. qemu runs the guest's threads on the host's
# cores and translates loads and stores to host (x86, TSO) ones, so it never
# shows the reorderings an ARM core may make; the orders are argued in
# docs/concurrency.md.
#
#   scripts/cross-aarch64.sh            configure (once), build, run the tests
#   scripts/cross-aarch64.sh --build    configure and build only
# Environment: CG_CROSS_DIR (default build-aarch64), CG_JOBS (ninja's -j).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${CG_CROSS_DIR:-build-aarch64}
cxx=aarch64-linux-gnu-g++
scripts/install-deps.sh

mkdir -p "$dir"
deps=$(cd "$dir" && pwd)/cross-deps

# GoogleTest has no AArch64 package here: build it from Debian's sources
# (libgtest-dev ships them in /usr/src/googletest) with the cross compiler.
src=/usr/src/googletest
mkdir -p "$deps/obj" "$deps/lib"
inc=(-I"$src/googletest/include" -I"$src/googletest" -I"$src/googlemock/include" -I"$src/googlemock")
pids=()
for unit in googletest/src/gtest-all googletest/src/gtest_main googlemock/src/gmock-all; do
  obj="$deps/obj/$(basename "$unit").o"
  [ -f "$obj" ] && continue
  echo "cross-aarch64: compiling $unit.cc for aarch64"
  (nice -n 10 $cxx -std=c++17 -O2 -fPIC -pthread "${inc[@]}" -c "$src/$unit.cc" -o "$obj.tmp" &&
     mv "$obj.tmp" "$obj") &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
# $ORIGIN: gtest_main and gmock find libgtest beside them (the tests' own
# rpath does not apply to their libraries' dependencies).
so() {  # so <name> <object> <libs...>
  local name=$1 obj=$2; shift 2
  [ "$deps/lib/lib$name.so" -nt "$deps/obj/$obj.o" ] && return
  $cxx -shared -pthread -Wl,-rpath,'$ORIGIN' -o "$deps/lib/lib$name.so" "$deps/obj/$obj.o" "$@"
}
so gtest gtest-all
so gtest_main gtest_main -L"$deps/lib" -lgtest
so gmock gmock-all -L"$deps/lib" -lgtest

# The architecture-independent headers the project uses, without the rest of
# the host's /usr/include (its x86 system headers must not be seen).
mkdir -p "$deps/include" "$deps/pkgconfig"
for h in xxhash.h xxh3.h toml++ nlohmann; do ln -sfn "/usr/include/$h" "$deps/include/$h"; done

# xxHash: Debian's header carries the implementation (XXH_IMPLEMENTATION), so
# the library is one object compiled from it.
if [ ! -f "$deps/lib/libxxhash.a" ]; then
  printf '#define XXH_IMPLEMENTATION\n#define XXH_STATIC_LINKING_ONLY\n#include <xxhash.h>\n' \
    >"$deps/obj/xxhash.c"
  aarch64-linux-gnu-gcc -O2 -fPIC -I"$deps/include" -c "$deps/obj/xxhash.c" -o "$deps/obj/xxhash.o"
  aarch64-linux-gnu-ar rcs "$deps/lib/libxxhash.a" "$deps/obj/xxhash.o"
fi

# pkg-config files for the target: GoogleTest and xxHash just built (rpath, so
# qemu's loader finds GoogleTest), toml++ and nlohmann-json as headers (only
# targets not built here use them).
pc() {  # pc <name> <cflags> <libs>
  printf 'Name: %s\nDescription: cross-aarch64.sh\nVersion: %s\nCflags: %s\nLibs: %s\n' \
    "$1" "$4" "$2" "$3" >"$deps/pkgconfig/$1.pc"
}
gtest_inc="-I/usr/src/googletest/googletest/include -I/usr/src/googletest/googlemock/include"
rpath="-L$deps/lib -Wl,-rpath,$deps/lib"
gver=$(pkg-config --modversion gtest)
pc gtest "$gtest_inc -pthread" "$rpath -lgtest -pthread" "$gver"
pc gtest_main "$gtest_inc -pthread" "$rpath -lgtest_main -lgtest -pthread" "$gver"
pc gmock "$gtest_inc -pthread" "$rpath -lgmock -lgtest -pthread" "$gver"
pc gmock_main "$gtest_inc -pthread" "$rpath -lgmock -lgtest_main -lgtest -pthread" "$gver"
pc libxxhash "-I$deps/include" "$deps/lib/libxxhash.a" "$(pkg-config --modversion libxxhash)"
pc tomlplusplus "-I$deps/include -DTOML_HEADER_ONLY=1" "" "$(pkg-config --modversion tomlplusplus)"
pc nlohmann_json "-I$deps/include" "" "$(pkg-config --modversion nlohmann_json)"
# Libraries that `meson setup` looks up for parts this build never compiles
# (app/sync, app/quic): empty entries so that set-up passes. A new unconditional
# dependency() of such a part goes here; one a built target needs must be
# cross-built like GoogleTest above. (Without a libssl entry, meson falls back
# to probing the host's OpenSSL headers with the cross compiler, which fails.)
for m in hiredis libcrypto libssl; do pc "$m" "" "" "$(pkg-config --modversion "$m")"; done
# -L too: tests/store links gtest_main by name (-lgtest_main), and meson turns
# the pkg-config -L/-l pairs into file paths, dropping the -L.
printf "[properties]\npkg_config_libdir = ['%s']\n[built-in options]\ncpp_link_args = ['-L%s']\n" \
  "$deps/pkgconfig" "$deps/lib" >"$deps/paths.ini"

if [ ! -f "$dir/build.ninja" ]; then
  opts=(-Dbuildtype=release -Dgateway=false -Dbench=false)
  [ "${CI:-}" = "true" ] && opts+=(-Dwerror=true)
  meson setup "$dir" --cross-file scripts/aarch64-cross.ini --cross-file "$deps/paths.ini" \
    "${opts[@]}" >/dev/null || { tail -30 "$dir/meson-logs/meson-log.txt" >&2; exit 1; }
fi
# The tests this suite runs: every test of the 'unit' or 'concurrency' suite
# whose program lives in tests/filter, tests/keys, tests/store or tests/prefix (so a new
# test there joins without an edit here), and the targets that build them.
tests=(); targets=()
while read -r name target; do
  tests+=("$name"); targets+=("$target")
done < <(meson introspect "$dir" --tests | python3 -c '
import json, os, sys
root = os.path.realpath(sys.argv[1])
for t in json.load(sys.stdin):
    exe = os.path.relpath(os.path.realpath(t["cmd"][0]), root)
    suites = {s.split(":")[-1] for s in t["suite"]}
    if exe.split("/")[:2] in (["tests", "filter"], ["tests", "keys"], ["tests", "store"], ["tests", "prefix"]) \
            and suites & {"unit", "concurrency"}:
        print(t["name"], exe)' "$dir")
[ ${#tests[@]} -gt 0 ] || { echo "cross-aarch64: no tests found in $dir" >&2; exit 1; }
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort -u)
nice -n 10 ninja -C "$dir" ${CG_JOBS:+-j "$CG_JOBS"} "${targets[@]}"
[ "${1:-}" = "--build" ] && exit 0

# Under qemu everything runs several times slower: the timed stress loops keep
# their default length (their operation counts shrink instead), and the
# throughput measurements, which prove nothing here, are left out.
meson test -C "$dir" --no-rebuild --print-errorlogs --timeout-multiplier 3 \
  --test-args='--gtest_filter=-*Throughput*' "${tests[@]}"
