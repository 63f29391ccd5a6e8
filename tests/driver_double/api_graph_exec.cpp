// Executable graphs: instantiation (a private deep copy of the graph), launch,
// and the updates of an executable (per node, cuGraphExecUpdate, enabling and
// disabling nodes).
//
// A launch runs every node on the calling thread before returning, in one
// deterministic topological order: of the nodes whose dependencies have run,
// the one made first (Kahn's algorithm by creation order). A disabled node
// runs as an empty one. Conditional nodes read their handle's value when they
// run: an if node runs body 0 when it is nonzero (body 1, if there is one,
// when it is zero), a while node runs its body for as long as it is nonzero,
// checking before each pass, a switch node runs body[value] if there is one.
// A handle made with CU_GRAPH_COND_ASSIGN_DEFAULT takes its default value at
// the start of every launch.
//
// Simplifications: a handle without that flag starts at its default value at
// instantiation and keeps whatever kernels set across launches (CUDA leaves
// it undefined); kernels set a handle through the host hook
// setGraphConditional (host_kernels.h), since host code cannot call
// cudaGraphSetConditional. Upload does nothing (there is no device). Node
// pairing in cuGraphExecUpdate is by creation order, as CUDA pairs nodes;
// what may change per node follows CUDA's documented rules only as far as
// the memory types of a memcpy and the identity of allocation, free and
// conditional nodes.
#include "driver_exports.h"
#include "graph.h"
#include "state.h"

#include <cuda.h>

#include <algorithm>
#include <functional>
#include <set>

