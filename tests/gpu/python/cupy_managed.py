"""CuPy arrays in managed memory (cudaMallocManaged) that the host rewrites
between launches through a NumPy view of the same memory, with no CUDA call
in between: replay can only know what each launch read from what was logged
with it. y += 2 * x, six times, with new host values in x each time. Prints
a hash of the result's exact bytes.
"""
import ctypes
import hashlib

import cupy as cp
import numpy as np

ROUNDS = 6


def main():
    n = 1 << 20
    managed = cp.cuda.malloc_managed(n * 4)
    x = cp.ndarray((n,), dtype=cp.float32, memptr=managed)
    host = np.ctypeslib.as_array((ctypes.c_float * n).from_address(managed.ptr))
    y = cp.ones(n, dtype=cp.float32)
    stream = cp.cuda.get_current_stream()
    for round_ in range(ROUNDS):
        host[:] = (np.arange(n, dtype=np.float32) + 7 * round_) % 23  # integers: the sums are exact
        y += 2 * x
        stream.synchronize()  # the host writes x next
    print("result", hashlib.sha256(cp.asnumpy(y).tobytes()).hexdigest())
    print(f"made at-least cupy_multiply {ROUNDS}")
    print(f"made at-least cupy_add {ROUNDS}")


if __name__ == "__main__":
    main()
