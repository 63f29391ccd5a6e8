#!/usr/bin/env python3
"""`kcap replay --check determinism` on a checkpoint trace, on the GPU.

    checkpoint_determinism.py --kcap KCAP --log-dir DIR --kernel REGEX
                              [--checkpoint-every EVERY] -- PROGRAM [ARGS...]

Records PROGRAM in checkpoint mode (--checkpoint-every EVERY, default
2launches); its launches of kernels matching REGEX sum floats in an order that
varies from run to run (python/torch_racy_sum.py: index_add_'s atomics).
Then asserts that
  1. the recording exits 0 and `kcap check` accepts the trace;
  2. `kcap replay TRACE --json` re-executes every interval: at least one
     REPRODUCED (the deterministic launches before the sums), at least one
     DIFFERS (a sum's last bits), none FAULT or HANG;
  3. `kcap replay TRACE --check determinism --runs 3 --json` runs each
     differing interval again three times and names, for each, the first
     launch whose outputs vary between the runs: a launch of a kernel
     matching REGEX; no differing interval is called deterministic.
It never skips: a check that cannot run fails.
"""
import json
import re
import sys

from script_support import checkpoint_recording, report, run


def reexecute(kcap, trace, log, *extra):
    """(exit status, the intervals of `kcap replay TRACE --json`)."""
    done = run([kcap, "replay", str(trace), "--json", *extra], log, timeout=600)
    try:
        return done.returncode, json.loads(done.stdout)["intervals"]
    except (ValueError, KeyError, TypeError):
        return done.returncode, None


def main():
    args, logs, trace = checkpoint_recording(
        __doc__, "2launches",
        lambda p: p.add_argument("--kernel", required=True, help="the kernels whose outputs vary (regex)"))
    if trace is None:
        return 1
    failures = []
    check = run([args.kcap, "check", str(trace)], logs / "check.txt")
    if check.returncode != 0:
        failures.append(f"kcap check failed: {check.stdout[-1000:]}")

    code, intervals = reexecute(args.kcap, trace, logs / "replay.json")
    verdicts = [i["verdict"] for i in intervals or []]
    print(f"replay: exit {code}, intervals {verdicts}")
    if intervals is None or "REPRODUCED" not in verdicts or "DIFFERS" not in verdicts \
            or "FAULT" in verdicts or "HANG" in verdicts:
        failures.append(f"replay: exit {code}, intervals {verdicts}: expected REPRODUCED and DIFFERS, "
                        f"no FAULT or HANG")

    code, checked = reexecute(args.kcap, trace, logs / "determinism.json", "--check", "determinism", "--runs", "3")
    differing = [i for i in checked or [] if i["verdict"] == "DIFFERS"]
    named = re.compile(r"^launch (\d+) \((.*)\) is the first whose outputs vary between 3 runs")
    for interval in differing:
        lines = interval.get("determinism", [])
        found = [named.match(line) for line in lines]
        print(f"interval {interval['interval']} (launches {interval.get('launches')}): {lines}")
        if not found or not all(found) or not all(re.search(args.kernel, m.group(2)) for m in found):
            failures.append(f"--check determinism, interval {interval['interval']}: {lines}; expected the first "
                            f"varying launch, a kernel matching {args.kernel!r}")
    if code != 3 or not differing:
        failures.append(f"--check determinism: exit {code}, {len(differing)} differing intervals; expected exit 3 "
                        f"(DIFFERS) and at least one")

    return report(failures, logs)


if __name__ == "__main__":
    sys.exit(main())
