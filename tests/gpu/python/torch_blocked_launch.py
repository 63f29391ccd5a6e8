"""A PyTorch program that dies inside a launch call (gpu_die_in_launch).

A kernel that spins far longer than the program lives (torch.cuda._sleep)
holds the device's queue; the small launches queued behind it fill the
queue until a launch call blocks in the driver. The alarm set at the start
(SIGALRM, whose default action ends the process; Python leaves it so) then
ends the process while that call waits.

    torch_blocked_launch.py [SECONDS] [term]

SECONDS (default 5): when the signal comes. With `term` the signal is
SIGTERM, sent by a child process (a flight recorder's signal trigger fires
on it; SIGALRM is not one of its signals).
"""
import os
import signal
import subprocess
import sys

import torch

seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
x = torch.zeros(16, device="cuda")
# Load the add kernel's code now: with lazy loading the first add_ would
# load it behind the sleeping kernel, and that load waits for the device
# (the program would block in the load, not in a launch).
x.add_(1)
torch.cuda.synchronize()
print("filling the queue", flush=True)
if sys.argv[2:3] == ["term"]:
    subprocess.Popen(["sh", "-c", f"sleep {seconds}; kill -TERM {os.getpid()}"])
else:
    signal.alarm(seconds)
torch.cuda._sleep(int(4e9) * 30)  # about a minute at the H100's and H200's clocks: past the alarm
while True:
    x.add_(1)  # one small launch each, until one blocks behind the sleeping kernel
