#!/usr/bin/env python3
"""Launch overhead of the shim: runs kcap_bench_launch_overhead (100k empty
kernel launches on one stream, timed on the host) without the shim, with the
shim passing calls through (LD_PRELOAD, no KCAP_OUTPUT), with it counting
(KCAP_STATS_FILE) and with it recording metadata (KCAP_OUTPUT, KCAP_MODE=metadata),
and prints the nanoseconds each adds per launch against the 300 ns target.

    launch_overhead.py --bench build-gpu/bench/kcap_bench_launch_overhead \\
        --shim build-gpu/interpose/libkcap_interpose.so [--kcap build-gpu/tools/kcap] \\
        [--threads 1,16] [--rounds 9] [--launches 100000] [--threaded-launches 20000] [--reps 3] [--dir /tmp]
        [--pin-cpu C] [--cpus LIST] [--compare-shim OTHER.so] [--compare-env KEY=VALUE,...] [--compare-cpus LIST]
        [--interleave P] [--configs LIST] [--deadline SECONDS] [--host-work NS]

Configurations run round-robin, --rounds processes each, so that drift of
the machine hits all of them; a configuration's figure is the median over its
processes of each process's median repetition. What a configuration adds is
the median of its per-round differences (process i against plain's process
i, run beside it), with a distribution-free 90% interval for that median
(order statistics; needs 5 rounds): the target is "met" when the whole
interval lies at or under 300 ns, "MISSED" when it lies above, and
"unresolved" when it straddles the target (the processes of one
configuration spread over several hundred ns on the H200 host, as much as
the effect measured). Each process's line also
gives its launching threads' context switches (involuntary: other threads,
the shim's writer among them, taking their CPU; voluntary: blocking) and
CPU migrations per 1,000 launches, and the whole process's CPU time per
launch (what the shim's other threads cost the machine). --compare-shim
adds "metadata B", recording with another build of the shim in the same
rounds, and the paired difference B - metadata (an A/B of two builds on one
machine); --compare-env sets variables in B's environment (an A/B of an
option, with the same build unless --compare-shim names another);
--compare-cpus runs B's processes under taskset on other CPUs (where the
shim's writer threads run), the launching thread still on --pin-cpu.
"metadata in-process" (--interleave P; on by default with one thread, when
named in --configs with several) measures the same
within one process: P pairs of blocks of launches, one through the shim
recording and one through libcuda's own cuLaunchKernel, which the shim does
not see (kcap_bench_launch_overhead --interleave; with several threads all
of them run the same kind of block at once); its figure is the median over
rounds of each process's median pair difference, free of the spread between
processes; two more rows give the same for the launching threads' CPU time
and the whole process's (the writer's threads included) instead of wall
time (not the target's measure, but a VM guest does not count in them the
time the host gave its vCPU to others), and, with plain in the same rounds,
one its blocks through libcuda's own entry point against plain's processes
(what being a recording process costs launches the shim does not see: its
threads, its memory, the driver's state), and one its recorded blocks
against plain's processes. "metadata A/A in-process" (only when named)
runs both blocks of each pair through the shim (--same-blocks): its pair
difference is the in-process method's own spread, and its blocks, every
one recorded, are those of a process that records all its launches, set
against the same rounds' plain processes. --host-work NS adds "plain +
host work": plain processes whose launching threads spin NS ns after each
launch, touching nothing shared (a reference, not the shim: what adding NS
ns of a thread's own work to each launch costs at that thread count, where
the driver's contention may hide it or not); with it, "host work
in-process" (only when named) is the same reference measured as the
in-process rows are: one process, no shim, pairs of blocks through
libcuda's own entry point of which one spins NS ns after each launch
(kcap_bench_launch_overhead --hooked-work). With --kcap, every metadata
trace must hold every launch the program made (else the row says so and the
script exits 1), and a trace recorded in checkpoint mode (--env or
--compare-env KCAP_MODE=checkpoint) has its checkpoints' holds printed with
its process: a hold stops every launching thread, so a figure meant
"between checkpoints" is measured with KCAP_CHECKPOINT_EVERY past the
run's length (only the first, in the warm-up, and the last, at exit).
Exit status 1 also when a run fails; a missed target is a result, not a
failure. Fewer rounds than asked still give the tables, from
the complete rounds, with a line saying why: --deadline S starts no round
that would end past S seconds, and SIGTERM (`timeout`) stops at once.
"""
import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

