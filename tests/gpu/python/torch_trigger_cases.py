"""PyTorch programs for the flight recorder's hang and exit triggers
(gpu_flight_recorder).

    torch_trigger_cases.py hang SECONDS   small adds, a kernel that spins
                                          about SECONDS s (torch.cuda._sleep),
                                          one more add; ends normally
    torch_trigger_cases.py exit STATUS    small adds, then exits with STATUS

Prints the sum of what the adds made, so that a recorded run can be held to
the plain run's output.
"""
import sys

import torch

case, value = sys.argv[1], int(sys.argv[2])
x = torch.zeros(16, device="cuda")
for _ in range(8):
    x.add_(1)
torch.cuda.synchronize()
if case == "hang":
    torch.cuda._sleep(int(2e9) * value)  # clock cycles: about VALUE s at the H100's and H200's clocks
    x.add_(1)
    torch.cuda.synchronize()
print("sum", x.sum().item(), flush=True)
if case == "exit":
    sys.exit(value)
