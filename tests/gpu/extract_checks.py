#!/usr/bin/env python3
"""`kcap extract` on a real GPU:

    extract_checks.py --kcap KCAP --log-dir DIR -- PROGRAM [ARGS...]

Records PROGRAM (PyTorch eager ops: tests/gpu/python/torch_eager.py) with
`kcap record`, replays every launch once, then asserts that
  1. `kcap extract --launch N` of a cuBLAS launch (a kernel named like a GEMM)
     and of the last launch that reproduced writes a trace that `kcap check`
     accepts, holding that one launch and one module in at most 40 events,
     smaller than the recording (how much smaller depends on the size of the
     library image the kernel comes from);
  2. `kcap replay OUT --launch N --json` says of it what replaying the
     recording said: REPRODUCED, the same kernel, code and buffers (label,
     address, size, differing bytes);
  3. `kcap extract --range A..B` of the first three launches replays as a
     sequence exactly as `kcap replay TRACE --range A..B` does (launch by
     launch: verdict and buffers);
  4. extracting a launch that is not in the trace exits 2 and writes nothing;
  5. `kcap bisect TRACE --sequence --json` (the launches replayed in order
     from the first one's pre-state, each on what the ones before it wrote)
     exits 0, finds no divergence, and compared every launch of the
     recording (examined = total = the launches replay reported, none not
     comparable).
It never skips: a check that cannot run fails.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

GEMM = re.compile(r"gemm|nvjet|xmma|cutlass|sm90")


def run(command, log_dir, label):
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300)
    (log_dir / f"{label}.stdout").write_text(done.stdout)
    (log_dir / f"{label}.stderr").write_text(done.stderr)
    return done


def replay(kcap, trace, log_dir, label, *extra):
    command = [kcap, "replay", str(trace), "--json", *extra]
    done = run(command, log_dir, f"replay-{label}")
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = None
    print(f"replay {label}: exit {done.returncode}: {report.get('summary') if report else done.stderr.strip()}")
    return done.returncode, report, " ".join(command)


def essence(launch):
    """What must be the same when the same launch is replayed from the recording and from an extract."""
    buffers = [(b["label"], b["address"], b["size"], b["differingBytes"], b["firstDifferingOffset"])
               for b in launch["buffers"]]
    return (launch["launchIndex"], launch["kernel"], launch["verdict"], launch["code"], buffers)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kcap", required=True)
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    log_dir = Path(args.log_dir).resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    trace = log_dir / "trace.kcap"
    for old in log_dir.glob("*.kcap"):
        old.unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCAP_") and k != "LD_PRELOAD"}

    recorded = subprocess.run([args.kcap, "record", "-q", "-o", str(trace), "--", *command], env=env,
                              capture_output=True, text=True, errors="replace", timeout=300)
    if recorded.returncode != 0 or not trace.is_file():
        print(f"FAILED: recording failed (exit {recorded.returncode}):\n{recorded.stdout}{recorded.stderr}")
        return 1
    failures = []

    code, everything, cmd = replay(args.kcap, trace, log_dir, "all")
    if everything is None or not everything["launches"]:
        print(f"FAILED: {cmd}: exit {code}, no report")
        return 1
    original = {l["launchIndex"]: l for l in everything["launches"]}
    reproduced = [l for l in everything["launches"] if l["verdict"] == "REPRODUCED"]
    gemms = [l for l in reproduced if GEMM.search(l["kernel"])]
    if not gemms:
        failures.append(f"{cmd}: no cuBLAS launch reproduced: {[(l['kernel'], l['verdict']) for l in everything['launches']]}")
    picks = sorted({l["launchIndex"] for l in gemms[:1] + reproduced[-1:]})

    size = trace.stat().st_size
    for n in picks:
        out = log_dir / f"launch-{n}.kcap"
        done = run([args.kcap, "extract", str(trace), "--launch", str(n), "-o", str(out)], log_dir, f"extract-{n}")
        if done.returncode != 0 or not out.is_file():
            failures.append(f"extract --launch {n}: exit {done.returncode}: {done.stderr.strip()}")
            continue
        if not done.stdout.startswith(f"extracted launch {n} (1 launch) of {trace}: "):
            failures.append(f"extract --launch {n}: unexpected summary {done.stdout!r}")
        check = run([args.kcap, "check", str(out)], log_dir, f"check-{n}")
        if check.returncode != 0:
            failures.append(f"kcap check {out}: exit {check.returncode}: {check.stdout.strip()}")
        info = json.loads(run([args.kcap, "info", "--json", str(out)], log_dir, f"info-{n}").stdout or "{}")
        if info.get("launches", {}).get("count") != 1 or len(info.get("modules", [])) != 1:
            failures.append(f"{out}: expected 1 launch and 1 module, info says "
                            f"{info.get('launches', {}).get('count')} and {len(info.get('modules', []))}")
        events = re.match(r"OK: (\d+) events", check.stdout)
        if not out.stat().st_size < size or not events or int(events.group(1)) > 40:
            failures.append(f"{out}: {out.stat().st_size} bytes (the recording: {size}), check says "
                            f"{check.stdout.strip()!r}; expected a smaller file of at most 40 events")
        code, report, cmd = replay(args.kcap, out, log_dir, f"launch-{n}", "--launch", str(n))
        got = [essence(l) for l in (report or {}).get("launches", [])]
        if code != 0 or got != [essence(original[n])]:
            failures.append(f"{cmd}: exit {code}; expected {essence(original[n])}, got {got}")

    first = sorted(original)[:3]
    if len(first) == 3:
        a, b = first[0], first[-1]
        out = log_dir / "range.kcap"
        done = run([args.kcap, "extract", str(trace), "--range", f"{a}..{b}", "-o", str(out)], log_dir, "extract-range")
        if done.returncode != 0:
            failures.append(f"extract --range {a}..{b}: exit {done.returncode}: {done.stderr.strip()}")
        else:
            check = run([args.kcap, "check", str(out)], log_dir, "check-range")
            if check.returncode != 0:
                failures.append(f"kcap check {out}: exit {check.returncode}: {check.stdout.strip()}")
            code_a, want, cmd_a = replay(args.kcap, trace, log_dir, "range-recorded", "--range", f"{a}..{b}")
            code_b, got, cmd_b = replay(args.kcap, out, log_dir, "range-extracted", "--range", f"{a}..{b}")
            want_l = [essence(l) for l in (want or {}).get("launches", [])]
            got_l = [essence(l) for l in (got or {}).get("launches", [])]
            if code_a != code_b or want_l != got_l or len(want_l) != 3:
                failures.append(f"{cmd_b}: exit {code_b}, {got_l}; the recording ({cmd_a}) gave exit {code_a}, {want_l}")
    else:
        failures.append(f"{trace}: fewer than 3 launches recorded")

    missing = max(original) + 1000
    out = log_dir / "missing.kcap"
    done = run([args.kcap, "extract", str(trace), "--launch", str(missing), "-o", str(out)], log_dir, "extract-missing")
    if done.returncode != 2 or out.exists() or f"launch {missing} is not in" not in done.stderr:
        failures.append(f"extract --launch {missing}: exit {done.returncode}, {done.stderr.strip()!r}; "
                        f"expected exit 2 and no output")

    done = run([args.kcap, "bisect", str(trace), "--sequence", "--json"], log_dir, "bisect-sequence")
    try:
        bisected = json.loads(done.stdout)
    except json.JSONDecodeError:
        bisected = {}
    launches = len(original)
    if (done.returncode != 0 or bisected.get("first", "absent") is not None or not bisected.get("sequence")
            or bisected.get("examined") != launches or bisected.get("total") != launches
            or bisected.get("notComparable") != 0):
        failures.append(f"bisect --sequence: exit {done.returncode}, first {bisected.get('first', 'absent')}, "
                        f"examined {bisected.get('examined')} of {bisected.get('total')}, not comparable "
                        f"{bisected.get('notComparable')}; expected exit 0, no divergence, all {launches} compared: "
                        f"{done.stderr.strip()[-500:]}")
    else:
        print(f"bisect --sequence: {launches} launches compared, none diverges")

    for failure in failures:
        print("FAILED:", failure)
    print("PASSED" if not failures else f"{len(failures)} check(s) failed; logs in {log_dir}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