TARGET_NS = 300.0
CONFIGS = ["plain", "pass-through", "stats", "metadata"]
# What each process says about the scheduling of its launching threads, and
# the CPU time of all its threads (the shim's writer among them).
SCHEDULING = [("involuntary_switches_per_1k_launches", "involuntary switches/1k"),
              ("voluntary_switches_per_1k_launches", "voluntary switches/1k"),
              ("migrations_per_1k_launches", "migrations/1k"),
              ("process_cpu_ns_per_launch", "process CPU ns/launch")]


# In-process: what the shim adds to the launching threads' CPU time (not
# wall time), the median of a process's pairs. A VM guest does not count
# the time its vCPU was stolen by the host in a thread's CPU time.
THREAD_CPU = "launching thread CPU added"
# ... and to the whole process's (the shim's writer threads included).
PROCESS_CPU = "process CPU added"
# In-process: the median time a launch of the blocks through libcuda's own
# entry point, which the shim does not see. Against plain's processes of
# the same rounds it is what being a recording process costs launches the
# shim does not record (its threads, its memory, the driver's state).
DIRECT = "libcuda's own ns/launch"
# The reference configurations of --host-work: between processes, and in
# one process (no shim; one block of each pair spins after each launch).
HOST_WORK = "plain + host work"
HOST_WORK_IN_PROCESS = "host work in-process"
# Both blocks of a pair through the shim (--same-blocks).
SAME_BLOCKS = "metadata A/A in-process"
# Checkpoint mode, with --kcap: how many checkpoints the process's trace
# holds and how long they held its launching threads (kcap info). A hold
# stops every thread, and in an A/B process it lands in a block through
# the shim (only those launches ask whether one is due): with one due
# every second it can weigh more than the shim's work between them.
HOLDS = "checkpoint holds"


def summarize(problems):
    """A configuration's problems, each once, with how many processes had it."""
    return "; ".join(problem if n == 1 else f"{problem} ({n} processes)" for problem, n in Counter(problems).items())


