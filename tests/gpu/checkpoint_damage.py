#!/usr/bin/env python3
"""A damaged checkpoint trace of a real program, re-executed on the GPU.

    checkpoint_damage.py --kcap KCAP --log-dir DIR [--checkpoint-every EVERY]
                         -- PROGRAM [ARGS...]

Records PROGRAM in checkpoint mode (--checkpoint-every EVERY, default
4launches) and re-executes the whole trace: every interval REPRODUCED,
exit 0 (the baseline). Then damages copies of the file and re-executes each:
  - cut short, losing the last half, quarter, ... 1/1024 of its bytes (what
    a job killed while the trace was written leaves; a PyTorch trace is
    mostly module images, loaded early, so the launches' records and the
    checkpoints' contents are in its last part);
  - 64 bytes overwritten in the middle, and 1/8, 1/64 and 1/512 of the file
    before its end.
Every replay of a damaged copy must exit 0 or 1 (never a crash, a signal,
DIFFERS, FAULT or HANG: what is damaged is not compared), say that the
trace is damaged, and with exit 0 have reproduced at least one interval;
at least one of the shorter cuts must still reproduce an interval.
It never skips: a check that cannot run fails.
"""
import re
import sys

from script_support import checkpoint_recording, report, run

DAMAGE_SAID = re.compile(r"damaged|cut short|truncated|torn|corrupt", re.I)


def reexecute(kcap, trace, logs):
    done = run([kcap, "replay", str(trace)], logs / f"{trace.stem}-replay.txt", timeout=600)
    intervals = [line for line in done.stdout.splitlines() if line.startswith("interval ")]
    reproduced = [line for line in intervals if ": REPRODUCED" in line]
    bad = [line for line in intervals if any(v in line for v in (": DIFFERS", ": FAULT", ": HANG"))]
    return done, reproduced, bad


def main():
    args, logs, trace = checkpoint_recording(__doc__, "4launches")
    if trace is None:
        return 1
    done, reproduced, bad = reexecute(args.kcap, trace, logs)
    print(f"whole trace: exit {done.returncode}, {len(reproduced)} intervals reproduced")
    if done.returncode != 0 or len(reproduced) < 2 or bad:
        print(f"FAILED: the undamaged trace: exit {done.returncode}, {len(reproduced)} intervals reproduced "
              f"(expected exit 0 and at least 2), {bad}")
        return 1

    data = trace.read_bytes()
    size = len(data)
    copies = {f"cut-last-1of{2 ** j}": data[:size - size // 2 ** j] for j in range(1, 11)}
    for name, at in (("overwritten-middle", size // 2), ("overwritten-1of8-before-end", size - size // 8),
                     ("overwritten-1of64-before-end", size - size // 64),
                     ("overwritten-1of512-before-end", size - size // 512)):
        copies[name] = data[:at] + bytes((b ^ 0x5A) for b in data[at:at + 64]) + data[at + 64:]
    failures = []
    cuts_reproducing = 0
    for name, content in copies.items():
        damaged = logs / f"{name}.kcap"
        damaged.write_bytes(content)
        done, got, bad = reexecute(args.kcap, damaged, logs)
        damaged.unlink()  # a whole copy of the trace each: the replay's output is what is kept
        said = DAMAGE_SAID.search(done.stdout + done.stderr)
        print(f"{name}: exit {done.returncode}, {len(got)} intervals reproduced, damage said: {bool(said)}")
        if done.returncode not in (0, 1) or bad or not said or (done.returncode == 0 and not got):
            failures.append(f"{name}: exit {done.returncode}, {len(got)} reproduced, {bad}, damage said "
                            f"{bool(said)}: {(done.stdout + done.stderr)[-1500:]}")
        if name.startswith("cut-") and got:
            cuts_reproducing += 1
    if cuts_reproducing == 0:
        failures.append("no cut of the trace reproduced an interval: replay stopped at the first damage "
                        "instead of running what is intact")
    return report(failures, logs)


if __name__ == "__main__":
    sys.exit(main())
