"""The program of bench/checkpoint_capture.py: a buffer of GIB GiB of zeros
(an allocator pool, a KV cache) and LAUNCHES launches that each add 1 to
their own 1 MiB slice of it. Prints the loop's wall time and a checksum
(LAUNCHES * 262144: every slice's floats became 1).

    slice_program.py GIB LAUNCHES
"""
import sys
import time

import torch

SLICE = 1 << 18  # floats: 1 MiB


def main():
    gib, launches = int(sys.argv[1]), int(sys.argv[2])
    buffer = torch.zeros(gib << 28, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(launches):
        buffer[i * SLICE:(i + 1) * SLICE] += 1
    torch.cuda.synchronize()
    print(f"loop_ms {(time.perf_counter() - start) * 1e3:.3f}", flush=True)
    print(f"checksum {int(buffer[:launches * SLICE].sum().item())}")


if __name__ == "__main__":
    main()
