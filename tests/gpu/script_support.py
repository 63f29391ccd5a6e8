"""What the GPU test scripts share (graph_bisect.py, checkpoint_bisect.py,
flight_recorder.py, checkpoint_damage.py, checkpoint_determinism.py,
die_in_launch.py)."""
import argparse
import subprocess
from pathlib import Path


def run(command, log, env=None, timeout=300):
    """Runs `command`, keeps its exit status and output in the file `log`
    (a Path), and returns the CompletedProcess."""
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout, env=env)
    log.write_text(f"$ {' '.join(command)}\nexit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done


def checkpoint_recording(description, default_every, add_options=None):
    """The arguments of a script that records a program in checkpoint mode
    (--kcap, --log-dir, --checkpoint-every, those add_options(parser) adds,
    -- PROGRAM [ARGS...]), parsed, and its recording: (args, logs, trace)
    with the trace recorded, or (args, logs, None) after saying why not."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kcap", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("--checkpoint-every", default=default_every)
    if add_options is not None:
        add_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    trace = logs / "recorded.kcap"
    recorded = run([args.kcap, "record", "-q", "--force", "--mode", "checkpoint", "--checkpoint-every",
                    args.checkpoint_every, "-o", str(trace), "--", *command], logs / "recorded.txt")
    if recorded.returncode != 0 or not trace.exists():
        print(f"FAILED: the recording exited {recorded.returncode}: {recorded.stderr[-1000:]}")
        return args, logs, None
    return args, logs, trace


def report(failures, logs):
    """Prints each failure and the verdict; the script's exit status."""
    for failure in failures:
        print("FAILED:", failure)
    print("PASSED" if not failures else f"{len(failures)} check(s) failed; logs in {logs}")
    return 0 if not failures else 1
