"""A PyTorch program with nondeterministic launches (gpu_checkpoint_determinism).

index_add_ on CUDA floats adds with atomics: a million values into one
element, in an order the GPU's scheduling picks anew on every run, so the
sum's last bits differ from run to run. A few deterministic launches come
first, so that a checkpoint every two launches leaves intervals without it.
"""
import torch

torch.manual_seed(0)
n = 1 << 20
x = torch.randn(n, device="cuda")
x.mul_(torch.logspace(-8, 8, n, device="cuda"))  # magnitudes far apart: rounding depends on the order
idx = torch.zeros(n, dtype=torch.long, device="cuda")
y = torch.zeros(4, device="cuda")
x.add_(0.25)
torch.cuda.synchronize()
for step in range(4):
    y.index_add_(0, idx, x)
    x.mul_(1.5)
torch.cuda.synchronize()
print("made racy sums", 4)
