"""A serving loop's shape for the flight recorder: a decode step captured
into a CUDA graph at start-up (a matmul, a softmax over it, a KV-cache-like
buffer updated in place), then replayed many times with new inputs and a
plain launch between replays. At replay TRIGGER_AT the program decides
something went wrong and asks kcap for a trace through kcap_trigger (the
documented ctypes line); under plain Python, without kcap, the lookup fails
and the program goes on. Prints a hash of the cache after every replay.

    torch_decode_trigger.py [REPLAYS [TRIGGER_AT]]
"""
import ctypes
import hashlib
import sys

import torch


def digest(t):
    return hashlib.sha256(t.detach().float().cpu().numpy().tobytes()).hexdigest()[:16]


def trigger(reason):
    try:
        return ctypes.CDLL(None).kcap_trigger(reason.encode())
    except AttributeError:
        return -1  # not recorded


def step(x, weight, cache):
    scores = torch.softmax(x @ weight, dim=-1)
    cache.mul_(0.5).add_(scores)
    return scores.sum(dim=0)


def main():
    replays = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    trigger_at = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    if not torch.cuda.is_available():
        sys.exit("FAILED: no GPU")
    torch.manual_seed(0)
    weight = torch.randn(256, 512, device="cuda")
    static_in = torch.randn(32, 256, device="cuda")
    cache = torch.zeros(32, 512, device="cuda")

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_in, weight, torch.zeros_like(cache))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step(static_in, weight, cache)
    cache.zero_()

    inputs = torch.Generator().manual_seed(1)
    counter = torch.zeros(1, device="cuda")
    for replay in range(replays):
        static_in.copy_(torch.randn(32, 256, generator=inputs))
        graph.replay()
        counter.add_(1.0)  # a plain launch between graph launches
        torch.cuda.synchronize()
        print(f"result replay{replay} {digest(cache)} {digest(static_out)}")
        if replay == trigger_at:
            print(f"trigger {trigger('decode step ' + str(replay))}", file=sys.stderr)
    print("result counter", counter.item())


if __name__ == "__main__":
    main()
