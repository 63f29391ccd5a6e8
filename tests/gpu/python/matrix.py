"""One row of the compatibility matrix (README, "Frameworks"): a small
program of one framework path, run with and without capture. Each prints its
outputs' exact bytes as hashes (tests/gpu/run_under_shim.py compares them
with and without the shim: the program must be unchanged) and `made
at-least` lines naming the kernels the path must launch.

    matrix.py --case CASE

  cublaslt            bf16 linear with bias (cuBLASLt's fused epilogue)
  cudnn_conv          a 3x3 convolution and its backward (cuDNN), fp32,
                      deterministic algorithms
  sdpa_flash          scaled_dot_product_attention, the flash back end (bf16)
  sdpa_mem_efficient  the memory-efficient back end (fp16)
  compile_default     torch.compile of a small MLP (Inductor's Triton kernels)
  compile_max_autotune  torch.compile(mode="max-autotune-no-cudagraphs"): it
                      picks kernels by timing them, so its choice (and the
                      last bits of its output) may differ between runs: it
                      prints only whether the output matches eager
  cupy_nvrtc          a CuPy RawKernel compiled with NVRTC, and a CuPy
                      reduction
"""
import argparse
import sys


def torch_case(case):
    import torch
    import gpu_report

    gpu_report.require_gpu()
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    if case == "cublaslt":
        x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
        layer = torch.nn.Linear(512, 384, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            gpu_report.result("linear", torch.nn.functional.gelu(layer(x)))
        print("made at-least gemm|nvjet|xmma|cutlass|sm90 1")
    elif case == "cudnn_conv":
        x = torch.randn(8, 16, 32, 32, device="cuda", requires_grad=True)
        conv = torch.nn.Conv2d(16, 32, 3, padding=1, device="cuda")
        y = conv(x)
        y.square().mean().backward()
        gpu_report.result("conv", y)
        gpu_report.result("conv_grad_input", x.grad)
        gpu_report.result("conv_grad_weight", conv.weight.grad)
        print("made at-least conv|cudnn|xmma|sm80|sm90|implicit|winograd|fft 1")
    elif case in ("sdpa_flash", "sdpa_mem_efficient"):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        flash = case == "sdpa_flash"
        dtype = torch.bfloat16 if flash else torch.float16
        q, k, v = (torch.randn(2, 8, 256, 64, device="cuda", dtype=dtype) for _ in range(3))
        backend = SDPBackend.FLASH_ATTENTION if flash else SDPBackend.EFFICIENT_ATTENTION
        with sdpa_kernel(backend), torch.no_grad():
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        gpu_report.result("attention", out)
        print("made at-least flash|fmha|attention|efficient 1")
    elif case in ("compile_default", "compile_max_autotune"):
        model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 128)).cuda()
        x = torch.randn(64, 128, device="cuda")
        mode = "max-autotune-no-cudagraphs" if case == "compile_max_autotune" else None
        compiled = torch.compile(model, mode=mode)
        with torch.no_grad():
            out = compiled(x)
            expected = model(x)
        torch.cuda.synchronize()
        if not torch.allclose(out, expected, rtol=1e-3, atol=1e-3):
            sys.exit(f"FAILED: the compiled model differs from eager by {(out - expected).abs().max().item()}")
        if case == "compile_default":
            gpu_report.result("compiled", out)
        else:
            print("result compiled matches eager")
        print("made at-least triton 1")
    else:
        sys.exit(f"unknown case {case}")


def cupy_case():
    import cupy

    print(f"result device {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode().replace(' ', '_')}")
    kernel = cupy.RawKernel(r'''
extern "C" __global__ void matrix_saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}''', "matrix_saxpy")
    n = 1 << 16
    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.ones(n, dtype=cupy.float32)
    kernel(((n + 255) // 256,), (256,), (cupy.float32(2.0), x, y, cupy.int32(n)))
    total = float(y.sum())
    expected = 2.0 * (n - 1) * n / 2 + n
    if total != expected:
        sys.exit(f"FAILED: the sum is {total}, not {expected}")
    print(f"result saxpy_sum {total}")
    print("made at-least matrix_saxpy 1")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", required=True)
    case = parser.parse_args().case
    if case == "cupy_nvrtc":
        cupy_case()
    else:
        torch_case(case)


if __name__ == "__main__":
    main()
