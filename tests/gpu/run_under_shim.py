#!/usr/bin/env python3
"""Runs a GPU test program without and with the kcap shim and checks that the
shim changed nothing and saw every launch the program made.

    run_under_shim.py --shim libkcap_interpose.so [options] -- COMMAND [ARGS...]

The program says on stdout what it did, one fact a line (the same lines as
tests/interpose/programs/driver_program.h, plus two for programs whose
libraries choose their kernels):

    result ...                 anything it computed: compared, not parsed
    made kernel NAME N         it launched kernel NAME N times: the shim counted exactly N
    made call SYMBOL N         it (or cudart for it) called driver entry point SYMBOL
                               N times: the shim counted exactly N (with --hooks, only
                               hooked symbols are checked, and all of them)
    made launches N            it launched N kernels in all: the shim's per-kernel counts
                               and its calls of the launch entry points both total N
    made at-least REGEX N      kernels whose names match REGEX (re.search) were launched
                               at least N times (cuBLAS and PyTorch pick their kernels)

The test passes when all of these hold, and fails otherwise (it never skips:
a GPU test that could not run must not look like one that passed):
  1. both runs exit with status 0 within --timeout;
  2. their stdout is identical (the shim changed no result);
  3. the shim run wrote KCAP_STATS_FILE and printed no "kcap:" line on stderr;
  4. the program printed at least one "made" line, and every one holds;
  5. with --hooks driver_hooks.def (driver-API programs, which count every
     driver call they make): every hooked symbol was seen exactly as often as
     the program made it, 0 for those it never printed.

With --kcap, the program is also recorded (`kcap record`, --record-mode) and
  6. the recorded run's stdout is identical to the plain run's;
  7. every trace it wrote passes `kcap check`;
  8. the traces hold the launches of every "made kernel", "made launches" and
     "made at-least" line (counted from `kcap info --json`);
  9. every --expect-trace KEY>=N (or KEY==N) holds: KEY is a dotted path into
     `kcap info --json` (events.byType.graphLaunch, launches.capturedIntoGraph),
     summed over the traces.
 9b. every --expect-stats KIND.KEY>=N holds for the recorded run's
     KCAP_STATS_FILE (interpose/hooks/stats.h), e.g. snapshot.device_hashed>=1:
     memory was hashed on the GPU.
 10. with --timing required (recorded with `kcap record --timing`): every
     launch that ran (not captured into a graph, result 0) has
     exactly one kernelTiming with endNs > startNs, no kernelTiming names
     another launch (neither by index nor by the kernel name CUPTI gave it),
     and no "kcap: --timing" note was printed; with
     --timing or-note, either that, or (CUPTI held by another client, such
     as the PyTorch profiler) exactly one "kcap: --timing" line on stderr,
     the same note in a trace, and whatever durations came are valid:
     never silence without durations.
 11. with --replay: `kcap replay TRACE --json` and `kcap replay TRACE
     --no-fixed-va --json` both exit 0 with every launch REPRODUCED, each
     naming the buffers it compared
     (bit-exact against the recorded post-state); in the first, every
     launch kept its recorded addresses or says what the driver answered
     instead; the second relocated every one. Graph launches are held to
     the same: each REPRODUCED, naming the ranges it compared; and a trace
     with graph launches is replayed once more with --graph-nodes (each
     graph's nodes run one by one in a topological order), where every
     graph launch must reproduce too, with nodes run and none faulted;
     with --graph-nodes-refused REGEX, node by node must instead refuse
     every graph launch (ERROR, exit 1) saying why (REGEX: a loop whose
     condition a kernel sets cannot run node by node).
 5b. with --forbid-stderr REGEX: no run under the shim (shim, recorded)
     printed a line matching REGEX on stderr (a framework's own warning that
     capture disturbed it, e.g. XLA's "Delay kernel timed out"); a plain
     run that prints it too is noted, not failed; a run under the shim that
     does runs once more, and fails only if that one prints it too.
 11e. with --fixed-va-only WHY: step 11 replays at the recorded addresses
     only, saying WHY (a trace whose launches read pointers stored where
     the recorder does not look for them, which relocation cannot rewrite).
 11d. with --without-memory REGEX: launches the recording took no memory
     for, saying why (e.g. queued behind a kernel that waits for the host),
     may be ERROR "recorded without its memory: ..." when the reason
     matches REGEX; they are counted, never REPRODUCED, and at least one
     other launch must reproduce.
 11b. with --force-ptx-code REGEX: `kcap replay TRACE --force-ptx --json`
     also reproduces every launch, and each launch's code (what ran, e.g.
     "relocatable device code linked here ...") matches REGEX.
 11c. with --replay-detail REGEX: in each of those replays every launch's
     detail (what replay did beyond the plain path, e.g. "1 tensor map
     re-encoded here") matches REGEX.
 12. with --replay-range A..B: `kcap replay TRACE --range A..B --json` (the
     launches as one sequence, the recorded copies and memsets between them
     re-applied) exits 0 with every launch of the range REPRODUCED, and so
     does the same with --no-fixed-va (the copies and memsets then land
     where replay relocated their memory).
 13. with --replay-checkpoints N (a trace recorded with --mode checkpoint):
     `kcap replay TRACE` re-executes it from its checkpoints, with at least
     N intervals REPRODUCED and none that DIFFERS, FAULTs or HANGs (others
     may be NOT RE-EXECUTABLE, e.g. holding a graph launch, or NOT
     VERIFIED: exit 1 then); with --every-interval, every interval is
     REPRODUCED and replay exits 0.

The runs' output, the stats file and the traces are kept in --log-dir.
"""
import json
import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from replay_expectations import check_replay, check_replay_checkpoints, check_replay_range

