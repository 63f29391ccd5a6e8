#!/usr/bin/env bash
# The main job (README, command 1): installs missing dependencies, builds kcap,
# then shows it working on this machine.
#   With a GPU:    records the bundled example program and replays it.
#   Without a GPU: says so, and summarises the bundled example trace.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
source scripts/env.sh

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCAP_BUILD_TESTS=OFF >/dev/null
cmake --build build -j "$JOBS"
kcap=build/tools/kcap
echo

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU found: $(nvidia-smi -L | head -n 1)"
  if $kcap record --help >/dev/null 2>&1; then
    $kcap record -o build/example.kcap -- build/examples/kcap_example
    $kcap replay build/example.kcap --all
    exit $?
  fi
  echo "kcap record and kcap replay are not built yet in this version (capture and replay"
  echo "are the next milestones); showing the bundled example trace instead."
else
  echo "No GPU on this machine (nvidia-smi finds none): kcap cannot record or replay here."
  echo "Showing what kcap reads instead: the bundled example trace."
fi
echo
echo "\$ kcap info examples/sample.kcap"
$kcap info examples/sample.kcap
echo
echo "\$ kcap check examples/sample.kcap"
$kcap check examples/sample.kcap
