#!/usr/bin/env bash
# Regenerates the bundled captures in pcaps/ (deterministic output).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build >/dev/null
build/pcaps/make_pcaps pcaps
