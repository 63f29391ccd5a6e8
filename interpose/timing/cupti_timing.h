// Kernel durations through CUPTI's activity API (KCAP_TIMING=1, `kcap record
// --timing`): one kernelTiming event per recorded launch that ran.
//
// The shim does not link libcupti: it is loaded (dlopen) only when timing is
// on, from KCAP_CUPTI_LIBRARY (that path only) or else libcupti.so.13 /
// libcupti.so through the loader's path, then the usual toolkit places
// (cuptiLibraryCandidates).
//
// Correlation: just before the real launch call of a recorded launch that
// executes (not one captured into a graph), the shim pushes an external
// correlation id (kind CUSTOM2, id = the launch index). CUPTI then emits an
// external-correlation record binding its own correlation id of that API
// call to the launch index; the kernel record carries the same correlation
// id and the GPU start and end timestamps. A launch made through cudart
// (cudaLaunchKernel) takes its id when the runtime call ENTERS, before the
// shim sees the driver call: so between launches each thread has a token
// pushed, which its next launch binds to its index (cupti_timing.cpp,
// kTokenBit), and a thread gets its first token at its first hooked call.
// CUSTOM2, not CUSTOM0 or CUSTOM1: the PyTorch profiler (Kineto) and Triton's
// profiler use those for their own correlation, and an id of ours on top of
// their stack would take the place of theirs in their records.
//
// Sharing CUPTI: only one CUPTI client may subscribe per process (Nsight
// tools injected through CUDA_INJECTION64_PATH, the PyTorch profiler). The
// shim subscribes once as a probe and unsubscribes at once: when another
// client holds CUPTI, it backs off; it never keeps the slot itself, so a
// profiler started later still works (it then takes CUPTI's activity buffers
// over, and the trace says that no durations came).
//
// Any failure (no CUPTI, another client, an API error) is said once: one
// "kcap: --timing: ...; recording without durations" line on stderr and the
// same text in a Message event; recording goes on without durations.
//
// Threads: CUPTI hands buffers of records to its own worker thread (or to the
// thread that flushes). That thread only parses records and appends events
// (the trace writer is thread-safe); it makes no driver call, so it never
// enters the shim's hooks. The recorder is attached as the sink until the
// trace ends; records delivered after that are dropped.
//
// Ending: an atexit handler, registered when collection starts (so it runs
// before the loader unloads libcupti and the driver at _dl_fini), flushes
// CUPTI's buffers into the trace; the recorder's end (traceEnd) then only
// detaches. On a fatal signal there is no flush (the thread that got the
// signal may hold CUPTI's locks): durations CUPTI had not delivered are lost.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace kcap {

class Recorder;

namespace timing {

// Where the shim looks for CUPTI, in order: `requested` (KCAP_CUPTI_LIBRARY)
// alone when set, else the sonames through the loader's search path, then
// the toolkit directories. Pure: for tests.
std::vector<std::string> cuptiLibraryCandidates(const char* requested);

// Starts collecting for `recorder` (once per process image). On failure it
// says why (stderr once, and a Message event) and the recording goes on.
void start(Recorder& recorder) noexcept;

// Around the real call of a recorded launch that executes: true when an
// external correlation id was pushed; then leaveLaunch must follow on the
// same thread, with the result of the launch call.
bool enterLaunch(uint64_t launchIndex) noexcept;
void leaveLaunch(CUresult result) noexcept;

// Every hooked call, first: gives a thread that never launched its first
// token. One relaxed load when timing is off.
extern std::atomic<bool> g_sinkCollecting;
void firstTokenOfThread() noexcept;
inline void beforeAnyCall() noexcept {
  if (g_sinkCollecting.load(std::memory_order_relaxed)) [[unlikely]] {
    firstTokenOfThread();
  }
}

// Before the recorder writes traceEnd: delivers what CUPTI still holds (when
// `flush`; not on fatal signals), notes launches that got no duration, and
// detaches the recorder.
void finish(Recorder& recorder, bool flush) noexcept;

// In the child of fork(): CUPTI's threads are the parent's; timing is off in
// the child if the parent was timing.
void abandonAfterFork() noexcept;

}  // namespace timing
}  // namespace kcap
