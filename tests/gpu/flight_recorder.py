#!/usr/bin/env python3
"""The flight recorder on the GPU (gpu_flight_recorder): programs/fault_at.cu
recorded with `kcap record --mode checkpoint --trigger error --ring 2`.

  1. 1,500 launches, none faulting: the program's output is the plain run's
     and no trace is written (nothing fired).
  2. The 1,000th launch (index 999) faults: the program fails as it does
     without kcap (the same "error ..." line, exit 1), the trigger wrote the
     trace, `kcap check` passes, `kcap info` shows one error trigger, and
     `kcap replay` reports launch 999 as FAULT while the intervals before it
     reproduce.
  3. A PyTorch decode loop (python/torch_decode_trigger.py: a CUDA graph
     captured at start-up, replayed 40 times) that calls kcap_trigger at
     replay 30, recorded with `--trigger api --ring 2`: the output is the
     plain run's, the trace checks, holds graph launches of a graph defined
     before its window, and every interval re-executes and reproduces.
  4. `--trigger hang=2` on a PyTorch program whose kernel spins about 6 s
     (python/torch_trigger_cases.py hang 6): the output and exit status are
     the plain run's, and the trace checks and holds one hang trigger that
     says how long and names a launch in the trace: the spinning one or one
     queued behind it.
  5. `--trigger exit`: the same program's exit 3 leaves a trace with one
     exit trigger naming status 3 (the program still exits 3); its exit 0
     writes nothing.

    flight_recorder.py --kcap KCAP --program FAULT_AT --log-dir DIR
                       [--python PYTHON --decode SCRIPT --cases SCRIPT]
"""
import argparse
import json
import sys
from pathlib import Path

from script_support import run


def check_fired(kcap, trace, kind, logs, prefix, failures):
    """`kcap check` passes on the trigger's trace and `kcap info` names one
    trigger of `kind`; returns the info JSON."""
    check = run([kcap, "check", str(trace)], logs / f"{prefix}check.txt")
    if check.returncode != 0:
        failures.append(f"{prefix}kcap check failed: " + check.stdout[-1000:])
    info = json.loads(run([kcap, "info", "--json", str(trace)], logs / f"{prefix}info.json").stdout or "{}")
    kinds = [t.get("kind") for t in info.get("triggers", [])]
    if kinds != [kind]:
        failures.append(f"{prefix}triggers {kinds}, expected [{kind!r}]")
    return info


def decode_loop(args, logs):
    """3. The api trigger in a PyTorch decode loop of graph replays."""
    failures = []
    trace = logs / "decode.kcap"
    trace.unlink(missing_ok=True)
    program = [args.python, args.decode, "40", "30"]
    plain = run(program, logs / "decode-plain.txt", timeout=600)
    recorded = run([args.kcap, "record", "-q", "--mode", "checkpoint", "--checkpoint-every", "10launches",
                    "--trigger", "api", "--ring", "2", "-o", str(trace), "--"] + program,
                   logs / "decode-recorded.txt", timeout=600)
    if plain.returncode != 0 or recorded.returncode != 0 or plain.stdout != recorded.stdout:
        failures.append(f"decode loop: plain exit {plain.returncode}, recorded exit {recorded.returncode}, "
                        f"same output {plain.stdout == recorded.stdout}")
    if not trace.exists():
        return failures + ["decode loop: the api trigger wrote no trace"]
    info = check_fired(args.kcap, trace, "api", logs, "decode-", failures)
    if info.get("graphs", {}).get("launches", 0) < 2:
        failures.append(f"decode loop: the window holds {info.get('graphs', {}).get('launches', 0)} graph launches")
    replay = run([args.kcap, "replay", str(trace)], logs / "decode-replay.txt", timeout=600)
    if replay.returncode != 0 or "intervals reproduced as recorded" not in replay.stdout \
            or "NOT RE-EXECUTABLE" in replay.stdout:
        failures.append("decode loop: not every interval reproduced:\n" + replay.stdout[-2000:])
    return failures


def same_as_plain(args, case, value, options, trace, logs, failures):
    """Runs python/torch_trigger_cases.py CASE VALUE plain and recorded with
    OPTIONS into TRACE; failures if exit status or output differ."""
    program = [args.python, args.cases, case, str(value)]
    trace.unlink(missing_ok=True)
    plain = run(program, logs / f"{trace.stem}-plain.txt", timeout=300)
    recorded = run([args.kcap, "record", "-q", "--mode", "checkpoint"] + options + ["-o", str(trace), "--"] + program,
                   logs / f"{trace.stem}-recorded.txt", timeout=300)
    if plain.returncode != recorded.returncode or plain.stdout != recorded.stdout or "sum" not in plain.stdout:
        failures.append(f"{trace.stem}: plain exit {plain.returncode} ({plain.stdout.strip()!r}), recorded exit "
                        f"{recorded.returncode} ({recorded.stdout.strip()!r})")
    return plain.returncode


