#!/usr/bin/env bash
# The whole GPU-host check in one device call (see tests/gpu/CMakeLists.txt):
# build with the bundled dependencies, run the GPU tests, then the benchmarks
# of docs/benchmarks.md. Logs go to $OUT (when set: a folder whose files are kept) or
# build-gpu/logs; keep what the check writes there to a few files (the
# caller may keep only a few).
#   scripts/gpu-check.sh [--no-bench] [--no-gpu-tests] [--no-overhead] [--ci] [--container] [--buffer SIZE]
#                        [--checkpoint-bench] [--thread-overhead] [--flight-overhead] [--gpu-tests REGEX]
#                        [--skip-gpu-tests REGEX] [--targets "TARGET..."]
# --ci also runs the CI tests (label gpu excluded); --no-overhead leaves out
# the launch-overhead benchmark; --container the container
# benchmark; --buffer SIZE also runs the capture benchmark with `kcap record
# --flush batch --buffer SIZE`, 3 rounds (the file written behind the program);
# --checkpoint-bench the checkpoint-mode benchmarks (change hashing against
# the device's read bandwidth, the slice program in every mode, re-execution's
# launch rate against the program's, checkpoint mode's launch overhead
# against metadata mode's, with the writer at idle priority and on two CPUs,
# at 16 threads in-process against libcuda's own entry point,
# the flight recorder's at 16 threads), also with
# --no-bench (more than one call's ten minutes: --no-overhead leaves its
# launch-overhead rows out); --thread-overhead only checkpoint mode's
# 16-thread row in one process and its references (at most 5 minutes after
# the build), also with --no-bench; --flight-overhead the flight
# recorder's 16-thread figure against checkpoint mode alone, in one process
# (at most 5 minutes after the build), also with --no-bench;
# --gpu-tests REGEX runs only the GPU tests it matches, --skip-gpu-tests
# REGEX all but those; --targets builds only the targets named (a few
# tests' programs: the tests that need others then fail). On an H100 or
# H200 host the build takes about 2 minutes, the GPU tests over 10, the
# benchmarks about 4: more than one call's 10 minutes. Run the tests in
# three calls, each after the first on the machine the one before left
# warm (its build is then incremental):
#   scripts/gpu-check.sh --no-bench --gpu-tests 'checkpoint|jax'
#   scripts/gpu-check.sh --no-bench --gpu-tests 'flight|die_in_launch|extract'
#   scripts/gpu-check.sh --no-bench --skip-gpu-tests 'checkpoint|jax|flight|die_in_launch|extract'
# and the benchmarks (--no-gpu-tests) in another.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
out=${OUT:-build-gpu/logs}
mkdir -p "$out"
status=0
bench=1 ci=0 gputests=1 overhead=1 container=0 buffer="" checkpointbench=0 threadoverhead=0 flightoverhead=0
only="" skip="" targets=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bench) bench=0 ;;
    --no-gpu-tests) gputests=0 ;;
    --no-overhead) overhead=0 ;;
    --ci) ci=1 ;;
    --container) container=1 ;;
    --buffer) buffer=${2:?--buffer needs a size}; shift ;;
    --checkpoint-bench) checkpointbench=1 ;;
    --thread-overhead) threadoverhead=1 ;;
    --flight-overhead) flightoverhead=1 ;;
    --gpu-tests) only=${2:?--gpu-tests needs a regex}; shift ;;
    --skip-gpu-tests) skip=${2:?--skip-gpu-tests needs a regex}; shift ;;
    --targets) targets=${2:?--targets needs build targets}; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
start=$(date +%s)
elapsed() { echo "  ($(( $(date +%s) - start )) s)"; }
{
  echo "== $(date -u +%FT%TZ) $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  nproc; grep -m1 'model name' /proc/cpuinfo
} 2>&1 | tee "$out/machine.txt"

# The options set, not left to the cache: scripts/gpu-ab.sh builds the same
# folder without tests and with warnings allowed.
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCAP_BUILD_TESTS=ON -DKCAP_WERROR=ON >"$out/build.log" 2>&1 &&
  cmake --build build-gpu -j "$JOBS" ${targets:+--target $targets} >>"$out/build.log" 2>&1 || { echo "BUILD FAILED"; tail -n 40 "$out/build.log"; exit 1; }
echo "build ok$(elapsed)"

if [ $ci = 1 ]; then
  ctest --test-dir build-gpu -LE gpu --no-tests=error --output-on-failure -j "$JOBS" >"$out/ctest-ci.log" 2>&1 || status=1
  tail -3 "$out/ctest-ci.log"
