#!/usr/bin/env bash
# Fuzzes the trace reader (tests/fuzz/fuzz_reader.cpp) and what replay works
# out from a trace before it touches a GPU (tests/fuzz/fuzz_replay_model.cpp),
# each for a bounded time.
#
#   scripts/fuzz.sh [SECONDS]        default 60, for each target
#
# FUZZ_SEED picks libFuzzer's seed (default 0: a new random one each run).
# scripts/test.sh, and so CI, uses a fixed seed, so that a red run reproduces.
#
# Configures a separate clang build (build-fuzz/, or $KCAP_FUZZ_BUILD_DIR) with
# KCAP_FUZZ=ON (libFuzzer + ASan + UBSan), builds only the fuzz targets, and runs
# each on a COPY of tests/fuzz/corpus/ (the committed seeds never grow). Crash
# reproducers are kept in <build>/fuzz-artifacts/; the script exits non-zero
# when the fuzzer finds anything. Reproduce one with
#   <build>/tests/fuzz/kcap_fuzz_reader <build>/fuzz-artifacts/crash-...
# (or kcap_fuzz_replay_model, the target that found it).

set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi
build="${KCAP_FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${JOBS:-$(nproc)}"

if [ ! -f "$build/CMakeCache.txt" ]; then
  CC="${KCAP_FUZZ_CC:-clang}" CXX="${KCAP_FUZZ_CXX:-clang++}" \
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DKCAP_FUZZ=ON -DKCAP_BUILD_KERNELS=OFF -DKCAP_BUILD_TESTS=ON >/dev/null
fi
cmake --build "$build" --target kcap_fuzz_reader kcap_fuzz_replay_model -j "$jobs"

work="$(mktemp -d "${TMPDIR:-/tmp}/kcap-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/fuzz-artifacts"

# name, what it fuzzes
for target in "kcap_fuzz_reader:the trace reader" "kcap_fuzz_replay_model:replay's model of a trace"; do
  name="${target%%:*}"
  rm -rf "$work/corpus" && mkdir -p "$work/corpus"
  cp tests/fuzz/corpus/* "$work/corpus/"
  echo "fuzzing ${target#*:} for ${seconds} s ($(ls "$work/corpus" | wc -l) seeds)"
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    "$build/tests/fuzz/$name" \
      -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 -seed="${FUZZ_SEED:-0}" \
      -artifact_prefix="$build/fuzz-artifacts/" \
      "$work/corpus"
done