def binomial_cdf(k, n):
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def median_interval(values, level=0.90):
    """(low, high): order statistics x(j) <= x(n+1-j) that hold the median with
    probability >= level, whatever the distribution; None with too few values."""
    ordered = sorted(values)
    n = len(ordered)
    best = None
    for j in range(1, n // 2 + 1):
        if 1 - 2 * binomial_cdf(j - 1, n) >= level:
            best = j
    if best is None:
        return None
    return ordered[best - 1], ordered[n - best]


def verdict(interval):
    if interval is None:
        return "unresolved (too few rounds)"
    low, high = interval
    if high <= TARGET_NS:
        return "met"
    if low > TARGET_NS:
        return "MISSED"
    return "unresolved"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="kcap_bench_launch_overhead")
    p.add_argument("--shim", required=True, help="libkcap_interpose.so")
    p.add_argument("--kcap", help="the kcap binary: check that the metadata traces hold every launch")
    p.add_argument("--threads", default="1,16", help="comma-separated thread counts (default 1,16)")
    # Nine processes of three repetitions rather than three of seven: on the
    # H200 host one configuration's processes spread over +-400 ns, more than
    # the effect measured, while repetitions within a process agree.
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--launches", type=int, default=100000, help="launches a repetition, one thread")
    p.add_argument("--threaded-launches", type=int, default=20000,
                   help="launches a repetition of each thread when there are several (16 x 100k would take minutes)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--dir", default="/tmp", help="where the metadata traces and stats files go (deleted)")
    p.add_argument("--pin-cpu", type=int, default=-1,
                   help="run the launching threads on CPUs C, C+1, ... (after warm-up; the same in every "
                        "configuration): removes which-core noise; -1 (default) leaves them unpinned")
    p.add_argument("--compare-shim", default="",
                   help="another libkcap_interpose.so: also record metadata with it (\"metadata B\") and "
                        "print B's paired difference against the first")
    p.add_argument("--compare-env", default="",
                   help="KEY=VALUE[,KEY=VALUE...]: set these in \"metadata B\"'s environment (B is the same "
                        "shim unless --compare-shim names another): an A/B of an option, e.g. KCAP_LEVEL=-5")
    p.add_argument("--env", default="",
                   help="KEY=VALUE[,KEY=VALUE...]: set these in every recording configuration's environment "
                        "(\"metadata B\" too, before --compare-env), e.g. KCAP_MODE=checkpoint to measure "
                        "checkpoint mode in the \"metadata\" rows")
    p.add_argument("--compare-cpus", default="",
                   help="run \"metadata B\"'s processes under `taskset -c LIST` instead of --cpus (the launching "
                        "thread still moves to --pin-cpu): an A/B of where the shim's threads run")
    p.add_argument("--interleave", type=int, default=6,
                   help="pairs of blocks in each \"metadata in-process\" process (0: none)")
    p.add_argument("--configs", default="",
                   help="comma-separated configurations to run (plain runs too, unless all of them are "
                        "in-process, which measure against libcuda's own entry point), e.g. "
                        "\"metadata in-process,metadata B in-process\"; default: all but \"pass-through "
                        "in-process\", \"stats in-process\" and, with several threads, every in-process "
                        "configuration, which run only when named")
    p.add_argument("--deadline", type=float, default=0,
                   help="seconds this script may run: no round is started that would end past it, going by "
                        "the longest round so far (a time limit on the whole run); 0: none")
    p.add_argument("--graph", action="store_true",
                   help="each launch is a cuGraphLaunch of a one-node graph (the bench's --graph 1); the "
                        "metadata traces must hold every graph launch")
    p.add_argument("--host-work", type=int, default=0,
                   help="also run \"plain + host work\": plain processes whose launching threads spin NS ns after "
                        "each launch (the bench's --host-work): what that much of a thread's own work costs a "
                        "launch, for reference; with --configs naming \"host work in-process\", the same in "
                        "one process (then plain + host work only when named too); 0 (default): not run")
    p.add_argument("--cpus", default="",
                   help="run each process under `taskset -c CPUS`: all its threads, the shim's included, "
                        "on these CPUs (tells whether the shim's threads cost by being elsewhere)")
    args = p.parse_args()
    args.compare_env_pairs = {}
    args.env_pairs = {}
    if args.host_work < 0:
        p.error("--host-work: expected nanoseconds >= 0")
    if HOST_WORK_IN_PROCESS in {c.strip() for c in args.configs.split(",")} and args.host_work == 0:
        p.error(f"--configs names \"{HOST_WORK_IN_PROCESS}\": it needs --host-work NS")
    if args.compare_cpus and args.pin_cpu < 0:
        p.error("--compare-cpus needs --pin-cpu (else the launching thread runs among the LIST too)")
    for flag, text, pairs in (("--env", args.env, args.env_pairs),
                              ("--compare-env", args.compare_env, args.compare_env_pairs)):
        for item in filter(None, text.split(",")):
            key, equals, value = item.partition("=")
            if not equals or not key:
                p.error(f"{flag}: expected KEY=VALUE, got {item!r}")
            pairs[key] = value
    for flag, path in (("--bench", args.bench), ("--shim", args.shim), ("--compare-shim", args.compare_shim)):
        if path and not Path(path).is_file():
            p.error(f"{flag}: no such file: {path}")
    return args


def environment(config, args, scratch):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("KCAP_")}
    if config not in ("plain", HOST_WORK, HOST_WORK_IN_PROCESS):
        env["LD_PRELOAD"] = args.shim
    if config.startswith("stats"):
        env["KCAP_STATS_FILE"] = str(scratch / "stats")
    if config.startswith("metadata"):
        env["KCAP_OUTPUT"] = str(scratch / "trace.kcap")
        env["KCAP_MODE"] = "metadata"
        env.update(args.env_pairs)
    if config.startswith("metadata B"):
        env["LD_PRELOAD"] = args.compare_shim or args.shim
        env.update(args.compare_env_pairs)
    return env


def trace_summary(kcap, trace):
    """`kcap info --json` of the trace, or None if it cannot be read."""
    info = subprocess.run([kcap, "info", "--json", str(trace)], capture_output=True, text=True)
    return json.loads(info.stdout) if info.returncode == 0 else None


