// A recorded graph made again on this GPU: a real CUgraph built node by node
// from what a graph launch runs (TraceModel::graphRun), instantiated.
//
// Recorded addresses are relocated through the replay's placed memory; the
// memory of the graph's own allocation nodes gets new addresses, and pointer
// words of later kernel nodes into it are rewritten; conditional handles are
// made anew and kernel parameter words holding a recorded one rewritten.
// What cannot be made again (an unreadable node, a copy from host memory
// whose bytes the trace lacks, a copy with a CUDA array) throws
// NotReplayable naming the node.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "driver.h"
#include "trace_model.h"
#include "trace_reader.h"

namespace kcap::replay {

// A graph the trace describes but replay cannot make again.
class NotReplayable : public ReplayError {
 public:
  using ReplayError::ReplayError;
};

// A kernel node as the rebuild adds it: the function loaded here, the
// parameter bytes with the pointer words into placed memory relocated.
struct KernelNodeCode {
  CUfunction function = nullptr;
  std::vector<uint8_t> params;
};

// What the rebuild needs from the replay around it.
struct GraphRebuildContext {
  Driver* driver = nullptr;
  CUcontext context = nullptr;
  int device = 0;  // the replay device, where allocation nodes take memory
  format::TraceReader* reader = nullptr;
  std::function<std::optional<uint64_t>(uint64_t)> translate;  // placed memory and module globals
  std::function<KernelNodeCode(const GraphNodeRun&)> kernel;   // loads the node's code, builds its parameters
};

// A kernel node of NCCL's: it waits for its peers, so the rebuild makes it
// an empty node, and the copy node kcap added after its call
// (GraphNode.writtenReadBack) writes what the call wrote. A graph with NCCL
// kernels and no such copy is not replayable.
bool isNcclKernelNode(const GraphNodeRun& node);

// "11 nodes: 4 kernels, 1 memcpy, 1 memset, ..." over every depth.
std::string graphNodeSummary(const GraphBodyRun& root);
uint64_t graphNodeCount(const GraphBodyRun& root);

class RebuiltGraph {
 public:
  // Builds and instantiates the graph `run` describes, with the host-source
  // copies' bytes from its launch's hostCopies. Throws NotReplayable,
  // ReplayError, CudaError. With `build` false it only checks that the graph
  // can be made, for a replay node by node through copyOf, memsetOf,
  // kernelOf and addAllocation.
  RebuiltGraph(const GraphRebuildContext& context, const GraphRun& run, bool build = true);
  ~RebuiltGraph();
  RebuiltGraph(const RebuiltGraph&) = delete;
  RebuiltGraph& operator=(const RebuiltGraph&) = delete;

  CUgraphExec exec() const { return exec_; }
  // What differs from the recording by design: host nodes not called, NCCL
  // kernels not run.
  const std::vector<std::string>& notes() const { return notes_; }
  uint64_t ncclKernelsSkipped() const { return ncclKernelsSkipped_; }

  // The replay address of a recorded one: the graph's own allocations first,
  // then the replay's placed memory.
  std::optional<uint64_t> translate(uint64_t recorded) const;
  // A recorded copy or memset of one node with its addresses relocated
  // (graph_rebuild_params.cpp); for the node-by-node replay too.
  CUDA_MEMCPY3D copyOf(const GraphNodeRun& node);
  CUDA_MEMSET_NODE_PARAMS memsetOf(const GraphNodeRun& node) const;
  // A kernel node's parameter bytes with every recorded address and
  // conditional handle rewritten.
  KernelNodeCode kernelOf(const GraphNodeRun& node) const;
  // Memory made here for a recorded allocation node (node by node: cuMemAlloc).
  void addAllocation(uint64_t recorded, uint64_t size, uint64_t replay) { allocations_[recorded] = {size, replay}; }
  std::optional<uint64_t> allocationAt(uint64_t recorded) const;

 private:
  void release();
  void buildBody(const GraphBodyRun& body, CUgraph graph, unsigned depth);
  CUgraphNode addNode(const GraphNodeRun& node, CUgraph graph, const std::vector<CUgraphNode>& deps, unsigned depth);
  uint8_t* pinned(uint64_t size);
  std::optional<schema::GraphHostCopy::Reader> launchBytesOf(const GraphNodeRun& node) const;
  CUDA_MEMCPY3D writtenCopyOf(const GraphNodeRun& node);
  void applyAttributes(const GraphNodeRun& node, CUgraphNode made);
  std::optional<uint64_t> translateExtent(uint64_t recorded, uint64_t extent) const;

  const GraphRebuildContext& context_;
  const GraphRun& run_;
  Driver& driver_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  std::map<uint64_t, CUevent> events_;                             // recorded CUevent -> made here
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> allocations_;  // recorded address -> (size, replay address)
  // Recorded addresses of allocation nodes made empty: the replay placed their memory.
  std::set<uint64_t> placedByReplay_;
  std::map<uint64_t, uint64_t> conditionals_;  // recorded handle -> made here
  std::vector<void*> pinned_;                  // host-side copy buffers
  std::vector<std::pair<const GraphNodeRun*, CUgraphNode>> disabled_;
  std::vector<std::string> notes_;
  uint64_t ncclKernelsSkipped_ = 0;
};

}  // namespace kcap::replay
