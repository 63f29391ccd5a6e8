#!/usr/bin/env python3
"""bench/launch_overhead.py end to end against the driver double: the script
that produces the launch-overhead figures of docs/benchmarks.md runs only on
the GPU host, where a parsing slip costs a GPU run. Here it runs the real
benchmark program under the real shim (tiny sizes; the figures themselves
mean nothing on the double) and the test checks what it prints.

    launch_overhead_script_test.py SCRIPT BENCH SHIM KCAP DOUBLE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile


def run(script, bench, shim, kcap, double_dir, *extra, threads=1,
        configs="metadata in-process,metadata B in-process"):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = double_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, script, "--bench", bench, "--shim", shim, "--kcap", kcap, "--threads", str(threads),
                   "--rounds", "5", "--launches", "300", "--threaded-launches", "300", "--reps", "1",
                   "--interleave", "2", "--dir", scratch,
                   "--configs", configs, *extra]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


failures = []


def expect(condition, what, output):
    if not condition:
        failures.append(what)
        print(f"FAILED: {what}\n--- output ---\n{output}\n---", flush=True)


def expect_rows(out, threads, rows, what):
    """A table row for each of `rows` at `threads` threads, with its figure and interval."""
    for row in rows:
        expect(re.search(rf"^\| {threads} \| {re.escape(row)} \|[^|]*\|[^|]*\| [+-][\d.]+ \| [+-]\d+ to [+-]\d+ \|",
                         out, re.M), f"{what} for {row}", out)


def main():
    script, bench, shim, kcap, double_dir = sys.argv[1:6]

    # An A/B of an option: B records at another zstd level. Every trace must
    # hold every launch (--kcap), so the script exits 0.
    status, out = run(script, bench, shim, kcap, double_dir, "--compare-env", "KCAP_LEVEL=3")
    expect(status == 0, f"exit status 0 with --compare-env (got {status})", out)
    expect("PROBLEM" not in out, "no PROBLEM line when every trace holds every launch", out)
    expect(re.search(r"^host: .+, [1-9]\d* logical CPUs, [1-9]\d* cores, [1-9]\d* socket\(s\); clocksource \S+ "
                     r"\(available: [^)]+\)$", out, re.M), "the host's CPUs and clock come first", out)
    expect("threads 1 plain" not in out, "no plain process when every configuration is in-process", out)
    expect(len(re.findall(r"^  threads 1 metadata in-process: [\d.]+ ns/launch through the shim, [+-][\d.]+ "
                          r"against libcuda's own \(median of 2 pairs\); launching threads' CPU time [+-][\d.]+, "
                          r"process CPU time [+-][\d.]+$",
                          out, re.M)) == 5, "five in-process lines with wall, thread and process CPU figures", out)
    expect_rows(out, 1, ("metadata in-process", "metadata in-process (thread CPU time)",
                         "metadata in-process (process CPU time)", "metadata B in-process",
                         "metadata B in-process (thread CPU time)"), "a table row with its figure and interval")
    expect(re.search(r"^\| 1 \| metadata in-process \(thread CPU time\) .*\(not the target's measure\) \|$", out, re.M),
           "the thread CPU row carries no verdict on the target", out)
    expect(re.search(r"^metadata B in-process \(KCAP_LEVEL=3\) - metadata in-process, 1 thread\(s\), 5 rounds: "
                     r"[+-][\d.]+ ns a launch, 90% interval [+-]\d+ to [+-]\d+$", out, re.M),
           "the paired B - A line names the option", out)

    # Several threads in one process, each block run by all of them at once:
    # every launch through the shim is in the trace (2 threads x (warm-up +
    # 2 blocks of 300)).
    status, out = run(script, bench, shim, kcap, double_dir, "--compare-env", "KCAP_MODE=checkpoint", threads=2,
                      configs="plain,metadata in-process,metadata B in-process,pass-through in-process")
    expect(status == 0, f"exit status 0 with two threads in-process (got {status})", out)
    expect("PROBLEM" not in out, "no PROBLEM line: the two threads' traces hold every launch", out)
    # B records in checkpoint mode: its lines say what its checkpoints held
    # (at least the first, at the first launch, and the last, at exit); A's
    # metadata traces have none to report.
    expect(len(re.findall(r"^  threads 2 metadata B in-process: .*; (\d+) checkpoints held the threads [\d.]+ ms, "
                          r"[\d.]+ ns a recorded launch of one thread$", out, re.M)) == 5,
           "every B line reports its checkpoints' holds", out)
    expect(not re.search(r"^  threads 2 metadata in-process: .*checkpoints held", out, re.M),
           "no holds reported for metadata mode", out)
    expect_rows(out, 2, ("metadata in-process", "metadata in-process (process CPU time)", "metadata B in-process",
                         "pass-through in-process", "metadata in-process (libcuda's own blocks against plain)"),
                "a two-thread table row")

    # A/A in one process (both blocks of a pair through the shim, every
    # launch of both in the trace) and the host-work reference (plain
    # processes that spin after each launch, no shim).
    status, out = run(script, bench, shim, kcap, double_dir, "--host-work", "200", threads=2,
                      configs="plain,metadata A/A in-process")
    expect(status == 0, f"exit status 0 with A/A in-process and --host-work (got {status})", out)
    expect("PROBLEM" not in out, "no PROBLEM line: the A/A traces hold the launches of both blocks", out)
    expect(len(re.findall(r"^  threads 2 metadata A/A in-process: [\d.]+ ns/launch through the shim, [+-][\d.]+ "
                          r"against its other blocks \(median of 2 pairs\)", out, re.M)) == 5,
           "five A/A lines, each against its other blocks", out)
    expect_rows(out, 2, ("metadata A/A in-process", "metadata A/A in-process (recorded blocks against plain)",
                         "plain + host work"), "a two-thread table row")
    expect(re.search(r"^\| 2 \| metadata A/A in-process \|.*\(not the target's measure\) \|$", out, re.M),
           "the A/A row carries no verdict on the target", out)
    expect("A/A in-process (libcuda's own blocks" not in out, "no libcuda's-own row for A/A: it has no such blocks", out)
    expect(re.search(r"^\| 2 \| plain \+ host work \|.*\| \(a reference without the shim: 200 ns of work a launch\) \|$",
                     out, re.M), "the host-work row names itself a reference and its nanoseconds", out)

    # The host-work reference in one process: no shim, one block of each
    # pair spins 20 us after each launch, far above the double's launch.
    status, out = run(script, bench, shim, kcap, double_dir, "--host-work", "20000",
                      configs="host work in-process,metadata in-process")
    expect(status == 0, f"exit status 0 with host work in-process (got {status})", out)
    expect("PROBLEM" not in out, "no PROBLEM line: the bench ran with the work asked for", out)
    expect(len(re.findall(r"^  threads 1 host work in-process: [\d.]+ ns/launch with the work, \+\d{5}\.\d against "
                          r"libcuda's own", out, re.M)) == 5, "five processes, each adding at least 10 us", out)
    expect(re.search(r"^\| 1 \| host work in-process \|.*\| \+\d{5}\.\d \|.*\| \(a reference without the shim: "
                     r"20000 ns of work a launch of one block\) \|$", out, re.M),
           "the in-process host-work row: its work, named a reference", out)
    expect("plain + host work" not in out, "no plain + host work processes unless named", out)
    expect("host work in-process (libcuda's own blocks" not in out, "no libcuda's-own row for the reference", out)
    status, out = run(script, bench, shim, kcap, double_dir, configs="host work in-process")
    expect(status == 2 and "it needs --host-work NS" in out, "host work in-process without --host-work is refused",
           out)

    # B records only 10 launches: the --kcap check must catch it and fail the run.
    status, out = run(script, bench, shim, kcap, double_dir, "--compare-env", "KCAP_MAX_LAUNCHES=10")
    expect(status == 1, f"exit status 1 when B's traces lack launches (got {status})", out)
    expect(re.search(r"^  threads 1 metadata B in-process: PROBLEM the trace holds 10 launches of \d+ made", out, re.M),
           "a PROBLEM line naming how many launches B's trace holds", out)
    expect(not re.search(r"^  threads 1 metadata in-process: PROBLEM", out, re.M), "A has no problem", out)

    # --env reaches the first build's recording too (A records only 10
    # launches now), and B's, before --compare-env.
    status, out = run(script, bench, shim, kcap, double_dir, "--env", "KCAP_MAX_LAUNCHES=10", "--compare-env",
                      "KCAP_MAX_LAUNCHES=1000000000")
    expect(status == 1, f"exit status 1 when --env leaves launches out of A's traces (got {status})", out)
    expect(re.search(r"^  threads 1 metadata in-process: PROBLEM the trace holds 10 launches of \d+ made", out, re.M),
           "a PROBLEM line naming how many launches A's trace holds under --env", out)
    expect("recording environment: KCAP_MAX_LAUNCHES=10" in out, "the header names --env", out)

    # Every process fails (no such CPU to pin to): the script stops after
    # the first round instead of running all five, names the problem once
    # with its count, and exits 1.
    status, out = run(script, bench, shim, kcap, double_dir, "--compare-env", "KCAP_LEVEL=3", "--pin-cpu", "100000")
    expect(status == 1, f"exit status 1 when every process fails (got {status})", out)
    expect("stopped after the first round (1 thread(s)): every configuration failed in it" in out,
           "the script says it stopped after a first round that failed entirely", out)
    expect(re.search(r"^\| 1 \| metadata in-process \| failed \| \| \| \| \| [^;|]+ \|$", out, re.M),
           "A's failed row names its problem once", out)

    status, out = run(script, bench, shim, kcap, double_dir, "--compare-env", "KCAP_LEVEL")
    expect(status == 2 and "--compare-env: expected KEY=VALUE" in out, "a malformed --compare-env is refused", out)
    status, out = run(script, bench, shim, kcap, double_dir, "--env", "=1")
    expect(status == 2 and "--env: expected KEY=VALUE" in out, "a malformed --env is refused", out)

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