def launches_in(summary, graph):
    """The kcap_empty launches (graph: the graph launches) the trace holds; None if it cannot be read."""
    if summary is None:
        return None
    if graph:
        return int(summary.get("events", {}).get("byType", {}).get("graphLaunch", 0))
    return sum(int(k["launches"]) for k in summary.get("kernels", []) if k["name"] == "kcap_empty")


def run_once(args, config, threads, scratch):
    """(median ns per launch, median loop-only ns per launch, problem or None)."""
    for old in scratch.glob("*"):
        old.unlink()
    launches = args.launches if threads == 1 else args.threaded_launches
    command = [args.bench, "--launches", str(launches), "--reps", str(args.reps), "--threads", str(threads)]
    if args.graph:
        command += ["--graph", "1"]
    in_process = config.endswith("in-process")
    if in_process:
        command += ["--interleave", str(args.interleave)]
    if config == SAME_BLOCKS:
        command += ["--same-blocks", "1"]
    if config == HOST_WORK:
        command += ["--host-work", str(args.host_work)]
    if config == HOST_WORK_IN_PROCESS:
        command += ["--hooked-work", str(args.host_work)]
    cpus = args.compare_cpus if config.startswith("metadata B") and args.compare_cpus else args.cpus
    if cpus:
        command = ["taskset", "-c", cpus] + command
    if args.pin_cpu >= 0:
        command += ["--pin-cpu", str(args.pin_cpu)]
    try:
        done = subprocess.run(command, env=environment(config, args, scratch), capture_output=True, text=True,
                              timeout=600)
    except subprocess.TimeoutExpired:
        return None, None, "timed out after 600 s", None
    if done.returncode != 0:
        return None, None, f"exit status {done.returncode}: {done.stderr.strip()[-500:]}", None
    shim_lines = [line for line in done.stderr.splitlines() if line.startswith("kcap:")]
    if shim_lines:
        return None, None, "the shim said: " + " / ".join(shim_lines), None
    value = lambda key: float(re.search(rf"^{key} (-?[\d.]+)$", done.stdout, re.M).group(1))
    problem = None
    holds = None  # checkpoint mode: what its checkpoints held the launching threads
    # The program ran what this configuration is (a bench that ignored a
    # flag would measure something else under its name).
    settings = dict(re.findall(r" (\w+) (-?\d+)", (re.search(r"^config .*$", done.stdout, re.M) or [""])[0]))
    wanted = {"same_blocks": "1" if config == SAME_BLOCKS else "0",
              "host_work_ns": str(args.host_work) if config == HOST_WORK else "0",
              "hooked_work_ns": str(args.host_work) if config == HOST_WORK_IN_PROCESS else "0"}
    for key, expected in wanted.items():
        if settings.get(key) != expected:
            problem = f"the bench ran with {key} {settings.get(key)}, not {expected}"
    if config.startswith("metadata") and args.kcap:
        made_line = r"^made graph_launches (\d+)$" if args.graph else r"^made kernel kcap_empty (\d+)$"
        made = int(re.search(made_line, done.stdout, re.M).group(1))
        traces = sorted(scratch.glob("trace*.kcap"))
        summary = trace_summary(args.kcap, traces[0]) if len(traces) == 1 else None
        held = launches_in(summary, args.graph)
        if held != made:
            problem = "; ".join(filter(None, [problem, f"the trace holds {held} launches of {made} made "
                                                       f"({len(traces)} trace files)"]))
        checkpoints = (summary or {}).get("checkpoints", {})
        if checkpoints.get("count") and made:
            # Every launching thread waits out each hold: what the holds
            # cost a recorded launch of one thread, spread over them all.
            hold_ns = int(checkpoints.get("holdNs", 0))
            holds = (f"{checkpoints['count']} checkpoints held the threads {hold_ns / 1e6:.2f} ms, "
                     f"{hold_ns * threads / made:.1f} ns a recorded launch of one thread")
    scheduling = {}
    for key, name in SCHEDULING:
        found = re.search(rf"^{key} (-?[\d.]+)$", done.stdout, re.M)
        scheduling[name] = float(found.group(1)) if found else None
    scheduling[HOLDS] = holds
    if in_process:
        # (hooked ns per launch, the process's added figure)
        hooked = [float(x) for x in re.findall(r"^pair \d+ hooked_ns_per_launch ([\d.]+)", done.stdout, re.M)]
        direct = [float(x) for x in re.findall(r" direct_ns_per_launch ([\d.]+)", done.stdout, re.M)]
        scheduling[DIRECT] = statistics.median(direct) if direct else None
        for name, key in ((THREAD_CPU, "interleaved_added_cpu_ns_per_launch"),
                          (PROCESS_CPU, "interleaved_added_process_cpu_ns_per_launch")):
            found = re.search(rf"^{key} (-?[\d.]+)$", done.stdout, re.M)
            scheduling[name] = float(found.group(1)) if found else None
        return statistics.median(hooked), value("interleaved_added_ns_per_launch"), problem, scheduling
    return value("median_ns_per_launch"), value("median_loop_ns_per_launch"), problem, scheduling


