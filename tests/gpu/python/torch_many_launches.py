"""Many small PyTorch launches (gpu_checkpoint_damage): enough events that
a checkpoint trace's records come in several chunks between the
checkpoints' contents, as in a long job.

    torch_many_launches.py [LAUNCHES]      (default 8000)
"""
import sys

import torch

launches = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
x = torch.zeros(1 << 16, device="cuda")
y = torch.ones(1 << 16, device="cuda")
for _ in range(launches // 2):
    x.add_(y)
    y.mul_(1.0001)
torch.cuda.synchronize()
print("sum", x.sum().item())
