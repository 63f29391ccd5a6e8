// The shim's NCCL entry points (nccl_exports.cpp): the collective and
// point-to-point calls, ncclGroupStart and ncclGroupEnd, exported under
// NCCL's names and its profiling names (pncclAllReduce, ...) so that a program linked against libnccl.so.2 reaches them
// first (LD_PRELOAD). Each forwards to the next definition (NCCL's own) and
// hands the call to the recorder once NCCL has queued its work: at once,
// or for a call inside a group at the outermost ncclGroupEnd.
//
// A program that opens NCCL itself and looks these names up in its handle
// (dlsym(handle, "ncclAllReduce")) gets them too (dlsym_override.cpp,
// ncclEntryFor). What they do not see: NCCL linked statically into another
// library.
#pragma once

namespace kcap {

// Whether this thread is inside one of those NCCL calls: a kernel it
// launches now is the call's (Launch.collectiveCall).
bool insideCollectiveCall() noexcept;

// Whether the memory the hooked call this thread is in makes is NCCL's own
// (Alloc.byNccl): the driver was called from code in libnccl, on any
// thread, and not for ncclMemAlloc, whose memory is the program's.
bool madeByNccl() noexcept;

// The answer to dlsym(handle, name) for one of the names above, or nullptr
// to let the C library answer: the shim's entry point when the handle's
// definition is the one that entry point forwards to (the process's one
// NCCL), so that a second NCCL library keeps its own functions.
void* ncclEntryFor(void* handle, const char* name) noexcept;

}  // namespace kcap
