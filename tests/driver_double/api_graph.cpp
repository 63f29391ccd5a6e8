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

namespace kcap_double {
namespace {

thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

Event* find_event(State& s, CUevent event) {
  auto* found = reinterpret_cast<Event*>(event);
  return s.events.count(found) != 0 ? found : nullptr;
}

CUresult record_event(CUevent event, CUstream stream) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Event* found = find_event(s, event);
  if (found == nullptr || !valid_stream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  found->recorded = true;
  found->when = std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}

CUresult wait_event(CUstream stream, CUevent event) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return find_event(s, event) != nullptr && valid_stream(s, stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult begin_capture(CUstream stream, CUstreamCaptureMode) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Stream* found = find_stream(s, stream);
  if (found == nullptr) {
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
  }
  if (found->capture != Stream::Capture::none) {
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  found->capture = Stream::Capture::active;
  found->captured.clear();
  return CUDA_SUCCESS;
}

CUresult end_capture(CUstream stream, CUgraph* graph) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (graph == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Stream* found = find_stream(s, stream);
  if (found == nullptr || found->capture == Stream::Capture::none) {
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  const bool invalidated = found->capture == Stream::Capture::invalidated;
  found->capture = Stream::Capture::none;
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

CUresult is_capturing(CUstream stream, CUstreamCaptureStatus* status) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (status == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!valid_stream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const Stream* found = find_stream(s, stream);
  const Stream::Capture capture = found != nullptr ? found->capture : Stream::Capture::none;
  *status = capture == Stream::Capture::active        ? CU_STREAM_CAPTURE_STATUS_ACTIVE
            : capture == Stream::Capture::invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                                      : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult launch_graph(CUgraphExec exec, CUstream stream) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  std::vector<CapturedLaunch> launches;
  {
    State& s = state();
    Lock lock(s.mutex);
    const auto* found = reinterpret_cast<const Graph*>(exec);
    if (s.graph_execs.count(found) == 0 || !valid_stream(s, stream)) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    launches = found->launches;
  }
  for (const CapturedLaunch& launch : launches) {
    run_launch(launch);
  }
  return CUDA_SUCCESS;
}

}  // namespace

// Context synchronization (api_device.cpp's cuCtxSynchronize).
CUresult synchronize_context() {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  bool invalidated = false;
  for (const Stream* stream : s.streams) {
    auto* capturing = const_cast<Stream*>(stream);
    if (capturing->capture != Stream::Capture::none) {
      capturing->capture = Stream::Capture::invalidated;
      invalidated = true;
    }
  }
  return invalidated ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

}  // namespace kcap_double

using namespace kcap_double;

// ---- events ---------------------------------------------------------------------------

DOUBLE_API CUresult cuEventCreate(CUevent* event, unsigned flags) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
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
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Event* found = find_event(s, event);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  s.events.erase(found);
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuEventRecord(CUevent event, CUstream stream) { return record_event(event, stream); }
DOUBLE_API CUresult cuEventRecord_ptsz(CUevent event, CUstream stream) { return record_event(event, stream); }
DOUBLE_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned) { return wait_event(stream, event); }
DOUBLE_API CUresult cuStreamWaitEvent_ptsz(CUstream stream, CUevent event, unsigned) {
  return wait_event(stream, event);
}

DOUBLE_API CUresult cuEventSynchronize(CUevent event) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return find_event(s, event) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// Milliseconds between two recorded events, from the host clock at
// cuEventRecord (the real driver's resolution is about half a microsecond).
DOUBLE_API CUresult cuEventElapsedTime_v2(float* milliseconds, CUevent start, CUevent end) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (milliseconds == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Event* first = find_event(s, start);
  const Event* second = find_event(s, end);
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
  return begin_capture(stream, mode);
}
DOUBLE_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  return begin_capture(stream, mode);
}
DOUBLE_API CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) { return end_capture(stream, graph); }
DOUBLE_API CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) { return end_capture(stream, graph); }
DOUBLE_API CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  return is_capturing(stream, status);
}
DOUBLE_API CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  return is_capturing(stream, status);
}

DOUBLE_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUstreamCaptureMode previous = t_capture_mode;
  t_capture_mode = *mode;
  *mode = previous;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
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
  s.graph_execs.insert(made);
  *exec = reinterpret_cast<CUgraphExec>(made);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) { return launch_graph(exec, stream); }
DOUBLE_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) { return launch_graph(exec, stream); }

DOUBLE_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
  State& s = state();
  Lock lock(s.mutex);
  auto* found = reinterpret_cast<Graph*>(exec);
  if (s.graph_execs.erase(found) == 0) {
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
