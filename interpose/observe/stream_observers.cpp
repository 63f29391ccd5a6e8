// The observers of streams, events, synchronization and graph capture, and of
// failed calls: each hands the call to the Recorder when the shim records.
#include "observe/observer.h"

#include "record/recorder.h"

namespace kcap {
namespace {

uint64_t word(const void* pointer) { return reinterpret_cast<uint64_t>(pointer); }

template <class T>
uint64_t madeAddress(CUresult result, T* out) {
  return result == CUDA_SUCCESS && out != nullptr ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(*out)) : 0;
}

void recordSync(const SyncCall& call) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->synchronized(call);
  }
}

}  // namespace

void observeFailure(HookId id, CUresult result) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->apiError(id, result);
  }
}

// ---- streams, events, synchronization -------------------------------------------------

void Observer<HookId::cuStreamCreate_hook>::after(HookId, CUresult result, CUstream* stream, unsigned flags) {
  recordSync({.kind = schema::SyncKind::STREAM_CREATE,
              .result = result,
              .stream = madeAddress(result, stream),
              .flags = flags});
}

void Observer<HookId::cuStreamCreateWithPriority_hook>::after(HookId, CUresult result, CUstream* stream, unsigned flags,
                                                              int priority) {
  recordSync({.kind = schema::SyncKind::STREAM_CREATE,
              .result = result,
              .stream = madeAddress(result, stream),
              .flags = flags,
              .priority = priority});
}

void Observer<HookId::cuStreamDestroy_v2_hook>::after(HookId, CUresult result, CUstream stream) {
  recordSync({.kind = schema::SyncKind::STREAM_DESTROY, .result = result, .stream = word(stream)});
}

void Observer<HookId::cuStreamSynchronize_hook>::after(HookId, CUresult result, CUstream stream) {
  recordSync({.kind = schema::SyncKind::STREAM_SYNCHRONIZE, .result = result, .stream = word(stream)});
}

void Observer<HookId::cuCtxSynchronize_hook>::after(HookId, CUresult result) {
  recordSync({.kind = schema::SyncKind::CONTEXT_SYNCHRONIZE, .result = result});
}

void Observer<HookId::cuCtxSynchronize_hook>::after(HookId, CUresult result, CUcontext) {
  recordSync({.kind = schema::SyncKind::CONTEXT_SYNCHRONIZE, .result = result});
}

void Observer<HookId::cuEventCreate_hook>::after(HookId, CUresult result, CUevent* event, unsigned flags) {
  recordSync(
      {.kind = schema::SyncKind::EVENT_CREATE, .result = result, .event = madeAddress(result, event), .flags = flags});
}

void Observer<HookId::cuEventDestroy_v2_hook>::after(HookId, CUresult result, CUevent event) {
  recordSync({.kind = schema::SyncKind::EVENT_DESTROY, .result = result, .event = word(event)});
}

void Observer<HookId::cuEventRecord_hook>::after(HookId, CUresult result, CUevent event, CUstream stream) {
  recordSync({.kind = schema::SyncKind::EVENT_RECORD, .result = result, .stream = word(stream), .event = word(event)});
}

void Observer<HookId::cuStreamWaitEvent_hook>::after(HookId, CUresult result, CUstream stream, CUevent event,
                                                     unsigned flags) {
  recordSync({.kind = schema::SyncKind::STREAM_WAIT_EVENT,
              .result = result,
              .stream = word(stream),
              .event = word(event),
              .flags = flags});
}

void Observer<HookId::cuEventSynchronize_hook>::after(HookId, CUresult result, CUevent event) {
  recordSync({.kind = schema::SyncKind::EVENT_SYNCHRONIZE, .result = result, .event = word(event)});
}

void Observer<HookId::cuStreamBeginCapture_v2_hook>::after(HookId, CUresult result, CUstream stream,
                                                           CUstreamCaptureMode mode) {
  recordSync({.kind = schema::SyncKind::STREAM_BEGIN_CAPTURE,
              .result = result,
              .stream = word(stream),
              .flags = static_cast<uint32_t>(mode)});
}

void Observer<HookId::cuStreamEndCapture_hook>::after(HookId, CUresult result, CUstream stream, CUgraph*) {
  recordSync({.kind = schema::SyncKind::STREAM_END_CAPTURE, .result = result, .stream = word(stream)});
}

}  // namespace kcap
