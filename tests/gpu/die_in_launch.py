#!/usr/bin/env python3
"""A launch call the process dies in, on the GPU (gpu_die_in_launch).

python/torch_blocked_launch.py fills the device's queue behind a kernel
that spins for a minute until a launch call blocks, and SIGALRM ends the
process while it waits. Recorded in metadata and in checkpoint mode, each
trace must: check; end with a traceEnd naming SIGALRM; hold the small
launches that filled the queue (over 100), each with its outcome (`ended`,
result 0); and hold the blocked launch too, last of its thread, without
`ended` (its event reached the writer before the call; the call never
returned). The program itself dies of SIGALRM as it does without kcap.
The flight recorder (checkpoint mode, `--trigger signal`) is held to the
same, with SIGTERM (one of its trigger's signals) sent by the program's
child, and its trace must hold one trigger event naming the signal.

    die_in_launch.py --kcap KCAP --python PYTHON --program SCRIPT --log-dir DIR
"""
import argparse
import json
import signal
import sys
from pathlib import Path

from script_support import report, run


# name: (kcap record's options, the program's arguments after SECONDS, the signal)
MODES = {
    # No checkpoint but the first: a checkpoint waits for the device, which
    # the minute-long kernel holds (the launch would die in the checkpoint).
    "metadata": (["--mode", "metadata"], [], signal.SIGALRM),
    "checkpoint": (["--mode", "checkpoint", "--checkpoint-every", "10m"], [], signal.SIGALRM),
    "flight-recorder": (["--mode", "checkpoint", "--checkpoint-every", "10m", "--trigger", "signal"], ["term"],
                        signal.SIGTERM),
}


def check_mode(args, logs, mode):
    failures = []
    trace = logs / f"{mode}.kcap"
    trace.unlink(missing_ok=True)
    options, program_args, sig = MODES[mode]
    recorded = run([args.kcap, "record", "-q", "--force"] + options + ["-o", str(trace), "--",
                    args.python, args.program, "5"] + program_args, logs / f"{mode}-recorded.txt", timeout=180)
    if recorded.returncode != 128 + sig:
        failures.append(f"{mode}: the recorded program exited {recorded.returncode}, not by {sig.name} "
                        f"({128 + sig}): {recorded.stderr[-500:]}")
    if not trace.exists():
        return failures + [f"{mode}: no trace written"]
    check = run([args.kcap, "check", str(trace)], logs / f"{mode}-check.txt")
    if check.returncode != 0:
        failures.append(f"{mode}: kcap check failed: {check.stdout[-1000:]}")
    dump = run([args.kcap, "dump", "--json", "--type", "launch,traceEnd,trigger", str(trace)],
               logs / f"{mode}-dump.txt")
    events = [json.loads(line) for line in dump.stdout.splitlines() if line.startswith("{")]
    ends = [e["traceEnd"] for e in events if "traceEnd" in e]
    if len(ends) != 1 or ends[0].get("reason") != "signal" or ends[0].get("signal") != int(sig):
        failures.append(f"{mode}: traceEnd {ends}, expected one naming signal {int(sig)}")
    triggers = [e["trigger"] for e in events if "trigger" in e]
    expected = 1 if "--trigger" in options else 0
    if len(triggers) != expected or any(t.get("kind") != "signal" for t in triggers):
        failures.append(f"{mode}: trigger events {triggers}, expected {expected} of kind signal")
    launches = [e for e in events if "launch" in e]
    unended = [e for e in launches if not e["launch"].get("ended")]
    ended = [e for e in launches if e["launch"].get("ended")]
    if len(unended) != 1:
        failures.append(f"{mode}: {len(unended)} launches without their outcome, expected 1 (the blocked call)")
    else:
        blocked = unended[0]
        name = blocked["launch"].get("kernelName", "")
        last_of_thread = max(int(e["seq"]) for e in launches if e["threadId"] == blocked["threadId"])
        if int(blocked["seq"]) != last_of_thread or "elementwise" not in name:
            failures.append(f"{mode}: the launch without its outcome is seq {blocked['seq']} of {name!r}, "
                            f"not the last of its thread ({last_of_thread}) or not the small add")
    small = [e for e in ended if "elementwise" in e["launch"].get("kernelName", "")]
    if len(small) < 100:
        failures.append(f"{mode}: {len(small)} small launches with their outcome, expected over 100 (a full queue)")
    failed = [e for e in ended if int(e["launch"].get("result", 0)) != 0]
    if failed:
        failures.append(f"{mode}: {len(failed)} launches returned an error, e.g. {failed[0]['launch']}")
    print(f"{mode}: {len(launches)} launches, {len(small)} small ones with their outcome, "
          f"{len(unended)} without (the blocked call)")
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kcap", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--program", required=True)
    p.add_argument("--log-dir", required=True)
    args = p.parse_args()
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    failures = []
    for mode in MODES:
        failures += check_mode(args, logs, mode)
    return report(failures, logs)


if __name__ == "__main__":
    sys.exit(main())
