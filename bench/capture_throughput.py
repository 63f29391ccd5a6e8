#!/usr/bin/env python3
"""Full-capture throughput: runs kcap_bench_capture (a kernel reading a 4 GiB
buffer) without the shim and under `kcap record --mode full` and `--mode
pre`, and prints how fast the shim snapshots the buffer, against pinned
device-to-host bandwidth (target: at least 50% of it).

    capture_throughput.py --bench build-gpu/bench/kcap_bench_capture --kcap build-gpu/tools/kcap \\
        [--mib 4096] [--rounds 2] [--masks 0xffffffff,0x0000ffff] [--modes full,pre] [--dir /tmp] [--buffer SIZE]
        [--flush launch|batch] [--hash device|host]

For each data kind (--masks: 0xffffffff random words, incompressible;
0x0000ffff 16 random bits a word, compressible) the plain run measures the
launch, the pinned D2H bandwidth and the host-side rates of the snapshot
path; each recorded run (only kcap_read_sum is recorded: --include) measures
the same launches. Capture cost of a launch = its launch + synchronize time
recorded minus plain (medians over the rounds); capture GB/s = bytes
snapshotted (the buffer once in pre mode, twice in full mode) / that cost.
"fresh" launches read data the trace has not seen (the writer hashes,
compresses and writes every piece), "repeat" launches the same data again
(every piece deduplicates: copy and hash only).

By default (`--flush launch`) a launch runs only once its record and every
piece it references are in the file: fresh data is captured at the rate it
is compressed and written. With `--flush batch` and a `--buffer` larger than
the snapshot, the launch waits only for the copy and the hashing; the file is
written behind the program, and the recorded process's wall time (printed
with each trace) includes writing it out at the end.

The program's results must be identical with and without recording, and
every trace must pass `kcap check` (exit status 1 otherwise).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

MIB = 1 << 20


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="kcap_bench_capture")
    p.add_argument("--kcap", required=True, help="the kcap binary")
    p.add_argument("--mib", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--masks", default="0xffffffff,0x0000ffff")
    p.add_argument("--modes", default="full,pre")
    p.add_argument("--dir", default="/tmp", help="traces go here (deleted after each run)")
    p.add_argument("--buffer", help="`kcap record --buffer SIZE`: with more than a snapshot's size, the figure is "
                                    "how long the program waits; the file is written behind it")
    p.add_argument("--flush", choices=["launch", "batch"], help="`kcap record --flush`")
    p.add_argument("--hash", choices=["device", "host"], help="`kcap record --hash` (default device: large ranges "
                                                               "are hashed on the GPU, only new pieces copied)")
    p.add_argument("--timeout", type=float, default=500, help="seconds for each run")
    return p.parse_args()


def clean_env():
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("KCAP_")}


def run(command, timeout, env=None):
    try:
        done = subprocess.run(command, env={**clean_env(), **(env or {})}, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s: {' '.join(command)}"
    if done.returncode != 0:
        return None, f"exit status {done.returncode}: {' '.join(command)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done, None


def launches(out):
    """{kind: [total_ns per round]}, and the result lines."""
    times = {}
    for m in re.finditer(r"^launch round \d+ (\w+) call_ns ([\d.]+) total_ns ([\d.]+)$", out, re.M):
        times.setdefault(m.group(1), []).append(float(m.group(3)))
    return times, [line for line in out.splitlines() if line.startswith("result ")]


def profile(path):
    """The shim's snapshot profile (KCAP_STATS_FILE, interpose/hooks/stats.h): {line kind: {key: value}}."""
    out = {}
    try:
        text = Path(path).read_text()
    except OSError:
        return out
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in ("snapshot", "snapshot_ns", "writer"):
            out[words[0]] = {k: int(v) for k, v in zip(words[1::2], words[2::2])}
    return out