namespace kcap_double {
namespace {

// The conditional values of the launch running on this thread.
thread_local std::map<CUgraphConditionalHandle, unsigned>* t_conditions = nullptr;

GraphExec* findExec(State& s, CUgraphExec exec) {
  auto* found = reinterpret_cast<GraphExec*>(exec);
  return s.graphExecs.count(found) != 0 ? found : nullptr;
}

// The nodes in the order they run; empty for a graph with a cycle.
std::vector<const GraphNode*> runOrder(const Graph& graph) {
  std::set<const GraphNode*> done;
  std::vector<const GraphNode*> order;
  while (order.size() < graph.nodes.size()) {
    const GraphNode* next = nullptr;
    for (const GraphNode* node : graph.nodes) {
      if (done.count(node) == 0 &&
          std::all_of(node->deps.begin(), node->deps.end(), [&](const GraphNode* d) { return done.count(d) != 0; })) {
        next = node;
        break;
      }
    }
    if (next == nullptr) {
      return {};
    }
    done.insert(next);
    order.push_back(next);
  }
  return order;
}

bool acyclic(const Graph& graph) {
  if (!graph.nodes.empty() && runOrder(graph).empty()) {
    return false;
  }
  for (const GraphNode* node : graph.nodes) {
    for (const Graph* body : node->bodies) {
      if (!acyclic(*body)) {
        return false;
      }
    }
  }
  return true;
}

template <class Visit>
void eachNode(const Graph& graph, const Visit& visit) {
  for (const GraphNode* node : graph.nodes) {
    visit(*node);
    for (const Graph* body : node->bodies) {
      eachNode(*body, visit);
    }
  }
}

CUresult runGraph(const Graph& graph);

unsigned conditionOf(CUgraphConditionalHandle handle) {
  return t_conditions != nullptr && t_conditions->count(handle) != 0 ? t_conditions->at(handle) : 0;
}

CUresult runConditional(const GraphNode& node) {
  const unsigned value = conditionOf(node.condHandle);
  switch (node.condType) {
    case CU_GRAPH_COND_TYPE_IF:
      if (value != 0) {
        return runGraph(*node.bodies[0]);
      }
      return node.bodies.size() == 2 ? runGraph(*node.bodies[1]) : CUDA_SUCCESS;
    case CU_GRAPH_COND_TYPE_WHILE:
      while (conditionOf(node.condHandle) != 0) {
        if (const CUresult r = runGraph(*node.bodies[0]); r != CUDA_SUCCESS) {
          return r;
        }
      }
      return CUDA_SUCCESS;
    case CU_GRAPH_COND_TYPE_SWITCH:
      return value < node.bodies.size() ? runGraph(*node.bodies[value]) : CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult runNode(const GraphNode& node) {
  if (!node.enabled) {
    return CUDA_SUCCESS;
  }
  switch (node.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      runLaunch(node.launch);
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return runCopy3d(node.copy);
    case CU_GRAPH_NODE_TYPE_MEMSET:
      return runMemset(node.memset);
    case CU_GRAPH_NODE_TYPE_HOST:
      node.host.fn(node.host.userData);
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return runGraph(*node.bodies[0]);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      return runConditional(node);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
      State& s = state();
      Lock lock(s.mutex);
      if (s.events.count(reinterpret_cast<const Event*>(node.event)) != 0) {
        auto* event = reinterpret_cast<Event*>(node.event);
        event->recorded = true;
        event->when = std::chrono::steady_clock::now();
      }
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      State& s = state();
      Lock lock(s.mutex);
      const auto reserved = s.graphReserved.find(node.dptr);
      if (reserved == s.graphReserved.end()) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (!s.takeDeviceMemory(reserved->second)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      s.allocations[node.dptr] = node.bytes;
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE: {
      State& s = state();
      Lock lock(s.mutex);
      return s.release(node.dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    default:  // empty, event wait: work is synchronous
      return CUDA_SUCCESS;
  }
}

CUresult runGraph(const Graph& graph) {
  for (const GraphNode* node : runOrder(graph)) {
    if (const CUresult r = runNode(*node); r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

CUresult instantiate(CUgraphExec* exec, CUgraph graph, cuuint64_t flags, CUgraphInstantiateResult* result) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Graph* found = findGraph(s, graph);
  if (exec == nullptr || found == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!acyclic(*found)) {
    if (result != nullptr) {
      *result = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
    }
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* made = new GraphExec;
  made->graph = cloneGraph(s, *found, false, &made->nodeFor);
  made->flags = flags;
  eachNode(*made->graph, [&](const GraphNode& node) {
    if (node.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      made->conditions[node.condHandle] = conditionalHandles().at(node.condHandle).defaultValue;
    }
  });
  s.graphExecs.insert(made);
  *exec = reinterpret_cast<CUgraphExec>(made);
  if (result != nullptr) {
    *result = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  }
  return CUDA_SUCCESS;
}

CUresult launchGraph(CUgraphExec exec, CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Graph* snapshot = nullptr;
  std::map<CUgraphConditionalHandle, unsigned> conditions;
  {
    Lock lock(s.mutex);
    GraphExec* found = findExec(s, exec);
    if (found == nullptr || !validStream(s, stream)) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    if (GraphNode* node = captureNode(s, stream, CU_GRAPH_NODE_TYPE_GRAPH); node != nullptr) {
      Graph* child = cloneGraph(s, *found->graph, true);  // a graph launched into a capture: a child graph node
      child->ownedByNode = true;
      node->bodies.push_back(child);
      node->bodyHandles.push_back(reinterpret_cast<CUgraph>(child));
      return CUDA_SUCCESS;
    }
    // An allocation still live from the last launch: CUDA refuses the launch
    // unless the graph frees it itself on launch.
    bool live = false;
    eachNode(*found->graph, [&](const GraphNode& node) {
      if (node.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && s.allocations.count(node.dptr) != 0) {
        if ((found->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0) {
          s.release(node.dptr);
        } else {
          live = true;
        }
      }
    });
    if (live) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (auto& [handle, value] : found->conditions) {
      const ConditionalHandle& made = conditionalHandles().at(handle);
      if ((made.flags & CU_GRAPH_COND_ASSIGN_DEFAULT) != 0) {
        value = made.defaultValue;
      }
    }
    conditions = found->conditions;
    snapshot = cloneGraph(s, *found->graph, false);
  }
  auto* outer = t_conditions;
  t_conditions = &conditions;
  const CUresult result = runGraph(*snapshot);
  t_conditions = outer;
  Lock lock(s.mutex);
  if (GraphExec* found = findExec(s, exec); found != nullptr) {
    found->conditions = conditions;
  }
  destroyGraph(s, snapshot);
  return result;
}

// The executable's copy of a node of a graph it was made or updated from.
CUresult withExecNode(CUgraphExec exec, CUgraphNode handle, CUgraphNodeType type,
                      const std::function<CUresult(State&, GraphNode&, const GraphNode&)>& use) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  GraphExec* found = findExec(s, exec);
  const GraphNode* node = findNode(s, handle);
  if (found == nullptr || node == nullptr || found->nodeFor.count(node) == 0 || node->type != type) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return use(s, *found->nodeFor.at(node), *node);
}

// cuGraphExecUpdate's comparison: the same nodes (paired in creation order),
// of the same types, with the same edges, and only changes CUDA can apply.
CUgraphExecUpdateResult compare(const Graph& have, const Graph& want, const GraphNode*& errorNode,
                                const GraphNode*& errorFrom) {
  if (have.nodes.size() != want.nodes.size()) {
    return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  }
  const auto indexIn = [](const Graph& graph, const GraphNode* node) {
    return std::find(graph.nodes.begin(), graph.nodes.end(), node) - graph.nodes.begin();
  };
  for (std::size_t i = 0; i < want.nodes.size(); ++i) {
    const GraphNode& a = *have.nodes[i];
    const GraphNode& b = *want.nodes[i];
    errorNode = &b;
    errorFrom = &a;
    if (a.type != b.type) {
      return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    }
    std::set<std::ptrdiff_t> depsA;
    std::set<std::ptrdiff_t> depsB;
    for (const GraphNode* d : a.deps) {
      depsA.insert(indexIn(have, d));
    }
    for (const GraphNode* d : b.deps) {
      depsB.insert(indexIn(want, d));
    }
    if (depsA != depsB || a.bodies.size() != b.bodies.size()) {
      return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    }
    const bool copyTypesChanged =
        a.type == CU_GRAPH_NODE_TYPE_MEMCPY &&
        (a.copy.srcMemoryType != b.copy.srcMemoryType || a.copy.dstMemoryType != b.copy.dstMemoryType);
    const bool fixedChanged = (a.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || a.type == CU_GRAPH_NODE_TYPE_MEM_FREE) &&
                              (a.dptr != b.dptr || a.bytes != b.bytes);
    const bool conditionChanged =
        a.type == CU_GRAPH_NODE_TYPE_CONDITIONAL && (a.condHandle != b.condHandle || a.condType != b.condType);
    if (copyTypesChanged || fixedChanged || conditionChanged) {
      return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    }
    for (std::size_t k = 0; k < a.bodies.size(); ++k) {
      if (const auto r = compare(*a.bodies[k], *b.bodies[k], errorNode, errorFrom); r != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        return r;
      }
    }
  }
  errorNode = nullptr;
  errorFrom = nullptr;
  return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

// After a successful compare: every pair's parameters, and `want`'s nodes
// become handles of the executable's.
void apply(Graph& have, const Graph& want, std::map<const GraphNode*, GraphNode*>& nodeFor) {
  for (std::size_t i = 0; i < want.nodes.size(); ++i) {
    GraphNode& a = *have.nodes[i];
    const GraphNode& b = *want.nodes[i];
    copyNodeParams(a, b);
    nodeFor[&b] = &a;
    for (std::size_t k = 0; k < a.bodies.size(); ++k) {
      apply(*a.bodies[k], *b.bodies[k], nodeFor);
    }
  }
}

CUresult update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  GraphExec* found = findExec(s, exec);
  const Graph* want = findGraph(s, graph);
  if (found == nullptr || want == nullptr || info == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const GraphNode* errorNode = nullptr;
  const GraphNode* errorFrom = nullptr;
  info->result = compare(*found->graph, *want, errorNode, errorFrom);
  info->errorNode = reinterpret_cast<CUgraphNode>(const_cast<GraphNode*>(errorNode));
  info->errorFromNode = nullptr;
  if (info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
    // The executable's own node means nothing to the program: the node it was made from.
    if (errorFrom != nullptr && s.graphNodes.count(errorFrom->origin) != 0) {
      info->errorFromNode = reinterpret_cast<CUgraphNode>(const_cast<GraphNode*>(errorFrom->origin));
    }
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  apply(*found->graph, *want, found->nodeFor);
  return CUDA_SUCCESS;
}

CUresult instantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (params == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  params->hErrNode_out = nullptr;
  return instantiate(exec, graph, params->flags, &params->result_out);
}

CUresult upload(CUgraphExec exec, CUstream stream) {
  State& s = state();
  Lock lock(s.mutex);
  return findExec(s, exec) != nullptr && validStream(s, stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult setExecKernel(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  return withExecNode(exec, node, CU_GRAPH_NODE_TYPE_KERNEL, [p](State& s, GraphNode& target, const GraphNode&) {
    if (p == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const LaunchShape shape{
        {p->gridDimX, p->gridDimY, p->gridDimZ}, {p->blockDimX, p->blockDimY, p->blockDimZ}, p->sharedMemBytes};
    return kernelFromParams(s, target, p->func, p->kern, shape, p->kernelParams, p->extra);
  });
}

// A new child graph must have the topology of the node's; its parameters are
// taken over.
CUresult setExecChild(CUgraphExec exec, CUgraphNode node, CUgraph child) {
  return withExecNode(exec, node, CU_GRAPH_NODE_TYPE_GRAPH,
                      [exec, child](State& s, GraphNode& target, const GraphNode&) {
                        const Graph* want = findGraph(s, child);
                        if (want == nullptr) {
                          return CUDA_ERROR_INVALID_VALUE;
                        }
                        const GraphNode* errorNode = nullptr;
                        const GraphNode* errorFrom = nullptr;
                        if (compare(*target.bodies[0], *want, errorNode, errorFrom) != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
                          return CUDA_ERROR_INVALID_VALUE;
                        }
                        apply(*target.bodies[0], *want, findExec(s, exec)->nodeFor);
                        return CUDA_SUCCESS;
                      });
}

}  // namespace

void setGraphConditional(std::uint64_t handle, unsigned value) {
  if (t_conditions != nullptr && t_conditions->count(handle) != 0) {
    (*t_conditions)[handle] = value;
  }
}

}  // namespace kcap_double

using namespace kcap_double;

DOUBLE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  return instantiate(exec, graph, flags, nullptr);
}

DOUBLE_API CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiateWithParams(exec, graph, params);
}
DOUBLE_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiateWithParams(exec, graph, params);
}

DOUBLE_API CUresult cuGraphExecGetFlags(CUgraphExec exec, cuuint64_t* flags) {
  State& s = state();
  Lock lock(s.mutex);
  const GraphExec* found = findExec(s, exec);
  if (found == nullptr || flags == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *flags = found->flags;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) { return upload(exec, stream); }
DOUBLE_API CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) { return upload(exec, stream); }

DOUBLE_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) { return launchGraph(exec, stream); }
DOUBLE_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) { return launchGraph(exec, stream); }

DOUBLE_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
  State& s = state();
  Lock lock(s.mutex);
  GraphExec* found = findExec(s, exec);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  s.graphExecs.erase(found);
  destroyGraph(s, found->graph);
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  return update(exec, graph, info);
}
DOUBLE_API CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode* errorNode,
                                      CUgraphExecUpdateResult* result) {
  if (errorNode == nullptr || result == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUgraphExecUpdateResultInfo info{};
  const CUresult r = update(exec, graph, &info);
  *errorNode = info.errorNode;
  *result = info.result;
  return r;
}

DOUBLE_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                      const CUDA_KERNEL_NODE_PARAMS* p) {
  return setExecKernel(exec, node, p);
}
DOUBLE_API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                   const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (p == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUDA_KERNEL_NODE_PARAMS wide{p->func,         p->gridDimX,  p->gridDimY,  p->gridDimZ,
                                     p->blockDimX,    p->blockDimY, p->blockDimZ, p->sharedMemBytes,
                                     p->kernelParams, p->extra,     nullptr,      nullptr};
  return setExecKernel(exec, node, &wide);
}

DOUBLE_API CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D* copy,
                                                   CUcontext) {
  return withExecNode(exec, node, CU_GRAPH_NODE_TYPE_MEMCPY, [copy](State&, GraphNode& target, const GraphNode&) {
    if (copy == nullptr || copy->srcMemoryType != target.copy.srcMemoryType ||
        copy->dstMemoryType != target.copy.dstMemoryType) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    target.copy = *copy;
    return CUDA_SUCCESS;
  });
}

DOUBLE_API CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p,
                                                   CUcontext) {
  return withExecNode(exec, node, CU_GRAPH_NODE_TYPE_MEMSET, [p](State&, GraphNode& target, const GraphNode&) {
    if (p == nullptr || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    target.memset = *p;
    return CUDA_SUCCESS;
  });
}

DOUBLE_API CUresult cuGraphExecHostNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_HOST_NODE_PARAMS* p) {
  return withExecNode(exec, node, CU_GRAPH_NODE_TYPE_HOST, [p](State&, GraphNode& target, const GraphNode&) {
    if (p == nullptr || p->fn == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    target.host = *p;
    return CUDA_SUCCESS;
  });
}

DOUBLE_API CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec exec, CUgraphNode node, CUgraph child) {
  return setExecChild(exec, node, child);
}

DOUBLE_API CUresult cuGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams* p) {
  if (p == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (p->type == CU_GRAPH_NODE_TYPE_GRAPH) {
    return setExecChild(exec, node, p->graph.graph);
  }
  return withExecNode(exec, node, p->type, [p](State& s, GraphNode& target, const GraphNode&) {
    if (p->type == CU_GRAPH_NODE_TYPE_MEMCPY && (p->memcpy.copyParams.srcMemoryType != target.copy.srcMemoryType ||
                                                 p->memcpy.copyParams.dstMemoryType != target.copy.dstMemoryType)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    return setParamsGeneric(s, target, *p);
  });
}

DOUBLE_API CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec exec, CUgraphNode node, CUevent event) {
  return withExecNode(exec, node, CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                      [event](State& s, GraphNode& target, const GraphNode&) {
                        if (s.events.count(reinterpret_cast<const Event*>(event)) == 0) {
                          return CUDA_ERROR_INVALID_HANDLE;
                        }
                        target.event = event;
                        return CUDA_SUCCESS;
                      });
}

DOUBLE_API CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec exec, CUgraphNode node, CUevent event) {
  return withExecNode(exec, node, CU_GRAPH_NODE_TYPE_WAIT_EVENT,
                      [event](State& s, GraphNode& target, const GraphNode&) {
                        if (s.events.count(reinterpret_cast<const Event*>(event)) == 0) {
                          return CUDA_ERROR_INVALID_HANDLE;
                        }
                        target.event = event;
                        return CUDA_SUCCESS;
                      });
}

namespace {

// Only kernel, memcpy and memset nodes can be disabled, as in CUDA.
CUresult withToggleable(CUgraphExec exec, CUgraphNode node, const std::function<void(GraphNode&)>& use) {
  for (const CUgraphNodeType type : {CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_MEMSET}) {
    const CUresult r = withExecNode(exec, node, type, [&](State&, GraphNode& target, const GraphNode&) {
      use(target);
      return CUDA_SUCCESS;
    });
    if (r == CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

DOUBLE_API CUresult cuGraphNodeSetEnabled(CUgraphExec exec, CUgraphNode node, unsigned enabled) {
  return withToggleable(exec, node, [enabled](GraphNode& target) { target.enabled = enabled != 0; });
}

DOUBLE_API CUresult cuGraphNodeGetEnabled(CUgraphExec exec, CUgraphNode node, unsigned* enabled) {
  if (enabled == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return withToggleable(exec, node, [enabled](GraphNode& target) { *enabled = target.enabled ? 1 : 0; });
}