class Stopped(Exception):
    """SIGTERM (`timeout`): the rounds done so far are reported."""


def stop_on_sigterm(signum, frame):
    raise Stopped()


def run_round(args, configs, threads, scratch, results, problems, cpu, in_process_figures):
    """One process of each configuration, appended to results (and cpu, in_process_figures, problems)."""
    for config in configs:
        total, loop, problem, scheduling = run_once(args, config, threads, scratch)
        results[config].append(None if total is None else (total, loop))
        # Kept by round (None: not measured), so that a cut round can be dropped.
        cpu[config].append(scheduling["process CPU ns/launch"] if total is not None and scheduling else None)
        # (launching threads' CPU added, process CPU added, libcuda's own ns/launch), in-process only
        measured = total is not None and scheduling
        in_process_figures[config].append(tuple(scheduling.get(k) for k in (THREAD_CPU, PROCESS_CPU, DIRECT))
                                  if measured else None)
        held = f"; {scheduling[HOLDS]}" if total is not None and scheduling.get(HOLDS) else ""
        if total is not None and config.endswith("in-process"):
            on_cpu, process, _ = in_process_figures[config][-1]
            other = "its other blocks" if config == SAME_BLOCKS else "libcuda's own"
            through = "with the work" if config == HOST_WORK_IN_PROCESS else "through the shim"
            print(f"  threads {threads} {config}: {total:.1f} ns/launch {through}, "
                  f"{loop:+.1f} against {other} (median of {args.interleave} pairs)"
                  + ("" if on_cpu is None else f"; launching threads' CPU time {on_cpu:+.1f}")
                  + ("" if process is None else f", process CPU time {process:+.1f}") + held, flush=True)
        elif total is not None:
            print(f"  threads {threads} {config}: {total:.1f} ns/launch (loop {loop:.1f}); launching "
                  "threads: " + ", ".join(f"{k} {v}" for k, v in scheduling.items() if k != HOLDS) + held,
                  flush=True)
        if problem:
            problems[config].append(problem)
            print(f"  threads {threads} {config}: PROBLEM {problem}", flush=True)


