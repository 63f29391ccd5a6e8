#!/usr/bin/env python3
"""One GPU test per bug class of kernels/bugs/ (ctest gpu_bug_<name>):

    bug_classes.py --class NAME --kcap KCAP --bugs-dir DIR --log-dir DIR

Runs the program kernels/bugs/NAME plainly and under `kcap record`; the
recorded run must exit 0 with the same stdout as the plain one (recording
changed nothing), the trace must pass `kcap check` and hold the launches the
program makes, in order. Then kcap's own tools must find the launch that has
the bug and name its class, and must leave the launch without it alone:

  tail_oob        `kcap replay --launch 1 --check overrun`: finding (n = 4000
                  writes past y); launch 0 (n = 4096, whole tiles): clean; the
                  same with `--check sanitizer` (compute-sanitizer's initcheck
                  reports launch 1's reads past x)
  nan_padding     `--check uninit`: finding on launch 0 (padded_dot reads a's
                  padding, which nothing wrote), clean on launch 1 (it writes
                  the workspace, reads none of it); `--override
                  padded_dot=nan_padding_fixed.fatbin --dtype f32` on launch 2:
                  DIFFERS, out has 8 NaN recorded and none replayed, first
                  difference in row 3; on launch 0: REPRODUCED
  inplace_alias   `--check alias`: finding on launch 1 (out == in), clean on
                  launch 0
  arch_path       replay as recorded: every launch REPRODUCED, launch 2 on
                  SASS sm_90; `kcap bisect --against force-ptx`: the first
                  divergence is launch 2 (checksum), in the second sum;
                  `--override checksum=arch_path_fixed.fatbin` on launch 2
                  differs there too
  fp16_accum      `--override row_mean=fp16_accum_fixed.fatbin --dtype f16` on
                  launch 1: DIFFERS with infRecorded > 0 and infReplayed == 0;
                  on launch 0: REPRODUCED; `kcap bisect --against
                  override:...` names launch 1
  flag_hang       `kcap replay --timeout 1`: launch 1 (chunks = 0) HANG, launch
                  0 REPRODUCED, exit 4
  int32_overflow  `kcap bisect --against override:strided_copy=...fixed.fatbin`:
                  launch 1, y differs from byte 2^31 on, in exactly 4096 bytes,
                  and nothing else differs
  pdl_race        `kcap replay --range 0..3 --check determinism --runs 20`
                  reports a determinism finding on launch 3 (consume) and
                  none on launch 1 (consume_synced); `kcap bisect --sequence`
                  is run beside it and not required. The program's two
                  runs get CUDA_LAUNCH_BLOCKING=1: recording serializes
                  launches (docs/capture.md), so only a serialized plain run
                  can print the same; the tools run without it.
  smem_arch       replay on this GPU reproduces launch 0; some kcap output
                  (`kcap replay --launch 0 --json`: detail, checks; `kcap
                  doctor`) says the launch needs 204800 bytes of dynamic shared
                  memory, more than sm_80 allows. No tool saying so is a
                  failure, not a skip.
  partial_write   `--check unwritten`: finding on launch 1 (rows_per_group 6),
                  clean on launch 0 (8); `--override
                  group_center=partial_write_fixed.fatbin` on launch 1 differs
                  first in row 4 of group 0 (byte 1024 of out)

The contract assumed of the tools (docs/replay.md): `kcap replay
--json` gives {"launches": [{"launchIndex", "kernel", "verdict", "detail",
"code", "buffers": [{"label", "size", "differingBytes",
"firstDifferingOffset", "stats"?}], "checks": [{"name", "status",
"summary"}]}], "exitCode"}; `kcap bisect --json` gives {"first": null or
{"launchIndex", "kernel", "verdict", "buffers", "reproduce"}, "examined"}.
Every command's stdout and stderr is kept in --log-dir. It never skips: a
check that cannot run fails.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

# What each program launches, in order (extern "C" names).
LAUNCHES = {
    "tail_oob": ["tile_scale", "tile_scale"],
    "nan_padding": ["padded_dot", "normalize_rows", "padded_dot"],
    "inplace_alias": ["center_rows", "center_rows"],
    "arch_path": ["fill_ramp", "checksum", "checksum"],
    "fp16_accum": ["row_mean", "row_mean"],
    "flag_hang": ["chunked_sum", "chunked_sum"],
    "int32_overflow": ["strided_copy", "strided_copy"],
    "pdl_race": ["produce", "consume_synced", "produce", "consume"],
    "smem_arch": ["big_tile_sum"],
    "partial_write": ["group_center", "group_center"],
}
# Set for the program's plain and recorded runs only (never for the tools).
RUN_ENV = {"pdl_race": {"CUDA_LAUNCH_BLOCKING": "1"}}


class Test:
    def __init__(self, args):
        self.name = args.bug_class
        self.kcap = args.kcap
        self.bugs = Path(args.bugs_dir).resolve()
        self.log_dir = Path(args.log_dir).resolve()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.trace = self.log_dir / "trace.kcap"
        self.env = {k: v for k, v in os.environ.items()
                    if k != "LD_PRELOAD" and k != "CUDA_LAUNCH_BLOCKING" and not k.startswith("KCAP_")}
        self.failures = []

    def fixed(self, stem):
        return str(self.bugs / f"{stem}_fixed.fatbin")

    def fail(self, message):
        print("FAILED:", message)
        self.failures.append(message)

    def run(self, label, command, env=None, timeout=600):
        try:
            done = subprocess.run(command, env=env or self.env, capture_output=True, text=True, errors="replace",
                                  timeout=timeout)
            code, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as expired:
            decode = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
            code, out, err = None, decode(expired.stdout), decode(expired.stderr) + f"\n(timed out after {timeout} s)"
        (self.log_dir / f"{label}.stdout").write_text(out)
        (self.log_dir / f"{label}.stderr").write_text(err)
        return code, out, err

    def tool(self, label, *args, timeout=600):
        """`kcap ARGS --json`: (exit code, parsed report or None, the command as text)."""
        command = [self.kcap, *args, "--json"]
        code, out, err = self.run(label, command, timeout=timeout)
        try:
            report = json.loads(out)
        except ValueError:
            report = None
        text = " ".join(command)
        said = (report or {}).get("summary") if isinstance(report, dict) else None
        print(f"$ {text}\n  exit {code}: {said if said is not None else (err.strip()[-300:] or 'no JSON')}")
        if report is None:
            self.fail(f"`{text}` printed no JSON report (exit {code}): {err.strip()[-500:]}")
        return code, report, text

    # ---- recording ---------------------------------------------------------------
    def record(self):
        """Plain run, recorded run, kcap check; the launches of the trace as [(index, kernel, sharedMemBytes)]."""
        program = str(self.bugs / self.name)
        env = dict(self.env, **RUN_ENV.get(self.name, {}))
        plain = self.run("plain", [program], env=env)
        if plain[0] != 0:
            self.fail(f"the plain run of {program} exited {plain[0]} (it must exit 0: the bug is silent):\n"
                      f"{plain[1]}{plain[2]}")
            return None
        self.trace.unlink(missing_ok=True)
        recorded = self.run("recorded", [self.kcap, "record", "-q", "-o", str(self.trace), "--", program], env=env)
        print("program output:\n  " + "\n  ".join(plain[1].splitlines()))
        if recorded[0] != 0 or not self.trace.is_file():
            self.fail(f"`kcap record -- {program}` exited {recorded[0]}:\n{recorded[1]}{recorded[2]}")
            return None
        if recorded[1] != plain[1]:
            self.fail(f"the recorded run printed something else than the plain run (recording changed the "
                      f"program's results):\n--- plain\n{plain[1]}--- recorded\n{recorded[1]}")
        checked = self.run("check", [self.kcap, "check", str(self.trace)])
        if checked[0] != 0:
            self.fail(f"kcap check {self.trace} failed:\n{checked[1]}{checked[2]}")
        dump = self.run("dump", [self.kcap, "dump", "--json", str(self.trace)])
        launches = []
        for line in dump[1].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if "launch" in event and not event["launch"].get("capturing", False):
                l = event["launch"]
                launches.append((int(l["launchIndex"]), l.get("kernelName", ""), int(l.get("sharedMemBytes", 0))))
        names = [kernel for _, kernel, _ in launches]
        if names != LAUNCHES[self.name]:
            self.fail(f"the trace holds the launches {names}; the program makes {LAUNCHES[self.name]}")
            return None
        if [index for index, _, _ in launches] != list(range(len(launches))):
            self.fail(f"launch indexes {[index for index, _, _ in launches]}, expected 0..{len(launches) - 1}")
            return None
        return launches

    # ---- report helpers ----------------------------------------------------------
    @staticmethod
    def launch(report, index):
        for l in (report or {}).get("launches", []):
            if int(l.get("launchIndex", -1)) == index:
                return l
        return None

    @staticmethod
    def check(launch, name):
        for c in (launch or {}).get("checks", []):
            if c.get("name") == name:
                return c
        return None

    @staticmethod
    def differing(launch_or_first):
        return [b for b in (launch_or_first or {}).get("buffers", []) if b.get("differingBytes", 0)]

    @staticmethod
    def brief(buffers):
        return [(b.get("label"), b.get("size"), b.get("differingBytes"), b.get("firstDifferingOffset"))
                for b in buffers]

    def expect_check(self, index, name, status, why, *extra):
        """`kcap replay --launch INDEX --check NAME`: the check on that launch has STATUS (finding or clean)."""
        code, report, cmd = self.tool(f"check-{name}-{index}", "replay", str(self.trace), "--launch", str(index),
                                      "--check", name, *extra)
        if report is None:
            return None
        launch = self.launch(report, index)
        check = self.check(launch, name)
        if check is None:
            self.fail(f"{why}; but `{cmd}` ran no '{name}' check on launch {index} (exit {code}, verdict "
                      f"{(launch or {}).get('verdict')}: {(launch or {}).get('detail', '')})")
            return None
        print(f"  launch {index} {launch.get('kernel')}: {launch.get('verdict')}; check {name}: "
              f"{check.get('status')}: {check.get('summary', '')}")
        if check.get("status") != status:
            self.fail(f"{why}; but `{cmd}` says {check.get('status')}: {check.get('summary', '')}")
        elif status == "finding" and code != 3:
            self.fail(f"{why}; `{cmd}` found it but exited {code}, not 3 (a checker finding)")
        elif status == "clean" and code != 0:
            self.fail(f"{why}; `{cmd}` exited {code}, not 0 (verdict {launch.get('verdict')}: "
                      f"{launch.get('detail', '')})")
        return check

    def expect_verdict(self, label, index, verdict, why, *args):
        """`kcap replay --launch INDEX ARGS`: that launch's verdict; returns the launch's entry."""
        code, report, cmd = self.tool(label, "replay", str(self.trace), "--launch", str(index), *args)
        launch = self.launch(report, index)
        if report is None:
            return None
        if launch is None:
            self.fail(f"{why}; but `{cmd}` reported no launch {index} (exit {code})")
            return None
        print(f"  launch {index} {launch.get('kernel')}: {launch.get('verdict')} with {launch.get('code')}; "
              f"differing buffers {self.brief(self.differing(launch))}")
        expected_code = {"REPRODUCED": 0, "DIFFERS": 3, "FAULT": 4, "HANG": 4}.get(verdict)
        if launch.get("verdict") != verdict:
            self.fail(f"{why}; but `{cmd}` says {launch.get('verdict')}: {launch.get('detail', '')}")
        elif expected_code is not None and code != expected_code:
            self.fail(f"{why}; `{cmd}` says {verdict} but exited {code}, not {expected_code}")
        return launch

    def bisect(self, label, why, index, kernel, *args, expect_first=True):
        """`kcap bisect ARGS`: the first divergent launch is INDEX (KERNEL); returns `first`."""
        code, report, cmd = self.tool(label, "bisect", str(self.trace), *args)
        if report is None:
            return None
        first = report.get("first")
        if first is None:
            if expect_first:
                self.fail(f"{why}; but `{cmd}` found no divergence (examined {report.get('examined')}, exit {code})")
            return None
        print(f"  first divergence: launch {first.get('launchIndex')} {first.get('kernel')} {first.get('verdict')}; "
              f"differing buffers {self.brief(self.differing(first))}; reproduce: {first.get('reproduce')}")
        if int(first.get("launchIndex", -1)) != index or first.get("kernel") != kernel:
            if expect_first:
                self.fail(f"{why}; but `{cmd}` names launch {first.get('launchIndex')} ({first.get('kernel')})")
            return None
        if expect_first and code not in (3, 4):
            self.fail(f"{why}; `{cmd}` named it but exited {code}, not 3 (divergence) or 4 (fault/hang)")
        return first

    # ---- the classes -------------------------------------------------------------
    def tail_oob(self):
        self.expect_check(1, "overrun", "finding",
                          "the launch that reads past the end of x and writes past the end of y is launch 1 "
                          "(tile_scale, n = 4000: not a multiple of the 256-element tile), found by --check overrun")
        self.expect_check(0, "overrun", "clean",
                          "launch 0 (tile_scale, n = 4096: 16 whole tiles) stays inside x and y; --check overrun "
                          "must not flag it")
        # compute-sanitizer (in the CUDA toolkit) on the replayed launch: the
        # reads past x's end are of bytes nothing initialized, which
        # initcheck reports (memcheck does not: the recorded addresses are
        # mapped whole granules, so the overrun stays in mapped memory).
        self.expect_check(1, "sanitizer", "finding",
                          "launch 1 (tile_scale, n = 4000) reads past the end of x; compute-sanitizer's initcheck "
                          "must report the uninitialized reads")
        self.expect_check(0, "sanitizer", "clean",
                          "launch 0 (tile_scale, n = 4096) reads only what the program wrote; compute-sanitizer "
                          "must find nothing")

    def nan_padding(self):
        self.expect_check(0, "uninit", "finding",
                          "launch 0 (padded_dot) loads the 28 padding floats of every row of a, which nothing "
                          "wrote (cudaMemcpy2D copied 100 of each 128), found by --check uninit")
        self.expect_check(1, "uninit", "clean",
                          "launch 1 (normalize_rows) writes the whole workspace and reads only counts and totals, "
                          "which were copied in; --check uninit must not flag it")
        why = ("launch 2 (padded_dot on the reused workspace) turns 8 rows into NaN (0 * the NaN left in their "
               "padding); the fixed build, which loads only the 100 used columns, must give numbers exactly there")
        launch = self.expect_verdict("override-2", 2, "DIFFERS", why, "--override",
                                     f"padded_dot={self.fixed('nan_padding')}", "--dtype", "f32")
        buffers = self.differing(launch)
        if launch is not None and launch.get("verdict") == "DIFFERS":
            if len(buffers) != 1:
                self.fail(f"{why}; only out may differ, but the differing buffers are {self.brief(buffers)}")
            else:
                stats = buffers[0].get("stats") or {}
                offset = buffers[0].get("firstDifferingOffset", -1)
                if stats.get("nanRecorded") != 8 or stats.get("nanReplayed") != 0:
                    self.fail(f"{why}: expected 8 NaN recorded and 0 replayed in out, the report's --dtype f32 "
                              f"statistics say {stats or 'nothing'}")
                if not 12 <= offset < 16:
                    self.fail(f"{why}: the first NaN row is row 3 (bytes 12..15 of out), but the first difference "
                              f"is at byte {offset}")
        self.expect_verdict("override-0", 0, "REPRODUCED",
                            "launch 0 ran with zeros in the padding, where the fixed build computes bit for bit "
                            "what the original did", "--override", f"padded_dot={self.fixed('nan_padding')}")

    def inplace_alias(self):
        self.expect_check(1, "alias", "finding",
                          "the launch that overwrites its own input is launch 1 (center_rows with out == in: "
                          "columns 32..95 read in[row][0] after lane 0 replaced it), found by --check alias")
        self.expect_check(0, "alias", "clean",
                          "launch 0 (center_rows, out and in distinct) does not alias; --check alias must not "
                          "flag it")
        # Informational: with one warp per row the wrong result is the same every time.
        self.tool("determinism-1", "replay", str(self.trace), "--launch", "1", "--check", "determinism",
                  "--runs", "5")

    def arch_path(self):
        code, report, cmd = self.tool("replay-all", "replay", str(self.trace))
        if report is not None:
            bad = [(l["launchIndex"], l["verdict"], l.get("detail", "")) for l in report.get("launches", [])
                   if l.get("verdict") != "REPRODUCED"]
            if code != 0 or bad:
                self.fail(f"replayed with the recorded code every launch must reproduce, but `{cmd}` exited "
                          f"{code}: {bad}")
            launch = self.launch(report, 2)
            if launch is not None and not str(launch.get("code", "")).startswith("SASS sm_90"):
                self.fail(f"the program ran checksum's sm_90 SASS (the Hopper path); `{cmd}` says launch 2 ran "
                          f"{launch.get('code')!r}")
        why = ("the launch whose sm_90 code is wrong is launch 2 (checksum of 4099 elements: the Hopper path "
               "drops the last 3), found by kcap bisect --against force-ptx (the compute_80 PTX takes the "
               "generic path)")
        first = self.bisect("bisect-force-ptx", why, 2, "checksum", "--against", "force-ptx")
        buffers = self.differing(first)
        if first is not None and not any(8 <= b.get("firstDifferingOffset", -1) < 16 for b in buffers):
            self.fail(f"{why}: the second sum (bytes 8..15 of sums) must differ, the differing buffers are "
                      f"{self.brief(buffers)}")
        fixed = self.expect_verdict("override-2", 2, "DIFFERS",
                                    "the fixed build adds the 3 remaining elements on sm_90 too, so launch 2's "
                                    "sum must change", "--override", f"checksum={self.fixed('arch_path')}")
        if first is not None and fixed is not None and self.brief(self.differing(fixed)) != self.brief(buffers):
            self.fail(f"the fixed build must differ from the recording where the PTX path does: "
                      f"{self.brief(self.differing(fixed))} vs {self.brief(buffers)}")

    def fp16_accum(self):
        fixed = f"row_mean={self.fixed('fp16_accum')}"
        why = ("launch 1 (row_mean of rows of 30.0) sums 122880 in fp16, past 65504: the recorded mean is inf; "
               "the fixed build (fp32 sums) gives 30")
        launch = self.expect_verdict("override-1", 1, "DIFFERS", why, "--override", fixed, "--dtype", "f16")
        buffers = self.differing(launch)
        if launch is not None and launch.get("verdict") == "DIFFERS":
            stats = [b.get("stats") or {} for b in buffers]
            if len(buffers) != 1 or not (stats[0].get("infRecorded", 0) > 0 and stats[0].get("infReplayed") == 0):
                self.fail(f"{why}: expected one differing buffer (out) with infRecorded > 0 and infReplayed == 0; "
                          f"the report says {list(zip(self.brief(buffers), stats))}")
            elif not 0 <= buffers[0].get("firstDifferingOffset", -1) < 2:
                self.fail(f"{why}: row 0's mean (bytes 0..1 of out) must differ first, not byte "
                          f"{buffers[0].get('firstDifferingOffset')}")
        self.expect_verdict("override-0", 0, "REPRODUCED",
                            "launch 0's rows (1.0, 0.5, 2.0, -1.0) sum exactly in fp16: the fixed build writes the "
                            "same means", "--override", fixed, "--dtype", "f16")
        self.bisect("bisect-override", "kcap bisect against the fixed build must name launch 1 (row_mean) as the "
                    "first launch whose output changes", 1, "row_mean", "--against", f"override:{fixed}",
                    "--dtype", "f16")

    def flag_hang(self):
        code, report, cmd = self.tool("replay-timeout", "replay", str(self.trace), "--timeout", "1")
        if report is None:
            return
        hang, fine = self.launch(report, 1), self.launch(report, 0)
        if (hang or {}).get("verdict") != "HANG":
            self.fail(f"the launch that never sets its flag is launch 1 (chunked_sum with chunks = 0: its waiting "
                      f"threads spin 2 s), so `{cmd}` must call it HANG; it says "
                      f"{(hang or {}).get('verdict')}: {(hang or {}).get('detail', '')}")
        if (fine or {}).get("verdict") != "REPRODUCED":
            self.fail(f"launch 0 (chunked_sum with chunks = 4) finishes at once and must reproduce; `{cmd}` says "
                      f"{(fine or {}).get('verdict')}: {(fine or {}).get('detail', '')}")
        if code != 4:
            self.fail(f"`{cmd}` exited {code}; a hang is exit 4")

    def int32_overflow(self):
        why = ("the launch whose 32-bit source offset wraps is launch 1 (strided_copy of 2^31 + 4096 int8 "
               "elements), found by kcap bisect against the fixed build (64-bit offsets)")
        first = self.bisect("bisect-override", why, 1, "strided_copy", "--against",
                            f"override:strided_copy={self.fixed('int32_overflow')}")
        if first is None:
            return
        buffers = self.differing(first)
        y = [b for b in buffers if b.get("size") == (1 << 31) + 4096]
        if len(buffers) != 1 or not y:
            self.fail(f"{why}: only y (2147487744 bytes) may differ (the wrong reads do not write), the differing "
                      f"buffers are {self.brief(buffers)}")
        elif y[0].get("firstDifferingOffset") != 1 << 31 or y[0].get("differingBytes") != 4096:
            self.fail(f"{why}: y must differ from byte 2147483648 (element 2^31, the first past INT_MAX) on, in "
                      f"4096 bytes; the report says first differing byte {y[0].get('firstDifferingOffset')}, "
                      f"{y[0].get('differingBytes')} bytes")

    def pdl_race(self):
        why = ("the launch that reads buf without waiting for produce is launch 3 (consume: launched with "
               "programmatic stream serialization, no cudaGridDependencySynchronize)")
        code, report, cmd = self.tool("range-determinism", "replay", str(self.trace), "--range", "0..3",
                                      "--check", "determinism", "--runs", "20")
        if report is None:
            self.fail(f"`{cmd}` gave no report (exit {code})")
            return
        bad, good = self.launch(report, 3), self.launch(report, 1)
        for l in (good, bad):
            if l is not None:
                c = self.check(l, "determinism") or {}
                print(f"  launch {l.get('launchIndex')} {l.get('kernel')}: {l.get('verdict')}; determinism "
                      f"{c.get('status')}: {c.get('summary', '')}")
        finding = lambda l: l is not None and (self.check(l, "determinism") or {}).get("status") == "finding"
        if finding(good):
            self.fail(f"launch 1 (consume_synced) waits for produce; `{cmd}` must not flag it")
        # The determinism check itself must name the race: a verdict that
        # differs, or another tool, is not the finding this class is about.
        if not finding(bad):
            self.fail(f"{why}; `{cmd}` did not report a determinism finding on it (logs: {self.log_dir})")
        # kcap bisect --sequence is shown beside it, not required.
        self.bisect("bisect-sequence", why, 3, "consume", "--sequence", expect_first=False)

    def smem_arch(self, launches):
        _, _, shared = launches[0]
        if shared != 204800:
            self.fail(f"the trace says launch 0 asked for {shared} bytes of dynamic shared memory; the program asks "
                      f"for 204800")
        launch = self.expect_verdict("replay-0", 0, "REPRODUCED",
                                     "launch 0 (big_tile_sum, 200 KiB of dynamic shared memory) fits an sm_90 GPU")
        # One statement (a string in the replay report, a line of doctor's output) must hold both facts.
        def strings(value):
            if isinstance(value, str):
                yield value
            elif isinstance(value, dict):
                for v in value.values():
                    yield from strings(v)
            elif isinstance(value, list):
                for v in value:
                    yield from strings(v)
        texts = {"kcap replay --launch 0 --json": list(strings(launch or {}))}
        for label, args in (("doctor", ["doctor", str(self.trace)]), ("doctor-json", ["doctor", str(self.trace),
                                                                                      "--json"])):
            code, out, err = self.run(label, [self.kcap, *args])
            try:
                lines = list(strings(json.loads(out)))
            except ValueError:
                lines = (out + err).splitlines()
            texts[f"kcap {' '.join(args)} (exit {code})"] = lines
        size = re.compile(r"204800|200(\.0)? ?KiB")
        arch = re.compile(r"sm_?80|compute capability 8\.0|A100")
        said = [f"{where}: {line}" for where, lines in texts.items() for line in lines
                if size.search(line) and arch.search(line)]
        if said:
            print(f"  said by: {said}")
        else:
            self.fail("launch 0 (big_tile_sum) needs 204800 bytes of dynamic shared memory, more than an sm_80 GPU "
                      "allows (166912 per block): it runs on this GPU and fails on an A100. No kcap tool says so: "
                      f"looked for both facts in {list(texts)} (logs: {self.log_dir})")

    def partial_write(self):
        self.expect_check(1, "unwritten", "finding",
                          "the launch that leaves output rows unwritten is launch 1 (group_center with 6 rows per "
                          "group: rows 4 and 5 of every group are never written), found by --check unwritten")
        self.expect_check(0, "unwritten", "clean",
                          "launch 0 (group_center with 8 rows per group) writes every row; --check unwritten must "
                          "not flag it")
        why = "the fixed build writes rows 4 and 5 of every group, so out must change from row 4 of group 0 on"
        launch = self.expect_verdict("override-1", 1, "DIFFERS", why, "--override",
                                     f"group_center={self.fixed('partial_write')}")
        buffers = self.differing(launch)
        if launch is not None and launch.get("verdict") == "DIFFERS":
            if len(buffers) != 1 or not 1024 <= buffers[0].get("firstDifferingOffset", -1) < 1028:
                self.fail(f"{why} (byte 1024 of out); the differing buffers are {self.brief(buffers)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--class", dest="bug_class", required=True, choices=sorted(LAUNCHES))
    parser.add_argument("--kcap", required=True)
    parser.add_argument("--bugs-dir", required=True, help="the build's kernels/bugs: programs and *_fixed.fatbin")
    parser.add_argument("--log-dir", required=True)
    args = parser.parse_args()
    test = Test(args)
    launches = test.record()
    if launches is not None:
        step = getattr(test, test.name)
        step(launches) if test.name == "smem_arch" else step()
    print("PASSED" if not test.failures else f"{len(test.failures)} check(s) failed; logs in {test.log_dir}")
    return 0 if not test.failures else 1


if __name__ == "__main__":
    sys.exit(main())