LAUNCH_SYMBOL = re.compile(r"^cuLaunch(Kernel|KernelEx|CooperativeKernel)(_ptsz)?$")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", required=True, help="libkcap_interpose.so")
    parser.add_argument("--hooks", help="interpose/driver_hooks.def: check every hooked symbol's count")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in both runs' environment")
    parser.add_argument("--log-dir", default=".", help="where the runs' output and the stats file go")
    parser.add_argument("--timeout", type=float, default=120, help="seconds for each run")
    parser.add_argument("--kcap", help="the kcap binary: also record the program and check the trace")
    parser.add_argument("--record-mode", default="full", help="kcap record --mode (default full)")
    parser.add_argument("--expect-trace", action="append", default=[], metavar="KEY>=N",
                        help="with --kcap: `kcap info --json` KEY (dotted), summed over the traces, is >= N "
                             "(KEY==N: exactly N)")
    parser.add_argument("--expect-stats", action="append", default=[], metavar="KIND.KEY>=N",
                        help="with --kcap: the recorded run's KCAP_STATS_FILE line KIND has KEY >= N (9b.)")
    parser.add_argument("--timing", choices=["required", "or-note"],
                        help="with --kcap: record with --timing and check the durations (see 10.)")
    parser.add_argument("--replay", action="store_true",
                        help="also replay every recorded launch with `kcap replay`, with fixed addresses and "
                             "with --no-fixed-va: each must reproduce bit-exactly")
    parser.add_argument("--replay-checkpoints", type=int, metavar="N",
                        help="with --kcap: re-execute the checkpoint trace; at least N intervals reproduce (13.)")
    parser.add_argument("--every-interval", action="store_true",
                        help="with --replay-checkpoints: every interval reproduces, none is left out (13.)")
    parser.add_argument("--replay-detail", metavar="REGEX",
                        help="with --replay: each replayed launch's detail must match REGEX (see 11c.)")
    parser.add_argument("--force-ptx-code", metavar="REGEX",
                        help="with --replay: also replay with --force-ptx; what ran must match REGEX (see 11b.)")
    parser.add_argument("--replay-range", metavar="A..B",
                        help="also replay launches A..B as one sequence: each must reproduce bit-exactly")
    parser.add_argument("--forbid-stderr", metavar="REGEX", help="no run may print a line matching REGEX on stderr")
    parser.add_argument("--fixed-va-only", metavar="WHY",
                        help="with --replay: replay at the recorded addresses only, not relocated, because WHY")
    parser.add_argument("--without-memory", metavar="REGEX",
                        help="with --replay: launches recorded without memory for a reason matching REGEX may be ERROR")
    parser.add_argument("--graph-nodes-refused", metavar="REGEX",
                        help="with --replay: --graph-nodes must refuse every graph launch, saying REGEX")
    parser.add_argument("--needs-gpus", type=int, default=1, metavar="N",
                        help="with fewer than N GPUs, run nothing and exit 77 (ctest: skipped)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args()
    if args.replay_range is not None and not re.fullmatch(r"\d+\.\.\d+", args.replay_range):
        parser.error(f"--replay-range {args.replay_range}: not A..B")

    def expectations(option, texts, pattern, form):
        """Each text matched against pattern, its groups (the last an int)."""
        found = []
        for text in texts:
            m = re.fullmatch(pattern, text)
            if not m:
                parser.error(f"{option} {text}: not {form}")
            found.append((*m.groups()[:-1], int(m.groups()[-1])))
        return found

    args.expect_trace = expectations("--expect-trace", args.expect_trace, r"([\w.]+)(>=|==)(\d+)",
                                     "KEY>=N or KEY==N")
    args.expect_stats = expectations("--expect-stats", args.expect_stats, r"(\w+)\.(\w+)>=(\d+)", "KIND.KEY>=N")
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given")
    return args


class Run:
    def __init__(self, label, returncode, out, err, timed_out):
        self.label, self.returncode, self.out, self.err, self.timed_out = label, returncode, out, err, timed_out

    def ok(self):
        return not self.timed_out and self.returncode == 0

    def describe(self):
        status = "TIMED OUT" if self.timed_out else f"exit status {self.returncode}"
        return f"--- {self.label} run: {status}\n--- stdout\n{self.out}--- stderr\n{self.err}"


def run(command, label, env, log_dir, timeout):
    start = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, errors="replace", timeout=timeout)
        result = Run(label, done.returncode, done.stdout, done.stderr, False)
    except subprocess.TimeoutExpired as expired:  # a hang, most likely: the child was killed
        decode = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        result = Run(label, None, decode(expired.stdout), decode(expired.stderr), True)
    result.seconds = time.monotonic() - start
    (log_dir / f"{label}.stdout").write_text(result.out)
    (log_dir / f"{label}.stderr").write_text(result.err)
    return result


