// Building and reading graphs explicitly, the graph-level part: cuGraphCreate
// and cuGraphDestroy, clones, dependencies, the node and edge queries. The
// nodes themselves: api_graph_nodes.cpp.
#include "driver_exports.h"
#include "graph.h"
#include "state.h"

#include <cuda.h>

#include <algorithm>
#include <iterator>

namespace kcap_double {
namespace {

// Writes up to *count entries of `items` to `out` (NULL past the end),
// and *count = how many there are; out == NULL: only the count.
template <class T>
CUresult listOut(const std::vector<T>& items, T* out, std::size_t* count) {
  if (count == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (out != nullptr) {
    for (std::size_t i = 0; i < *count; ++i) {
      out[i] = i < items.size() ? items[i] : T{};
    }
    if (*count < items.size()) {
      return CUDA_SUCCESS;
    }
  }
  *count = items.size();
  return CUDA_SUCCESS;
}

std::vector<CUgraphNode> handles(const std::vector<GraphNode*>& nodes) {
  std::vector<CUgraphNode> out;
  for (GraphNode* node : nodes) {
    out.push_back(reinterpret_cast<CUgraphNode>(node));
  }
  return out;
}

std::vector<GraphNode*> dependentsOf(const GraphNode& node) {
  std::vector<GraphNode*> out;
  for (GraphNode* other : node.graph->nodes) {
    if (std::find(other->deps.begin(), other->deps.end(), &node) != other->deps.end()) {
      out.push_back(other);
    }
  }
  return out;
}

CUresult getEdges(CUgraph graph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* data, std::size_t* count) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Graph* found = findGraph(s, graph);
  if (found == nullptr || count == nullptr || ((from == nullptr) != (to == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<CUgraphNode> froms;
  std::vector<CUgraphNode> tos;
  for (GraphNode* node : found->nodes) {
    for (GraphNode* dep : node->deps) {
      froms.push_back(reinterpret_cast<CUgraphNode>(dep));
      tos.push_back(reinterpret_cast<CUgraphNode>(node));
    }
  }
  if (data != nullptr && from != nullptr) {
    for (std::size_t i = 0; i < *count; ++i) {
      data[i] = CUgraphEdgeData{};
    }
  }
  std::size_t fromCount = *count;
  listOut(froms, from, &fromCount);
  return listOut(tos, to, count);
}

CUresult changeDependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData* data,
                            std::size_t count, bool adding) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!defaultEdges(data, count)) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  State& s = state();
  Lock lock(s.mutex);
  Graph* found = findGraph(s, graph);
  if (found == nullptr || (count != 0 && (from == nullptr || to == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (std::size_t i = 0; i < count; ++i) {
    GraphNode* a = findNode(s, from[i]);
    GraphNode* b = findNode(s, to[i]);
    if (a == nullptr || b == nullptr || a == b || a->graph != found || b->graph != found) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const auto at = std::find(b->deps.begin(), b->deps.end(), a);
    if (adding && at != b->deps.end()) {
      return CUDA_ERROR_INVALID_VALUE;  // CUDA refuses a duplicate edge
    }
    if (!adding && at == b->deps.end()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (std::size_t i = 0; i < count; ++i) {
    GraphNode* a = findNode(s, from[i]);
    GraphNode* b = findNode(s, to[i]);
    if (adding) {
      b->deps.push_back(a);
    } else {
      b->deps.erase(std::find(b->deps.begin(), b->deps.end(), a));
    }
  }
  return CUDA_SUCCESS;
}

CUresult nodeNeighbours(CUgraphNode handle, CUgraphNode* out, CUgraphEdgeData* data, std::size_t* count,
                        bool dependencies) {
  return withNode(handle, kAnyType, [&](State&, GraphNode& node) {
    if (data != nullptr && out != nullptr && count != nullptr) {
      for (std::size_t i = 0; i < *count; ++i) {
        data[i] = CUgraphEdgeData{};
      }
    }
    return listOut(handles(dependencies ? node.deps : dependentsOf(node)), out, count);
  });
}

}  // namespace
}  // namespace kcap_double

using namespace kcap_double;

// ---- graphs -------------------------------------------------------------------------

DOUBLE_API CUresult cuGraphCreate(CUgraph* graph, unsigned flags) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (graph == nullptr || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* made = new Graph;
  s.graphs.insert(made);
  *graph = reinterpret_cast<CUgraph>(made);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphDestroy(CUgraph graph) {
  State& s = state();
  Lock lock(s.mutex);
  Graph* found = findGraph(s, graph);
  if (found == nullptr || found->ownedByNode) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (const Stream* stream : s.streams) {
    if (stream->captureGraph == found) {
      return CUDA_ERROR_ILLEGAL_STATE;  // a capture is building it
    }
  }
  destroyGraph(s, found);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphClone(CUgraph* clone, CUgraph original) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Graph* found = findGraph(s, original);
  if (clone == nullptr || found == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *clone = reinterpret_cast<CUgraph>(cloneGraph(s, *found, true));
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphNodeFindInClone(CUgraphNode* node, CUgraphNode original, CUgraph clone) {
  State& s = state();
  Lock lock(s.mutex);
  const Graph* found = findGraph(s, clone);
  if (node == nullptr || found == nullptr || findNode(s, original) == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (GraphNode* candidate : found->nodes) {
    if (candidate->origin == reinterpret_cast<const GraphNode*>(original)) {
      *node = reinterpret_cast<CUgraphNode>(candidate);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

DOUBLE_API CUresult cuGraphDestroyNode(CUgraphNode handle) {
  State& s = state();
  Lock lock(s.mutex);
  GraphNode* node = findNode(s, handle);
  if (node == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Graph& graph = *node->graph;
  for (GraphNode* other : graph.nodes) {
    other->deps.erase(std::remove(other->deps.begin(), other->deps.end(), node), other->deps.end());
  }
  graph.nodes.erase(std::find(graph.nodes.begin(), graph.nodes.end(), node));
  for (Graph* body : node->bodies) {
    destroyGraph(s, body);
  }
  s.graphNodes.erase(node);
  delete node;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, std::size_t* count) {
  State& s = state();
  Lock lock(s.mutex);
  const Graph* found = findGraph(s, graph);
  return found == nullptr ? CUDA_ERROR_INVALID_VALUE : listOut(handles(found->nodes), nodes, count);
}

DOUBLE_API CUresult cuGraphGetRootNodes(CUgraph graph, CUgraphNode* nodes, std::size_t* count) {
  State& s = state();
  Lock lock(s.mutex);
  const Graph* found = findGraph(s, graph);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<GraphNode*> roots;
  std::copy_if(found->nodes.begin(), found->nodes.end(), std::back_inserter(roots),
               [](const GraphNode* node) { return node->deps.empty(); });
  return listOut(handles(roots), nodes, count);
}

DOUBLE_API CUresult cuGraphGetEdges(CUgraph graph, CUgraphNode* from, CUgraphNode* to, std::size_t* count) {
  return getEdges(graph, from, to, nullptr, count);
}
DOUBLE_API CUresult cuGraphGetEdges_v2(CUgraph graph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* data,
                                       std::size_t* count) {
  return getEdges(graph, from, to, data, count);
}

DOUBLE_API CUresult cuGraphAddDependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to,
                                           std::size_t count) {
  return changeDependencies(graph, from, to, nullptr, count, true);
}
DOUBLE_API CUresult cuGraphAddDependencies_v2(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to,
                                              const CUgraphEdgeData* data, std::size_t count) {
  return changeDependencies(graph, from, to, data, count, true);
}
DOUBLE_API CUresult cuGraphRemoveDependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to,
                                              std::size_t count) {
  return changeDependencies(graph, from, to, nullptr, count, false);
}
DOUBLE_API CUresult cuGraphRemoveDependencies_v2(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to,
                                                 const CUgraphEdgeData* data, std::size_t count) {
  return changeDependencies(graph, from, to, data, count, false);
}

DOUBLE_API CUresult cuGraphNodeGetType(CUgraphNode handle, CUgraphNodeType* type) {
  return withNode(handle, kAnyType, [type](State&, GraphNode& node) {
    if (type == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *type = node.type;
    return CUDA_SUCCESS;
  });
}

DOUBLE_API CUresult cuGraphNodeGetDependencies(CUgraphNode node, CUgraphNode* deps, std::size_t* count) {
  return nodeNeighbours(node, deps, nullptr, count, true);
}
DOUBLE_API CUresult cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode* deps, CUgraphEdgeData* data,
                                                  std::size_t* count) {
  return nodeNeighbours(node, deps, data, count, true);
}
DOUBLE_API CUresult cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode* out, std::size_t* count) {
  return nodeNeighbours(node, out, nullptr, count, false);
}
DOUBLE_API CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode* out, CUgraphEdgeData* data,
                                                    std::size_t* count) {
  return nodeNeighbours(node, out, data, count, false);
}
