#!/usr/bin/env bash
# The main job (README, command 1): installs missing dependencies, builds kcap,
# then shows it working on this machine.
#   With a GPU:    records the bundled example program and replays it.
#   Without a GPU: says so, and summarises the bundled example trace.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
source scripts/env.sh

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKCAP_BUILD_TESTS=OFF >/dev/null
cmake --build build -j "$JOBS"
kcap=build/tools/kcap
echo

example=examples/vector_pipeline.kcap
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU found: $(nvidia-smi -L | head -n 1)"
  echo "\$ kcap record --force -o build/example.kcap -- build/examples/kcap_example"
  $kcap record --force -o build/example.kcap -- build/examples/kcap_example
  example=build/example.kcap
  echo
  echo "\$ kcap replay $example"
  # Every launch again on this GPU, from its recorded memory, compared byte
  # for byte with what the program produced: exit 0 when all reproduce.
  $kcap replay "$example"
  exit $?
else
  echo "No GPU on this machine (nvidia-smi finds none): kcap cannot record or replay here."
  echo "Showing what kcap reads instead: the bundled example trace, recorded on an H200"
  echo "from examples/vector_pipeline.cu (see examples/README.md)."
fi
echo
echo "\$ kcap info $example"
$kcap info "$example"
echo
echo "\$ kcap check $example"
$kcap check "$example"