def hang_and_exit(args, logs):
    """4. and 5.: the hang and exit triggers on PyTorch programs."""
    failures = []
    trace = logs / "hang.kcap"
    same_as_plain(args, "hang", 6, ["--trigger", "hang=2"], trace, logs, failures)
    if not trace.exists():
        failures.append("hang: the hang trigger wrote no trace")
    else:
        check_fired(args.kcap, trace, "hang", logs, "hang-", failures)
        dump = run([args.kcap, "dump", "--json", "--type", "launch,trigger", str(trace)], logs / "hang-dump.txt")
        events = [json.loads(line) for line in dump.stdout.splitlines() if line.startswith("{")]
        triggers = [e["trigger"] for e in events if "trigger" in e]
        launches = {int(e["launch"]["launchIndex"]): e["launch"].get("kernelName", "") for e in events if "launch" in e}
        spins = [i for i, name in launches.items() if "spin_kernel" in name]
        named = int(triggers[0].get("launchIndex", -1)) if triggers and triggers[0].get("hasLaunch") else None
        if len(spins) != 1 or named is None or named not in launches or named < spins[0] \
                or "has not finished after 2 s" not in triggers[0].get("reason", ""):
            failures.append(f"hang: trigger {triggers}, spinning launch {spins}: expected one naming a launch in the "
                            f"trace at or after the spinning one, unfinished after 2 s")
    trace = logs / "exit.kcap"
    if same_as_plain(args, "exit", 3, ["--trigger", "exit"], trace, logs, failures) != 3:
        failures.append("exit: the program did not exit 3")
    if not trace.exists():
        failures.append("exit: the exit trigger wrote no trace")
    else:
        check_fired(args.kcap, trace, "exit", logs, "exit-", failures)
        dump = run([args.kcap, "dump", "--json", "--type", "trigger", str(trace)], logs / "exit-dump.txt")
        status = [json.loads(line)["trigger"].get("exitStatus") for line in dump.stdout.splitlines()
                  if line.startswith("{")]
        if status != [3]:
            failures.append(f"exit: the trigger's exit status {status}, expected [3]")
    trace = logs / "exit0.kcap"
    same_as_plain(args, "exit", 0, ["--trigger", "exit"], trace, logs, failures)
    if trace.exists():
        failures.append("exit 0: the exit trigger fired, yet it should not")
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kcap", required=True)
    p.add_argument("--program", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("--python")
    p.add_argument("--decode")
    p.add_argument("--cases", help="python/torch_trigger_cases.py")
    args = p.parse_args()
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    failures = []
    record = [args.kcap, "record", "-q", "--mode", "checkpoint", "--checkpoint-every", "200launches",
              "--trigger", "error", "--ring", "2"]

    # 1. Nothing fires: nothing written.
    quiet = logs / "quiet.kcap"
    quiet.unlink(missing_ok=True)
    plain = run([args.program, "1500"], logs / "plain.txt")
    recorded = run(record + ["-o", str(quiet), "--", args.program, "1500"], logs / "quiet.txt")
    if plain.returncode != 0 or recorded.returncode != 0 or plain.stdout != recorded.stdout:
        failures.append(f"no fault: plain exit {plain.returncode}, recorded exit {recorded.returncode}, "
                        f"same output {plain.stdout == recorded.stdout}")
    if quiet.exists():
        failures.append(f"no trigger fired, yet {quiet} was written")

    # 2. Launch 999 faults: the trace holds it, replay faults on it.
    trace = logs / "fault.kcap"
    trace.unlink(missing_ok=True)
    plain = run([args.program, "1500", "999"], logs / "plain-fault.txt")
    recorded = run(record + ["-o", str(trace), "--", args.program, "1500", "999"], logs / "fault.txt")
    if plain.returncode != 1 or recorded.returncode != 1 or plain.stdout != recorded.stdout:
        failures.append(f"fault: plain exit {plain.returncode} ({plain.stdout.strip()!r}), recorded exit "
                        f"{recorded.returncode} ({recorded.stdout.strip()!r})")
    if not trace.exists():
        failures.append("the error trigger wrote no trace")
    else:
        check_fired(args.kcap, trace, "error", logs, "", failures)
        replay = run([args.kcap, "replay", str(trace)], logs / "replay.txt", timeout=600)
        lines = replay.stdout.splitlines()
        if not any("FAULT" in l and "999" in l for l in lines):
            failures.append("replay did not report launch 999 as FAULT:\n" + replay.stdout[-2000:])
        if not any("REPRODUCED" in l for l in lines):
            failures.append("no interval before the fault reproduced:\n" + replay.stdout[-2000:])
    if args.python and args.decode:
        failures += decode_loop(args, logs)
    if args.python and args.cases:
        failures += hang_and_exit(args, logs)
    for f in failures:
        print("FAILED:", f)
    print("OK" if not failures else f"{len(failures)} check(s) failed; logs in {logs}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