def matching_lines(text, regex):
    return [line for line in text.splitlines() if re.search(regex, line)]


def counts(text, prefix):
    """'<prefix> NAME N' lines; NAME may hold spaces, N is the last field."""
    found = Counter()
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            name, _, n = line[len(prefix) + 1:].rpartition(" ")
            found[name] += int(n)
    return found


def hooked_symbols(def_file):
    return re.findall(r"^KCAP_HOOK\(\s*\w+\s*,\s*(\w+)\s*,", Path(def_file).read_text(), re.M)


def check(plain, shimmed, stats, hooks):
    """The list of failures (empty: the test passes)."""
    failures = []
    for r in (plain, shimmed):
        if not r.ok():
            failures.append(f"the {r.label} run failed\n{r.describe()}")
    if failures:
        return failures
    if shimmed.out != plain.out:
        failures.append("stdout differs with the shim (it changed what the program computed or did)\n"
                        + plain.describe() + shimmed.describe())
    shim_lines = [line for line in shimmed.err.splitlines() if line.startswith("kcap:")]
    if shim_lines:
        failures.append("the shim reported problems:\n  " + "\n  ".join(shim_lines))
    if stats is None:
        return failures + ["the shim wrote no KCAP_STATS_FILE (was it loaded?)"]

    calls_seen, kernels_seen = counts(stats, "call"), counts(stats, "kernel")
    out = shimmed.out
    kernels_made, calls_made = counts(out, "made kernel"), counts(out, "made call")
    launches_made = [int(n) for n in re.findall(r"^made launches (\d+)$", out, re.M)]
    at_least = [(m.group(1), int(m.group(2))) for m in re.finditer(r"^made at-least (.+) (\d+)$", out, re.M)]
    if not (kernels_made or calls_made or launches_made or at_least):
        failures.append("the program reported no launches ('made' lines): nothing was checked")

    for name, n in sorted(kernels_made.items()):
        if kernels_seen[name] != n:
            failures.append(f"kernel {name}: launched {n} times, the shim counted {kernels_seen[name]}")
    # With --hooks, every hooked symbol is checked (and calls of entry points
    # the shim does not hook are not); without, the symbols the program names.
    symbols = hooked_symbols(hooks) if hooks else sorted(calls_made)
    for symbol in symbols:
        if calls_seen[symbol] != calls_made[symbol]:
            failures.append(f"{symbol}: called {calls_made[symbol]} times, the shim counted {calls_seen[symbol]}")
    total_kernels = sum(kernels_seen.values())
    total_launch_calls = sum(n for symbol, n in calls_seen.items() if LAUNCH_SYMBOL.match(symbol))
    for n in launches_made:
        if total_kernels != n or total_launch_calls != n:
            failures.append(f"{n} launches made; the shim counted {total_kernels} kernel launches "
                            f"and {total_launch_calls} calls of launch entry points")
    for pattern, n in at_least:
        matched = sum(c for name, c in kernels_seen.items() if re.search(pattern, name))
        if matched < n:
            failures.append(f"kernels matching /{pattern}/: at least {n} launches expected, "
                            f"the shim counted {matched}")
    return failures


