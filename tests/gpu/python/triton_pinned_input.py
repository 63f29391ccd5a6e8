"""A Triton kernel that reads page-locked host memory directly (a pinned
PyTorch tensor, reached through unified addressing): the host rewrites the
pinned buffer between launches with no CUDA call in between, so replay can
only know what each launch read from what was logged with it. out += pinned,
eight times, with new host values each time. Prints a hash of the result's
exact bytes.
"""
import hashlib

import torch
import triton
import triton.language as tl

LAUNCHES = 8


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def host_values(n, round_):
    return (torch.arange(n, dtype=torch.float32) * (round_ + 3)) % 29  # integers: the sums are exact


def main():
    assert torch.cuda.is_available()
    n = (1 << 20) + 3
    out = torch.zeros(n, device="cuda")
    pinned = torch.empty(n, dtype=torch.float32, pin_memory=True)
    grid = (triton.cdiv(n, 1024),)
    for r in range(LAUNCHES):
        pinned.copy_(host_values(n, r))  # on the CPU: no CUDA call
        add_kernel[grid](out, pinned, out, n, BLOCK=1024)  # out += pinned, read over the bus
        torch.cuda.synchronize()  # the host must not rewrite it while the kernel reads
    expected = sum(host_values(n, r) for r in range(LAUNCHES))
    result = out.cpu()
    assert torch.equal(result, expected), "the kernel did not read what the host wrote"
    print("result out sha256", hashlib.sha256(result.numpy().tobytes()).hexdigest())
    print(f"made at-least add_kernel {LAUNCHES}")


if __name__ == "__main__":
    main()
