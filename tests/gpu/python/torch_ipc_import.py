"""A PyTorch tensor shared between two processes through CUDA IPC. The
exporter (a second process, started without kcap) owns x and rewrites it on
the GPU between the launches of this process, which reads x through its IPC
mapping: y += 2 x, once a round. Nothing in this process writes x, so replay
can know what each launch read of it only from what was recorded with the
launch. Prints a hash of y's exact bytes.
"""
import hashlib
import os

import torch
import torch.multiprocessing as mp

ROUNDS = 6
N = (1 << 20) + 3


def values(round_, device):
    return (torch.arange(N, dtype=torch.float32, device=device) * (round_ + 3)) % 29  # integers: exact sums


def exporter(conn):
    x = torch.zeros(N, device="cuda")
    conn.send(x)  # through CUDA IPC: the importer maps this allocation
    for r in range(ROUNDS):
        x.copy_(values(r, "cuda"))
        torch.cuda.synchronize()  # written before the importer reads it
        conn.send(r)
        assert conn.recv() == "next"
    assert conn.recv() == "done"  # x lives until the importer is done with it


def main():
    assert torch.cuda.is_available()
    spawn = mp.get_context("spawn")
    here, there = spawn.Pipe()
    # The exporter is another program's process, not recorded: kcap's
    # preload and settings stay with this one.
    kept = {k: os.environ.pop(k) for k in list(os.environ) if k == "LD_PRELOAD" or k.startswith("KCAP_")}
    child = spawn.Process(target=exporter, args=(there,))
    child.start()
    os.environ.update(kept)

    x = here.recv()
    y = torch.ones(N, device="cuda")
    for r in range(ROUNDS):
        assert here.recv() == r
        y.add_(x, alpha=2)
        torch.cuda.synchronize()  # read before the exporter rewrites it
        here.send("next")
    result = y.cpu()
    del x
    here.send("done")
    child.join(timeout=60)
    assert child.exitcode == 0, f"the exporter exited with {child.exitcode}"

    expected = 1 + 2 * sum(values(r, "cpu") for r in range(ROUNDS))
    assert torch.equal(result, expected), "the launches did not read what the exporter wrote"
    print("result y sha256", hashlib.sha256(result.numpy().tobytes()).hexdigest())
    print(f"made at-least elementwise {ROUNDS}")


if __name__ == "__main__":
    main()