def info_value(info, key):
    """The number at dotted `key` in a `kcap info --json` object (0 when absent): a number, or a
    string of digits (the recording's options are strings)."""
    for part in key.split("."):
        info = info.get(part, {}) if isinstance(info, dict) else {}
    if isinstance(info, str) and info.isdigit():
        return int(info)
    return info if isinstance(info, (int, float)) and not isinstance(info, bool) else 0


def check_traces(kcap, plain, recorded, traces, log_dir, expectations=()):
    """Failures of the recorded run: output, trace integrity, launches in the traces."""
    if not recorded.ok():
        return [f"the recorded run failed\n{recorded.describe()}"]
    failures = []
    if recorded.out != plain.out:
        failures.append("stdout differs when recorded\n" + plain.describe() + recorded.describe())
    if not traces:
        return failures + ["kcap record wrote no trace"]
    kernels = Counter()
    totals = Counter()
    for trace in traces:
        checked = subprocess.run([kcap, "check", str(trace)], capture_output=True, text=True, errors="replace")
        (log_dir / f"{trace.name}.check").write_text(checked.stdout + checked.stderr)
        if checked.returncode != 0:
            failures.append(f"kcap check {trace.name} failed:\n{checked.stdout}{checked.stderr}")
        info = subprocess.run([kcap, "info", "--json", str(trace)], capture_output=True, text=True,
                              errors="replace")
        (log_dir / f"{trace.name}.info.json").write_text(info.stdout)
        try:
            summary = json.loads(info.stdout)
            for kernel in summary.get("kernels", []):
                kernels[kernel["name"]] += int(kernel["launches"])
            for key, _, _ in expectations:
                totals[key] += info_value(summary, key)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            failures.append(f"kcap info --json {trace.name}: unreadable ({e})")
    out = recorded.out
    for name, n in sorted(counts(out, "made kernel").items()):
        if kernels[name] != n:
            failures.append(f"kernel {name}: launched {n} times, the traces hold {kernels[name]}")
    for n in (int(m) for m in re.findall(r"^made launches (\d+)$", out, re.M)):
        if sum(kernels.values()) != n:
            failures.append(f"{n} launches made, the traces hold {sum(kernels.values())}")
    for m in re.finditer(r"^made at-least (.+) (\d+)$", out, re.M):
        matched = sum(c for name, c in kernels.items() if re.search(m.group(1), name))
        if matched < int(m.group(2)):
            failures.append(f"kernels matching /{m.group(1)}/: at least {m.group(2)} launches expected, "
                            f"the traces hold {matched}")
    for key, relation, n in expectations:
        if not (totals[key] >= n if relation == ">=" else totals[key] == n):
            failures.append(f"the traces' {key} is {totals[key]}, expected {relation} {n}")
    print(f"recorded: {len(traces)} trace(s), {sum(kernels.values())} launches of {len(kernels)} kernels, "
          f"{sum(t.stat().st_size for t in traces)} bytes")
    return failures


def timing_in(kcap, trace):
    """(launches that ran, kernelTiming counts by launch index, bad durations, --timing notes) of a trace."""
    dump = subprocess.run([kcap, "dump", "--json", str(trace)], capture_output=True, text=True, errors="replace")
    launched, succeeded, timings, bad, notes = set(), set(), Counter(), [], []
    names, timed_names = {}, []
    for line in dump.stdout.splitlines():
        event = json.loads(line)
        if "launch" in event:
            names[int(event["launch"]["launchIndex"])] = event["launch"].get("kernelName", "")
            if not event["launch"].get("capturing", False):
                launched.add(int(event["launch"]["launchIndex"]))
            # Metadata and checkpoint modes: the launch carries its outcome, no launchEnd follows.
            if event["launch"].get("ended", False) and int(event["launch"].get("result", 0)) == 0:
                succeeded.add(int(event["launch"]["launchIndex"]))
        elif "launchEnd" in event:
            if int(event["launchEnd"].get("result", 0)) == 0:
                succeeded.add(int(event["launchEnd"]["launchIndex"]))
        elif "kernelTiming" in event:
            timing = event["kernelTiming"]
            index = int(timing["launchIndex"])
            timings[index] += 1
            timed_names.append((index, timing.get("kernelName", "")))
            if int(timing.get("endNs", 0)) <= int(timing.get("startNs", 0)):
                bad.append(f"#{index}: startNs {timing.get('startNs', 0)}, endNs {timing.get('endNs', 0)}")
        elif "message" in event and event["message"].get("text", "").startswith("--timing: "):
            notes.append(event["message"]["text"])
    # A duration given to the wrong launch shows as a name that is not the launch's.
    bad += [f"#{index}: the duration is of {name!r}, the launch is of {names.get(index)!r}"
            for index, name in timed_names if name and names.get(index) not in (None, name)]
    return launched & succeeded, timings, bad, notes