fi
if [ $gputests = 1 ]; then
  # Several at once: each records and replays its own program; the one test
  # that compares kernel times runs alone (RUN_SERIAL).
  ctest --test-dir build-gpu -L gpu ${only:+-R "$only"} ${skip:+-E "$skip"} --no-tests=error --output-on-failure -j 8 \
    >"$out/ctest-gpu.log" 2>&1 || status=1
  grep -E '\*\*\*|tests passed' "$out/ctest-gpu.log"
  echo "GPU tests done$(elapsed)"
fi

# 16 threads, checkpoint mode (the target's), in one process: blocks through
# the shim against blocks through libcuda's own entry point (free of the
# spread between processes), between checkpoints (--env: none due after the
# first, in the warm-up; each process line says what its checkpoints held).
# In the same rounds: the A/A process (the method's own spread), the shim
# passing calls through (the hook's share), and 200 ns of a thread's own
# work without the shim (what the driver's contention makes of that much).
threads_in_process() {
  echo "=== 16 threads in-process: checkpoint mode between checkpoints, A/A, the shim passing calls through, and 200 ns of a thread's own work"
  timeout 300 python3 bench/launch_overhead.py --deadline 290 --bench build-gpu/bench/kcap_bench_launch_overhead \
    --shim build-gpu/interpose/libkcap_interpose.so --kcap build-gpu/tools/kcap --threads 16 --rounds 12 \
    --interleave 4 --configs "metadata in-process,metadata A/A in-process,pass-through in-process,host work in-process" \
    --host-work 200 \
    --env KCAP_MODE=checkpoint,KCAP_CHECKPOINT_EVERY=60m
}
if [ $threadoverhead = 1 ]; then
  sync
  threads_in_process >"$out/bench-threads.txt" 2>&1 || status=1
  grep -E '^\| |^=== |^metadata B|FAILED|PROBLEM' "$out/bench-threads.txt" | head -30
  echo "16-thread overhead done$(elapsed)"
fi

# The flight recorder (--trigger error, none firing) against checkpoint mode
# alone, 16 threads in one process, between checkpoints: what its ring's
# append adds to checkpoint mode's. No --kcap: the flight recorder writes
# no trace to check.
if [ $flightoverhead = 1 ]; then
  sync
  { echo "=== 16 threads in-process: the flight recorder (metadata B: checkpoint mode, --trigger error) against checkpoint mode"
    timeout 300 python3 bench/launch_overhead.py --deadline 290 --bench build-gpu/bench/kcap_bench_launch_overhead \
      --shim build-gpu/interpose/libkcap_interpose.so --threads 16 --rounds 12 --interleave 4 \
      --configs "metadata in-process,metadata B in-process" \
      --env KCAP_MODE=checkpoint,KCAP_CHECKPOINT_EVERY=60m --compare-env KCAP_TRIGGER=error
  } >"$out/bench-flight.txt" 2>&1 || status=1
  grep -E '^\| |^=== |FAILED|PROBLEM' "$out/bench-flight.txt" | head -30
  echo "flight recorder overhead done$(elapsed)"
fi