def read_text(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def host_facts():
    """What decides how a launch path's cost shows on this host: the CPU, how its logical
    CPUs pair into cores and sockets, and the kernel's clock (a stamp from the TSC costs one
    instruction, CLOCK_MONOTONIC through a hypervisor's clock more)."""
    model = next((line.split(":", 1)[1].strip() for line in read_text("/proc/cpuinfo").splitlines()
                  if line.startswith("model name")), "unknown CPU")
    cpus = sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"))
    sockets = {read_text(c / "physical_package_id") for c in cpus}
    cores = {(read_text(c / "physical_package_id"), read_text(c / "core_id")) for c in cpus}
    source = "/sys/devices/system/clocksource/clocksource0/"
    return (f"host: {model}, {len(cpus)} logical CPUs, {len(cores)} cores, {len(sockets)} socket(s); "
            f"clocksource {read_text(source + 'current_clocksource') or '?'} "
            f"(available: {read_text(source + 'available_clocksource') or '?'})")


def main():
    args = parse_args()
    started = time.monotonic()
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    cut = None  # why fewer rounds than --rounds ran
    scratch = Path(args.dir) / f"kcap-bench-launch-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    failed = False
    print(host_facts())
    print(f"bench: {args.bench}\nshim: {args.shim}\n"
          + (f"recording environment: {args.env}\n" if args.env else "")
          + f"{args.launches} launches (one thread; "
          f"{args.threaded_launches} a thread with several) x {args.reps} reps a process, "
          f"{args.rounds} processes a configuration, round-robin; figures: median over processes of each "
          "process's median repetition, ns per launch of one thread (loop + synchronize; loop only); "
          + (f"launching threads pinned from CPU {args.pin_cpu} on" if args.pin_cpu >= 0 else "threads not pinned")
          + (f"; every process on CPUs {args.cpus} (taskset)" if args.cpus else ""))
    rows = []
    comparisons = []  # (threads, median of B - metadata, its interval, rounds)
    try:
        for threads in [int(t) for t in args.threads.split(",")]:
            compare = bool(args.compare_shim or args.compare_env_pairs or args.compare_cpus)
            configs = CONFIGS + (["metadata B"] if compare else []) + ([HOST_WORK] if args.host_work > 0 else [])
            in_process = ["metadata in-process"] + (["metadata B in-process"] if compare else [])
            if args.interleave > 0 and threads == 1:
                configs += in_process
            if args.configs:
                wanted = {c.strip() for c in args.configs.split(",")}
                # Only when asked for: several threads in-process (a process
                # takes several times as long), and the shim's launch path
                # alone, without a writer (pass-through) or with counters
                # only (stats), in-process.
                if args.interleave > 0:
                    optional = (["pass-through in-process", "stats in-process", SAME_BLOCKS]
                                + ([HOST_WORK_IN_PROCESS] if args.host_work > 0 else [])
                                + (in_process if threads > 1 else []))
                    configs += [c for c in optional if c in wanted]
                # In-process configurations need no plain process: each
                # measures against libcuda's own entry point inside itself.
                needs_plain = "plain" in wanted or any(not c.endswith("in-process") for c in wanted)
                # plain + host work is in configs only when --host-work asks
                # for it: then unless only the in-process reference is named.
                across = HOST_WORK in wanted or HOST_WORK_IN_PROCESS not in wanted
                configs = [c for c in configs
                           if (c == "plain" and needs_plain) or c in wanted or (c == HOST_WORK and across)]
            results = {config: [] for config in configs}  # a round's (total, loop) or None
            problems = {config: [] for config in configs}
            cpu = {config: [] for config in configs}
            in_process_figures = {config: [] for config in configs}
            longest = 0.0
            complete = 0
            try:
                for _ in range(args.rounds):
                    elapsed = time.monotonic() - started
                    if args.deadline > 0 and complete > 0 and elapsed + longest > args.deadline:
                        cut = (f"stopped after {complete} of {args.rounds} rounds ({threads} thread(s)): "
                               f"another would end past --deadline {args.deadline:g} s")
                        break
                    run_round(args, configs, threads, scratch, results, problems, cpu, in_process_figures)
                    failed = failed or any(problems[c] for c in configs)
                    longest = max(longest, time.monotonic() - started - elapsed)
                    complete += 1
                    if complete == 1 and all(results[c][-1] is None for c in configs):
                        cut = f"stopped after the first round ({threads} thread(s)): every configuration failed in it"
                        break
            except Stopped:
                cut = f"stopped by SIGTERM after {complete} complete rounds ({threads} thread(s)); the rest is left out"
                for config in configs:  # pairs are made by round: drop the incomplete one
                    del results[config][complete:]
                    del cpu[config][complete:]
                    del in_process_figures[config][complete:]
            if cut:
                print(f"  {cut}", flush=True)
            plain = results.get("plain", [])
            if "plain" in results and not any(plain):
                failed = True
                continue
            for config in configs:
                mine = [r for r in results[config] if r is not None]
                if not mine:
                    rows.append((threads, config, None, None, None, None, None, summarize(problems[config])))
                    continue
                total = statistics.median(t for t, _ in mine)
                loop = statistics.median(l for _, l in mine)
                known = [c for c in cpu[config] if c is not None]
                if config.endswith("in-process"):
                    # Each process measured its own difference.
                    differences = [l for _, l in mine]
                    rows.append((threads, config, total, None, statistics.median(differences),
                                 median_interval(differences), None, summarize(problems[config])))
                    for index, what in ((0, " (thread CPU time)"), (1, " (process CPU time)")):
                        known = [c[index] for c in in_process_figures[config] if c is not None and c[index] is not None]
                        if known:
                            rows.append((threads, config + what, None, None, statistics.median(known),
                                         median_interval(known), None, ""))
                    # Its recorded blocks, and its blocks through libcuda's own
                    # entry point, against plain's process of the round.
                    known = [r[0] - p[0] for r, p in zip(results[config], plain) if r is not None and p is not None]
                    if known:
                        rows.append((threads, config + " (recorded blocks against plain)", None, None,
                                     statistics.median(known), median_interval(known), None, ""))
                    known = [c[2] - p[0] for c, p in zip(in_process_figures[config], plain)
                             if c is not None and c[2] is not None and p is not None]
                    if known and config not in (SAME_BLOCKS, HOST_WORK_IN_PROCESS):
                        rows.append((threads, config + " (libcuda's own blocks against plain)", None, None,
                                     statistics.median(known), median_interval(known), None, ""))
                    continue
                differences = [r[0] - p[0] for r, p in zip(results[config], plain) if r is not None and p is not None]
                added = statistics.median(differences) if differences else None
                rows.append((threads, config, total, loop, added, median_interval(differences),
                             statistics.median(known) if known else None, summarize(problems[config])))
            if "metadata B" in results and "metadata" in results:
                pairs = [b[0] - a[0] for a, b in zip(results["metadata"], results["metadata B"])
                         if a is not None and b is not None]
                if pairs:
                    comparisons.append((threads, "", statistics.median(pairs), median_interval(pairs), len(pairs)))
            if "metadata B in-process" in results and "metadata in-process" in results:
                pairs = [b[1] - a[1] for a, b in zip(results["metadata in-process"], results["metadata B in-process"])
                         if a is not None and b is not None]
                if pairs:
                    comparisons.append((threads, " in-process", statistics.median(pairs), median_interval(pairs),
                                        len(pairs)))
                pairs = [b[0] - a[0] for a, b in zip(in_process_figures["metadata in-process"],
                                                     in_process_figures["metadata B in-process"])
                         if a is not None and b is not None and a[0] is not None and b[0] is not None]
                if pairs:
                    comparisons.append((threads, " in-process (thread CPU time)", statistics.median(pairs),
                                        median_interval(pairs), len(pairs)))
            if cut:
                break
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for old in scratch.glob("*"):
            old.unlink()
        scratch.rmdir()

    print("\n| threads | configuration | ns/launch | loop only | added vs plain (median of per-round "
          "differences) | its 90% interval | process CPU ns/launch | target: added <= 300 ns |")
    print("|---:|---|---:|---:|---:|---|---:|---|")
    for threads, config, total, loop, added, interval, process_cpu, problem in rows:
        if total is None and added is None:
            print(f"| {threads} | {config} | failed | | | | | {problem} |")
            continue
        cpu_text = "" if process_cpu is None else f"{process_cpu:.0f}"
        if config == "plain":
            added_text = interval_text = outcome = ""
        else:
            added_text = "" if added is None else f"{added:+.1f}"
            interval_text = "" if interval is None else f"{interval[0]:+.0f} to {interval[1]:+.0f}"
            # The target is wall time; CPU time is its companion, less noisy on a VM.
            if config == HOST_WORK:
                outcome = f"(a reference without the shim: {args.host_work} ns of work a launch)"
            elif config == HOST_WORK_IN_PROCESS:
                outcome = f"(a reference without the shim: {args.host_work} ns of work a launch of one block)"
            elif config.endswith(")") or config == SAME_BLOCKS:
                outcome = "(not the target's measure)"
            else:
                outcome = verdict(interval)
        if problem:
            outcome += f" ({problem})"
        loop_text = "" if loop is None else f"{loop:.1f}"
        total_text = "" if total is None else f"{total:.1f}"
        print(f"| {threads} | {config} | {total_text} | {loop_text} | {added_text} | {interval_text} | {cpu_text} "
              f"| {outcome} |")
    for threads, kind, median, interval, count in comparisons:
        span = "" if interval is None else f", 90% interval {interval[0]:+.0f} to {interval[1]:+.0f}"
        what = ", ".join(filter(None, [args.compare_shim, args.compare_env,
                                       args.compare_cpus and f"taskset -c {args.compare_cpus}"]))
        print(f"\nmetadata B{kind} ({what}) - metadata{kind}, {threads} thread(s), {count} rounds: "
              f"{median:+.1f} ns a launch{span}")
    if cut:
        print(f"\n{cut}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
