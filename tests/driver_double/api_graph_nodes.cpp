// The graph nodes: the cuGraphAdd*Node calls (and cuGraphAddNode with
// CUgraphNodeParams), their parameter queries and changes, conditional
// handles. Parameters are copied when a node is made or set, as CUDA copies
// them: a kernel node keeps its parameter bytes, laid out as
// cuFuncGetParamInfo reports them.
//
// Simplifications: what a node may hold is checked only where the double
// needs it to run the node (a kernel's handle and shape, a memset's element
// size); device addresses are checked when the graph runs. Edge data other
// than the default (programmatic ports), external semaphore and batch
// memory-op nodes, and a child graph moved rather than cloned into its
// parent are refused with CUDA_ERROR_NOT_SUPPORTED. An allocation node's
// address stays reserved for the process's lifetime.
#include "driver_exports.h"
#include "graph.h"
#include "state.h"

#include <cuda.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace kcap_double {

CUresult kernelFromParams(State& s, GraphNode& node, CUfunction func, CUkernel kern, const LaunchShape& shape,
                          void** params, void** extra) {
  const auto* launchable = static_cast<const Launchable*>(func != nullptr ? static_cast<void*>(func) : kern);
  if (launchable == nullptr || s.launchables.count(launchable) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (int d = 0; d < 3; ++d) {
    if (shape.grid[d] == 0 || shape.block[d] == 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  CapturedLaunch launch{launchable->def, launchable->module, shape, {}};
  if (const CUresult r = packParams(*launchable->def, params, extra, launch.bytes); r != CUDA_SUCCESS) {
    return r;
  }
  node.func = func;
  node.kern = func != nullptr ? nullptr : kern;
  node.launch = std::move(launch);
  return CUDA_SUCCESS;
}

std::map<CUgraphConditionalHandle, ConditionalHandle>& conditionalHandles() {
  static auto* handles = new std::map<CUgraphConditionalHandle, ConditionalHandle>;
  return *handles;
}

// A query or change of one node of the given type (any type: kAnyType).
CUresult withNode(CUgraphNode handle, int type, const std::function<CUresult(State&, GraphNode&)>& use) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  GraphNode* node = findNode(s, handle);
  if (node == nullptr || (type != kAnyType && node->type != type)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return use(s, *node);
}

bool defaultEdges(const CUgraphEdgeData* data, std::size_t count) {
  for (std::size_t i = 0; data != nullptr && i < count; ++i) {
    if (data[i].from_port != 0 || data[i].to_port != 0 || data[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) {
      return false;
    }
  }
  return true;
}

namespace {

using Fill = std::function<CUresult(State&, GraphNode&)>;

// The steps every cuGraphAdd*Node shares: check the handles, make the node,
// let `fill` set its parameters; a refused node is taken back.
CUresult add(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t count, CUgraphNodeType type,
             const Fill& fill) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Graph* found = findGraph(s, graph);
  if (out == nullptr || found == nullptr || (count != 0 && deps == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<GraphNode*> before;
  for (std::size_t i = 0; i < count; ++i) {
    GraphNode* dep = findNode(s, deps[i]);
    if (dep == nullptr || dep->graph != found) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    before.push_back(dep);
  }
  GraphNode* node = addNode(s, *found, type, before);
  if (const CUresult r = fill(s, *node); r != CUDA_SUCCESS) {
    found->nodes.pop_back();
    s.graphNodes.erase(node);
    delete node;
    return r;
  }
  *out = reinterpret_cast<CUgraphNode>(node);
  return CUDA_SUCCESS;
}

LaunchShape shapeOf(const CUDA_KERNEL_NODE_PARAMS& p) {
  return {{p.gridDimX, p.gridDimY, p.gridDimZ}, {p.blockDimX, p.blockDimY, p.blockDimZ}, p.sharedMemBytes};
}

CUDA_KERNEL_NODE_PARAMS widen(const CUDA_KERNEL_NODE_PARAMS_v1& p) {
  return {p.func,      p.gridDimX,       p.gridDimY,     p.gridDimZ, p.blockDimX, p.blockDimY,
          p.blockDimZ, p.sharedMemBytes, p.kernelParams, p.extra,    nullptr,     nullptr};
}

CUresult setKernel(State& s, GraphNode& node, const CUDA_KERNEL_NODE_PARAMS* p) {
  if (p == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node.ctx = p->ctx;
  return kernelFromParams(s, node, p->func, p->kern, shapeOf(*p), p->kernelParams, p->extra);
}

void getKernel(GraphNode& node, CUDA_KERNEL_NODE_PARAMS& p) {
  node.paramPointers.clear();
  for (const ParamSlot& slot : node.launch.def->params) {
    node.paramPointers.push_back(node.launch.bytes.data() + slot.offset);
  }
  const LaunchShape& shape = node.launch.shape;
  p = {node.func,      shape.grid[0],     shape.grid[1],
       shape.grid[2],  shape.block[0],    shape.block[1],
       shape.block[2], shape.sharedBytes, node.paramPointers.empty() ? nullptr : node.paramPointers.data(),
       nullptr,        node.kern,         node.ctx};
}

CUresult setMemset(GraphNode& node, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx) {
  if (p == nullptr || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || p->width == 0 ||
      p->height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node.memset = *p;
  node.ctx = ctx;
  return CUDA_SUCCESS;
}

CUresult setEvent(State& s, GraphNode& node, CUevent event) {
  if (s.events.count(reinterpret_cast<const Event*>(event)) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  node.event = event;
  return CUDA_SUCCESS;
}

Graph* newBody(State& s, GraphNode& node) {
  auto* body = new Graph;
  body->ownedByNode = true;
  s.graphs.insert(body);
  node.bodies.push_back(body);
  node.bodyHandles.push_back(reinterpret_cast<CUgraph>(body));
  return body;
}

CUresult setChild(State& s, GraphNode& node, CUgraph child) {
  const Graph* found = findGraph(s, child);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Graph* copy = cloneGraph(s, *found, true);
  copy->ownedByNode = true;
  node.bodies.push_back(copy);
  node.bodyHandles.push_back(reinterpret_cast<CUgraph>(copy));
  return CUDA_SUCCESS;
}

CUresult setAlloc(State& s, GraphNode& node, CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  if (p == nullptr || p->bytesize == 0 || (p->accessDescCount != 0 && p->accessDescs == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::size_t rounded = (p->bytesize + 255) / 256 * 256;
  void* memory = std::aligned_alloc(256, rounded);
  if (memory == nullptr) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  node.dptr = reinterpret_cast<CUdeviceptr>(memory);
  node.bytes = p->bytesize;
  node.poolProps = p->poolProps;
  node.access.assign(p->accessDescs, p->accessDescs + p->accessDescCount);
  s.graphReserved[node.dptr] = rounded;
  p->dptr = node.dptr;
  return CUDA_SUCCESS;
}

CUresult setFree(State& s, GraphNode& node, CUdeviceptr dptr) {
  CUdeviceptr base = 0;
  std::size_t size = 0;
  const bool allocated = s.rangeOf(dptr, base, size) && base == dptr;
  if (!allocated && s.graphReserved.count(dptr) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node.dptr = dptr;
  return CUDA_SUCCESS;
}

CUresult setConditional(State& s, GraphNode& node, CUDA_CONDITIONAL_NODE_PARAMS& p) {
  const auto handle = conditionalHandles().find(p.handle);
  if (handle == conditionalHandles().end()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const bool sizeOk = p.type == CU_GRAPH_COND_TYPE_WHILE    ? p.size == 1
                      : p.type == CU_GRAPH_COND_TYPE_IF     ? p.size == 1 || p.size == 2
                      : p.type == CU_GRAPH_COND_TYPE_SWITCH ? p.size >= 1
                                                            : false;
  if (!sizeOk) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node.condHandle = p.handle;
  node.condType = p.type;
  node.ctx = p.ctx;
  for (unsigned i = 0; i < p.size; ++i) {
    newBody(s, node);
  }
  p.phGraph_out = node.bodyHandles.data();  // CUDA-owned, valid while the node lives
  return CUDA_SUCCESS;
}

// cuGraphAddNode: the node of the given type from the generic parameters.
CUresult fillGeneric(State& s, GraphNode& node, CUgraphNodeParams& p) {
  switch (p.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      const CUDA_KERNEL_NODE_PARAMS_v3& k = p.kernel;
      node.ctx = k.ctx;
      const LaunchShape shape{
          {k.gridDimX, k.gridDimY, k.gridDimZ}, {k.blockDimX, k.blockDimY, k.blockDimZ}, k.sharedMemBytes};
      return kernelFromParams(s, node, k.func, k.kern, shape, k.kernelParams, k.extra);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      node.copy = p.memcpy.copyParams;
      node.ctx = p.memcpy.copyCtx;
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      const CUDA_MEMSET_NODE_PARAMS m{p.memset.dst,         p.memset.pitch, p.memset.value,
                                      p.memset.elementSize, p.memset.width, p.memset.height};
      return setMemset(node, &m, p.memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST:
      if (p.host.fn == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      node.host = {p.host.fn, p.host.userData};
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      if (p.graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) {
        return CUDA_ERROR_NOT_SUPPORTED;
      }
      return setChild(s, node, p.graph.graph);
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return setEvent(s, node, p.eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return setEvent(s, node, p.eventRecord.event);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      CUDA_MEM_ALLOC_NODE_PARAMS a{p.alloc.poolProps, p.alloc.accessDescs, p.alloc.accessDescCount, p.alloc.bytesize,
                                   0};
      const CUresult r = setAlloc(s, node, &a);
      p.alloc.dptr = a.dptr;
      return r;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return setFree(s, node, p.free.dptr);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      return setConditional(s, node, p.conditional);
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

}  // namespace

CUresult setParamsGeneric(State& s, GraphNode& node, CUgraphNodeParams& p) {
  if (p.type != node.type) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (p.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_HOST:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return fillGeneric(s, node, p);
    default:  // a child graph, an allocation, a free, a conditional: made once
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

bool captureAllocation(State& s, CUstream stream, std::size_t bytes, CUdeviceptr& address, CUresult& result) {
  GraphNode* node = captureNode(s, stream, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  if (node == nullptr) {
    return false;
  }
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.bytesize = bytes;
  result = setAlloc(s, *node, &p);
  address = p.dptr;
  return true;
}

bool captureFree(State& s, CUstream stream, CUdeviceptr address, CUresult& result) {
  GraphNode* node = captureNode(s, stream, CU_GRAPH_NODE_TYPE_MEM_FREE);
  if (node == nullptr) {
    return false;
  }
  result = setFree(s, *node, address);
  return true;
}

bool capturedReservation(const State& s, CUstream stream, CUdeviceptr address, std::size_t bytes) {
  const auto* found = reinterpret_cast<const Stream*>(stream);
  if (s.streams.count(found) == 0 || found->capture == Stream::Capture::kNone) {
    return false;
  }
  auto it = s.graphReserved.upper_bound(address);
  if (it == s.graphReserved.begin()) {
    return false;
  }
  --it;
  return address >= it->first && address - it->first <= it->second && bytes <= it->second - (address - it->first);
}

namespace {

CUresult addNodeGeneric(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* data,
                        std::size_t count, CUgraphNodeParams* p) {
  if (p == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!defaultEdges(data, count)) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return add(out, graph, deps, count, p->type, [p](State& s, GraphNode& node) { return fillGeneric(s, node, *p); });
}

}  // namespace
}  // namespace kcap_double

using namespace kcap_double;

// ---- nodes ----------------------------------------------------------------------------

DOUBLE_API CUresult cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t count,
                                   CUgraphNodeParams* params) {
  return addNodeGeneric(node, graph, deps, nullptr, count, params);
}
DOUBLE_API CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                      const CUgraphEdgeData* data, std::size_t count, CUgraphNodeParams* params) {
  return addNodeGeneric(node, graph, deps, data, count, params);
}

DOUBLE_API CUresult cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams* params) {
  if (params == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return withNode(node, kAnyType, [params](State& s, GraphNode& n) { return setParamsGeneric(s, n, *params); });
}

DOUBLE_API CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t count,
                                         const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUDA_KERNEL_NODE_PARAMS wide = widen(*params);
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_KERNEL,
             [&wide](State& s, GraphNode& n) { return setKernel(s, n, &wide); });
}
DOUBLE_API CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                            std::size_t count, const CUDA_KERNEL_NODE_PARAMS* params) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_KERNEL,
             [params](State& s, GraphNode& n) { return setKernel(s, n, params); });
}

DOUBLE_API CUresult cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1* params) {
  return withNode(node, CU_GRAPH_NODE_TYPE_KERNEL, [params](State&, GraphNode& n) {
    if (params == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    CUDA_KERNEL_NODE_PARAMS wide{};
    getKernel(n, wide);
    // The older form has no CUkernel: a node made from one reports it as its function.
    *params = {wide.func != nullptr ? wide.func : reinterpret_cast<CUfunction>(wide.kern),
               wide.gridDimX,
               wide.gridDimY,
               wide.gridDimZ,
               wide.blockDimX,
               wide.blockDimY,
               wide.blockDimZ,
               wide.sharedMemBytes,
               wide.kernelParams,
               nullptr};
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID id,
                                                  const CUkernelNodeAttrValue* value) {
  return withNode(node, CU_GRAPH_NODE_TYPE_KERNEL, [id, value](State&, GraphNode& n) {
    if (value == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    n.attributes[static_cast<int>(id)] = *value;
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphKernelNodeGetAttribute(CUgraphNode node, CUkernelNodeAttrID id,
                                                  CUkernelNodeAttrValue* value) {
  return withNode(node, CU_GRAPH_NODE_TYPE_KERNEL, [id, value](State&, GraphNode& n) {
    if (value == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const auto it = n.attributes.find(static_cast<int>(id));
    *value = it != n.attributes.end() ? it->second : CUkernelNodeAttrValue{};
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params) {
  return withNode(node, CU_GRAPH_NODE_TYPE_KERNEL, [params](State&, GraphNode& n) {
    if (params == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    getKernel(n, *params);
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUDA_KERNEL_NODE_PARAMS wide = widen(*params);
  return withNode(node, CU_GRAPH_NODE_TYPE_KERNEL, [&wide](State& s, GraphNode& n) { return setKernel(s, n, &wide); });
}
DOUBLE_API CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params) {
  return withNode(node, CU_GRAPH_NODE_TYPE_KERNEL,
                  [params](State& s, GraphNode& n) { return setKernel(s, n, params); });
}

DOUBLE_API CUresult cuGraphAddMemcpyNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t count,
                                         const CUDA_MEMCPY3D* copy, CUcontext ctx) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_MEMCPY, [copy, ctx](State&, GraphNode& n) {
    if (copy == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    n.copy = *copy;
    n.ctx = ctx;
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D* copy) {
  return withNode(node, CU_GRAPH_NODE_TYPE_MEMCPY, [copy](State&, GraphNode& n) {
    if (copy == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *copy = n.copy;
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D* copy) {
  return withNode(node, CU_GRAPH_NODE_TYPE_MEMCPY, [copy](State&, GraphNode& n) {
    if (copy == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    n.copy = *copy;
    return CUDA_SUCCESS;
  });
}

DOUBLE_API CUresult cuGraphAddMemsetNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t count,
                                         const CUDA_MEMSET_NODE_PARAMS* params, CUcontext ctx) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_MEMSET,
             [params, ctx](State&, GraphNode& n) { return setMemset(n, params, ctx); });
}
DOUBLE_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS* params) {
  return withNode(node, CU_GRAPH_NODE_TYPE_MEMSET, [params](State&, GraphNode& n) {
    if (params == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *params = n.memset;
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* params) {
  return withNode(node, CU_GRAPH_NODE_TYPE_MEMSET,
                  [params](State&, GraphNode& n) { return setMemset(n, params, n.ctx); });
}

DOUBLE_API CUresult cuGraphAddHostNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t count,
                                       const CUDA_HOST_NODE_PARAMS* params) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_HOST, [params](State&, GraphNode& n) {
    if (params == nullptr || params->fn == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    n.host = *params;
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphHostNodeGetParams(CUgraphNode node, CUDA_HOST_NODE_PARAMS* params) {
  return withNode(node, CU_GRAPH_NODE_TYPE_HOST, [params](State&, GraphNode& n) {
    if (params == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *params = n.host;
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphHostNodeSetParams(CUgraphNode node, const CUDA_HOST_NODE_PARAMS* params) {
  return withNode(node, CU_GRAPH_NODE_TYPE_HOST, [params](State&, GraphNode& n) {
    if (params == nullptr || params->fn == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    n.host = *params;
    return CUDA_SUCCESS;
  });
}

DOUBLE_API CUresult cuGraphAddChildGraphNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                             std::size_t count, CUgraph child) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_GRAPH,
             [child](State& s, GraphNode& n) { return setChild(s, n, child); });
}
DOUBLE_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* graph) {
  return withNode(node, CU_GRAPH_NODE_TYPE_GRAPH, [graph](State&, GraphNode& n) {
    if (graph == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *graph = n.bodyHandles.front();
    return CUDA_SUCCESS;
  });
}

DOUBLE_API CUresult cuGraphAddEmptyNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t count) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_EMPTY, [](State&, GraphNode&) { return CUDA_SUCCESS; });
}

DOUBLE_API CUresult cuGraphAddEventRecordNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                              std::size_t count, CUevent event) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_EVENT_RECORD,
             [event](State& s, GraphNode& n) { return setEvent(s, n, event); });
}
DOUBLE_API CUresult cuGraphAddEventWaitNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                            std::size_t count, CUevent event) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_WAIT_EVENT,
             [event](State& s, GraphNode& n) { return setEvent(s, n, event); });
}
DOUBLE_API CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode node, CUevent* event) {
  return withNode(node, CU_GRAPH_NODE_TYPE_EVENT_RECORD, [event](State&, GraphNode& n) {
    if (event == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *event = n.event;
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode node, CUevent* event) {
  return withNode(node, CU_GRAPH_NODE_TYPE_WAIT_EVENT, [event](State&, GraphNode& n) {
    if (event == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *event = n.event;
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode node, CUevent event) {
  return withNode(node, CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                  [event](State& s, GraphNode& n) { return setEvent(s, n, event); });
}
DOUBLE_API CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode node, CUevent event) {
  return withNode(node, CU_GRAPH_NODE_TYPE_WAIT_EVENT,
                  [event](State& s, GraphNode& n) { return setEvent(s, n, event); });
}

DOUBLE_API CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t count,
                                           CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_MEM_ALLOC,
             [params](State& s, GraphNode& n) { return setAlloc(s, n, params); });
}
DOUBLE_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  return withNode(node, CU_GRAPH_NODE_TYPE_MEM_ALLOC, [params](State&, GraphNode& n) {
    if (params == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *params = {n.poolProps, n.access.empty() ? nullptr : n.access.data(), n.access.size(), n.bytes, n.dptr};
    return CUDA_SUCCESS;
  });
}
DOUBLE_API CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t count,
                                          CUdeviceptr dptr) {
  return add(node, graph, deps, count, CU_GRAPH_NODE_TYPE_MEM_FREE,
             [dptr](State& s, GraphNode& n) { return setFree(s, n, dptr); });
}
DOUBLE_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr* dptr) {
  return withNode(node, CU_GRAPH_NODE_TYPE_MEM_FREE, [dptr](State&, GraphNode& n) {
    if (dptr == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *dptr = n.dptr;
    return CUDA_SUCCESS;
  });
}

// Handles are numbered from 1; the value lives in each executable.
DOUBLE_API CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle* handle, CUgraph graph, CUcontext,
                                                   unsigned defaultValue, unsigned flags) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Graph* found = findGraph(s, graph);
  if (handle == nullptr || found == nullptr || (flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto& all = conditionalHandles();
  const CUgraphConditionalHandle made = all.size() + 1;
  all[made] = {found, defaultValue, flags};
  *handle = made;
  return CUDA_SUCCESS;
}
