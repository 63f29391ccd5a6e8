"""The replay steps of run_under_shim.py (11 to 13 of its list): replaying
every launch of the traces it recorded (fixed and relocated addresses,
--force-ptx, graph launches node by node), a range as one sequence, and
re-execution of checkpoint traces. Each returns a list of failures, empty
when the step held.
"""
import json
import re
import subprocess
from collections import Counter


def run_kept(command, log_dir, stem, timeout, failures):
    """Runs `command`, keeping its stdout in STEM.json and its stderr in
    STEM.stderr under log_dir; None (a failure added) when it timed out."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        failures.append(f"{' '.join(command)}: timed out after {timeout} s")
        return None
    (log_dir / f"{stem}.json").write_text(done.stdout)
    (log_dir / f"{stem}.stderr").write_text(done.stderr)
    return done

def check_replay(kcap, traces, log_dir, timeout, force_ptx_code=None, detail=None, graph_nodes_refused=None,
                 without_memory=None, fixed_va_only=None):
    """Failures of replaying every launch of the traces, twice (11. above)."""
    failures = []
    variants = [("fixed", [])] + ([] if fixed_va_only else [("relocated", ["--no-fixed-va"])])
    if fixed_va_only:
        print(f"  not replayed relocated: {fixed_va_only}")
    if force_ptx_code:
        variants.append(("force-ptx", ["--force-ptx"]))
    for trace in traces:
        graphs = graph_launch_count(kcap, trace)
        for label, extra in variants + ([("graph-nodes", ["--graph-nodes"])] if graphs else []):
            command = [kcap, "replay", str(trace), "--json"] + extra
            done = run_kept(command, log_dir, f"{trace.name}.replay-{label}", timeout, failures)
            if done is None:
                continue
            try:
                report = json.loads(done.stdout)
                launches = report["launches"]
                graph_launches = report.get("graphLaunches", [])
            except (ValueError, KeyError, TypeError) as e:
                failures.append(f"{' '.join(command)}: exit {done.returncode}, no JSON report ({e}):\n{done.stderr}")
                continue
            if label == "graph-nodes" and graph_nodes_refused:
                unrefused = [f"graph launch {g['graphLaunchIndex']}: {g['verdict']} {g.get('detail', '')}"
                             for g in graph_launches
                             if g["verdict"] != "ERROR" or not re.search(graph_nodes_refused, g.get("detail", ""))]
                print(f"  node by node: {len(graph_launches) - len(unrefused)} of {graphs} graph launches refused")
                if done.returncode != 1 or unrefused or len(graph_launches) != graphs:
                    failures.append(f"{' '.join(command)}: exit {done.returncode}, expected every graph launch "
                                    f"refused with {graph_nodes_refused!r}: " + "; ".join(unrefused[:5]))
                continue
            failures += graph_failures(" ".join(command), graph_launches, graphs, label == "graph-nodes")
            if label == "graph-nodes":
                if done.returncode != 0:
                    failures.append(f"{' '.join(command)}: exit {done.returncode}")
                continue
            def unrecorded(l):
                reason = l.get("detail", "").partition("recorded without its memory: ")[2]
                return l["verdict"] == "ERROR" and reason and without_memory and re.search(without_memory, reason)
            excused = [l for l in launches if unrecorded(l)]
            bad = [f"#{l['launchIndex']} {l['kernel']}: {l['verdict']} {l.get('detail', '')}"
                   for l in launches if l["verdict"] != "REPRODUCED" and not unrecorded(l)]
            if excused:
                print(f"  {len(excused)} of {len(launches)} launches recorded without memory: "
                      f"{Counter(l['detail'] for l in excused).most_common(2)}")
                if not any(l["verdict"] == "REPRODUCED" for l in launches):
                    failures.append(f"{' '.join(command)}: no launch reproduced")
            paths = Counter(l["memory"] for l in launches)
            moved = {key: sum(l.get(key, 0) for l in launches)
                     for key in ("restoredBytes", "uploadedBytes", "readBackBytes")}
            print(f"replay {trace.name} ({label}): {report.get('summary')}; memory {dict(paths)}; bytes {moved}")
            if done.returncode != (1 if excused else 0) or bad:
                failures.append(f"{' '.join(command)}: exit {done.returncode}; not reproduced:\n  "
                                + "\n  ".join(bad[:20]))
            if not launches and not graph_launches:
                failures.append(f"{' '.join(command)}: replayed no launch")
            # A verdict is only as good as what it compared: every reproduced
            # launch must name the buffers it held to the recording, except a
            # launch the driver refused when recorded, which reproduces by
            # being refused the same way (its result code is what compares).
            vacuous = [l["launchIndex"] for l in launches if l["verdict"] == "REPRODUCED" and not l.get("buffers")
                       and not l.get("detail", "").startswith("refused as recorded")]
            if vacuous:
                failures.append(f"{' '.join(command)}: launches REPRODUCED without a buffer compared: {vacuous[:10]}")
            if detail:
                unlike = [f"#{l['launchIndex']}: {l.get('detail', '')!r}" for l in launches
                          if not re.search(detail, l.get("detail", ""))]
                if unlike:
                    failures.append(f"{' '.join(command)}: detail does not match {detail!r}: " + "; ".join(unlike[:5]))
            if label == "force-ptx":
                odd = sorted({l.get("code", "") for l in launches if not re.search(force_ptx_code, l.get("code", ""))})
                print(f"replay {trace.name} (force-ptx): code {sorted({l.get('code', '') for l in launches})}")
                if odd:
                    failures.append(f"{' '.join(command)}: code {odd} does not match {force_ptx_code!r}")
            if label == "relocated" and paths["fixed-va"]:
                failures.append(f"{' '.join(command)}: {paths['fixed-va']} launches kept fixed addresses")
            # Fixed addresses are asked for; where the driver refuses one (it does
            # for addresses inside its own cuMemAlloc pool: docs/replay.md), the
            # launch is relocated and the report must say what the driver answered.
            unexplained = [l["launchIndex"] for l in launches if label == "fixed" and l["memory"] == "relocated"
                           and "recorded addresses not granted: " not in l.get("detail", "")]
            if unexplained:
                failures.append(f"{' '.join(command)}: launches relocated without saying why: {unexplained[:10]}")
            if label == "fixed":
                refusals = Counter(l["detail"].split("recorded addresses not granted: ", 1)[1].split(" gave ")[0]
                                   for l in launches if "recorded addresses not granted: " in l.get("detail", ""))
                print(f"  fixed-va granted for {paths['fixed-va'] + paths['fixed-va+relocated']} of {len(launches)} "
                      f"launches; first refusal: {next(iter(refusals), 'none')}")
    return failures


def graph_launch_count(kcap, trace):
    """How many graph launches `kcap info --json` counts in TRACE."""
    done = subprocess.run([kcap, "info", str(trace), "--json"], capture_output=True, text=True, errors="replace")
    try:
        return int(json.loads(done.stdout)["events"]["byType"].get("graphLaunch", 0))
    except (ValueError, KeyError, TypeError):
        return 0


def graph_failures(command, graph_launches, expected, node_by_node):
    """What is wrong with a replay's graph launches: each must be REPRODUCED
    with the ranges it compared named; node by node, each must also list its
    nodes, some run and none faulted."""
    failures = []
    if len(graph_launches) != expected:
        failures.append(f"{command}: {len(graph_launches)} graph launches replayed, the trace has {expected}")
    bad = [f"graph launch {g['graphLaunchIndex']}: {g['verdict']} {g.get('detail', '')}"
           for g in graph_launches if g["verdict"] != "REPRODUCED"]
    if bad:
        failures.append(f"{command}: not reproduced:\n  " + "\n  ".join(bad[:20]))
    vacuous = [g["graphLaunchIndex"] for g in graph_launches if g["verdict"] == "REPRODUCED" and not g.get("buffers")]
    if vacuous:
        failures.append(f"{command}: graph launches REPRODUCED without a range compared: {vacuous[:10]}")
    if node_by_node:
        # A node line: "node 3 (axpy): ran", "node 3 > node 0 (memcpy): ran",
        # "node 7 (host function): a host function, not called".
        for g in graph_launches:
            lines = g.get("nodes", [])
            ran = [l for l in lines if l.endswith(": ran")]
            faulted = [l for l in lines if ": FAULT" in l]
            if not ran:
                failures.append(f"{command}: graph launch {g['graphLaunchIndex']}: no node ran: {lines[:5]}")
            if faulted:
                failures.append(f"{command}: graph launch {g['graphLaunchIndex']}: nodes faulted: {faulted[:5]}")
        print(f"  node by node: {sum(len(g.get('nodes', [])) for g in graph_launches)} node lines in "
              f"{len(graph_launches)} graph launches")
    return failures


def check_replay_checkpoints(kcap, traces, log_dir, timeout, least, every):
    """Failures of re-executing checkpoint traces (13. above)."""
    failures = []
    for trace in traces:
        command = [kcap, "replay", str(trace)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired:
            failures.append(f"{' '.join(command)}: timed out after {timeout} s")
            continue
        (log_dir / f"{trace.name}.reexecute.txt").write_text(done.stdout + done.stderr)
        intervals = [l for l in done.stdout.splitlines() if l.startswith("interval ")]
        reproduced = [l for l in intervals if ": REPRODUCED" in l]
        bad = [l for l in intervals if any(v in l for v in (": DIFFERS", ": FAULT", ": HANG"))]
        print(f"re-executed {trace.name}: {len(reproduced)} of {len(intervals)} intervals reproduced")
        # Exit 1 with no interval that differs, faults or hangs: some could
        # not be re-executed or verified (a graph launch, no checkpoint
        # after them), which the verdict lines say.
        left = every and (done.returncode != 0 or len(reproduced) != len(intervals))
        if done.returncode not in (0, 1) or bad or len(reproduced) < least or left:
            failures.append(f"{' '.join(command)}: exit {done.returncode}, {len(reproduced)} intervals reproduced "
                            f"(expected >= {least}{', and every one' if every else ''}):\n"
                            + done.stdout[-3000:] + done.stderr[-1000:])
    return failures


def check_replay_range(kcap, traces, log_dir, timeout, launch_range):
    """Failures of replaying launches A..B of the traces as one sequence (12. above)."""
    failures = []
    first, last = (int(n) for n in launch_range.split(".."))
    for trace, extra, name in ((t, e, n) for t in traces
                               for e, n in (([], "replay-range"), (["--no-fixed-va"], "replay-range-relocated"))):
        command = [kcap, "replay", str(trace), "--range", launch_range, "--json"] + extra
        done = run_kept(command, log_dir, f"{trace.name}.{name}", timeout, failures)
        if done is None:
            continue
        try:
            launches = json.loads(done.stdout)["launches"]
        except (ValueError, KeyError, TypeError) as e:
            failures.append(f"{' '.join(command)}: exit {done.returncode}, no JSON report ({e}):\n{done.stderr}")
            continue
        print(f"replay {trace.name} --range {launch_range}{' '.join([''] + extra)}: "
              f"{[(l['launchIndex'], l['verdict']) for l in launches]}")
        bad = [f"#{l['launchIndex']} {l['kernel']}: {l['verdict']} {l.get('detail', '')}"
               for l in launches if l["verdict"] != "REPRODUCED"]
        if done.returncode != 0 or bad:
            failures.append(f"{' '.join(command)}: exit {done.returncode}; not reproduced:\n  "
                            + "\n  ".join(bad[:20]))
        if sorted(l["launchIndex"] for l in launches) != list(range(first, last + 1)):
            failures.append(f"{' '.join(command)}: replayed launches {[l['launchIndex'] for l in launches]}, "
                            f"expected {first}..{last}")
    return failures
