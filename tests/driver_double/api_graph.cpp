// Events, stream capture and graphs. Work runs synchronously, so events only
// need to be valid handles and the time they were recorded. A stream capturing into a graph keeps its
// launches instead of running them; the graph made from them runs them in
// order when launched. What a real driver forbids during capture, the double
// forbids too, by invalidating the capture: synchronizing the capturing
// stream, or the context while any stream captures (the recorder must do
// neither).
#include "driver_exports.h"
#include "state.h"

#include <cuda.h>

#include <cstdlib>
#include <string_view>

namespace kcap_double {
namespace {

thread_local CUstreamCaptureMode g_tCaptureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;

Event* findEvent(State& s, CUevent event) {
  auto* found = reinterpret_cast<Event*>(event);
  return s.events.count(found) != 0 ? found : nullptr;
}

CUresult recordEvent(CUevent event, CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Event* found = findEvent(s, event);
  if (found == nullptr || !validStream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  found->recorded = true;
  found->when = std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}

CUresult waitEvent(CUstream stream, CUevent event) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return findEvent(s, event) != nullptr && validStream(s, stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult beginCapture(CUstream stream, CUstreamCaptureMode) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Stream* found = findStream(s, stream);
  if (found == nullptr) {
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
  }
  if (found->capture != Stream::Capture::kNone) {
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  found->capture = Stream::Capture::kActive;
  found->captured.clear();
  return CUDA_SUCCESS;
}

CUresult endCapture(CUstream stream, CUgraph* graph) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (graph == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Stream* found = findStream(s, stream);
  if (found == nullptr || found->capture == Stream::Capture::kNone) {
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  const bool invalidated = found->capture == Stream::Capture::kInvalidated;
  found->capture = Stream::Capture::kNone;
  if (invalidated) {
    found->captured.clear();
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  auto* made = new Graph{std::move(found->captured)};
  found->captured.clear();
  s.graphs.insert(made);
  *graph = reinterpret_cast<CUgraph>(made);
  return CUDA_SUCCESS;
}

CUresult isCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (status == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!validStream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const Stream* found = findStream(s, stream);
  const Stream::Capture capture = found != nullptr ? found->capture : Stream::Capture::kNone;
  *status = capture == Stream::Capture::kActive        ? CU_STREAM_CAPTURE_STATUS_ACTIVE
            : capture == Stream::Capture::kInvalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                                       : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult launchGraph(CUgraphExec exec, CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  std::vector<CapturedLaunch> launches;
  {
    State& s = state();
    Lock lock(s.mutex);
    const auto* found = reinterpret_cast<const Graph*>(exec);
    if (s.graphExecs.count(found) == 0 || !validStream(s, stream)) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    launches = found->launches;
  }
  for (const CapturedLaunch& launch : launches) {
    runLaunch(launch);
  }
  return CUDA_SUCCESS;
}

}  // namespace

// Context synchronization (api_device.cpp's cuCtxSynchronize).
CUresult synchronizeContext() {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  bool invalidated = false;
  for (const Stream* stream : s.streams) {
    auto* capturing = const_cast<Stream*>(stream);
    if (capturing->capture != Stream::Capture::kNone) {
      capturing->capture = Stream::Capture::kInvalidated;
      invalidated = true;
    }
  }
  return invalidated ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

}  // namespace kcap_double

using namespace kcap_double;

// ---- events ---------------------------------------------------------------------------

DOUBLE_API CUresult cuEventCreate(CUevent* event, unsigned flags) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (event == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* created = new Event{flags};
  s.events.insert(created);
  *event = reinterpret_cast<CUevent>(created);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuEventDestroy_v2(CUevent event) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Event* found = findEvent(s, event);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  s.events.erase(found);
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuEventRecord(CUevent event, CUstream stream) { return recordEvent(event, stream); }
DOUBLE_API CUresult cuEventRecord_ptsz(CUevent event, CUstream stream) { return recordEvent(event, stream); }
DOUBLE_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned) { return waitEvent(stream, event); }
DOUBLE_API CUresult cuStreamWaitEvent_ptsz(CUstream stream, CUevent event, unsigned) {
  return waitEvent(stream, event);
}

// Work in the double completes within the call that queued it, so a
// recorded event is always complete; KCAP_DOUBLE_EVENT_NOT_READY=1 says it
// never is (work that hangs on the device).
DOUBLE_API CUresult cuEventQuery(CUevent event) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (findEvent(s, event) == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const char* notReady = std::getenv("KCAP_DOUBLE_EVENT_NOT_READY");
  return notReady != nullptr && std::string_view(notReady) == "1" ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

DOUBLE_API CUresult cuEventSynchronize(CUevent event) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return findEvent(s, event) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// Milliseconds between two recorded events, from the host clock at
// cuEventRecord (the real driver's resolution is about half a microsecond).
DOUBLE_API CUresult cuEventElapsedTime_v2(float* milliseconds, CUevent start, CUevent end) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (milliseconds == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Event* first = findEvent(s, start);
  const Event* second = findEvent(s, end);
  if (first == nullptr || second == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if ((first->flags & CU_EVENT_DISABLE_TIMING) != 0 || (second->flags & CU_EVENT_DISABLE_TIMING) != 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!first->recorded || !second->recorded) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *milliseconds = std::chrono::duration<float, std::milli>(second->when - first->when).count();
  return CUDA_SUCCESS;
}

// ---- capture and graphs ----------------------------------------------------------------

DOUBLE_API CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  return beginCapture(stream, mode);
}
DOUBLE_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  return beginCapture(stream, mode);
}
DOUBLE_API CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) { return endCapture(stream, graph); }
DOUBLE_API CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) { return endCapture(stream, graph); }
DOUBLE_API CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  return isCapturing(stream, status);
}
DOUBLE_API CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  return isCapturing(stream, status);
}

DOUBLE_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUstreamCaptureMode previous = g_tCaptureMode;
  g_tCaptureMode = *mode;
  *mode = previous;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (exec == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const auto* found = reinterpret_cast<const Graph*>(graph);
  if (s.graphs.count(found) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  auto* made = new Graph{found->launches};
  s.graphExecs.insert(made);
  *exec = reinterpret_cast<CUgraphExec>(made);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) { return launchGraph(exec, stream); }
DOUBLE_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) { return launchGraph(exec, stream); }

DOUBLE_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
  State& s = state();
  Lock lock(s.mutex);
  auto* found = reinterpret_cast<Graph*>(exec);
  if (s.graphExecs.erase(found) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphDestroy(CUgraph graph) {
  State& s = state();
  Lock lock(s.mutex);
  auto* found = reinterpret_cast<Graph*>(graph);
  if (s.graphs.erase(found) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  delete found;
  return CUDA_SUCCESS;
}
