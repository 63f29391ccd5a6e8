#!/usr/bin/env bash
# clang-tidy over every host source (format/, interpose/, replay/, tools/,
# tests/ but the fuzz target, which a separate clang build compiles) with the
# repository's .clang-tidy: the naming convention and a few
# bug-prone checks, every finding an error. Needs a configured and built tree
# (compile_commands.json and the generated Cap'n Proto headers).
#   scripts/tidy.sh [BUILD_DIR]        default build/
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/compile_commands.json" ] || { echo "tidy: no $build/compile_commands.json (configure and build first)" >&2; exit 2; }
jobs=${JOBS:-$(nproc)}
root=$(pwd)
mapfile -t files < <(git ls-files 'format/*.cpp' 'interpose/*.cpp' 'replay/*.cpp' 'tools/*.cpp' 'tests/*.cpp' | grep -v '^tests/fuzz/' | sed "s|^|$root/|")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# GCC-only warning flags in the compile commands mean nothing to clang.
if ! run-clang-tidy -p "$build" -j "$jobs" -quiet -extra-arg=-Wno-unknown-warning-option -extra-arg=-Wno-ignored-optimization-argument \
    -header-filter="^$root/(format|interpose|replay|tools|tests)/" "${files[@]}" >"$log" 2>&1; then
  sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E "(error|warning): " | sort -u >&2 || cat "$log" >&2
  echo "tidy: clang-tidy found the problems above (.clang-tidy)" >&2
  exit 1
fi
echo "tidy: ${#files[@]} sources clean"
