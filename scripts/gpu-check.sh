#!/usr/bin/env bash
# The whole GPU-host check in one call (see README): build with the bundled
# dependencies, run the CI tests and the GPU tests, then the benchmarks.
# Logs go to $OUT (the device tool's output folder) or build-gpu/logs.
#   scripts/gpu-check.sh [--no-bench] [--no-ci] [--no-gpu-tests]
# (the device tool runs one command for at most 10 minutes: split the check
# with these when the whole does not fit)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
out=${OUT:-build-gpu/logs}
mkdir -p "$out"
status=0
bench=1 ci=1 gputests=1
for arg in "$@"; do
  case "$arg" in
    --no-bench) bench=0 ;;
    --no-ci) ci=0 ;;
    --no-gpu-tests) gputests=0 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done
{
  echo "== $(date -u +%FT%TZ) $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  nproc; grep -m1 'model name' /proc/cpuinfo
} 2>&1 | tee "$out/machine.txt"

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/configure.log" 2>&1 &&
  cmake --build build-gpu -j "$JOBS" >"$out/build.log" 2>&1 || { echo "BUILD FAILED"; tail -n 40 "$out/configure.log" "$out/build.log"; exit 1; }
echo "build ok"

if [ $ci = 1 ]; then
  ctest --test-dir build-gpu -LE gpu --output-on-failure -j "$JOBS" >"$out/ctest-ci.log" 2>&1 || status=1
  tail -3 "$out/ctest-ci.log"
fi
if [ $gputests = 0 ]; then
  :
elif ctest --test-dir build-gpu -N -L gpu | grep -q 'Total Tests: [1-9]'; then
  # Several at once: each records and replays its own program (no timings are asserted).
  ctest --test-dir build-gpu -L gpu --output-on-failure -j 4 >"$out/ctest-gpu.log" 2>&1 || status=1
  tail -3 "$out/ctest-gpu.log"
else
  echo "no GPU tests registered yet"
fi

if [ $bench = 1 ]; then
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
  # Replay: restore GB/s of a 4 GiB working set against pinned H2D, small launches a second.
  timeout 300 python3 bench/replay_throughput.py --capture-bench build-gpu/bench/kcap_bench_capture \
    --launch-bench build-gpu/bench/kcap_bench_launch_overhead --kcap build-gpu/tools/kcap --dir /tmp \
    >"$out/bench-replay.txt" 2>&1 || status=1
  tail -12 "$out/bench-replay.txt"
fi
exit $status
