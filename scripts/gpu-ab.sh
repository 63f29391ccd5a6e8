#!/usr/bin/env bash
# An A/B of the shim's launch overhead on the GPU host in one device call:
# another revision's shim (A) against this tree's (B), in-process, paired
# by round (bench/launch_overhead.py, "metadata in-process"), optionally
# followed by the GPU tests of this tree.
#
# Two steps, because the GPU host gets a copy of the working tree without
# the git history:
#   scripts/gpu-ab.sh prepare REV     here: REV's sources into .ab-base/
#                                     (ignored by git; give the device call
#                                     carry [".gpu-deps", ".ab-base"])
#   scripts/gpu-ab.sh run [--seconds S] [--env KEY=VALUE,...] [--pin-cpu C] [--gpu-tests]
#                         [--threads N] [--record-env KEY=VALUE,...] [--base-only]
#                                     on the GPU host: the GPU tests first if
#                                     asked (scripts/gpu-check.sh --no-bench),
#                                     build both, A/B for at most S seconds
#                                     (default 240; launching thread on CPU C,
#                                     default 2; with N launching threads, on
#                                     CPUs C to C+N-1, or unpinned with C -1);
#                                     --record-env sets variables in A and B
#                                     (e.g. KCAP_MODE=checkpoint)
# Without .ab-base, `run --env` compares this tree against itself with the
# variables set in B (an A/B of an option). `run --base-only --env ...`
# does the same with .ab-base's build on both sides and without checking
# the traces: an option of a scratch tree (a probe that records less) in
# one call. Logs go to $OUT (when set:
# a folder whose files are kept) or build-gpu/logs. The A/B's own builds do not
# stop at warnings (the host's compiler may warn where the development one
# does not); the count of warnings is printed. With --gpu-tests, this
# tree is built by the GPU check, with warnings as errors.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = prepare ]; then
  rev=${2:?usage: scripts/gpu-ab.sh prepare REV}
  commit=$(git rev-parse --verify "$rev^{commit}") || exit 2
  rm -rf .ab-base && mkdir .ab-base && git archive "$commit" | tar -x -C .ab-base || exit 1
  echo "$commit" >.ab-base/REVISION
  echo "A = $(git log --oneline -1 "$commit") in .ab-base; carry [\".gpu-deps\", \".ab-base\"]"
  exit 0
fi
[ "${1:-}" = run ] || { echo "usage: scripts/gpu-ab.sh prepare REV | run [--seconds S] [--env K=V,...] [--pin-cpu C] [--gpu-tests] [--threads N] [--record-env K=V,...] [--base-only]" >&2; exit 2; }
shift
seconds=240 env="" gputests=0 pin=2 threads=1 recordenv="" baseonly=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift ;;
    --threads) threads=${2:?--threads needs a number}; shift ;;
    --record-env) recordenv=${2:?--record-env needs KEY=VALUE}; shift ;;
    --env) env=${2:?--env needs KEY=VALUE}; shift ;;
    --pin-cpu) pin=${2:?--pin-cpu needs a CPU number}; shift ;;
    --gpu-tests) gputests=1 ;;
    --base-only) baseonly=1 ;;
    *) echo "gpu-ab.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ $baseonly = 1 ] && { [ ! -d .ab-base ] || [ -z "$env" ]; }; then
  echo "gpu-ab.sh: --base-only needs .ab-base (scripts/gpu-ab.sh prepare REV) and --env" >&2
  exit 2
fi
source scripts/env.sh
out=${OUT:-build-gpu/logs}
mkdir -p "$out"
start=$(date +%s)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  grep -m1 'model name' /proc/cpuinfo; } 2>&1 | tee "$out/machine.txt"

build() {  # build(SOURCE_DIR, LOG, TARGETS...)
  local dir=$1 log=$2; shift 2
  (cd "$dir" && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCAP_WERROR=OFF \
     -DKCAP_BUILD_TESTS=OFF && cmake --build build-gpu -j "$JOBS" "$@") >"$log" 2>&1 ||
    { echo "BUILD FAILED in $dir"; tail -40 "$log"; exit 1; }
  echo "built $dir ($(grep -c 'warning:' "$log") warnings, $(( $(date +%s) - start )) s)"
}
if [ $gputests = 1 ]; then
  # First, so that a short A/B cannot crowd them out: the check builds
  # everything (warnings as errors) and runs the GPU tests.
  scripts/gpu-check.sh --no-bench || { echo "GPU CHECK FAILED"; exit 1; }
  echo "GPU tests done ($(( $(date +%s) - start )) s)"
  start=$(date +%s)  # --seconds counts the A/B alone
elif [ $baseonly = 1 ]; then
  build . "$out/build.log" --target kcap_bench_launch_overhead  # both shims are .ab-base's, no trace checked
else
  build . "$out/build.log" --target kcap_interpose kcap kcap_bench_launch_overhead
fi
compare=()
check=(--kcap build-gpu/tools/kcap)
if [ -d .ab-base ]; then
  base=$(cat .ab-base/REVISION 2>/dev/null || echo '.ab-base')
  ln -sfn ../.gpu-deps .ab-base/.gpu-deps
  build .ab-base "$out/build-base.log" --target kcap_interpose
  shim=.ab-base/build-gpu/interpose/libkcap_interpose.so
  if [ $baseonly = 1 ]; then
    echo "A and B: $base, B with $env; traces not checked"
    check=()
  else
    echo "A: $base; B: this tree"
    compare=(--compare-shim build-gpu/interpose/libkcap_interpose.so)
  fi
else
  [ -n "$env" ] || { echo "gpu-ab.sh: no .ab-base (scripts/gpu-ab.sh prepare REV) and no --env: nothing to compare" >&2; exit 2; }
  shim=build-gpu/interpose/libkcap_interpose.so
fi
[ -n "$env" ] && compare+=(--compare-env "$env")
[ -n "$recordenv" ] && compare+=(--env "$recordenv")
# Several threads: fewer pairs a process (each block is 16 threads' launches).
interleave=6
[ "$threads" -gt 1 ] && interleave=4
python3 bench/launch_overhead.py --bench build-gpu/bench/kcap_bench_launch_overhead --shim "$shim" "${compare[@]}" \
  "${check[@]}" --threads "$threads" --pin-cpu "$pin" --interleave "$interleave" --rounds 100 \
  --configs "metadata in-process,metadata B in-process" --deadline "$seconds" >"$out/ab.txt" 2>&1
status=$?
sed -n '/^| threads/,$p' "$out/ab.txt"
echo "A/B done ($(( $(date +%s) - start )) s)"
exit $status
