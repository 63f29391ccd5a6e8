#!/usr/bin/env bash
# The whole GPU-host check in one call (see README): build with the bundled
# dependencies, run the CI tests and the GPU tests, then the benchmarks.
# Logs go to $OUT (the device tool's output folder) or build-gpu/logs.
#   scripts/gpu-check.sh [--no-bench]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
out=${OUT:-build-gpu/logs}
mkdir -p "$out"
status=0
{
  echo "== $(date -u +%FT%TZ) $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  nproc; grep -m1 'model name' /proc/cpuinfo
} 2>&1 | tee "$out/machine.txt"

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/configure.log" 2>&1 &&
  cmake --build build-gpu -j "$JOBS" >"$out/build.log" 2>&1 || { echo "BUILD FAILED"; tail -n 40 "$out/configure.log" "$out/build.log"; exit 1; }
echo "build ok"

ctest --test-dir build-gpu -LE gpu --output-on-failure -j "$JOBS" >"$out/ctest-ci.log" 2>&1 || status=1
tail -3 "$out/ctest-ci.log"
if ctest --test-dir build-gpu -N -L gpu | grep -q 'Total Tests: [1-9]'; then
  ctest --test-dir build-gpu -L gpu --output-on-failure >"$out/ctest-gpu.log" 2>&1 || status=1
  tail -3 "$out/ctest-gpu.log"
else
  echo "no GPU tests registered yet"
fi

if [ "${1:-}" != "--no-bench" ]; then
  build-gpu/bench/kcap_bench_container --dir /tmp --threads 1,0,8 >"$out/bench-container.txt" 2>&1 || status=1
  tail -25 "$out/bench-container.txt"
  # Launch overhead of the shim (pass-through, stats, metadata) and full-capture
  # throughput against pinned D2H (docs/benchmarks.md); each bounded in time.
  timeout 360 python3 bench/launch_overhead.py --bench build-gpu/bench/kcap_bench_launch_overhead \
    --shim build-gpu/interpose/libkcap_interpose.so --kcap build-gpu/tools/kcap \
    >"$out/bench-launch-overhead.txt" 2>&1 || status=1
  tail -12 "$out/bench-launch-overhead.txt"
  timeout 360 python3 bench/capture_throughput.py --bench build-gpu/bench/kcap_bench_capture \
    --kcap build-gpu/tools/kcap --dir /tmp >"$out/bench-capture.txt" 2>&1 || status=1
  tail -22 "$out/bench-capture.txt"
fi
exit $status
