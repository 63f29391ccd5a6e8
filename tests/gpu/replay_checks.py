#!/usr/bin/env python3
"""Replay checks on a real GPU that need more than "every launch reproduces"
(run_under_shim.py --replay covers that):

    replay_checks.py --kcap KCAP --log-dir DIR --override-image IMAGE
                     --override-kernel NAME --expect-offset N -- PROGRAM [ARGS...]

Records PROGRAM (a driver-API program loading the kernels/ fatbins) with
`kcap record`, then asserts that
  1. `kcap replay --kernel NAME --force-ptx` reproduces every launch of NAME
     bit-exactly, with the image's PTX JIT-compiled (the report says "PTX
     compute_..." for each);
  2. `kcap replay --kernel NAME --override NAME=IMAGE` (IMAGE: a deliberately
     changed build of the kernel) exits 3 and reports every launch of NAME as
     DIFFERS, each with a buffer whose first differing byte is at offset N
     (the element the changed build gets wrong);
  3. `kcap replay --range 0..LAST` (the whole program as one sequence, with
     its recorded copies and memsets between launches) reproduces every
     launch;
  4. `kcap replay --launch 0 --repeat 5 --json` reports 5 GPU timings;
  5. with --fault-image (a build of the kernel that writes 1 TiB past its
     output), `kcap replay --override NAME=FAULT_IMAGE` exits 4 and reports
     each launch of NAME as FAULT with CUDA_ERROR_ILLEGAL_ADDRESS, while every
     other launch, replayed after a fault in a fresh replay process, still
     REPRODUCED;
  6. with --slow-image (a build of the kernel with the same results, ~200 us
     slower), `kcap bisect --perf --against override:^NAME$=SLOW_IMAGE
     --threshold 100` exits 3 and lists every launch of NAME as slower, and
     no launch of another kernel.
It never skips: a check that cannot run fails.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path


def replay(kcap, trace, log_dir, label, *extra):
    command = [kcap, "replay", str(trace), "--json", *extra]
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300)
    (log_dir / f"replay-{label}.json").write_text(done.stdout)
    (log_dir / f"replay-{label}.stderr").write_text(done.stderr)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = None
    print(f"{label}: exit {done.returncode}: {report.get('summary') if report else done.stderr.strip()}")
    return done.returncode, report, " ".join(command)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kcap", required=True)
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--override-image", required=True)
    parser.add_argument("--override-kernel", required=True)
    parser.add_argument("--expect-offset", type=int, required=True)
    parser.add_argument("--fault-image", help="a build of the kernel that faults")
    parser.add_argument("--slow-image", help="a build of the kernel with the same results, much slower")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    log_dir = Path(args.log_dir).resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    trace = log_dir / "trace.kcap"
    trace.unlink(missing_ok=True)
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("KCAP_") and k != "LD_PRELOAD"}
    for setting in args.env:
        name, _, value = setting.partition("=")
        env[name] = value

    failures = []
    recorded = subprocess.run([args.kcap, "record", "-q", "-o", str(trace), "--", *command], env=env,
                              capture_output=True, text=True, errors="replace", timeout=300)
    if recorded.returncode != 0 or not trace.is_file():
        print(f"FAILED: recording failed (exit {recorded.returncode}):\n{recorded.stdout}{recorded.stderr}")
        return 1
    kernel = args.override_kernel

    code, report, cmd = replay(args.kcap, trace, log_dir, "force-ptx", "--kernel", f"^{kernel}$", "--force-ptx")
    if report is None or code != 0:
        failures.append(f"{cmd}: exit {code}, expected 0")
    else:
        for l in report["launches"]:
            if l["verdict"] != "REPRODUCED" or not l["code"].startswith("PTX compute_"):
                failures.append(f"{cmd}: launch {l['launchIndex']}: {l['verdict']} with code {l['code']!r} "
                                f"{l.get('detail', '')}")
        if not report["launches"]:
            failures.append(f"{cmd}: no launch of {kernel}")

    code, report, cmd = replay(args.kcap, trace, log_dir, "override", "--kernel", f"^{kernel}$", "--override",
                               f"^{kernel}$={args.override_image}")
    if report is None or code != 3:
        failures.append(f"{cmd}: exit {code}, expected 3 (differs)")
    if report is not None:
        for l in report["launches"]:
            offsets = [b["firstDifferingOffset"] for b in l["buffers"] if b["differingBytes"]]
            if l["verdict"] != "DIFFERS" or offsets != [args.expect_offset] or "override" not in l["code"]:
                failures.append(f"{cmd}: launch {l['launchIndex']}: {l['verdict']}, code {l['code']!r}, first "
                                f"differing offsets {offsets}, expected DIFFERS at [{args.expect_offset}]")

    launches = json.loads(subprocess.run([args.kcap, "info", "--json", str(trace)], capture_output=True,
                                         text=True).stdout)["launches"]["count"]
    code, report, cmd = replay(args.kcap, trace, log_dir, "sequence", "--range", f"0..{launches - 1}")
    if report is None or code != 0 or len(report["launches"]) != launches or any(
            l["verdict"] != "REPRODUCED" for l in report["launches"]):
        failures.append(f"{cmd}: exit {code}; expected {launches} launches REPRODUCED, got "
                        f"{[(l['launchIndex'], l['verdict'], l.get('detail')) for l in (report or {}).get('launches', [])]}")

    code, report, cmd = replay(args.kcap, trace, log_dir, "repeat", "--launch", "0", "--repeat", "5")
    times = (report or {}).get("launches", [{}])[0].get("timeNs", {})
    if code != 0 or times.get("repeats") != 5 or not times.get("median", 0) > 0:
        failures.append(f"{cmd}: exit {code}, timings {times}; expected 5 repeats with a positive median")

    if args.fault_image:
        code, report, cmd = replay(args.kcap, trace, log_dir, "fault", "--override",
                                   f"^{kernel}$={args.fault_image}")
        launches_seen = (report or {}).get("launches", [])
        faulted = [l for l in launches_seen if l["kernel"] == kernel]
        others = [l for l in launches_seen if l["kernel"] != kernel]
        if code != 4 or not faulted or any(
                l["verdict"] != "FAULT" or "CUDA_ERROR_ILLEGAL_ADDRESS" not in l["detail"] for l in faulted):
            failures.append(f"{cmd}: exit {code}; expected FAULT (illegal address) for every {kernel} launch, got "
                            f"{[(l['launchIndex'], l['verdict'], l['detail'][:80]) for l in faulted]}")
        if not others or any(l["verdict"] != "REPRODUCED" for l in others):
            failures.append(f"{cmd}: the other launches must still reproduce after a fault, got "
                            f"{[(l['launchIndex'], l['verdict']) for l in others]}")

    if args.slow_image:
        perf_command = [args.kcap, "bisect", str(trace), "--perf", "--against", f"override:^{kernel}$={args.slow_image}",
                   "--threshold", "100", "--json"]
        done = subprocess.run(perf_command, capture_output=True, text=True, errors="replace", timeout=300)
        (log_dir / "bisect-perf.json").write_text(done.stdout)
        (log_dir / "bisect-perf.stderr").write_text(done.stderr)
        try:
            report = json.loads(done.stdout)
        except ValueError:
            report = None
        slower = (report or {}).get("slower", [])
        print(f"bisect --perf: exit {done.returncode}, timed {(report or {}).get('timed')}, slower "
              f"{[(s['launchIndex'], s['kernel'], round(s['percent'])) for s in slower]}")
        every = sorted(l["launchIndex"] for l in json.loads(subprocess.run(
            [args.kcap, "replay", str(trace), "--kernel", f"^{kernel}$", "--json"], capture_output=True,
            text=True).stdout)["launches"])
        if done.returncode != 3 or sorted(s["launchIndex"] for s in slower) != every or any(
                s["kernel"] != kernel for s in slower):
            failures.append(f"{' '.join(perf_command)}: exit {done.returncode}, slower "
                            f"{[(s['launchIndex'], s['kernel']) for s in slower]}; expected exit 3 and exactly "
                            f"the {kernel} launches {every}")

    for failure in failures:
        print("FAILED:", failure)
    print("PASSED" if not failures else f"{len(failures)} check(s) failed; logs in {log_dir}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
