#!/usr/bin/env python3
"""Re-execution's pace against the program's: a program recorded with
`kcap record --mode checkpoint --checkpoint-every Nlaunches`, then replayed
(`kcap replay --json`, which re-executes every interval between two
checkpoints and verifies it at the next). Each interval reports the launches
it re-executed, the time from the first one's submission to the last one's
completion, and the program's time for the same launches (from the end of
one checkpoint's hold to the start of the next's, the trace's event times).
The target: re-execution runs the launches at no less than half the
program's launches a second (ratio >= 0.5).

    reexecution_rate.py --kcap build-gpu/tools/kcap --bench build-gpu/bench/kcap_bench_launch_overhead
        [--programs tiny,slice] [--launches 20000] [--every 2000] [--slice-launches 1000]
        [--python python3] [--dir /tmp] [--timeout 120]

Programs: `tiny`, kcap_bench_launch_overhead (empty kernels <<<1, 1>>> back
to back on one stream, the pace set by the launch path itself: --launches a
repetition, 3 repetitions after 1,000 warm-up launches); `slice`,
bench/slice_program.py (PyTorch, each launch adding 1 to its own 1 MiB slice
of a 1 GiB buffer, --slice-launches launches, a checkpoint every quarter).
Every interval must reproduce, or be NOT VERIFIED for holding no memory
to compare (the tiny program allocates none); exit status 1 otherwise. A
missed target is a result, not a failure.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = 0.5


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kcap", required=True)
    p.add_argument("--bench", help="kcap_bench_launch_overhead (for the tiny program)")
    p.add_argument("--programs", default="tiny,slice")
    p.add_argument("--launches", type=int, default=20000, help="tiny: launches a repetition")
    p.add_argument("--every", type=int, default=2000, help="tiny: launches between checkpoints")
    p.add_argument("--slice-launches", type=int, default=1000)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--timeout", type=float, default=120)
    return p.parse_args()


def run(command, timeout):
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout)
    return done, (time.perf_counter() - start) * 1e3


def programs(args):
    """(name, command, launches between checkpoints) for each program asked for."""
    for name in args.programs.split(","):
        if name == "tiny":
            if not args.bench:
                sys.exit("--programs tiny needs --bench")
            yield name, [args.bench, "--launches", str(args.launches), "--reps", "3", "--warmup", "1000"], args.every
        elif name == "slice":
            yield name, [args.python, str(HERE / "slice_program.py"), "1", str(args.slice_launches)], max(
                1, args.slice_launches // 4)
        else:
            sys.exit(f"unknown program {name}")


def verdicts_text(row):
    return ", ".join(f"{n} {verdict}" for verdict, n in sorted(row["verdicts"].items()))


def main():
    args = parse_args()
    failures, rows = [], []
    for name, program, every in programs(args):
        trace = Path(args.dir) / f"kcap-reexecution-{name}.kcap"
        record, record_ms = run([args.kcap, "record", "-q", "--force", "-o", str(trace), "--mode", "checkpoint",
                                 "--checkpoint-every", f"{every}launches", "--"] + program, args.timeout)
        if record.returncode != 0 or not trace.exists():
            failures.append(f"{name}: recording exited {record.returncode}\n{record.stderr[-2000:]}")
            continue
        replay, replay_ms = run([args.kcap, "replay", "--json", str(trace)], args.timeout)
        try:
            document = json.loads(replay.stdout)
        except json.JSONDecodeError:
            failures.append(f"{name}: kcap replay exited {replay.returncode} without a report\n{replay.stderr[-2000:]}")
            trace.unlink()
            continue
        intervals = document.get("intervals", [])
        verdicts = {}
        for i in intervals:
            verdicts[i["verdict"]] = verdicts.get(i["verdict"], 0) + 1
        # The tiny program allocates nothing: its checkpoints hold no memory
        # and its intervals are NOT VERIFIED (kcap replay exits 1 for that).
        if replay.returncode not in (0, 1) or not set(verdicts) <= {"REPRODUCED", "NOT VERIFIED"}:
            failures.append(f"{name}: kcap replay exit {replay.returncode}, intervals {verdicts}: "
                            f"{[i['detail'] for i in intervals if i['verdict'] != 'REPRODUCED'][:3]}")
        pace = document.get("pace", {})
        launches, program_ns = pace.get("timedLaunches", 0), pace.get("programNs", 0)
        reexecution_ns = pace.get("timedReexecutionNs", 0)
        row = {"program": name, "launches": pace.get("launches", 0), "intervals": len(intervals),
               "verdicts": verdicts, "timed_launches": launches, "program_ns": program_ns,
               "reexecution_ns": reexecution_ns, "record_ms": record_ms, "replay_ms": replay_ms}
        if launches and program_ns and reexecution_ns:
            row["program_per_s"] = launches * 1e9 / program_ns
            row["reexecution_per_s"] = launches * 1e9 / reexecution_ns
            row["ratio"] = row["reexecution_per_s"] / row["program_per_s"]
        else:
            failures.append(f"{name}: the replay gave no timed intervals ({pace})")
        rows.append(row)
        print(json.dumps(row), flush=True)
        trace.unlink()
    print()
    print("| program | launches | intervals | verdicts | program launches/s | re-execution launches/s | ratio | target "
          "| result |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---|")
    for r in rows:
        if "ratio" not in r:
            print(f"| {r['program']} | {r['launches']:,} | {r['intervals']} | {verdicts_text(r)} | - | - | - | >= {TARGET} "
                  "| no figures |")
            continue
        result = "met" if r["ratio"] >= TARGET else "MISSED"
        print(f"| {r['program']} | {r['timed_launches']:,} | {r['intervals']} | {verdicts_text(r)} | {r['program_per_s']:,.0f} | "
              f"{r['reexecution_per_s']:,.0f} | {r['ratio']:.2f} | >= {TARGET} | {result} |", flush=True)
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
