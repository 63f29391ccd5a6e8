#!/usr/bin/env python3
"""`kcap bisect --devices 0,1` on a host with two GPUs:

    two_devices.py --kcap KCAP --log-dir DIR -- PROGRAM [ARGS...]

Records PROGRAM with `kcap record`, then asserts that `kcap bisect TRACE
--devices 0,1 --json` replays every launch on both GPUs (examined == the
number of launches, no launch left not comparable), that the two sides ran
on two devices (each side's replay process names the PCI bus id of the
device its context was on: two ids, neither empty, ordinals 0 and 1) and,
the two GPUs being of one model, finds no divergence (first is null, exit
0); that the same with another build on side B (--changed KERNEL=IMAGE,
`--against override:KERNEL=IMAGE`) diverges (exit 3, a first launch), so
that the comparison is shown able to fail; and that `--devices 0,0` is a
usage error (exit 2).

With fewer than two GPUs it exits 77, which ctest reports as skipped (never
as passed).
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kcap", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("--changed", required=True, metavar="KERNEL=IMAGE",
                   help="a build of one of PROGRAM's kernels that computes something else")
    p.add_argument("program", nargs=argparse.REMAINDER)
    args = p.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)

    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
    if len(gpus) < 2:
        print(f"SKIPPED: {len(gpus)} GPU(s) here; --devices needs two")
        return 77
    print("\n".join(gpus))

    trace = log_dir / "trace.kcap"
    trace.unlink(missing_ok=True)
    recorded = subprocess.run([args.kcap, "record", "-q", "-o", str(trace), "--", *program],
                              capture_output=True, text=True, errors="replace", timeout=300)
    if recorded.returncode != 0:
        print(f"FAILED: kcap record exited {recorded.returncode}:\n{recorded.stdout}{recorded.stderr}")
        return 1
    info = json.loads(subprocess.run([args.kcap, "info", "--json", str(trace)], capture_output=True, text=True,
                                     check=True).stdout)
    launches = sum(int(k["launches"]) for k in info.get("kernels", []))

    failures = []
    done = subprocess.run([args.kcap, "bisect", str(trace), "--devices", "0,1", "--json"], capture_output=True,
                          text=True, errors="replace", timeout=600)
    (log_dir / "bisect.json").write_text(done.stdout)
    (log_dir / "bisect.stderr").write_text(done.stderr)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        print(f"FAILED: kcap bisect --devices 0,1 printed no JSON (exit {done.returncode}): {done.stderr[-500:]}")
        return 1
    print(f"bisect --devices 0,1: exit {done.returncode}, examined {report.get('examined')} of {launches}, "
          f"not comparable {report.get('notComparable')}, first {report.get('first')}, "
          f"sides {report.get('sideA')!r} / {report.get('sideB')!r}")
    if done.returncode != 0 or report.get("first") is not None:
        failures.append(f"two GPUs of one model diverged or failed: exit {done.returncode}, first {report.get('first')}")
    devices = report.get("devices") or {}
    a, b = devices.get("sideA") or {}, devices.get("sideB") or {}
    print(f"side A ran on {a}, side B on {b}")
    if a.get("ordinal") != 0 or b.get("ordinal") != 1 or not a.get("pciBusId") or \
            a.get("pciBusId") == b.get("pciBusId"):
        failures.append(f"the sides did not run on two devices: {devices}")
    if int(report.get("examined", -1)) != launches or int(report.get("notComparable", -1)) != 0:
        failures.append(f"examined {report.get('examined')} (not comparable {report.get('notComparable')}) of "
                        f"{launches} launches")
    changed = subprocess.run([args.kcap, "bisect", str(trace), "--devices", "0,1", "--against",
                              f"override:{args.changed}", "--json"],
                             capture_output=True, text=True, errors="replace", timeout=600)
    (log_dir / "bisect-changed.json").write_text(changed.stdout)
    try:
        first = json.loads(changed.stdout).get("first")
    except ValueError:
        first = None
    print(f"bisect --devices 0,1 with {args.changed} on side B: exit {changed.returncode}, first {first and first.get('launchIndex')}")
    if changed.returncode != 3 or not first:
        failures.append(f"another build on side B did not diverge: exit {changed.returncode}, first {first}")
    same = subprocess.run([args.kcap, "bisect", str(trace), "--devices", "0,0"], capture_output=True, text=True)
    if same.returncode != 2:
        failures.append(f"--devices 0,0 exited {same.returncode}, not 2 (usage)")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
