#!/usr/bin/env python3
"""Checkpoint capture against the program's own cost: bench/slice_program.py
(LAUNCHES launches, each adding 1 to a 1 MiB slice of one GIB GiB buffer)
run plain and under `kcap record` in metadata, checkpoint (the default 1 s
interval, and a checkpoint every 10 launches) and full mode, side by side.

    checkpoint_capture.py --kcap build-gpu/tools/kcap [--python python3] [--gib 1,32] [--launches 50]
        [--modes plain,metadata,checkpoint,checkpoint-10,full] [--dir /tmp] [--replay]
        [--whole SCRIPT.py ...] [--rounds 3]

--whole: also each Python program named, run whole, plain and in metadata
and checkpoint mode (the default interval), --rounds times each, the order
rotating: the added wall time of the whole process (median of the rounds'
differences), the checkpoints' holds and copies, and how many distinct
outputs the plain runs printed (a recorded run must print one of them).

For each run: the loop's wall time (the launches, as the program timed
them), the whole process's wall time, and for checkpoint runs the
checkpoints taken, the longest time one held the program and the bytes they
copied (`kcap info --json`). Every recorded run's output must equal the plain
run's and its trace must pass `kcap check` (which also holds every
checkpoint's change hashes to its content); exit status 1 otherwise. With
--replay, every checkpoint trace is replayed (`kcap replay`) and its verdict
lines are printed.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kcap", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--gib", default="1,32")
    p.add_argument("--launches", type=int, default=50)
    p.add_argument("--modes", default="plain,metadata,checkpoint,checkpoint-10,full")
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--replay", action="store_true")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--whole", nargs="*", default=[], help="Python programs to time whole, plain and in checkpoint mode")
    p.add_argument("--rounds", type=int, default=3)
    return p.parse_args()


def run(command, timeout):
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout)
    return done, (time.perf_counter() - start) * 1e3


WHOLE_MODES = ("plain", "metadata", "checkpoint")


def whole_program(args, script, failures):
    """One program run whole --rounds times in each of WHOLE_MODES, the
    modes' order rotating from round to round so that drift of the machine
    hits all of them. What a mode adds is the median of its per-round
    differences against that round's plain run. The program's output must be
    one the plain runs printed: a program whose plain runs disagree among
    themselves (JAX autotuning picks algorithms by timing them) is said to
    be so, and then any plain output counts."""
    wall = {m: [] for m in WHOLE_MODES}
    outputs = {m: [] for m in WHOLE_MODES}
    infos = []
    trace = Path(args.dir) / "kcap-checkpoint-whole.kcap"
    for r in range(args.rounds):
        order = WHOLE_MODES[r % len(WHOLE_MODES):] + WHOLE_MODES[:r % len(WHOLE_MODES)]
        for mode in order:
            command = [args.python, script]
            if mode != "plain":
                command = [args.kcap, "record", "-q", "--force", "-o", str(trace), "--mode", mode, "--"] + command
            done, ms = run(command, args.timeout)
            if done.returncode != 0:
                failures.append(f"{script} {mode}: exit {done.returncode}\n{done.stderr[-1500:]}")
            wall[mode].append(ms / 1e3)
            outputs[mode].append(done.stdout)
            if mode == "checkpoint" and trace.exists():
                infos.append(json.loads(subprocess.run([args.kcap, "info", "--json", str(trace)], capture_output=True,
                                                       text=True).stdout or "{}").get("checkpoints", {}))
            if trace.exists():
                trace.unlink()
    plain_outputs = set(outputs["plain"])
    for mode in WHOLE_MODES[1:]:
        for i, out in enumerate(outputs[mode]):
            if out not in plain_outputs:
                failures.append(f"{script} {mode} round {i}: an output no plain run printed")
    med = lambda v: sorted(v)[len(v) // 2]
    added = {m: med([wall[m][i] / wall["plain"][i] - 1 for i in range(args.rounds)]) for m in WHOLE_MODES[1:]}
    print(f"| {Path(script).name} | {med(wall['plain']):.2f} | {med(wall['metadata']):.2f} | "
          f"{added['metadata'] * 100:+.1f}% | {med(wall['checkpoint']):.2f} | {added['checkpoint'] * 100:+.1f}% | "
          f"{[i.get('count', 0) for i in infos]} | {max((i.get('maxHoldNs', 0) for i in infos), default=0) / 1e6:.0f} | "
          f"{med([i.get('holdNs', 0) for i in infos] or [0]) / 1e6:.0f} | "
          f"{med([i.get('changedBytes', 0) for i in infos] or [0]) / (1 << 20):.0f} | "
          f"{len(plain_outputs)} |", flush=True)


def main():
    args = parse_args()
    failures = []
    rows = []
    for gib in [int(g) for g in args.gib.split(",") if g]:
        program = [args.python, str(HERE / "slice_program.py"), str(gib), str(args.launches)]
        plain_out = None
        for mode in args.modes.split(","):
            trace = Path(args.dir) / f"kcap-checkpoint-bench-{gib}-{mode}.kcap"
            if mode == "plain":
                command = program
            else:
                kcap_mode, _, every = mode.partition("-")
                command = [args.kcap, "record", "-q", "--force", "-o", str(trace), "--mode", kcap_mode]
                if every:
                    command += ["--checkpoint-every", every + "launches"]
                command += ["--"] + program
            done, wall_ms = run(command, args.timeout)
            out = done.stdout
            loop = next((float(l.split()[1]) for l in out.splitlines() if l.startswith("loop_ms")), None)
            checksum = next((l for l in out.splitlines() if l.startswith("checksum")), None)
            row = {"gib": gib, "mode": mode, "loop_ms": loop, "wall_ms": wall_ms}
            if done.returncode != 0 or loop is None:
                failures.append(f"{gib} GiB {mode}: exit {done.returncode}\n{done.stderr[-2000:]}")
            if mode == "plain":
                plain_out = checksum
            elif checksum != plain_out:
                failures.append(f"{gib} GiB {mode}: {checksum!r}, plain printed {plain_out!r}")
            if mode != "plain" and trace.exists():
                check = subprocess.run([args.kcap, "check", str(trace)], capture_output=True, text=True)
                if check.returncode != 0:
                    failures.append(f"{gib} GiB {mode}: kcap check failed:\n{check.stdout[-2000:]}")
                info = json.loads(subprocess.run([args.kcap, "info", "--json", str(trace)], capture_output=True,
                                                 text=True).stdout or "{}")
                checkpoints = info.get("checkpoints", {})
                row.update(checkpoints=checkpoints.get("count", 0), hold_ms=checkpoints.get("maxHoldNs", 0) / 1e6,
                           changed_mib=checkpoints.get("changedBytes", 0) / (1 << 20),
                           trace_mib=trace.stat().st_size / (1 << 20))
                if args.replay and mode.startswith("checkpoint"):
                    replay, replay_ms = run([args.kcap, "replay", str(trace)], args.timeout)
                    print(f"--- replay of {gib} GiB {mode} ({replay_ms:.0f} ms, exit {replay.returncode})")
                    print(replay.stdout[-3000:], replay.stderr[-1000:], sep="", flush=True)
                    row["replay_exit"] = replay.returncode
                    if replay.returncode != 0:
                        failures.append(f"{gib} GiB {mode}: kcap replay exit {replay.returncode}")
                trace.unlink()
            rows.append(row)
            print(json.dumps(row), flush=True)
    if rows:
        print()
        print("| GiB | mode | loop ms | x plain | process ms | checkpoints | longest hold ms | copied MiB | trace MiB |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        plain = {r["gib"]: r["loop_ms"] for r in rows if r["mode"] == "plain"}
        for r in rows:
            ratio = r["loop_ms"] / plain[r["gib"]] if r["loop_ms"] and plain.get(r["gib"]) else float("nan")
            loop = f"{r['loop_ms']:.1f}" if r["loop_ms"] is not None else "-"
            print(f"| {r['gib']} | {r['mode']} | {loop} | {ratio:.2f} | {r['wall_ms']:.0f} | {r.get('checkpoints', '')} | "
                  f"{r.get('hold_ms', 0):.1f} | {r.get('changed_mib', 0):.1f} | {r.get('trace_mib', 0):.1f} |")
    if args.whole:
        print()
        print("| program | plain s | metadata s | added | checkpoint s | added | checkpoints | longest hold ms | "
              "total hold ms | copied MiB | distinct plain outputs |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for script in args.whole:
        whole_program(args, script, failures)
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