def check_timing(kcap, recorded, traces, mode):
    """Failures of --timing (10. above)."""
    failures = []
    said = [line for line in recorded.err.splitlines() if line.startswith("kcap: --timing: ")]
    notes, ran_total, timed_total = [], 0, 0
    for trace in traces:
        ran, timings, bad, trace_notes = timing_in(kcap, trace)
        notes += trace_notes
        ran_total += len(ran)
        timed_total += sum(1 for index in ran if timings[index] == 1)
        failures += [f"{trace.name}: wrong kernelTiming, {b}" for b in bad]
        twice = sorted(index for index, n in timings.items() if n > 1)
        if twice:
            failures.append(f"{trace.name}: launches with more than one kernelTiming: {twice[:10]}")
        strays = sorted(set(timings) - ran)
        if strays:
            failures.append(f"{trace.name}: kernelTiming for launches that did not run: {strays[:10]}")
        untimed = sorted(ran - set(timings))
        if untimed and not (mode == "or-note" and said):
            failures.append(f"{trace.name}: {len(untimed)} of {len(ran)} launches that ran have no kernelTiming "
                            f"(first: {untimed[:10]})")
    if ran_total == 0:
        failures.append("the traces hold no launch that ran: nothing was timed")
    if said and mode == "required":
        failures.append("the shim could not time the launches:\n  " + "\n  ".join(said))
    if len(said) > 1:
        failures.append("more than one 'kcap: --timing' line:\n  " + "\n  ".join(said))
    if said and not any("kcap: " + note == said[0] for note in notes):
        failures.append(f"the traces hold no Message with the note printed ({said[0]!r}); they hold {notes}")
    print(f"timing: {timed_total} of {ran_total} launches that ran have a duration"
          + (f"; the shim said: {said[0]}" if said else ""))
    return failures


def check_stats(path, expectations):
    """9b: the recorded run's KCAP_STATS_FILE lines against --expect-stats."""
    if not expectations:
        return []
    values = {}
    text = path.read_text() if path.is_file() else ""
    for line in text.splitlines():
        words = line.split()
        if words:
            for key, value in zip(words[1::2], words[2::2]):
                if value.isdigit():
                    values[(words[0], key)] = int(value)
    failures = []
    for kind, key, least in expectations:
        got = values.get((kind, key))
        print(f"recorded stats: {kind} {key} = {got}")
        if got is None or got < least:
            failures.append(f"recorded run's stats: {kind} {key} is {got}, expected >= {least}")
    return failures


def summary(stats):
    """What the shim saw, for the log: launch entry points and kernels."""
    lines = []
    for symbol, n in sorted(counts(stats, "call").items()):
        if LAUNCH_SYMBOL.match(symbol) or symbol.startswith(("cuGraphLaunch", "cuLibraryLoad", "cuModuleLoad")):
            lines.append(f"  call {symbol} {n}")
    kernels = counts(stats, "kernel")
    lines.append(f"  {sum(kernels.values())} launches of {len(kernels)} kernels:")
    lines += [f"  kernel {name} {n}" for name, n in sorted(kernels.items())]
    return "\n".join(lines)


