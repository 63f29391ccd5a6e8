#!/usr/bin/env bash
# The test command (README, and all that CI runs):
#   1. installs missing build dependencies,
#   2. checks the code style (.clang-format) of every C++ and CUDA source,
#   3. builds everything optimised (Release), runs clang-tidy's naming and
#      bug-prone checks over the host sources (scripts/tidy.sh) and
#      every CI test (ctest -LE gpu),
#   4. rebuilds the host code with AddressSanitizer + UBSan and runs the tests again,
#   5. runs the format library's tests of its threads (the lock-free append
#      path, the merger, the ring, the pools) under ThreadSanitizer,
#   6. fuzzes the trace reader and replay's model of a trace, each for a
#      bounded time (FUZZ_SECONDS, default 60), from a fixed seed (FUZZ_SEED,
#      default 1) so that a failure reproduces.
# GPU tests (ctest label gpu) are not run here: see scripts/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
source scripts/env.sh

echo "== code style (.clang-format)"
git ls-files -z '*.cpp' '*.h' '*.cu' | xargs -0 clang-format --dry-run --Werror

echo "== build (Release)"
# Tests on, whatever an earlier scripts/setup.sh (tests off) left in the cache.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKCAP_BUILD_TESTS=ON >/dev/null
cmake --build build -j "$JOBS"
echo "== clang-tidy (.clang-tidy)"
scripts/tidy.sh build
echo "== tests"
ctest --test-dir build -LE gpu --no-tests=error --output-on-failure -j "$JOBS"

echo "== tests under AddressSanitizer + UBSan"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKCAP_SANITIZE=ON -DKCAP_BUILD_TESTS=ON >/dev/null
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -LE gpu --no-tests=error --output-on-failure -j "$JOBS"

# The format library's own threads only: the shim's launch path orders its
# threads with asymmetric fences (membarrier, interpose/core/thread_work.h),
# which ThreadSanitizer does not model. The reader's single-threaded
# truncation and corruption sweeps are left to the runs above.
echo "== the format library's threads under ThreadSanitizer"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCAP_TSAN=ON -DKCAP_BUILD_KERNELS=OFF \
  -DKCAP_BUILD_TESTS=ON >/dev/null
cmake --build build-tsan -j "$JOBS" --target kcap_format_tests
# Without address randomization where the system allows it: GCC 12's TSan
# runtime stops ("unexpected memory mapping") on kernels that randomize
# mappings over more bits than it expects.
norandom=()
if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "${norandom[@]}" build-tsan/tests/unit/kcap_format_tests \
  --gtest_filter='-Truncation.*:Corruption.*:HostileReader.*:FakeHeaders/*:SampleTrace.*'

echo "== fuzzing the trace reader and replay's model of a trace, ${FUZZ_SECONDS:-60} s each"
FUZZ_SEED="${FUZZ_SEED:-1}" scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
echo "== all tests passed"
