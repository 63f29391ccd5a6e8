// The double's CUDA graphs: nodes with a type, their parameters and their
// dependencies, shared by stream capture (api_graph.cpp), the construction
// and query API (api_graph_build.cpp) and executables (api_graph_exec.cpp).
//
// A graph owns its nodes; a child-graph node and a conditional node own their
// graphs (the child is a deep copy, as CUDA makes one). Every graph and node
// the program may name is in State::graphs / State::graphNodes, so a stale
// handle gets CUDA_ERROR_INVALID_VALUE instead of a crash. An executable owns
// a private deep copy made at instantiation, not registered: later changes to
// the graph do not reach it, as in CUDA.
#pragma once

#include "state.h"

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

namespace kcap_double {

struct Graph;

struct GraphNode {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  Graph* graph = nullptr;             // the graph it is part of
  std::vector<GraphNode*> deps;       // its dependencies, in the order they were added
  const GraphNode* origin = nullptr;  // the node it was cloned from (cuGraphNodeFindInClone)
  bool enabled = true;                // executables only (cuGraphNodeSetEnabled)

  // Kernel: the handle as given (a CUfunction, or a CUkernel in `kern`), the
  // launch with the parameter bytes copied at add / set time.
  CUfunction func = nullptr;
  CUkernel kern = nullptr;
  CUcontext ctx = nullptr;
  CapturedLaunch launch;
  std::vector<void*> paramPointers;                 // what KernelNodeGetParams hands out
  std::map<int, CUkernelNodeAttrValue> attributes;  // cuGraphKernelNodeSetAttribute; unset ones read as zeros

  CUDA_MEMCPY3D copy{};
  CUDA_MEMSET_NODE_PARAMS memset{};
  CUDA_HOST_NODE_PARAMS host{};
  CUevent event = nullptr;

  // Child graph (one) or conditional bodies (`size`), owned by the node.
  std::vector<Graph*> bodies;
  std::vector<CUgraph> bodyHandles;  // the conditional's phGraph_out array
  CUgraphConditionalHandle condHandle = 0;
  CUgraphConditionalNodeType condType = CU_GRAPH_COND_TYPE_IF;

  // Allocation: the address is fixed when the node is made (as CUDA's is);
  // the memory becomes device memory when the node runs. Free: dptr.
  CUdeviceptr dptr = 0;
  std::size_t bytes = 0;
  CUmemPoolProps poolProps{};
  std::vector<CUmemAccessDesc> access;
};

struct Graph {
  std::vector<GraphNode*> nodes;  // in creation order; owned
  bool ownedByNode = false;       // a child graph or a conditional body
};

// An executable: the copy of its graph at instantiation, the node of that
// copy for every node handle that may address it (the instantiated graph's,
// later those of graphs passed to cuGraphExecUpdate), and the values of its
// conditional handles.
struct GraphExec {
  Graph* graph = nullptr;
  std::map<const GraphNode*, GraphNode*> nodeFor;
  std::map<CUgraphConditionalHandle, unsigned> conditions;
  cuuint64_t flags = 0;
};

// A conditional handle: made for a graph, with its default value.
struct ConditionalHandle {
  const Graph* graph = nullptr;
  unsigned defaultValue = 0;
  unsigned flags = 0;
};

// ---- shared by the graph files; all need the lock ------------------------------

Graph* findGraph(State& s, CUgraph graph);
GraphNode* findNode(State& s, CUgraphNode node);

// A new node at the end of `graph`, depending on `deps` (registered).
GraphNode* addNode(State& s, Graph& graph, CUgraphNodeType type, std::span<GraphNode* const> deps);

// A deep copy of `from`; `registered`: its graphs and nodes become handles.
// `mapping` (optional) receives original node -> copy, nested nodes included.
Graph* cloneGraph(State& s, const Graph& from, bool registered,
                  std::map<const GraphNode*, GraphNode*>* mapping = nullptr);

// Frees a graph, its nodes and the graphs they own, and forgets their handles.
void destroyGraph(State& s, Graph* graph);

// Parameters copied from another node of the same type (cuGraphExecUpdate).
void copyNodeParams(GraphNode& to, const GraphNode& from);

// cuGraphNodeSetParams: the parameters of a node of p.type that can change.
CUresult setParamsGeneric(State& s, GraphNode& node, CUgraphNodeParams& p);

// A kernel node's launch from its handle, shape and parameters.
CUresult kernelFromParams(State& s, GraphNode& node, CUfunction func, CUkernel kern, const LaunchShape& shape,
                          void** params, void** extra);

// A query or change of one node of the given type (any type: kAnyType).
// Takes the lock.
constexpr int kAnyType = -1;
CUresult withNode(CUgraphNode handle, int type, const std::function<CUresult(State&, GraphNode&)>& use);

// Whether every edge is an ordinary full dependency (the only kind the double has).
bool defaultEdges(const CUgraphEdgeData* data, std::size_t count);

// Stream capture: a node appended to the capture `stream` takes part in
// (after the stream's last work). false: the stream does not capture.
GraphNode* captureNode(State& s, CUstream stream, CUgraphNodeType type);
bool captureCopy(State& s, CUstream stream, const CUDA_MEMCPY3D& copy);
bool captureMemset(State& s, CUstream stream, const CUDA_MEMSET_NODE_PARAMS& memset);
// cuMemAllocAsync / cuMemFreeAsync in a capture: allocation and free nodes
// (`result`: the call's result when captured).
bool captureAllocation(State& s, CUstream stream, std::size_t bytes, CUdeviceptr& address, CUresult& result);
bool captureFree(State& s, CUstream stream, CUdeviceptr address, CUresult& result);
// Whether `stream` captures and [address, address + bytes) lies in an
// allocation node's memory, which exists only while its graph runs: captured
// work may name it.
bool capturedReservation(const State& s, CUstream stream, CUdeviceptr address, std::size_t bytes);

// Runs the memcpy / memset nodes' work (api_memory.cpp), outside the lock.
CUresult runCopy3d(const CUDA_MEMCPY3D& copy);
CUresult runMemset(const CUDA_MEMSET_NODE_PARAMS& memset);

// The conditional handles made so far. Needs the lock.
std::map<CUgraphConditionalHandle, ConditionalHandle>& conditionalHandles();

}  // namespace kcap_double
