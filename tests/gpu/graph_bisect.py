#!/usr/bin/env python3
"""Graph launches node by node on the GPU (gpu_graph_bisect): the decode
scenario of graph_scenarios (a plain axpy over 100 elements; graph launch 0
runs that axpy; graph launch 1 runs it, then an axpy over all 1024) recorded
in full mode, then

  1. `kcap replay TRACE --graph-nodes --json`: both graph launches
     REPRODUCED, each node "ran";
  2. `kcap bisect TRACE`: nothing diverges, 3 launches examined, 2 of them
     graph launches;
  3. `kcap bisect TRACE --against override:axpy=axpy_changed.fatbin`
     (y[100]'s lowest bit flipped): exit 3, the first divergent launch is
     graph launch 1, node 1 (axpy); node 0 agrees; y differs in exactly one
     byte, at offset 400;
  4. the during-capture scenario's graph launch 0 node 0, cut out with
     `kcap extract --graph-launch 0 --node 0`, checks and replays
     REPRODUCED as a plain launch, and differs at byte 400 with the changed
     build.

    graph_bisect.py --kcap KCAP --kernels-dir DIR --log-dir DIR -- GRAPH_SCENARIOS
"""
import argparse
import json
import os
import sys
from pathlib import Path

from script_support import run


def json_of(done):
    try:
        return json.loads(done.stdout or "{}") or {}
    except ValueError:
        return {}


def record(args, scenario, logs, env):
    trace = logs / f"{scenario}.kcap"
    trace.unlink(missing_ok=True)
    done = run([args.kcap, "record", "-q", "-o", str(trace), "--", args.program[0], scenario],
               logs / f"record-{scenario}.txt", env=env)
    if done.returncode != 0 or not trace.exists():
        return None, f"recording {scenario}: exit {done.returncode}: {done.stderr[-1000:]}"
    return trace, None


def check_decode(args, trace, logs):
    failures = []
    changed = f"override:axpy={args.kernels_dir}/axpy_changed.fatbin"

    nodes = json_of(run([args.kcap, "replay", str(trace), "--graph-nodes", "--json"], logs / "graph-nodes.json"))
    graphs = nodes.get("graphLaunches", [])
    print("node by node:", [(g["graphLaunchIndex"], g["verdict"], g.get("nodes")) for g in graphs])
    if [g["verdict"] for g in graphs] != ["REPRODUCED", "REPRODUCED"]:
        failures.append(f"--graph-nodes: expected 2 graph launches REPRODUCED, got {graphs}")
    elif graphs[1].get("nodes") != ["node 0 (axpy): ran", "node 1 (axpy): ran"] or not graphs[1].get("buffers"):
        failures.append(f"--graph-nodes: graph launch 1's nodes {graphs[1].get('nodes')}, buffers "
                        f"{graphs[1].get('buffers')}")

    same = run([args.kcap, "bisect", str(trace), "--json"], logs / "bisect-recorded.json")
    report = json_of(same)
    if same.returncode != 0 or report.get("first") is not None or report.get("examined") != 3 \
            or report.get("graphLaunchesExamined") != 2:
        failures.append(f"bisect against the recording: exit {same.returncode}, {same.stdout[-1500:]}")

    divergent = run([args.kcap, "bisect", str(trace), "--json", "--against", changed], logs / "bisect-override.json")
    first = json_of(divergent).get("first") or {}
    node = first.get("node") or {}
    print("bisect --against the changed axpy: exit", divergent.returncode, "first",
          {k: first.get(k) for k in ("launchIndex", "graphLaunchIndex", "kernel", "nodesAgreeing")}, "node", node)
    if divergent.returncode != 3 or first.get("graphLaunchIndex") != 1 or first.get("launchIndex") is not None:
        failures.append(f"bisect override: exit {divergent.returncode}, first {first}, expected graph launch 1")
    elif node.get("index") != 1 or node.get("kernel") != "axpy" or first.get("nodesAgreeing") != ["node 0 (axpy)"]:
        failures.append(f"bisect override: the divergent node is {node}, agreeing {first.get('nodesAgreeing')}, "
                        "expected node 1 (axpy) after node 0")
    elif '"differingBytes":1,"firstDifferingOffset":400' not in divergent.stdout.replace(" ", ""):
        failures.append("bisect override: y does not differ in exactly byte 400: " + divergent.stdout[-2000:])
    text = run([args.kcap, "bisect", str(trace), "--against", changed], logs / "bisect-override.txt")
    if "First divergent launch: graph launch 1 node 1 (kernel axpy)" not in text.stdout:
        failures.append("bisect override (text): the node is not named:\n" + text.stdout[-2000:])
    return failures


def check_node_extract(args, trace, logs):
    failures = []
    cut = logs / "node.kcap"
    cut.unlink(missing_ok=True)
    extracted = run([args.kcap, "extract", str(trace), "--graph-launch", "0", "--node", "0", "-o", str(cut)],
                    logs / "extract-node.txt")
    if extracted.returncode != 0 or "its post-state is the graph launch's" not in extracted.stdout:
        return [f"extract --graph-launch 0 --node 0: exit {extracted.returncode}: {extracted.stdout[-1000:]}"
                f"{extracted.stderr[-1000:]}"]
    if run([args.kcap, "check", str(cut)], logs / "extract-node-check.txt").returncode != 0:
        failures.append("the extracted node does not pass kcap check")
    replayed = run([args.kcap, "replay", str(cut), "--json"], logs / "extract-node-replay.json")
    launches = json_of(replayed).get("launches", [])
    print("the extracted node:", [(l["launchIndex"], l["kernel"], l["verdict"], len(l.get("buffers", [])))
                                  for l in launches])
    if replayed.returncode != 0 or len(launches) != 1 or launches[0]["verdict"] != "REPRODUCED" \
            or len(launches[0].get("buffers", [])) < 2:
        failures.append(f"the extracted node's replay: exit {replayed.returncode}, {launches}")
    changed = run([args.kcap, "replay", str(cut), "--override", f"axpy={args.kernels_dir}/axpy_changed.fatbin"],
                  logs / "extract-node-override.txt")
    if changed.returncode != 3 or "first at offset 400" not in changed.stdout:
        failures.append(f"the extracted node with the changed axpy: exit {changed.returncode}:\n"
                        + changed.stdout[-1500:])
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kcap", required=True)
    p.add_argument("--kernels-dir", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("program", nargs=1)
    args = p.parse_args()
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, KCAP_TEST_REAL_DRIVER="1", KCAP_KERNELS_DIR=args.kernels_dir)
    failures = []
    decode, error = record(args, "decode", logs, env)
    failures += [error] if error else check_decode(args, decode, logs)
    single, error = record(args, "during-capture", logs, env)
    failures += [error] if error else check_node_extract(args, single, logs)
    for f in failures:
        print("FAILED:", f)
    print("OK" if not failures else f"{len(failures)} check(s) failed; logs in {logs}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