def describe_profile(p):
    if "snapshot" not in p or "snapshot_ns" not in p:
        return "no snapshot profile"
    s, t, w = p["snapshot"], p["snapshot_ns"], p.get("writer", {})
    ms = lambda ns: f"{ns / 1e6:.0f} ms"
    return (f"launching thread, all rounds: hashed on the device {s.get('device_hashed', 0) / 1e9:.2f} GB in "
            f"{ms(t.get('device_hash', 0))}, copied {s.get('copied', 0) / 1e9:.2f} GB in {s['chunks']} segments "
            f"({s.get('direct', 0) / 1e9:.2f} GB straight into the writer's page-locked blocks, segments of up to "
            f"256 MiB; the rest through 32 MiB staging buffers); "
            f"waiting for D2H {ms(t['copy_wait'])}, "
            f"storing chunks {ms(t['store'])}, page-locked allocation {ms(t['staging'])} ({t['buffers_made']} "
            f"buffers); writer: {w.get('unique_bytes', 0) / 1e9:.2f} GB new, {w.get('reused_buffers', 0)} into "
            f"reused buffers, producers blocked on --buffer {ms(w.get('wait_ns', 0))}, direct memory page-locked "
            f"{w.get('page_locked', 0) / 1e9:.2f} GB in {ms(w.get('lock_ns', 0))}")


def rate(out, what):
    m = re.search(rf"^{what} gbps ([\d.]+)", out, re.M)
    return float(m.group(1)) if m else None