def main():
    args = parse_args()
    if args.needs_gpus > 1:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
        if len(gpus) < args.needs_gpus:
            print(f"SKIPPED: {len(gpus)} GPU(s) here; the test needs {args.needs_gpus}")
            return 77
    log_dir = Path(args.log_dir).resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    stats_file = log_dir / "stats"
    stats_file.unlink(missing_ok=True)

    # The caller's environment, minus anything that would preload or configure
    # the shim, plus the test's own settings.
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("KCAP_")}
    for setting in args.env:
        name, _, value = setting.partition("=")
        base[name] = value
    shim = str(Path(args.shim).resolve())
    if not Path(shim).is_file():
        print(f"FAILED: no shim at {shim}")
        return 1

    plain = run(args.command, "plain", base, log_dir, args.timeout)
    shimmed = run(args.command, "shim", dict(base, LD_PRELOAD=shim, KCAP_STATS_FILE=str(stats_file)),
                  log_dir, args.timeout)
    stats = stats_file.read_text() if stats_file.is_file() else None
    if stats is not None and not stats.startswith("kcap-stats 1\n"):
        stats = None

    print("command:", " ".join(args.command))
    print(f"runs: {plain.seconds:.1f} s plain, {shimmed.seconds:.1f} s with the shim")
    if stats is not None:
        print("the shim saw:\n" + summary(stats))
    failures = check(plain, shimmed, stats, args.hooks)
    if args.kcap:
        for old in log_dir.glob("trace*.kcap"):
            old.unlink()
        timing = ["--timing"] if args.timing else []
        recorded_stats = log_dir / "recorded-stats"
        recorded_stats.unlink(missing_ok=True)
        recorded = run([args.kcap, "record", "-q", "--mode", args.record_mode] + timing
                       + ["-o", str(log_dir / "trace.kcap"), "--"] + args.command, "recorded",
                       dict(base, KCAP_STATS_FILE=str(recorded_stats)), log_dir, args.timeout)
        print(f"recorded run: {recorded.seconds:.1f} s (mode {args.record_mode}{', --timing' if timing else ''})")
        traces = sorted(log_dir.glob("trace*.kcap"))
        failures += check_traces(args.kcap, plain, recorded, traces, log_dir, args.expect_trace)
        failures += check_stats(recorded_stats, args.expect_stats)
        if args.timing and recorded.ok() and traces:
            failures += check_timing(args.kcap, recorded, traces, args.timing)
        if args.replay and recorded.ok() and traces:
            failures += check_replay(args.kcap, traces, log_dir, args.timeout, args.force_ptx_code, args.replay_detail,
                                     args.graph_nodes_refused, args.without_memory, args.fixed_va_only)
        if args.replay_range and recorded.ok() and traces:
            failures += check_replay_range(args.kcap, traces, log_dir, args.timeout, args.replay_range)
        if args.replay_checkpoints is not None and recorded.ok() and traces:
            failures += check_replay_checkpoints(args.kcap, traces, log_dir, args.timeout, args.replay_checkpoints,
                                                 args.every_interval)
    elif args.expect_trace or args.timing or args.replay_range:
        failures.append("--expect-trace, --timing and --replay-range need --kcap")
    if args.forbid_stderr:
        # A plain run's warning is the program's own on this host (XLA's delay
        # kernel can time out without any shim): noted, not held against kcap.
        # A run under the shim that prints it runs once more: a disturbance
        # kcap causes comes back, the host's rare one does not.
        again = {"shim": (args.command, dict(base, LD_PRELOAD=shim, KCAP_STATS_FILE=str(log_dir / "stats-again"))),
                 "recorded": ([args.kcap or "kcap", "record", "-q", "--force", "--mode", args.record_mode]
                              + (["--timing"] if args.timing else [])
                              + ["-o", str(log_dir / "again.kcap"), "--"] + args.command, base)}
        for r in [plain, shimmed] + ([recorded] if args.kcap else []):
            hits = matching_lines(r.err, args.forbid_stderr)
            if hits and r is plain:
                print(f"note: the plain run printed {len(hits)} lines matching {args.forbid_stderr!r} without kcap: {hits[0]}")
            elif hits:
                command, env = again[r.label]
                second = run(command, r.label + "-again", env, log_dir, args.timeout)
                if matching_lines(second.err, args.forbid_stderr) or not second.ok():
                    failures.append(f"the {r.label} run printed {len(hits)} lines matching {args.forbid_stderr!r}, "
                                    f"and so did a second one ({second.describe().splitlines()[0]}): {hits[0]}")
                else:
                    print(f"note: the {r.label} run printed {len(hits)} lines matching {args.forbid_stderr!r}, "
                          f"a second one none: {hits[0]}")
    for failure in failures:
        print("FAILED:", failure)
    print("PASSED" if not failures else f"{len(failures)} check(s) failed; logs in {log_dir}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
