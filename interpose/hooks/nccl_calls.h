// The shim's NCCL entry points (nccl_exports.cpp): the collective and
// point-to-point calls, ncclGroupStart and ncclGroupEnd, exported under
// NCCL's names so that a program linked against libnccl.so.2 reaches them
// first (LD_PRELOAD). Each forwards to the next definition (NCCL's own) and
// hands the call to the recorder once NCCL has queued its work: at once,
// or for a call inside a group at the outermost ncclGroupEnd.
//
// What they do not see: NCCL reached through a dlopen handle of its own
// (dlsym(handle, "ncclAllReduce")), its profiling names (pnccl*), and
// NCCL linked statically into another library.
#pragma once

namespace kcap {

// Whether this thread is inside one of those NCCL calls: a kernel it
// launches now is the call's (Launch.collectiveCall).
bool insideCollectiveCall() noexcept;

// Whether the memory the hooked call this thread is in makes is NCCL's own
// (Alloc.byNccl): the driver was called from code in libnccl, on any
// thread, and not for ncclMemAlloc, whose memory is the program's.
bool madeByNccl() noexcept;

}  // namespace kcap
