"""A tensor-parallel decode step's shape in one process: a CUDA graph that
holds an NCCL all-reduce between a matmul and the ops after it, replayed
with new inputs, as serving engines replay their decode graphs. One rank
(a process group of world size 1 on the NCCL back end, what one GPU
allows): the all-reduce is captured into the graph like any other, and the
op after it overwrites the reduced tensor inside the graph, so that what
the all-reduce wrote can only be seen between the two.

A second graph of the same step at half the batch (serving engines capture
one decode graph per batch size, into one memory pool) is replayed on
another stream after each replay of the first: kcap's copies of what the
two graphs' all-reduces write may share memory.

Each replay's output is checked against the same ops run eagerly (exit 1
when they differ) and printed as a hash; a plain launch between replays
keeps the checkpoints (every few launches) falling between graph launches.
"""
import hashlib
import os
import sys
import tempfile

import torch
import torch.distributed as dist

REPLAYS = 6


def digest(t):
    return hashlib.sha256(t.detach().float().cpu().numpy().tobytes()).hexdigest()[:16]


def step(x, weight, scratch):
    h = x @ weight
    dist.all_reduce(h)  # one rank: the sum is h itself
    out = torch.relu(h) * 0.5
    scratch.copy_(h)
    h.mul_(0.0)  # the all-reduce's output, overwritten within the step
    return out


def main():
    if not torch.cuda.is_available():
        sys.exit("FAILED: no GPU")
    store = tempfile.NamedTemporaryFile(prefix="kcap-nccl-graph-", delete=False)
    store.close()
    os.unlink(store.name)
    dist.init_process_group("nccl", init_method=f"file://{store.name}", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    torch.manual_seed(0)
    weight = torch.randn(256, 256, device="cuda")
    static_in = torch.randn(64, 256, device="cuda")
    scratch = torch.empty(64, 256, device="cuda")
    small_in = torch.randn(32, 256, device="cuda")
    small_scratch = torch.empty(32, 256, device="cuda")

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_in, weight, scratch)
            step(small_in, weight, small_scratch)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step(static_in, weight, scratch)
    small_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(small_graph, pool=graph.pool()):
        small_out = step(small_in, weight, small_scratch)

    inputs = torch.Generator().manual_seed(1)
    counter = torch.zeros(1, device="cuda")
    other = torch.cuda.Stream()
    for replay in range(REPLAYS):
        new_input = torch.randn(64, 256, generator=inputs)
        static_in.copy_(new_input)
        graph.replay()
        counter.add_(1.0)  # a plain launch between graph launches
        other.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(other):
            small_in.copy_(static_in[:32] * 2.0)
            small_graph.replay()
        torch.cuda.current_stream().wait_stream(other)
        torch.cuda.synchronize()
        expected = torch.relu(new_input.cuda() @ weight) * 0.5
        if not torch.allclose(static_out, expected, rtol=1e-4, atol=1e-4):
            sys.exit(f"FAILED: replay {replay}: the graph's output differs from the eager ops")
        small_expected = torch.relu((new_input[:32].cuda() * 2.0) @ weight) * 0.5
        if not torch.allclose(small_out, small_expected, rtol=1e-4, atol=1e-4):
            sys.exit(f"FAILED: replay {replay}: the small graph's output differs from the eager ops")
        print(f"result replay{replay} {digest(static_out)} {digest(scratch)} {digest(small_out)}")
    dist.destroy_process_group()
    print("result counter", counter.item())
    print("made call cuGraphLaunch", 2 * REPLAYS)


if __name__ == "__main__":
    main()
