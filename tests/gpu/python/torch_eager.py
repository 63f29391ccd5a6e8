"""PyTorch eager ops on the GPU, cuBLAS matmuls among them (fp32 and fp16,
torch.matmul and a linear layer with bias, which goes through cuBLASLt).
Prints a hash of every output (identical with and without the shim, bit for
bit) and what must have been launched: cuBLAS kernels, elementwise, reduction
and softmax kernels, by name pattern, since the libraries choose the kernels.

    torch_eager.py [--profile]

--profile: also count the launches with the PyTorch profiler (CUPTI) and
print the total ("made launches N"), which the shim's count must equal.
"""
import contextlib
import sys

import torch
import torch.nn.functional as F

import gpu_report

# cuBLAS / cuBLASLt kernel names on Hopper: sm90_xmma_gemm_*, nvjet_*, cutlass_*, *gemm*.
GEMM = r"gemm|nvjet|xmma|cutlass|sm90"


def workload():
    torch.manual_seed(0)
    a = torch.randn(256, 384, device="cuda")
    b = torch.randn(384, 128, device="cuda")
    c32 = torch.matmul(a, b)                       # cuBLAS, fp32
    c16 = torch.matmul(a.half(), b.half())         # cuBLAS, fp16
    weight = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    bias = torch.randn(64, device="cuda", dtype=torch.float16)
    lin = F.linear(c16, weight, bias)              # addmm: cuBLASLt with a bias epilogue
    d = torch.relu(c32) * 2 + 1                    # three elementwise kernels
    e = d.sum(dim=0)                               # a reduction
    f = torch.softmax(lin.float(), dim=-1)
    torch.cuda.synchronize()
    return {"c32": c32, "c16": c16, "lin": lin, "d": d, "e": e, "f": f}


def main():
    gpu_report.require_gpu()
    profiled = "--profile" in sys.argv[1:]
    with gpu_report.ProfiledLaunches() if profiled else contextlib.nullcontext() as launches:
        outputs = workload()
    for name, tensor in outputs.items():
        gpu_report.result(name, tensor)
    print(f"made at-least {GEMM} 3")
    print("made at-least elementwise_kernel 3")
    print("made at-least reduce_kernel 1")
    print("made at-least softmax 1")
    if profiled:
        launches.report()


if __name__ == "__main__":
    main()
