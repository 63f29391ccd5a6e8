#!/usr/bin/env python3
"""A `torchrun` job of N ranks (NCCL) recorded in metadata, full and
checkpoint mode, one trace per rank:

    nccl_ranks.py --kcap KCAP --log-dir DIR --nproc N -- SCRIPT [ARGS...]

SCRIPT runs under `torchrun --standalone --nproc-per-node N` and prints one
"result rank R world W nccl VERSION ..." line per rank. Asserts that:
  1. the job's result lines are the same without kcap and under each mode
     (kcap changed nothing);
  2. each mode left one trace per rank, each passing `kcap check`, and
     `kcap ranks --json` names every rank 0..N-1 once, world size N, the NCCL
     version the rank printed, the device it ran on, and no problem;
  3. full mode: `kcap replay` of each rank's trace reproduces every launch
     but those recorded without memory because they wait for their peers
     (NCCL), which it names; none differs or faults;
  4. checkpoint mode: `kcap replay` of each rank's trace re-executes its
     intervals, none differing, faulting or hanging, at least one reproduced;
  5. every mode: each rank's trace holds the NCCL calls it made (`kcap dump
     --type collective`): the explicit all-reduce of 1024 floats among them,
     each naming the rank and the world size; in checkpoint mode each call
     that writes carries what it wrote (data = written bytes), in the other
     modes none does; every NCCL kernel launched is marked as launched by
     such a call (collectiveCall); some of the memory made is marked as
     NCCL's own (byNccl: made from libnccl), not all of it.
With fewer GPUs than ranks it exits 77, which ctest reports as skipped.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path


def run(command, env=None, timeout=300):
    return subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout, env=env)


def results(stdout):
    return sorted(line for line in stdout.splitlines() if line.startswith("result "))


def check_collectives(kcap, mode, row, nproc, out):
    """Check 5 for one rank's trace; returns the failures."""
    where = f"{mode}: rank {row['rank']} ({Path(row['file']).name})"
    dump = run([kcap, "dump", row["file"], "--type", "collective,writtenData,launch,alloc"])
    (out / f"{Path(row['file']).stem}.collectives.txt").write_text(dump.stdout + dump.stderr)
    if dump.returncode != 0:
        return [f"{where}: kcap dump exited {dump.returncode}: {dump.stderr[-500:]}"]
    failures = []
    calls = []
    own = allocs = 0
    read_back = {}  # seq of a call read back later -> the bytes its writtenData holds
    for line in dump.stdout.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[3] == "writtenData":
            kv = dict(f.split("=", 1) for f in fields[4:] if "=" in f)
            read_back[kv.get("of", "").lstrip("#")] = int(kv.get("data", "0"))
            continue
        if len(fields) > 5 and fields[3] == "launch" and fields[5].startswith("nccl") and " collectiveCall" not in line:
            failures.append(f"{where}: an NCCL kernel not marked as launched by an NCCL call: {line[:200]}")
        if len(fields) > 4 and fields[3] == "alloc":
            own += 1 if fields[-1] == "byNccl" or " byNccl" in line else 0
            allocs += 1
        if len(fields) < 5 or fields[3] != "collective":
            continue
        kv = dict(f.split("=", 1) for f in fields[5:] if "=" in f)
        kv["seq"] = fields[0].lstrip("#")
        calls.append((fields[4], kv, line))
    for _, kv, line in calls:  # a call read back later: its bytes are in its writtenData
        if " dataDeferred" in line:
            kv["deferred"] = "1"
            kv["data"] = str(read_back.get(kv["seq"], 0))
    explicit = [c for c in calls if c[0] == "allReduce" and c[1].get("count") == "1024"]
    if not explicit:
        failures.append(f"{where}: no allReduce of 1024 elements among its {len(calls)} NCCL calls")
    for op, kv, line in calls:
        if kv.get("rank") != str(row["rank"]) or kv.get("ranks") != str(nproc):
            failures.append(f"{where}: a call names rank {kv.get('rank')} of {kv.get('ranks')}: {line[:200]}")
        written = int(kv.get("written", "0"))
        data = int(kv.get("data", "0"))
        if mode == "checkpoint" and written > 0 and (data != written or "dataMissing" in kv):
            failures.append(f"{where}: {op} wrote {written} bytes, the trace holds {data}: {line[:300]}")
        if mode != "checkpoint" and data != 0:
            failures.append(f"{where}: {op} carries data in {mode} mode")
    if own == 0 or own == allocs:
        failures.append(f"{where}: {own} of {allocs} allocations marked as NCCL's own")
    logged = sum(1 for c in calls if int(c[1].get("data", "0")) > 0)
    deferred = sum(1 for c in calls if c[1].get("deferred"))
    print(f"{where}: {len(calls)} NCCL calls ({', '.join(sorted(set(c[0] for c in calls)))}), "
          f"{logged} with what they wrote ({deferred} read back later); {own} of {allocs} allocations NCCL's own")
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kcap", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("--nproc", type=int, default=1)
    p.add_argument("script", nargs=argparse.REMAINDER)
    args = p.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)

    listed = run(["nvidia-smi", "-L"])
    gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
    if len(gpus) < args.nproc:
        print(f"SKIPPED: {len(gpus)} GPU(s) here; {args.nproc} ranks need as many")
        return 77
    # Several GPUs: no NVLink multicast (NCCL's NVLS), which this host's GPUs
    # must not be asked for.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("KCAP_")}
    env.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    job = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}", *script]

    failures = []
    plain = run(job, env)
    (log_dir / "plain.txt").write_text(plain.stdout + plain.stderr)
    expected = results(plain.stdout)
    if plain.returncode != 0 or len(expected) != args.nproc:
        print(f"FAILED: the job without kcap exited {plain.returncode} with {len(expected)} result lines:\n"
              + plain.stdout[-2000:] + plain.stderr[-3000:])
        return 1
    printed = {}
    for line in expected:
        m = re.match(r"result rank (\d+) world (\d+) nccl (\S+)", line)
        printed[int(m.group(1))] = m.group(3)
    print("\n".join(expected))

    for mode in ("metadata", "full", "checkpoint"):
        out = log_dir / mode
        out.mkdir(exist_ok=True)
        for old in out.glob("*.kcap"):
            old.unlink()
        recorded = run([args.kcap, "record", "-q", "--mode", mode, "-o", str(out / "run-%r-%p.kcap"), "--", *job], env)
        (out / "recorded.txt").write_text(recorded.stdout + recorded.stderr)
        if recorded.returncode != 0 or results(recorded.stdout) != expected:
            failures.append(f"{mode}: the recorded job exited {recorded.returncode}; result lines "
                            f"{results(recorded.stdout)} against {expected}:\n{recorded.stderr[-2000:]}")
            continue
        traces = sorted(out.glob("*.kcap"))
        for trace in traces:
            check = run([args.kcap, "check", str(trace)])
            if check.returncode != 0:
                failures.append(f"{mode}: kcap check {trace.name}: exit {check.returncode}: {check.stdout}{check.stderr}")
        # Processes of the job that launched nothing (torchrun's own) may
        # leave traces too: the ranks are those that launched.
        summary = None
        for attempt in range(2):
            ranks = run([args.kcap, "ranks", "--json", *map(str, traces)])
            (out / "ranks.json").write_text(ranks.stdout + ranks.stderr)
            try:
                summary = json.loads(ranks.stdout)
            except ValueError as e:
                failures.append(f"{mode}: kcap ranks gave no JSON ({e}): {ranks.stderr}")
                summary = None
                break
            launched = [Path(r["file"]) for r in summary["traces"] if r["launches"] > 0]
            if len(launched) == len(traces):
                break
            traces = launched
        if summary is None:
            continue
        rows = summary["traces"]
        seen = sorted(r["rank"] for r in rows)
        if seen != list(range(args.nproc)):
            failures.append(f"{mode}: traces with launches name ranks {seen}, expected 0..{args.nproc - 1}")
        for r in rows:
            where = f"{mode}: rank {r['rank']} ({Path(r['file']).name})"
            if r["worldSize"] != args.nproc:
                failures.append(f"{where}: world size {r['worldSize']}, expected {args.nproc}")
            if r["ncclVersion"] != printed.get(r["rank"]):
                failures.append(f"{where}: NCCL {r['ncclVersion']!r}, the rank printed {printed.get(r['rank'])!r}")
            if not r["devices"] or not all(d["name"] and d["pciBusId"] for d in r["devices"]):
                failures.append(f"{where}: devices {r['devices']} do not name the device it ran on")
            print(f"{where}: {r['launches']} launches, {r['ncclLaunches']} of NCCL, NCCL {r['ncclVersion']}, "
                  f"on {[d['name'] + ' ' + d['pciBusId'] for d in r['devices']]}")
        if summary.get("problems"):
            failures.append(f"{mode}: kcap ranks found problems: {summary['problems']}")

        for r in rows:
            failures += check_collectives(args.kcap, mode, r, args.nproc, out)

        for r in rows:
            trace = r["file"]
            name = Path(trace).stem
            if mode == "full":
                replay = run([args.kcap, "replay", trace, "--json"], timeout=600)
                (out / f"{name}.replay.json").write_text(replay.stdout + replay.stderr)
                try:
                    launches = json.loads(replay.stdout)["launches"]
                except (ValueError, KeyError) as e:
                    failures.append(f"full: kcap replay {name}: exit {replay.returncode}, no JSON ({e}): "
                                    + replay.stderr[-1000:])
                    continue
                peers = [l for l in launches if "peers" in l.get("detail", "")]
                bad = [f"#{l['launchIndex']} {l['kernel'][:60]}: {l['verdict']} {l.get('detail', '')}"
                       for l in launches if l["verdict"] != "REPRODUCED" and l not in peers]
                print(f"full: replay of {name}: {len(launches) - len(peers) - len(bad)} reproduced, "
                      f"{len(peers)} refused as waiting for their peers")
                if bad or not launches or len(launches) == len(peers):
                    failures.append(f"full: kcap replay {name}: not reproduced:\n  " + "\n  ".join(bad[:20]))
            else:
                if mode != "checkpoint":
                    continue
                replay = run([args.kcap, "replay", trace], timeout=600)
                (out / f"{name}.reexecute.txt").write_text(replay.stdout + replay.stderr)
                intervals = [l for l in replay.stdout.splitlines() if l.startswith("interval ")]
                bad = [l for l in intervals if any(v in l for v in (": DIFFERS", ": FAULT", ": HANG"))]
                reproduced = [l for l in intervals if ": REPRODUCED" in l]
                print(f"checkpoint: re-execution of {name}: {len(reproduced)} of {len(intervals)} intervals reproduced")
                if replay.returncode not in (0, 1) or bad or not reproduced:
                    failures.append(f"checkpoint: kcap replay {name}: exit {replay.returncode}:\n"
                                    + replay.stdout[-2000:] + replay.stderr[-1000:])

    for failure in failures:
        print("FAILED:", failure)
    print("PASSED" if not failures else f"{len(failures)} check(s) failed; logs in {log_dir}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
