#!/usr/bin/env python3
"""Hostile traces replayed on a real GPU:

    hostile_replay.py --kcap KCAP --make-hostile GENERATOR --log-dir DIR -- PROGRAM [ARGS...]

Records PROGRAM (PyTorch eager ops: tests/gpu/python/torch_eager.py), cuts
one launch that reproduces and is not a GEMM into a trace of its own
(`kcap extract`), and writes the hostile-trace corpus from it
(kcap_make_hostile_traces: tests/support/hostile_traces.h). Then replays
the edited traces with the real driver and asserts, for each, how replay
ends: a parameter offset that wraps in 32 bits, a module image claiming
16 GiB, a missing blob or a piece list that disagrees with its size is a
trace error (exit 1) naming the event or launch, never a FAULT, a signal or
a hang; names full of terminal controls never reach the output raw; a
60,000-byte launch name still reproduces; 16 GiB snapshots of zeros are
restored and compared in windows and end as a verdict (the zeros are not
what the kernel saw, so DIFFERS is right). It never skips: a check that
cannot run fails.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

GEMM = re.compile(r"gemm|nvjet|xmma|cutlass|sm90")
RAW_CONTROLS = ("\x1b", "\x07", "\u009b", "\u009d", "\u202e")

# name: (extra replay arguments, allowed exit codes, text the output must hold)
CASES = {
    "pointer-word-wraps.kcap": (["--no-fixed-va"], {1}, "the trace is malformed at event #"),
    "param-layout-wraps.kcap": ([], {1}, "the trace is malformed at event #"),
    "huge-module-image.kcap": ([], {1}, "module image of 17179869184 bytes is over the limit"),
    "missing-blob.kcap": ([], {1}, "launch "),
    "pieces-disagree-with-size.kcap": ([], {1}, "launch "),
    "terminal-controls-in-names.kcap": ([], {1}, "\\u009b31m\\u009d0;title\\u202ex"),
    "long-launch-names.kcap": ([], {0}, "REPRODUCED"),
    "huge-pre-state.kcap": ([], {0, 3}, "Verdict:"),
    "huge-post-state.kcap": ([], {0, 3}, "Verdict:"),
}


def run(command, log_dir, label, **kwargs):
    try:
        done = subprocess.run(command, capture_output=True, timeout=300, **kwargs)
    except subprocess.TimeoutExpired:
        return None
    (log_dir / f"{label}.stdout").write_bytes(done.stdout)
    (log_dir / f"{label}.stderr").write_bytes(done.stderr)
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kcap", required=True)
    parser.add_argument("--make-hostile", required=True)
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    log_dir = Path(args.log_dir).resolve()
    corpus = log_dir / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for old in list(log_dir.glob("*.kcap")) + list(corpus.glob("*.kcap")):
        old.unlink()
    trace, small = log_dir / "trace.kcap", log_dir / "one-launch.kcap"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCAP_") and k != "LD_PRELOAD"}

    recorded = run([args.kcap, "record", "-q", "-o", str(trace), "--", *command], log_dir, "record", env=env)
    if recorded is None or recorded.returncode != 0 or not trace.is_file():
        print(f"FAILED: recording failed: {recorded and recorded.stderr.decode(errors='replace')}")
        return 1
    everything = run([args.kcap, "replay", str(trace), "--json"], log_dir, "replay-all")
    launches = json.loads(everything.stdout)["launches"] if everything and everything.stdout else []
    picks = [l for l in launches if l["verdict"] == "REPRODUCED" and not GEMM.search(l["kernel"])]
    if not picks:
        print(f"FAILED: no launch other than a GEMM reproduced: {[(l['kernel'], l['verdict']) for l in launches]}")
        return 1
    n = picks[0]["launchIndex"]
    cut = run([args.kcap, "extract", str(trace), "--launch", str(n), "-o", str(small)], log_dir, "extract")
    if cut is None or cut.returncode != 0:
        print(f"FAILED: kcap extract --launch {n}: {cut and cut.stderr.decode(errors='replace')}")
        return 1
    made = run([args.make_hostile, str(small), str(corpus)], log_dir, "make-hostile")
    if made is None or made.returncode != 0:
        print(f"FAILED: {args.make_hostile}: {made and made.stderr.decode(errors='replace')}")
        return 1
    print(f"launch {n} ({picks[0]['kernel'][:60]}) cut out; corpus written")

    failures = []
    for name, (extra, codes, text) in CASES.items():
        path = corpus / name
        if not path.is_file():
            failures.append(f"{name}: not written")
            continue
        done = run([args.kcap, "replay", str(path), *extra], log_dir, f"replay-{name}")
        if done is None:
            failures.append(f"{name}: replay did not end within 300 s")
            continue
        out = (done.stdout + done.stderr).decode("utf-8", errors="replace")
        verdict = next((line for line in out.splitlines() if "ERROR:" in line or line.startswith("Verdict")), "")
        print(f"{name}: exit {done.returncode}: {verdict[:160]}")
        if done.returncode < 0:
            failures.append(f"{name}: replay ended by signal {-done.returncode}")
        elif done.returncode not in codes:
            failures.append(f"{name}: exit {done.returncode}, expected one of {sorted(codes)}:\n{out[-2000:]}")
        if text not in out:
            failures.append(f"{name}: the output lacks {text!r}:\n{out[-2000:]}")
        if done.returncode == 1 and path.name not in out and f"launch " not in out:
            failures.append(f"{name}: an exit 1 that names neither the file nor a launch:\n{out[-2000:]}")
        for raw in RAW_CONTROLS:
            if raw in out:
                failures.append(f"{name}: a raw terminal control {raw!r} reached the output")
    for failure in failures:
        print(f"FAILED: {failure}")
    if not failures:
        print(f"all {len(CASES)} hostile traces ended as expected on the GPU")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
