#!/usr/bin/env bash
# Configure (once) and build one of the project's build directories.
#   scripts/build.sh build        release build: gateway, tests, benchmarks
#   scripts/build.sh build-tsan   ThreadSanitizer build of the DPDK-free libraries and their tests
#   scripts/build.sh build-asan   ASan/UBSan build of everything, for the DPDK gateway's tests
#   scripts/build.sh build-fuzz   clang + ASan/UBSan build with the libFuzzer targets
#   scripts/build.sh DIR SELECTION...   only what `meson test SELECTION` runs: the
#       programs of the selected tests and what they depend on (SELECTION as for
#       meson test: --suite S, --no-suite S, test names), e.g. build-asan --suite pcap
# Incremental: an existing build directory is reused, only changed files rebuild.
# With CI=true, warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
[ $# -gt 0 ] && shift
scripts/install-deps.sh

opts=()
[ "${CI:-}" = "true" ] && opts+=(-Dwerror=true)
case "$dir" in
  build)      opts+=(-Dbuildtype=release) ;;
  # -Wno-tsan: GCC notes that TSan does not model std::atomic_thread_fence. The
  # fences in kcas.cpp and epoch.cpp order std::atomic accesses only, which TSan
  # still checks as atomics; their ordering argument is in docs/concurrency.md
  # and docs/store.md.
  build-tsan) opts+=(-Dbuildtype=debugoptimized -Db_sanitize=thread -Dgateway=false -Dbench=false
                     -Dcpp_args=-Wno-tsan) ;;
  build-asan) opts+=(-Dbuildtype=debug -Db_sanitize=address,undefined -Dbench=false) ;;
  build-fuzz) opts+=(-Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false
                     -Dgateway=false -Dbench=false -Dfuzz=true)
              export CC=clang CXX=clang++ ;;
  *) echo "build.sh: unknown build directory '$dir' (build, build-tsan, build-asan, build-fuzz)" >&2; exit 2 ;;
esac

if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "${opts[@]}" >/dev/null || { cat "$dir/meson-logs/meson-log.txt" | tail -30 >&2; exit 1; }
fi
if [ $# -eq 0 ]; then
  ninja -C "$dir"
  exit
fi
# The ninja targets of the selected tests: each test's program and the targets
# it names in `depends` (the gateway binaries the end-to-end tests drive).
# Regenerated first if a meson.build changed, so that new tests are seen.
ninja -C "$dir" build.ninja >/dev/null
mapfile -t targets < <(scripts/test-targets.py "$dir" "$@")
[ ${#targets[@]} -gt 0 ] || { echo "build.sh: no test in $dir matches: $*" >&2; exit 1; }
ninja -C "$dir" "${targets[@]}"
