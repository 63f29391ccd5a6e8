#!/usr/bin/env python3
"""kcap bisect on a checkpoint trace, on the GPU (gpu_checkpoint_bisect): the
driver-API program recorded with `kcap record --mode checkpoint
--checkpoint-every 2launches`, then

  1. `kcap bisect TRACE`: every interval reproduces, exit 0;
  2. `kcap bisect TRACE --against override:axpy=axpy_changed.fatbin`
     (y[100]'s lowest bit flipped): exit 3, the first divergent launch is the
     first axpy launch, and its differing range is y's;
  3. `--against override:axpy=axpy.fatbin` (the same code): exit 0.

    checkpoint_bisect.py --kcap KCAP --kernels-dir DIR --log-dir DIR -- PROGRAM
"""
import argparse
import json
import os
import sys
from pathlib import Path

from script_support import run


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kcap", required=True)
    p.add_argument("--kernels-dir", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("program", nargs="+")
    args = p.parse_args()
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    failures = []
    env = dict(os.environ, KCAP_TEST_REAL_DRIVER="1", KCAP_KERNELS_DIR=args.kernels_dir)
    trace = logs / "direct_launch.kcap"
    trace.unlink(missing_ok=True)
    recorded = run([args.kcap, "record", "-q", "--mode", "checkpoint", "--checkpoint-every", "2launches",
                    "-o", str(trace), "--"] + args.program, logs / "record.txt", env=env)
    if recorded.returncode != 0 or not trace.exists():
        print(f"FAILED: recording exited {recorded.returncode}; logs in {logs}")
        return 1

    same = run([args.kcap, "bisect", str(trace)], logs / "against-recorded.txt")
    if same.returncode != 0 or "No launch diverges" not in same.stdout:
        failures.append(f"against the recording: exit {same.returncode}:\n{same.stdout[-2000:]}")

    changed = run([args.kcap, "bisect", str(trace), "--json", "--against",
                   f"override:axpy={args.kernels_dir}/axpy_changed.fatbin"], logs / "override.json")
    first = (json.loads(changed.stdout or "{}") or {}).get("first") or {}
    if changed.returncode != 3 or first.get("kernel") != "axpy" or first.get("launchIndex") != 0:
        failures.append(f"override: exit {changed.returncode}, first {first}, expected launch 0 (axpy)")
    elif not any("1 of" in r and "the first at bytes 0.." in r for r in first.get("ranges", [])):
        failures.append(f"override: the differing range is not named: {first.get('ranges')}")

    unchanged = run([args.kcap, "bisect", str(trace), "--against", f"override:axpy={args.kernels_dir}/axpy.fatbin"],
                    logs / "same-build.txt")
    if unchanged.returncode != 0:
        failures.append(f"the same build: exit {unchanged.returncode}:\n{unchanged.stdout[-2000:]}")
    for f in failures:
        print("FAILED:", f)
    print("OK" if not failures else f"{len(failures)} check(s) failed; logs in {logs}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