if [ $checkpointbench = 1 ]; then
  sync
  { echo "=== change hashing against a read-only kernel, 32 GiB"
    timeout 60 build-gpu/bench/kcap_bench_checkpoint_hash 32 5
    echo "=== the slice program"
    timeout 400 python3 bench/checkpoint_capture.py --kcap build-gpu/tools/kcap --gib 1,32 --replay \
      --whole tests/gpu/python/gpt2_generate.py tests/gpu/python/jax_default.py
    echo "=== re-execution against the program's launch rate"
    timeout 120 python3 bench/reexecution_rate.py --kcap build-gpu/tools/kcap \
      --bench build-gpu/bench/kcap_bench_launch_overhead --timeout 50
    if [ $overhead = 1 ]; then
    echo "=== launch overhead, checkpoint mode (metadata B) against metadata mode"
    timeout 100 python3 bench/launch_overhead.py --deadline 90 --bench build-gpu/bench/kcap_bench_launch_overhead \
      --shim build-gpu/interpose/libkcap_interpose.so --kcap build-gpu/tools/kcap --threads 1 --rounds 5 \
      --compare-env KCAP_MODE=checkpoint
    echo "=== 16 threads"
    timeout 100 python3 bench/launch_overhead.py --deadline 90 --bench build-gpu/bench/kcap_bench_launch_overhead \
      --shim build-gpu/interpose/libkcap_interpose.so --kcap build-gpu/tools/kcap --threads 16 --rounds 3 \
      --compare-env KCAP_MODE=checkpoint
    threads_in_process
    echo "=== 16 threads, checkpoint mode with the writer at idle priority (metadata B) against metadata mode"
    timeout 100 python3 bench/launch_overhead.py --deadline 90 --bench build-gpu/bench/kcap_bench_launch_overhead \
      --shim build-gpu/interpose/libkcap_interpose.so --kcap build-gpu/tools/kcap --threads 16 --rounds 3 \
      --compare-env KCAP_MODE=checkpoint,KCAP_WRITER_PRIORITY=idle
    # Two CPUs: the writer's threads take about two cores' time at this rate.
    echo "=== 16 threads, checkpoint mode with the writer on the last two CPUs (metadata B) against metadata mode"
    timeout 100 python3 bench/launch_overhead.py --deadline 90 --bench build-gpu/bench/kcap_bench_launch_overhead \
      --shim build-gpu/interpose/libkcap_interpose.so --kcap build-gpu/tools/kcap --threads 16 --rounds 3 \
      --compare-env KCAP_MODE=checkpoint,KCAP_WRITER_CPUS=$(( $(nproc) - 2 ))-$(( $(nproc) - 1 ))
    # The flight recorder writes nothing without a fault: no trace to check (no --kcap).
    echo "=== 16 threads, the flight recorder (checkpoint mode, --trigger error; metadata B) against metadata mode"
    timeout 100 python3 bench/launch_overhead.py --deadline 90 --bench build-gpu/bench/kcap_bench_launch_overhead \
      --shim build-gpu/interpose/libkcap_interpose.so --threads 16 --rounds 3 \
      --compare-env KCAP_MODE=checkpoint,KCAP_TRIGGER=error
    fi; } >"$out/bench-checkpoint.txt" 2>&1 || status=1
  grep -E '^\| |^=== |FAILED|GB/s' "$out/bench-checkpoint.txt" | head -60
  echo "checkpoint benchmarks done$(elapsed)"
fi

if [ $bench = 1 ]; then
  sync  # the GPU tests' traces: their writeback would land in the first benchmark
  if [ $container = 1 ]; then
    build-gpu/bench/kcap_bench_container --dir /tmp --threads 1,0,8 >"$out/bench-container.txt" 2>&1 || status=1
    tail -25 "$out/bench-container.txt"
  fi
  # Launch overhead of the shim: one thread unpinned and pinned, 16 threads.
  overhead() {
    timeout 150 python3 bench/launch_overhead.py --deadline 140 --bench build-gpu/bench/kcap_bench_launch_overhead \
      --shim build-gpu/interpose/libkcap_interpose.so --kcap build-gpu/tools/kcap "$@"
  }
  if [ $overhead = 1 ]; then
    { overhead --threads 1 --rounds 7; echo "=== launching thread pinned"; overhead --threads 1 --rounds 5 --pin-cpu 2
      echo "=== 16 threads"; overhead --threads 16 --rounds 3
      echo "=== graph launches (cuGraphLaunch of a one-node graph)"; overhead --graph --threads 1 --rounds 5
    } >"$out/bench-launch-overhead.txt" 2>&1 || status=1
    grep -E '^\| (1|16) |^=== ' "$out/bench-launch-overhead.txt"
    echo "launch overhead done$(elapsed)"
  fi
  # Full capture against pinned D2H; the same with a larger buffer if asked.
  sync
  timeout 150 python3 bench/capture_throughput.py --bench build-gpu/bench/kcap_bench_capture \
    --kcap build-gpu/tools/kcap --dir /tmp --rounds 1 >"$out/bench-capture.txt" 2>&1 || status=1
  if [ -n "$buffer" ]; then
    sync
    { echo "=== kcap record --flush batch --buffer $buffer"
      timeout 150 python3 bench/capture_throughput.py --bench build-gpu/bench/kcap_bench_capture \
        --kcap build-gpu/tools/kcap --dir /tmp --rounds 3 --flush batch --buffer "$buffer"; } >>"$out/bench-capture.txt" 2>&1 || status=1
  fi
  grep -E '^\| 0x|^=== |round by round' "$out/bench-capture.txt"
  echo "capture done$(elapsed)"
  # Replay: restore GB/s of a 4 GiB working set against pinned H2D, small launches a second.
  sync
  timeout 120 python3 bench/replay_throughput.py --capture-bench build-gpu/bench/kcap_bench_capture \
    --launch-bench build-gpu/bench/kcap_bench_launch_overhead --kcap build-gpu/tools/kcap --dir /tmp \
    >"$out/bench-replay.txt" 2>&1 || status=1
  tail -9 "$out/bench-replay.txt"
  echo "replay done$(elapsed)"
fi
exit $status
