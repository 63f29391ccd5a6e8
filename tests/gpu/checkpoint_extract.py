#!/usr/bin/env python3
"""`kcap extract` on a checkpoint trace, on a real GPU (gpu_checkpoint_extract):

    checkpoint_extract.py --kcap KCAP --log-dir DIR -- PROGRAM [ARGS...]

Records PROGRAM (tests/gpu/python/torch_eager.py) with `kcap record --mode
checkpoint`, then for a cuBLAS launch (a kernel named like a GEMM) and the
last launch: `kcap extract --launch N` rebuilds the launch's memory by
re-execution, says the interval it was rebuilt in reproduced, and writes a
full-mode trace that `kcap check` accepts and whose replay (`kcap replay
OUT --json`) is REPRODUCED, bit-exact against the rebuilt post-state.
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

GEMM = re.compile(r"gemm|nvjet|xmma|cutlass|sm90")


def run(command, log_dir, label, timeout=600):
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout)
    (log_dir / f"{label}.txt").write_text(f"$ {' '.join(command)}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kcap", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    trace = logs / "trace.kcap"
    trace.unlink(missing_ok=True)
    failures = []
    recorded = run([args.kcap, "record", "-q", "--mode", "checkpoint", "-o", str(trace), "--", *command], logs, "record")
    if recorded.returncode != 0 or not trace.exists():
        print(f"FAILED: recording failed (exit {recorded.returncode}):\n{recorded.stderr[-2000:]}")
        return 1
    dump = run([args.kcap, "dump", str(trace), "--json"], logs, "dump")
    launches = []
    for line in dump.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if "launch" in event:
            launches.append((int(event["launch"]["launchIndex"]), event["launch"].get("kernelName", "")))
    gemm = next((i for i, name in launches if GEMM.search(name)), None)
    if gemm is None or not launches:
        print(f"FAILED: no GEMM launch among {len(launches)} recorded launches")
        return 1
    for index in sorted({gemm, launches[-1][0]}):
        out = logs / f"launch{index}.kcap"
        out.unlink(missing_ok=True)
        extracted = run([args.kcap, "extract", str(trace), "--launch", str(index), "-o", str(out)], logs,
                        f"extract{index}")
        if extracted.returncode != 0 or "REPRODUCED" not in extracted.stdout:
            failures.append(f"extract --launch {index}: exit {extracted.returncode}, not rebuilt in a reproduced "
                            f"interval:\n{extracted.stdout[-1500:]}{extracted.stderr[-1500:]}")
            continue
        check = run([args.kcap, "check", str(out)], logs, f"check{index}")
        if check.returncode != 0:
            failures.append(f"kcap check {out.name}: {check.stdout[-1000:]}")
        replayed = run([args.kcap, "replay", str(out), "--json"], logs, f"replay{index}")
        try:
            verdicts = [l["verdict"] for l in json.loads(replayed.stdout)["launches"]]
        except (ValueError, KeyError, TypeError):
            verdicts = []
        print(f"launch {index}: extracted, replayed {verdicts}")
        if replayed.returncode != 0 or verdicts != ["REPRODUCED"]:
            failures.append(f"replay of {out.name}: exit {replayed.returncode}, verdicts {verdicts}")
    for f in failures:
        print("FAILED:", f)
    print("PASSED" if not failures else f"{len(failures)} check(s) failed; logs in {logs}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