def main():
    args = parse_args()
    work = Path(args.dir) / f"kcap-bench-capture-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    failures = []
    rows = []
    notes = []
    common = ["--mib", str(args.mib), "--rounds", str(args.rounds)]
    try:
        for mask in args.masks.split(","):
            plain, problem = run([args.bench, *common, "--mask", mask, "--host-rates", str(work)], args.timeout)
            if problem:
                failures.append(problem)
                continue
            print(f"--- mask {mask}, plain\n{plain.stdout}", flush=True)
            plain_times, plain_results = launches(plain.stdout)
            d2h = rate(plain.stdout, "d2h whole")
            chunked = rate(plain.stdout, "d2h chunked")
            hash_rate, copy_rate = rate(plain.stdout, "host hash"), rate(plain.stdout, "host copy")
            zstd_rate, writer_rate = rate(plain.stdout, "host zstd"), rate(plain.stdout, "host writer")
            file_rate = rate(plain.stdout, "host filewrite")
            ratio = re.search(r"^host zstd gbps [\d.]+ ratio ([\d.]+)", plain.stdout, re.M)
            if None in (d2h, chunked, hash_rate, copy_rate, zstd_rate, writer_rate) or 0 in (chunked, hash_rate, copy_rate):
                failures.append(f"mask {mask}: the plain run did not print every rate")
                continue
            # The copy of the next staging buffer overlaps the hashing (and, for new pieces,
            # copying) of the current one, which the launching thread and the writer's hashing
            # pool (min(8, cores - 1) threads) share; compression and writing run on the
            # writer's compression and writer threads.
            hashers = min(8, (os.cpu_count() or 2) - 1) + 1
            producer = min(chunked, hashers / (1 / hash_rate + 1 / copy_rate))
            dedup = min(chunked, hashers * hash_rate)
            notes.append(f"mask {mask}: pinned D2H {d2h:.2f} GB/s whole, {chunked:.2f} in 32 MiB calls; one thread: "
                         f"XXH3-128 {hash_rate:.2f}, piece copy {copy_rate:.2f}, zstd {zstd_rate:.2f} GB/s "
                         f"(ratio {float(ratio.group(1)) if ratio else 0:.3f}); plain write() to a file "
                         f"{file_rate or 0:.2f} GB/s; writer (default threads) "
                         f"{writer_rate:.2f} GB/s; page-locked allocation {rate(plain.stdout, 'host pinalloc') or 0:.2f}"
                         f" GB/s (first touch {rate(plain.stdout, 'host touch') or 0:.2f}, locking touched memory "
                         f"{rate(plain.stdout, 'host register') or 0:.2f}). Predicted: fresh <= "
                         + (f"producer {producer:.2f} (the file written behind)" if args.flush == "batch" else
                            f"min(producer {producer:.2f}, writer {writer_rate:.2f})")
                         + f" GB/s, repeat <= {dedup:.2f} GB/s (D2H overlapped with hashing on {hashers} threads; "
                         "single-thread rates, not counting the compression threads sharing the cores)")
            for mode in args.modes.split(","):
                trace = work / "trace.kcap"
                buffer = ["--buffer", args.buffer] if args.buffer else []
                buffer += ["--flush", args.flush] if args.flush else []
                buffer += ["--hash", args.hash] if args.hash else []
                stats = work / "stats.txt"
                began = time.monotonic()
                recorded, problem = run([args.kcap, "record", "-q", "--mode", mode, "--include", "^kcap_read_sum$",
                                         *buffer, "-o", str(trace), "--", args.bench, *common, "--mask", mask,
                                         "--d2h-mib", "0"], args.timeout, {"KCAP_STATS_FILE": str(stats)})
                wall = time.monotonic() - began
                if problem:
                    failures.append(problem)
                    continue
                print(f"--- mask {mask}, kcap record --mode {mode}\n{recorded.stdout}{recorded.stderr}", flush=True)
                shim_times, shim_results = launches(recorded.stdout)
                if shim_results != plain_results:
                    failures.append(f"mask {mask} mode {mode}: results differ when recorded")
                checked = subprocess.run([args.kcap, "check", str(trace)], capture_output=True, text=True)
                if checked.returncode != 0:
                    failures.append(f"mask {mask} mode {mode}: kcap check failed: {checked.stdout}{checked.stderr}")
                info = subprocess.run([args.kcap, "info", "--json", str(trace)], capture_output=True, text=True)
                stored = json.loads(info.stdout).get("bytes", {}) if info.returncode == 0 else {}
                notes.append(f"mask {mask} mode {mode}: recorded process {wall:.2f} s wall (the file complete); "
                             f"trace {trace.stat().st_size / 1e9:.2f} GB; bytes "
                             f"raw {stored.get('raw', 0) / 1e9:.2f} GB, unique {stored.get('unique', 0) / 1e9:.2f}"
                             f" GB, stored {stored.get('stored', 0) / 1e9:.2f} GB; " + describe_profile(profile(stats)))
                for old in [*work.glob("trace*.kcap"), stats]:
                    old.unlink(missing_ok=True)
                snapshotted = args.mib * MIB * (2 if mode == "full" else 1)
                for kind in ("fresh", "repeat"):
                    if not plain_times.get(kind) or not shim_times.get(kind):
                        failures.append(f"mask {mask} mode {mode}: no {kind} launches")
                        continue
                    base = statistics.median(plain_times[kind])
                    cost = statistics.median(shim_times[kind]) - base
                    gbps = snapshotted / cost if cost > 0 else float("inf")
                    if len(shim_times[kind]) > 1:
                        # The first round's fresh data also meets memory the writer has not used yet.
                        each = [snapshotted / (t - base) if t > base else float("inf") for t in shim_times[kind]]
                        notes.append(f"mask {mask} mode {mode} {kind}: capture GB/s round by round "
                                     + ", ".join(f"{g:.2f}" for g in each))
                    rows.append((mask, mode, kind, base / 1e6, cost / 1e6, snapshotted / 1e9, gbps,
                                 gbps / d2h if d2h else 0))
    finally:
        for old in work.glob("*"):
            old.unlink()
        work.rmdir()

    print("\n| data (mask) | mode | launch | plain ms | capture cost ms | GB snapshotted | capture GB/s "
          "| of pinned D2H | target >= 50% |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|")
    for mask, mode, kind, base, cost, size, gbps, share in rows:
        print(f"| {mask} | {mode} | {kind} | {base:.2f} | {cost:.1f} | {size:.2f} | {gbps:.2f} | {share:.0%} "
              f"| {'met' if share >= 0.5 else 'MISSED'} |")
    print()
    for note in notes:
        print("-", note)
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
