"""One training step of a small model under DistributedDataParallel with
the NCCL back end, one process per rank (`torchrun --nproc-per-node N`):
forward, backward (DDP all-reduces the gradients through NCCL), an
optimizer step, and an explicit all-reduce. Every rank prints its rank, the
world size, NCCL's version and hashes of its exact results.
"""
import hashlib
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def digest(t):
    return hashlib.sha256(t.detach().float().cpu().numpy().tobytes()).hexdigest()[:16]


def main():
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 16)).cuda()
    ddp = DistributedDataParallel(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    generator = torch.Generator(device="cuda").manual_seed(100 + rank)  # each rank its own batch
    inputs = torch.randn(64, 256, device="cuda", generator=generator)
    targets = torch.randn(64, 16, device="cuda", generator=generator)

    loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
    loss.backward()
    optimizer.step()
    total = torch.full((1024,), float(rank + 1), device="cuda")
    dist.all_reduce(total)
    torch.cuda.synchronize()

    nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    print(f"result rank {rank} world {world} nccl {nccl} loss {digest(loss)} "
          f"weights {digest(model[0].weight)} total {total[0].item():.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
