"""A Triton kernel (@triton.jit vector add) launched N times: the shim must
count exactly N launches of add_kernel. Triton loads its cubin with
cuModuleLoadData and launches with cuLaunchKernelEx found through dlsym.

    triton_add.py [--profile] [--cold-cache]

--profile: also count all launches (PyTorch's too) with the PyTorch profiler
and print the total, which the shim's count must equal.
--cold-cache: compile into a fresh TRITON_CACHE_DIR, so that the run under
the shim compiles the kernel and its launcher too (ptxas and the C compiler
then start with the shim preloaded) instead of loading what the run without
it left in the cache.
"""
import atexit
import contextlib
import os
import shutil
import sys
import tempfile

if "--cold-cache" in sys.argv[1:]:  # before triton is imported
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kcap-gpu-triton-")
    atexit.register(shutil.rmtree, os.environ["TRITON_CACHE_DIR"], ignore_errors=True)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import gpu_report  # noqa: E402

LAUNCHES = 7


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def workload():
    torch.manual_seed(0)
    n = 100_003  # not a multiple of BLOCK: the mask matters
    x = torch.randint(-1000, 1000, (n,), device="cuda").float()  # integers: the sums are exact
    out = torch.zeros(n, device="cuda")
    grid = (triton.cdiv(n, 1024),)
    for _ in range(LAUNCHES):
        add_kernel[grid](out, x, out, n, BLOCK=1024)  # out += x
    torch.cuda.synchronize()
    if not torch.equal(out, x * LAUNCHES):
        sys.exit("FAILED: wrong sums")
    return out


def main():
    gpu_report.require_gpu()
    profiled = "--profile" in sys.argv[1:]
    with gpu_report.ProfiledLaunches() if profiled else contextlib.nullcontext() as launches:
        out = workload()
    gpu_report.result("out", out)
    print(f"made kernel add_kernel {LAUNCHES}")
    if profiled:
        launches.report()


if __name__ == "__main__":
    main()
