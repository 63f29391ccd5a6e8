"""A PyTorch CUDA graph (a matmul with bias, relu and a scale, on static
tensors) captured and replayed with new inputs: it must still work, with the
same results bit for bit, when the shim records.

Eager warm-up first (on a side stream, as PyTorch asks before capture), then
torch.cuda.graph captures the same ops (the shim sees those launches on a
capturing stream: recorded with capturing = true, not run, not synchronized),
then REPLAYS replays, each after copying a new input into the static input
tensor: cuGraphLaunch calls, recorded as graphLaunch events. Every replay's
output is checked against the same ops run eagerly (a wrong graph exits 1)
and printed as a hash. The "made" lines cover the eager warm-up launches;
the CMake registration checks the graph launches and the captured launches
in the trace (run_under_shim.py --expect-trace).
"""
import sys

import torch

import gpu_report

GEMM = r"gemm|nvjet|xmma|cutlass|sm90"
WARMUPS = 3
REPLAYS = 5


def model(x, weight, bias):
    return torch.relu(x @ weight + bias) * 0.5  # a GEMM, then three elementwise kernels


def main():
    gpu_report.require_gpu()
    torch.manual_seed(0)
    weight = torch.randn(256, 64, device="cuda")
    bias = torch.randn(64, device="cuda")
    static_in = torch.randn(128, 256, device="cuda")

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUPS):
            model(static_in, weight, bias)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_in, weight, bias)

    inputs = torch.Generator().manual_seed(1)
    for replay in range(REPLAYS):
        new_input = torch.randn(128, 256, generator=inputs)  # on the host: no launch
        static_in.copy_(new_input)
        graph.replay()
        torch.cuda.synchronize()
        expected = model(new_input.cuda(), weight, bias)
        if not torch.allclose(static_out, expected, rtol=1e-4, atol=1e-4):
            sys.exit(f"FAILED: replay {replay}: the graph's output differs from the eager ops "
                     f"(max difference {(static_out - expected).abs().max().item()})")
        gpu_report.result(f"replay{replay}", static_out)

    # Lower bounds: the eager warm-ups alone make these, the eager checks and
    # the captured launches add to them.
    print(f"made at-least {GEMM} {WARMUPS}")
    print(f"made at-least elementwise_kernel {3 * WARMUPS}")


if __name__ == "__main__":
    main()
