#!/bin/bash
# Device-call helper (untracked): build, then the selected GPU tests.
start=$(date +%s)
timeout 200 scripts/gpu-check.sh --no-bench --no-gpu-tests > $OUT/build.log 2>&1; echo "build rc=$?" 
tail -5 $OUT/build.log
elapsed=$(( $(date +%s) - start ))
left=$(( ${LIMIT:-560} - elapsed ))
timeout $left ctest --test-dir build-gpu -L gpu -E "${EXCLUDE:-jax}" ${ONLY:+-R "$ONLY"} --output-on-failure -j ${JOBS:-8} > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"
grep -E "tests passed|Failed|Not Run|Passed|\*\*\*|SKIP" $OUT/ctest-gpu.log | tail -60
(cd build-gpu/tests/gpu && find logs -type f -size -1500k ! -name "*.kcap" | tar czf $OUT/logs.tgz -T -) 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
