"""Peer copies (cuMemcpyPeer, cuMemcpyPeerAsync, and the 3D ones,
cuMemcpy3DPeer and cuMemcpy3DPeerAsync) between PyTorch tensors, called
through the driver API as a library that moves data between devices would
(on one GPU both sides are its memory). Each round a kernel changes src, a
peer copy moves it (or a box of it: 2 slices of 64 rows of 512 floats, rows
of 1024) into x, and y += 2 x reads it: a copy the recording missed would
leave x stale in replay. Prints a hash of y's exact bytes.
"""
import ctypes
import hashlib

import torch

ROUNDS = 6
N = (1 << 20) + 3
ROW = 1024  # floats
BOX = (2, 64, 512)  # slices, rows, floats a row


class Memcpy3DPeer(ctypes.Structure):
    """CUDA_MEMCPY3D_PEER."""
    _fields_ = [(f"{side}{name}", kind) for side in ("src", "dst") for name, kind in (
        ("XInBytes", ctypes.c_size_t), ("Y", ctypes.c_size_t), ("Z", ctypes.c_size_t), ("LOD", ctypes.c_size_t),
        ("MemoryType", ctypes.c_int), ("Host", ctypes.c_void_p), ("Device", ctypes.c_uint64),
        ("Array", ctypes.c_void_p), ("Context", ctypes.c_void_p), ("Pitch", ctypes.c_size_t),
        ("Height", ctypes.c_size_t))] + [("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t),
                                         ("Depth", ctypes.c_size_t)]


def box_copy(dst, src, context):
    p = Memcpy3DPeer()
    p.srcMemoryType = p.dstMemoryType = 2  # CU_MEMORYTYPE_DEVICE
    p.srcDevice, p.dstDevice = src.data_ptr(), dst.data_ptr()
    p.srcContext = p.dstContext = context
    p.srcPitch = p.dstPitch = ROW * 4
    p.srcHeight = p.dstHeight = BOX[1]
    p.WidthInBytes, p.Height, p.Depth = BOX[2] * 4, BOX[1], BOX[0]
    return p


def main():
    assert torch.cuda.is_available()
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    cuda.cuMemcpyPeer.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    cuda.cuMemcpyPeerAsync.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                                       ctypes.c_size_t, ctypes.c_void_p]
    cuda.cuMemcpy3DPeer.argtypes = [ctypes.POINTER(Memcpy3DPeer)]
    cuda.cuMemcpy3DPeerAsync.argtypes = [ctypes.POINTER(Memcpy3DPeer), ctypes.c_void_p]

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
    for r in range(2):  # the box copies
        src.add_(1)
        p = box_copy(x, src, context)
        if r == 0:
            result = cuda.cuMemcpy3DPeer(ctypes.byref(p))
        else:
            result = cuda.cuMemcpy3DPeerAsync(ctypes.byref(p), stream)
        assert result == 0, f"box round {r}: CUresult {result}"
        y.add_(x, alpha=2)
    torch.cuda.synchronize()

    base = torch.arange(N, dtype=torch.float32) % 37
    expected = 1 + 2 * sum(base + r + 1 for r in range(ROUNDS))
    xs = base + ROUNDS
    for r in range(2):
        rows = xs[:BOX[0] * BOX[1] * ROW].view(BOX[0] * BOX[1], ROW)
        rows[:, :BOX[2]] = (base + ROUNDS + r + 1)[:BOX[0] * BOX[1] * ROW].view(BOX[0] * BOX[1], ROW)[:, :BOX[2]]
        expected = expected + 2 * xs
    result = y.cpu()
    assert torch.equal(result, expected), "the copies did not move what the kernels wrote"
    print("result y sha256", hashlib.sha256(result.numpy().tobytes()).hexdigest())
    print(f"made call cuMemcpyPeer {ROUNDS // 2}")
    print(f"made call cuMemcpyPeerAsync {ROUNDS // 2}")
    print("made call cuMemcpy3DPeer 1")
    print("made call cuMemcpy3DPeerAsync 1")


if __name__ == "__main__":
    main()
