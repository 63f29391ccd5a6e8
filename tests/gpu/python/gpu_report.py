"""Helpers for the Python GPU test scripts: what they print is what
tests/gpu/run_under_shim.py compares and checks (see there).

Importing this module fails when torch is missing, and require_gpu() exits
with status 1 when no GPU is usable: a GPU test fails, it never skips.
"""
import hashlib
import json
import os
import sys
import tempfile
from collections import Counter

import torch


def require_gpu():
    if not torch.cuda.is_available():
        sys.exit("FAILED: torch sees no CUDA device")
    print(f"result device {torch.cuda.get_device_name(0).replace(' ', '_')}")


def result(name, tensor):
    """Prints the tensor's exact bytes as a hash: compared with and without the shim."""
    data = tensor.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()
    shape = "x".join(str(d) for d in tensor.shape)
    print(f"result {name} {str(tensor.dtype)[6:]} {shape} sha256 {hashlib.sha256(data).hexdigest()}")


class ProfiledLaunches:
    """Counts the kernels the PyTorch profiler (CUPTI) saw run inside the block:
    an independent count of the launches made, to hold the shim's count against.

        with ProfiledLaunches() as launches:
            ...
        launches.report()   # 'made launches N'; per-kernel counts on stderr
    """

    def __enter__(self):
        self.profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                          torch.profiler.ProfilerActivity.CUDA])
        self.profile.__enter__()
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.profile.__exit__(*exc)
        # The Chrome trace names each GPU activity's category; kernels are "kernel".
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            self.profile.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f)["traceEvents"]
        # kcap_content_hash is the shim's own (it hashes device memory where
        # it lies while recording): not one of the program's launches.
        kernels = Counter(e["name"] for e in events if e.get("cat") == "kernel" and e.get("ph") == "X")
        self.shim_kernels = kernels.pop("kcap_content_hash", 0)
        self.kernels = kernels
        return False

    def report(self):
        for name, n in sorted(self.kernels.items()):
            print(f"profiler kernel {n} {name}", file=sys.stderr)
        print(f"profiler: the shim's own kcap_content_hash ran {self.shim_kernels} times (not counted)", file=sys.stderr)
        print(f"made launches {sum(self.kernels.values())}")
