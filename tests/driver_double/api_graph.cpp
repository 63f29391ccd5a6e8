// Events, stream capture, and the graph model's core (graph.h). Work runs
// synchronously, so events only need to be valid handles and the time they
// were recorded. A capturing stream turns its work into nodes of the
// capture's graph, each depending on the stream's previous work; an event
// recorded in a capture carries that point of the capture to another stream,
// which joins the capture when it waits on it. What a real driver forbids
// during capture, the double forbids too, by invalidating the capture:
// synchronizing the capturing stream, the context while any stream
// captures, or running work on the legacy stream (a synchronous copy, say)
// while a blocking stream captures (the recorder must do none of these).
//
// Simplifications: the capture mode is kept but not enforced (no call is
// refused as unsafe during a capture); only the CUDA 12.3 forms of
// cuStreamGetCaptureInfo and cuStreamUpdateCaptureDependencies (with edge
// data, default edges only) exist; a stream that joined a capture is not
// checked for work left unjoined beyond its last captured node.
#include "driver_exports.h"
#include "graph.h"
#include "state.h"

#include <cuda.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string_view>

namespace kcap_double {

Graph* findGraph(State& s, CUgraph graph) {
  auto* found = reinterpret_cast<Graph*>(graph);
  return s.graphs.count(found) != 0 ? found : nullptr;
}

GraphNode* findNode(State& s, CUgraphNode node) {
  auto* found = reinterpret_cast<GraphNode*>(node);
  return s.graphNodes.count(found) != 0 ? found : nullptr;
}

GraphNode* addNode(State& s, Graph& graph, CUgraphNodeType type, std::span<GraphNode* const> deps) {
  auto* node = new GraphNode;
  node->type = type;
  node->graph = &graph;
  for (GraphNode* dep : deps) {
    if (std::find(node->deps.begin(), node->deps.end(), dep) == node->deps.end()) {
      node->deps.push_back(dep);
    }
  }
  graph.nodes.push_back(node);
  if (s.graphs.count(&graph) != 0) {
    s.graphNodes.insert(node);
  }
  return node;
}

void copyNodeParams(GraphNode& to, const GraphNode& from) {
  to.func = from.func;
  to.kern = from.kern;
  to.ctx = from.ctx;
  to.launch = from.launch;
  to.copy = from.copy;
  to.memset = from.memset;
  to.host = from.host;
  to.event = from.event;
  to.condHandle = from.condHandle;
  to.condType = from.condType;
  to.dptr = from.dptr;
  to.bytes = from.bytes;
  to.poolProps = from.poolProps;
  to.access = from.access;
}

namespace {

void cloneInto(State& s, const Graph& from, Graph& to, bool registered,
               std::map<const GraphNode*, GraphNode*>& mapping) {
  for (const GraphNode* node : from.nodes) {
    auto* copy = new GraphNode;
    copy->type = node->type;
    copy->graph = &to;
    copy->origin = node;
    copy->enabled = node->enabled;
    copyNodeParams(*copy, *node);
    for (const Graph* body : node->bodies) {
      auto* bodyCopy = new Graph;
      bodyCopy->ownedByNode = true;
      if (registered) {
        s.graphs.insert(bodyCopy);
      }
      cloneInto(s, *body, *bodyCopy, registered, mapping);
      copy->bodies.push_back(bodyCopy);
      copy->bodyHandles.push_back(reinterpret_cast<CUgraph>(bodyCopy));
    }
    mapping[node] = copy;
    to.nodes.push_back(copy);
    if (registered) {
      s.graphNodes.insert(copy);
    }
  }
  // Edges last: an added dependency may point to a node made later.
  for (std::size_t i = 0; i < from.nodes.size(); ++i) {
    for (const GraphNode* dep : from.nodes[i]->deps) {
      to.nodes[i]->deps.push_back(mapping.at(dep));
    }
  }
}

}  // namespace

Graph* cloneGraph(State& s, const Graph& from, bool registered, std::map<const GraphNode*, GraphNode*>* mapping) {
  auto* graph = new Graph;
  if (registered) {
    s.graphs.insert(graph);
  }
  std::map<const GraphNode*, GraphNode*> local;
  cloneInto(s, from, *graph, registered, mapping != nullptr ? *mapping : local);
  return graph;
}

void destroyGraph(State& s, Graph* graph) {
  for (GraphNode* node : graph->nodes) {
    for (Graph* body : node->bodies) {
      destroyGraph(s, body);
    }
    s.graphNodes.erase(node);
    delete node;
  }
  s.graphs.erase(graph);
  delete graph;
}

// ---- capture ------------------------------------------------------------------------

GraphNode* captureNode(State& s, CUstream stream, CUgraphNodeType type) {
  Stream* found = findStream(s, stream);
  if (found == nullptr || found->capture == Stream::Capture::kNone || found->captureGraph == nullptr) {
    return nullptr;  // an invalidated capture still takes the work (and drops it at the end)
  }
  GraphNode* node = addNode(s, *found->captureGraph, type, found->tails);
  found->tails.assign(1, node);
  return node;
}

bool captureCopy(State& s, CUstream stream, const CUDA_MEMCPY3D& copy) {
  GraphNode* node = captureNode(s, stream, CU_GRAPH_NODE_TYPE_MEMCPY);
  if (node != nullptr) {
    node->copy = copy;
    node->ctx = reinterpret_cast<CUcontext>(currentContext());
  }
  return node != nullptr;
}

bool captureMemset(State& s, CUstream stream, const CUDA_MEMSET_NODE_PARAMS& memset) {
  GraphNode* node = captureNode(s, stream, CU_GRAPH_NODE_TYPE_MEMSET);
  if (node != nullptr) {
    node->memset = memset;
    node->ctx = reinterpret_cast<CUcontext>(currentContext());
  }
  return node != nullptr;
}

namespace {

thread_local CUstreamCaptureMode t_captureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;

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
  if (const Stream* capturing = findStream(s, stream);
      capturing != nullptr && capturing->capture != Stream::Capture::kNone) {
    found->captureGraph = capturing->captureGraph;  // a point in the capture, not a recording
    found->captureTails = capturing->tails;
    return CUDA_SUCCESS;
  }
  found->captureGraph = nullptr;
  found->captureTails.clear();
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
  const Event* found = findEvent(s, event);
  if (found == nullptr || !validStream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  Stream* waiting = findStream(s, stream);
  const bool captured = found->captureGraph != nullptr && s.graphs.count(found->captureGraph) != 0;
  if (waiting == nullptr || !captured) {
    return CUDA_SUCCESS;  // work is synchronous: nothing to wait for
  }
  if (waiting->capture == Stream::Capture::kNone) {
    // Joins the capture: its next work follows the event's point.
    Stream* origin = nullptr;
    for (const Stream* other : s.streams) {
      if (other->captureGraph == found->captureGraph && other->origin == other) {
        origin = const_cast<Stream*>(other);
      }
    }
    waiting->capture = Stream::Capture::kActive;
    waiting->captureGraph = found->captureGraph;
    waiting->origin = origin;
    waiting->captureId = origin != nullptr ? origin->captureId : 0;
    waiting->tails = found->captureTails;
    return CUDA_SUCCESS;
  }
  if (waiting->captureGraph != found->captureGraph) {
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  for (GraphNode* tail : found->captureTails) {
    if (std::find(waiting->tails.begin(), waiting->tails.end(), tail) == waiting->tails.end()) {
      waiting->tails.push_back(tail);
    }
  }
  return CUDA_SUCCESS;
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
  found->captureGraph = new Graph;
  s.graphs.insert(found->captureGraph);
  found->origin = found;
  found->tails.clear();
  static std::uint64_t captures = 0;
  found->captureId = ++captures;
  return CUDA_SUCCESS;
}

// Every node some stream of the capture ended with must come before the
// origin's last work: the other streams have joined back.
bool joined(const Stream& origin, const Stream& other) {
  std::set<const GraphNode*> before;
  std::vector<const GraphNode*> pending(origin.tails.begin(), origin.tails.end());
  while (!pending.empty()) {
    const GraphNode* node = pending.back();
    pending.pop_back();
    if (before.insert(node).second) {
      pending.insert(pending.end(), node->deps.begin(), node->deps.end());
    }
  }
  return std::all_of(other.tails.begin(), other.tails.end(), [&](const GraphNode* t) { return before.count(t) != 0; });
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
  if (found->origin != found) {
    return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  }
  Graph* made = found->captureGraph;
  bool invalidated = found->capture == Stream::Capture::kInvalidated;
  bool unjoined = false;
  for (const Stream* other : s.streams) {
    if (other != found && other->captureGraph == made) {
      unjoined = unjoined || !joined(*found, *other);
      invalidated = invalidated || other->capture == Stream::Capture::kInvalidated;
      auto* member = const_cast<Stream*>(other);
      member->capture = Stream::Capture::kNone;
      member->captureGraph = nullptr;
      member->origin = nullptr;
      member->tails.clear();
    }
  }
  found->capture = Stream::Capture::kNone;
  found->captureGraph = nullptr;
  found->origin = nullptr;
  found->tails.clear();
  if (invalidated || unjoined) {
    destroyGraph(s, made);
    *graph = nullptr;
    return unjoined && !invalidated ? CUDA_ERROR_STREAM_CAPTURE_UNJOINED : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
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

// The capture's state and the dependencies the stream's next work will have.
CUresult captureInfo(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                     const CUgraphNode** deps, const CUgraphEdgeData** edges, std::size_t* count) {
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
  Stream* found = findStream(s, stream);
  if (found == nullptr || found->capture == Stream::Capture::kNone) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  *status = found->capture == Stream::Capture::kActive ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                       : CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  found->tailHandles.clear();
  for (GraphNode* tail : found->tails) {
    found->tailHandles.push_back(reinterpret_cast<CUgraphNode>(tail));
  }
  found->tailEdges.assign(found->tails.size(), CUgraphEdgeData{});
  if (id != nullptr) {
    *id = found->captureId;
  }
  if (graph != nullptr) {
    *graph = reinterpret_cast<CUgraph>(found->captureGraph);
  }
  if (deps != nullptr) {
    *deps = found->tailHandles.empty() ? nullptr : found->tailHandles.data();
  }
  if (edges != nullptr) {
    *edges = found->tailEdges.empty() ? nullptr : found->tailEdges.data();
  }
  if (count != nullptr) {
    *count = found->tails.size();
  }
  return CUDA_SUCCESS;
}

CUresult updateCaptureDependencies(CUstream stream, CUgraphNode* deps, const CUgraphEdgeData* edges, std::size_t count,
                                   unsigned flags) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if ((count != 0 && deps == nullptr) || flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES || !defaultEdges(edges, count)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Stream* found = findStream(s, stream);
  if (found == nullptr || found->capture != Stream::Capture::kActive) {
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  std::vector<GraphNode*> added;
  for (std::size_t i = 0; i < count; ++i) {
    GraphNode* node = findNode(s, deps[i]);
    if (node == nullptr || node->graph != found->captureGraph) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    added.push_back(node);
  }
  if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) {
    found->tails.clear();
  }
  for (GraphNode* node : added) {
    if (std::find(found->tails.begin(), found->tails.end(), node) == found->tails.end()) {
      found->tails.push_back(node);
    }
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
  auto* created = new Event;
  created->flags = flags;
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
  const CUstreamCaptureMode previous = t_captureMode;
  t_captureMode = *mode;
  *mode = previous;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuStreamGetCaptureInfo_v3(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                              CUgraph* graph, const CUgraphNode** deps, const CUgraphEdgeData** edges,
                                              std::size_t* count) {
  return captureInfo(stream, status, id, graph, deps, edges, count);
}
DOUBLE_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                                   CUgraph* graph, const CUgraphNode** deps,
                                                   const CUgraphEdgeData** edges, std::size_t* count) {
  return captureInfo(stream, status, id, graph, deps, edges, count);
}
DOUBLE_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream stream, CUgraphNode* deps,
                                                         const CUgraphEdgeData* edges, std::size_t count,
                                                         unsigned flags) {
  return updateCaptureDependencies(stream, deps, edges, count, flags);
}
DOUBLE_API CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream stream, CUgraphNode* deps,
                                                              const CUgraphEdgeData* edges, std::size_t count,
                                                              unsigned flags) {
  return updateCaptureDependencies(stream, deps, edges, count, flags);
}
