#!/usr/bin/env python3
"""Replay throughput: how fast `kcap replay` restores a large
working set, against pinned host-to-device bandwidth measured in the same run
(target: at least 70% of it), and how many small launches it replays per
second.

    replay_throughput.py --capture-bench build-gpu/bench/kcap_bench_capture \\
        --launch-bench build-gpu/bench/kcap_bench_launch_overhead --kcap build-gpu/tools/kcap \\
        [--mib 4096] [--small 2000] [--reps 3] [--dir /tmp]

1. Records one kcap_read_sum launch over a --mib MiB buffer of incompressible
   data (kcap_bench_capture, `kcap record --mode pre`), then replays it --reps
   times; restore GB/s = restoredBytes / restoreNs from `kcap replay --json`
   (reading and decompressing the trace, and copying to the GPU; the time
   spent before it placing the device memory and loading the code, placeNs,
   is printed beside, and so is the share of the restore spent waiting for
   copies to the GPU, restoreWaitNs: near 100% the bus binds, near 0% reading
   the trace does). Pinned H2D GB/s comes from kcap_bench_capture's own measurement
   (cuMemcpyHtoD of 1 GiB from cuMemAllocHost memory, best of 5) in this run.
2. Records --small launches of an empty kernel in full mode
   (kcap_bench_launch_overhead, `--max-launches`), replays them all
   (`kcap replay --all`), and reports launches per second (wall time of the
   whole replay, process start included) and the median per-launch restore
   time.
Every replay must report every launch REPRODUCED (exit status 1 otherwise).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path


def clean_env():
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("KCAP_")}


def run(command, timeout=600):
    done = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        sys.exit(f"exit status {done.returncode}: {' '.join(command)}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--capture-bench", required=True)
    p.add_argument("--launch-bench", required=True)
    p.add_argument("--kcap", required=True)
    p.add_argument("--mib", type=int, default=4096)
    p.add_argument("--small", type=int, default=2000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--dir", default="/tmp")
    args = p.parse_args()
    trace = Path(args.dir) / "kcap-replay-bench.kcap"
    failures = []

    # 1. restore
    h2d = run([args.capture_bench, "--mib", "1024", "--rounds", "1", "--d2h-mib", "1024"])
    h2d_gbps = float(re.search(r"^h2d whole gbps ([\d.]+)$", h2d.stdout, re.M).group(1))
    trace.unlink(missing_ok=True)
    run([args.kcap, "record", "-q", "--mode", "pre", "--include", "^kcap_read_sum$", "--max-launches", "1",
         "-o", str(trace), "--", args.capture_bench, "--mib", str(args.mib), "--rounds", "1", "--d2h-mib", "0"])
    size = trace.stat().st_size
    rates, walls, places, waits = [], [], [], []
    for _ in range(args.reps):
        start = time.monotonic()
        done = subprocess.run([args.kcap, "replay", str(trace), "--json"], env=clean_env(), capture_output=True,
                              text=True, timeout=600)
        walls.append(time.monotonic() - start)
        report = json.loads(done.stdout)
        launch = report["launches"][0]
        if launch["verdict"] not in ("REPRODUCED", "RAN (not verified)"):
            failures.append(f"restore replay: {launch['verdict']} {launch['detail']}")
        rates.append(launch["restoredBytes"] / launch["restoreNs"])
        places.append(launch.get("placeNs", 0) / 1e9)
        waits.append(launch.get("restoreWaitNs", 0) / launch["restoreNs"])
        restored = launch["restoredBytes"]
    trace.unlink(missing_ok=True)
    restore = statistics.median(rates)
    print(f"restore: {restored / 2**30:.2f} GiB working set (trace {size / 2**30:.2f} GiB, incompressible)")
    print(f"  restore GB/s (median of {args.reps}): {restore:.2f}   runs: {', '.join(f'{r:.2f}' for r in rates)}")
    print(f"  pinned H2D GB/s (same run):      {h2d_gbps:.2f}")
    print(f"  restore / H2D: {100 * restore / h2d_gbps:.0f}%  (target >= 70%)")
    print(f"  placing memory and loading code before it, s: {', '.join(f'{p:.3f}' for p in places)}")
    print(f"  share of the restore spent waiting for copies to the GPU: {', '.join(f'{100 * w:.0f}%' for w in waits)}")
    print(f"  whole replay wall s: {', '.join(f'{w:.2f}' for w in walls)}")

    # 2. small launches
    trace.unlink(missing_ok=True)
    run([args.kcap, "record", "-q", "--mode", "full", "--max-launches", str(args.small), "-o", str(trace), "--",
         args.launch_bench, "--launches", str(args.small), "--reps", "1", "--warmup", "0"])
    start = time.monotonic()
    done = subprocess.run([args.kcap, "replay", str(trace), "--json"], env=clean_env(), capture_output=True,
                          text=True, timeout=600)
    wall = time.monotonic() - start
    report = json.loads(done.stdout)
    launches = report["launches"]
    bad = [l for l in launches if l["verdict"] != "REPRODUCED"]
    if bad or done.returncode != 0:
        failures.append(f"small launches: exit {done.returncode}, {len(bad)} not reproduced")
    trace.unlink(missing_ok=True)
    per_restore = statistics.median(l["restoreNs"] for l in launches) / 1e3
    print(f"small launches: {len(launches)} replayed in {wall:.2f} s: {len(launches) / wall:.0f} launches/s "
          f"(median restore {per_restore:.1f} us a launch)")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
