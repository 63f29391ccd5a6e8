"""Peer copies (cuMemcpyPeer, cuMemcpyPeerAsync) between PyTorch tensors,
called through the driver API as a library that moves data between devices
would (on one GPU both sides are its memory). Each round a kernel changes
src, a peer copy moves it into x, and y += 2 x reads it: a copy the
recording missed would leave x stale in replay. Prints a hash of y's exact
bytes.
"""
import ctypes
import hashlib

import torch

ROUNDS = 6
N = (1 << 20) + 3


def main():
    assert torch.cuda.is_available()
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    cuda.cuMemcpyPeer.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    cuda.cuMemcpyPeerAsync.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                                       ctypes.c_size_t, ctypes.c_void_p]

    src = torch.arange(N, dtype=torch.float32, device="cuda") % 37
    x = torch.zeros(N, device="cuda")
    y = torch.ones(N, device="cuda")
    context = ctypes.c_void_p()
    assert cuda.cuCtxGetCurrent(ctypes.byref(context)) == 0 and context.value
    stream = torch.cuda.current_stream().cuda_stream
    for r in range(ROUNDS):
        src.add_(1)
        if r % 2 == 0:
            result = cuda.cuMemcpyPeer(x.data_ptr(), context, src.data_ptr(), context, x.nbytes)
        else:
            result = cuda.cuMemcpyPeerAsync(x.data_ptr(), context, src.data_ptr(), context, x.nbytes, stream)
        assert result == 0, f"round {r}: CUresult {result}"
        y.add_(x, alpha=2)
    torch.cuda.synchronize()

    base = torch.arange(N, dtype=torch.float32) % 37
    expected = 1 + 2 * sum(base + r + 1 for r in range(ROUNDS))
    result = y.cpu()
    assert torch.equal(result, expected), "the copies did not move what the kernels wrote"
    print("result y sha256", hashlib.sha256(result.numpy().tobytes()).hexdigest())
    print(f"made call cuMemcpyPeer {ROUNDS // 2}")
    print(f"made call cuMemcpyPeerAsync {ROUNDS // 2}")


if __name__ == "__main__":
    main()
