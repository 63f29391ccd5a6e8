"""torch.compile(mode="reduce-overhead"): Inductor's Triton kernels run as
CUDA graphs (CUDA Graph Trees), the way LLM decode steps are served. A small
MLP step is compiled, warmed up (Inductor records its graph on the third
call) and run STEPS times on new inputs; each output is checked against the
eager model (a wrong graph exits 1) and printed as a hash. The CMake
registration checks that the executable graphs are described in the trace
(graphDefine) and that the graph launches are there, each with its end
(full mode), through run_under_shim.py --expect-trace.
"""
import sys

import torch

import gpu_report

STEPS = 6


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(128, 256)
        self.down = torch.nn.Linear(256, 128)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x))) + x


def main():
    gpu_report.require_gpu()
    torch.manual_seed(0)
    model = Step().cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead")
    inputs = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for step in range(STEPS):
            x = torch.randn(32, 128, generator=inputs).cuda()
            out = compiled(x).clone()  # the graph's output buffer is reused by the next step
            torch.cuda.synchronize()
            expected = model(x)
            if not torch.allclose(out, expected, rtol=1e-3, atol=1e-3):
                sys.exit(f"FAILED: step {step}: the compiled graph's output differs from eager "
                         f"(max difference {(out - expected).abs().max().item()})")
            gpu_report.result(f"step{step}", out)
    print("made at-least triton 1")


if __name__ == "__main__":
    main()
