// The graph's structure made again: bodies node by node in an order that
// respects their edges (an allocation node before the nodes that use its
// memory), nested bodies built into their own graphs, then instantiated. The
// parameters of copies, memsets and kernel nodes: graph_rebuild_params.cpp.
#include "graph_rebuild.h"

#include "job_environment.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace kcap::replay {
namespace {

void countNodes(const GraphBodyRun& body, std::map<std::string, uint64_t>& counts, uint64_t& total) {
  for (const GraphNodeRun& node : body.nodes) {
    ++total;
    const char* kind = "unreadable";
    switch (node.params.which()) {
      case schema::GraphNode::KERNEL:
        kind = "kernel";
        break;
      case schema::GraphNode::MEMCPY:
        kind = "memcpy";
        break;
      case schema::GraphNode::MEMSET:
        kind = "memset";
        break;
      case schema::GraphNode::HOST:
        kind = "host";
        break;
      case schema::GraphNode::CHILD_GRAPH:
        kind = "child graph";
        break;
      case schema::GraphNode::EMPTY:
        kind = "empty";
        break;
      case schema::GraphNode::EVENT_RECORD:
        kind = "event record";
        break;
      case schema::GraphNode::EVENT_WAIT:
        kind = "event wait";
        break;
      case schema::GraphNode::MEM_ALLOC:
        kind = "memAlloc";
        break;
      case schema::GraphNode::MEM_FREE:
        kind = "memFree";
        break;
      case schema::GraphNode::CONDITIONAL:
        kind = "conditional";
        break;
      default:
        break;
    }
    ++counts[kind];
    for (const GraphBodyRun& nested : node.bodies) countNodes(nested, counts, total);
  }
}

// The first unreadable node at any depth, or null.
const GraphNodeRun* firstUnreadable(const GraphBodyRun& body) {
  for (const GraphNodeRun& node : body.nodes) {
    if (node.params.isUnreadable()) return &node;
    for (const GraphBodyRun& nested : node.bodies) {
      if (const GraphNodeRun* found = firstUnreadable(nested)) return found;
    }
  }
  return nullptr;
}

// The first NCCL kernel node at any depth, and how many copy nodes kcap
// added after NCCL calls (GraphNode.writtenReadBack) there are.
void findCollectives(const GraphBodyRun& body, const GraphNodeRun*& firstNccl, uint64_t& readBacks) {
  for (const GraphNodeRun& node : body.nodes) {
    if (firstNccl == nullptr && isNcclKernelNode(node)) firstNccl = &node;
    if (node.params.getWrittenReadBack()) ++readBacks;
    for (const GraphBodyRun& nested : node.bodies) findCollectives(nested, firstNccl, readBacks);
  }
}

std::string plural(uint64_t n, const std::string& word) {
  if (n == 1) return "1 " + word;
  if (word == "child graph") return std::to_string(n) + " child graphs";
  return std::to_string(n) + " " + word + (word.back() == 's' ? "" : "s");
}

// A nested body's graph, destroyed once the node that copies it is added.
struct OwnedGraph {
  Driver& driver;
  CUgraph graph = nullptr;
  ~OwnedGraph() {
    if (graph != nullptr) driver.cuGraphDestroy(graph);
  }
};

}  // namespace

bool isNcclKernelNode(const GraphNodeRun& node) {
  return node.params.isKernel() && format::isNcclKernel(node.params.getKernel().getKernelName().cStr());
}

uint64_t graphNodeCount(const GraphBodyRun& root) {
  std::map<std::string, uint64_t> counts;
  uint64_t total = 0;
  countNodes(root, counts, total);
  return total;
}

std::string graphNodeSummary(const GraphBodyRun& root) {
  std::map<std::string, uint64_t> counts;
  uint64_t total = 0;
  countNodes(root, counts, total);
  std::string text = plural(total, "node");
  bool first = true;
  // Kernels first: what a reader looks for.
  const auto add = [&](const std::string& kind, uint64_t n) {
    text += (first ? ": " : ", ") + plural(n, kind);
    first = false;
  };
  if (const auto it = counts.find("kernel"); it != counts.end()) add("kernel", it->second);
  for (const auto& [kind, n] : counts) {
    if (kind != "kernel") add(kind, n);
  }
  return text;
}

RebuiltGraph::RebuiltGraph(const GraphRebuildContext& context, const GraphRun& run, bool build)
    : context_(context), run_(run), driver_(*context.driver) {
  const Driver& d = driver_;
  if (d.cuGraphCreate == nullptr || d.cuGraphInstantiate == nullptr || d.cuGraphLaunch == nullptr ||
      d.cuGraphAddKernelNode == nullptr || d.cuGraphAddEmptyNode == nullptr || d.cuGraphExecDestroy == nullptr ||
      d.cuGraphDestroy == nullptr) {
    throw ReplayError("this driver (" + d.libraryPath + ") lacks the CUDA graph API");
  }
  if (const GraphNodeRun* node = firstUnreadable(run.root)) {
    const auto u = node->params.getUnreadable();
    throw NotReplayable(node->path + " was not recorded (node type " + std::to_string(u.getType()) + ": " +
                        std::string(u.getWhy().cStr()) + ")");
  }
  if (!run.define->get().getGraphDefine().getComplete() && run.updates == 0) {
    throw NotReplayable("graphDefine #" + std::to_string(run.define->seq()) +
                        " is incomplete: a node or an edge could not be read when it was recorded");
  }
  const GraphNodeRun* nccl = nullptr;
  uint64_t readBacks = 0;
  findCollectives(run.root, nccl, readBacks);
  if (nccl != nullptr && readBacks == 0) {
    throw NotReplayable(nccl->path + " is an NCCL kernel (" +
                        std::string(nccl->params.getKernel().getKernelName().cStr()) +
                        "), which waits for its peers, and the graph holds no copy of what its call wrote (kcap "
                        "adds one in checkpoint mode; the NCCL call's dataMissing says why it could not)");
  }
  if (!build) return;
  try {
    check(driver_.cuGraphCreate(&graph_, 0), "cuGraphCreate");
    buildBody(run.root, graph_, 0);
    // Flags that change what a launch does; the others (upload, device
    // launch) concern how the program used the executable.
    const uint64_t flags =
        run.define->get().getGraphDefine().getFlags() &
        (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    check(driver_.cuGraphInstantiate(&exec_, graph_, flags), "cuGraphInstantiate");
    for (const auto& [node, made] : disabled_) {
      if (driver_.cuGraphNodeSetEnabled == nullptr) throw ReplayError("this driver lacks cuGraphNodeSetEnabled");
      check(driver_.cuGraphNodeSetEnabled(exec_, made, 0), "disabling " + node->path + " (cuGraphNodeSetEnabled)");
    }
  } catch (...) {
    release();
    throw;
  }
}

RebuiltGraph::~RebuiltGraph() { release(); }

void RebuiltGraph::release() {
  if (exec_ != nullptr) driver_.cuGraphExecDestroy(exec_);
  exec_ = nullptr;
  if (graph_ != nullptr) driver_.cuGraphDestroy(graph_);
  graph_ = nullptr;
  for (const auto& [recorded, event] : events_) driver_.cuEventDestroy(event);
  events_.clear();
  for (void* buffer : pinned_) driver_.cuMemFreeHost(buffer);
  pinned_.clear();
}

std::optional<uint64_t> RebuiltGraph::allocationAt(uint64_t recorded) const {
  const auto it = allocations_.find(recorded);
  if (it == allocations_.end()) return std::nullopt;
  return it->second.second;
}

// The kernel node attributes the recording found set (cluster shape,
// cooperative, priority, memory synchronization domain): a cluster kernel
// rebuilt without its cluster shape would compute something else. Two are
// left out, each with a note: the access policy window, a cache hint that
// names recorded addresses, and device updatability, which asks for a graph
// instantiated for device launch.
void RebuiltGraph::applyAttributes(const GraphNodeRun& node, CUgraphNode made) {
  for (const auto recorded : node.params.getKernel().getAttributes()) {
    const int32_t id = recorded.getId();
    if (id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW || id == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) {
      notes_.push_back(
          node.path + ": kernel node attribute " + std::to_string(id) +
          (id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW ? " (access policy window)" : " (device updatable)") +
          " not applied");
      continue;
    }
    if (driver_.cuGraphKernelNodeSetAttribute == nullptr) {
      throw ReplayError(node.path + " has kernel node attributes, and this driver lacks cuGraphKernelNodeSetAttribute");
    }
    CUkernelNodeAttrValue value{};
    std::memcpy(&value, recorded.getValue().begin(), std::min(sizeof value, recorded.getValue().size()));
    check(driver_.cuGraphKernelNodeSetAttribute(made, static_cast<CUkernelNodeAttrID>(id), &value),
          "cuGraphKernelNodeSetAttribute(" + std::to_string(id) + ") for " + node.path);
  }
}

uint8_t* RebuiltGraph::pinned(uint64_t size) {
  void* p = nullptr;
  check(driver_.cuMemAllocHost(&p, std::max<uint64_t>(size, 1)),
        "cuMemAllocHost of " + std::to_string(size) + " bytes for a graph copy");
  pinned_.push_back(p);
  return static_cast<uint8_t*>(p);
}

void RebuiltGraph::buildBody(const GraphBodyRun& body, CUgraph graph, unsigned depth) {
  // The conditional handles of this body's conditional nodes, before any
  // kernel that sets one is added.
  for (const GraphNodeRun& node : body.nodes) {
    if (!node.params.isConditional()) continue;
    const auto c = node.params.getConditional();
    if (conditionals_.count(c.getHandle()) != 0) continue;
    if (driver_.cuGraphConditionalHandleCreate == nullptr || driver_.cuGraphAddNode == nullptr) {
      throw ReplayError("this driver lacks conditional nodes (cuGraphConditionalHandleCreate)");
    }
    CUgraphConditionalHandle handle = 0;
    check(driver_.cuGraphConditionalHandleCreate(&handle, graph, context_.context, c.getDefaultValue(),
                                                 c.getSetDefault() ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0),
          "cuGraphConditionalHandleCreate for " + node.path);
    conditionals_[c.getHandle()] = handle;
  }
  const std::string where = depth == 0 ? "the graph" : body.nodes.empty() ? "a nested graph" : body.nodes[0].path;
  const std::vector<size_t> order = topologicalOrder(body, where);
  std::vector<std::vector<CUgraphNode>> deps(body.nodes.size());
  std::vector<CUgraphNode> made(body.nodes.size(), nullptr);
  std::vector<schema::GraphEdge::Reader> special;  // edges with ports or a type: added afterwards
  for (const auto edge : body.edges) {
    if (edge.getFromPort() == 0 && edge.getToPort() == 0 && edge.getType() == 0) continue;
    special.push_back(edge);
  }
  for (const size_t i : order) {
    std::vector<CUgraphNode> from;
    for (const auto edge : body.edges) {
      if (edge.getTo() == i && edge.getFromPort() == 0 && edge.getToPort() == 0 && edge.getType() == 0) {
        from.push_back(made[edge.getFrom()]);
      }
    }
    made[i] = addNode(body.nodes[i], graph, from, depth);
  }
  for (const auto edge : special) {
    if (driver_.cuGraphAddDependencies == nullptr) throw ReplayError("this driver lacks cuGraphAddDependencies");
    CUgraphEdgeData data{};
    data.from_port = edge.getFromPort();
    data.to_port = edge.getToPort();
    data.type = edge.getType();
    const CUgraphNode from = made[edge.getFrom()], to = made[edge.getTo()];
    check(driver_.cuGraphAddDependencies(graph, &from, &to, &data, 1),
          "the edge from " + body.nodes[edge.getFrom()].path + " to " + body.nodes[edge.getTo()].path +
              " (cuGraphAddDependencies)");
  }
}

CUgraphNode RebuiltGraph::addNode(const GraphNodeRun& node, CUgraph graph, const std::vector<CUgraphNode>& deps,
                                  unsigned depth) {
  CUgraphNode made = nullptr;
  const CUgraphNode* dep = deps.empty() ? nullptr : deps.data();
  const size_t count = deps.size();
  const auto need = [&](const void* function, const char* name) {
    if (function == nullptr) throw ReplayError(std::string("this driver lacks ") + name + " (" + node.path + ")");
  };
  const auto empty = [&] {
    check(driver_.cuGraphAddEmptyNode(&made, graph, dep, count), "cuGraphAddEmptyNode for " + node.path);
    return made;
  };
  // A disabled node does nothing: nested, where cuGraphNodeSetEnabled does
  // not reach, it is an empty node.
  if (!node.enabled && depth > 0) return empty();
  const auto p = node.params;
  switch (p.which()) {
    case schema::GraphNode::KERNEL: {
      if (isNcclKernelNode(node)) {
        // It waits for peers replay does not run; the copy kcap added after
        // its call writes what the call wrote.
        notes_.push_back(node.path + ": an NCCL kernel, not run (an empty node here)");
        ++ncclKernelsSkipped_;
        return empty();
      }
      KernelNodeCode code = kernelOf(node);
      const auto e = p.getKernel();
      std::vector<void*> arguments;
      for (const auto info : e.getParamLayout()) {
        if (uint64_t{info.getOffset()} + info.getSize() > code.params.size()) {
          throw ReplayError(node.path + ": the recorded parameter layout does not fit the recorded parameter bytes");
        }
        arguments.push_back(code.params.data() + info.getOffset());
      }
      size_t paramSize = code.params.size();
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, code.params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &paramSize,
                       CU_LAUNCH_PARAM_END};
      const bool useExtra = arguments.empty() && !code.params.empty();
      CUDA_KERNEL_NODE_PARAMS k{};
      k.func = code.function;
      k.gridDimX = e.getGridX(), k.gridDimY = e.getGridY(), k.gridDimZ = e.getGridZ();
      k.blockDimX = e.getBlockX(), k.blockDimY = e.getBlockY(), k.blockDimZ = e.getBlockZ();
      k.sharedMemBytes = e.getSharedMemBytes();
      k.kernelParams = useExtra ? nullptr : arguments.data();
      k.extra = useExtra ? extra : nullptr;
      k.ctx = context_.context;
      check(driver_.cuGraphAddKernelNode(&made, graph, dep, count, &k), "cuGraphAddKernelNode for " + node.path);
      applyAttributes(node, made);
      break;
    }
    case schema::GraphNode::MEMCPY: {
      need(reinterpret_cast<const void*>(driver_.cuGraphAddMemcpyNode), "cuGraphAddMemcpyNode");
      const CUDA_MEMCPY3D copy = copyOf(node);
      check(driver_.cuGraphAddMemcpyNode(&made, graph, dep, count, &copy, context_.context),
            "cuGraphAddMemcpyNode for " + node.path);
      break;
    }
    case schema::GraphNode::MEMSET: {
      need(reinterpret_cast<const void*>(driver_.cuGraphAddMemsetNode), "cuGraphAddMemsetNode");
      const CUDA_MEMSET_NODE_PARAMS set = memsetOf(node);
      check(driver_.cuGraphAddMemsetNode(&made, graph, dep, count, &set, context_.context),
            "cuGraphAddMemsetNode for " + node.path);
      break;
    }
    case schema::GraphNode::HOST:
      notes_.push_back(node.path + ": a host function, not called (an empty node here)");
      return empty();
    case schema::GraphNode::EMPTY:
      return empty();
    case schema::GraphNode::CHILD_GRAPH: {
      need(reinterpret_cast<const void*>(driver_.cuGraphAddChildGraphNode), "cuGraphAddChildGraphNode");
      OwnedGraph child{driver_};
      check(driver_.cuGraphCreate(&child.graph, 0), "cuGraphCreate");
      buildBody(node.bodies.at(0), child.graph, depth + 1);
      check(driver_.cuGraphAddChildGraphNode(&made, graph, dep, count, child.graph),
            "cuGraphAddChildGraphNode for " + node.path);
      break;
    }
    case schema::GraphNode::EVENT_RECORD:
    case schema::GraphNode::EVENT_WAIT: {
      const bool record = p.isEventRecord();
      const uint64_t recorded = record ? p.getEventRecord() : p.getEventWait();
      CUevent& event = events_[recorded];
      if (event == nullptr) check(driver_.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      if (record) {
        need(reinterpret_cast<const void*>(driver_.cuGraphAddEventRecordNode), "cuGraphAddEventRecordNode");
        check(driver_.cuGraphAddEventRecordNode(&made, graph, dep, count, event),
              "cuGraphAddEventRecordNode for " + node.path);
      } else {
        need(reinterpret_cast<const void*>(driver_.cuGraphAddEventWaitNode), "cuGraphAddEventWaitNode");
        check(driver_.cuGraphAddEventWaitNode(&made, graph, dep, count, event),
              "cuGraphAddEventWaitNode for " + node.path);
      }
      break;
    }
    case schema::GraphNode::MEM_ALLOC: {
      const auto a = p.getMemAlloc();
      uint64_t end = 0;
      if (a.getSize() == 0 || __builtin_add_overflow(a.getAddress(), a.getSize(), &end)) {
        throw ReplayError(node.path + ": an allocation of " + std::to_string(a.getSize()) + " bytes at " +
                          std::to_string(a.getAddress()) + " (a damaged trace?)");
      }
      // Re-execution places the graph's memory at its recorded addresses
      // (the trace's captured allocations) for the whole replay: eager work
      // between launches reads and frees what a launch left there, at
      // those addresses. The node then allocates nothing.
      if (const auto placed = context_.translate(a.getAddress());
          placed && context_.translate(end - 1) == *placed + (a.getSize() - 1)) {
        allocations_[a.getAddress()] = {a.getSize(), *placed};
        placedByReplay_.insert(a.getAddress());
        return empty();
      }
      need(reinterpret_cast<const void*>(driver_.cuGraphAddMemAllocNode), "cuGraphAddMemAllocNode");
      CUDA_MEM_ALLOC_NODE_PARAMS params{};
      params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      params.poolProps.location.id = context_.device;
      params.bytesize = a.getSize();
      check(driver_.cuGraphAddMemAllocNode(&made, graph, dep, count, &params),
            "cuGraphAddMemAllocNode for " + node.path);
      allocations_[a.getAddress()] = {a.getSize(), params.dptr};
      break;
    }
    case schema::GraphNode::MEM_FREE: {
      // Placed memory stays for the whole replay (an allocation node above,
      // or memory allocated outside the graph).
      if (placedByReplay_.count(p.getMemFree()) != 0 ||
          (allocations_.count(p.getMemFree()) == 0 && context_.translate(p.getMemFree()))) {
        return empty();
      }
      need(reinterpret_cast<const void*>(driver_.cuGraphAddMemFreeNode), "cuGraphAddMemFreeNode");
      const auto address = allocationAt(p.getMemFree());
      if (!address) {
        throw NotReplayable(node.path + " frees " + std::to_string(p.getMemFree()) +
                            ", which no allocation node of this graph made");
      }
      check(driver_.cuGraphAddMemFreeNode(&made, graph, dep, count, *address),
            "cuGraphAddMemFreeNode for " + node.path);
      break;
    }
    case schema::GraphNode::CONDITIONAL: {
      const auto c = p.getConditional();
      CUgraphNodeParams params{};
      params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
      params.conditional.handle = conditionals_.at(c.getHandle());
      params.conditional.type = static_cast<CUgraphConditionalNodeType>(c.getType());
      params.conditional.size = static_cast<unsigned>(node.bodies.size());
      params.conditional.ctx = context_.context;
      check(driver_.cuGraphAddNode(&made, graph, dep, nullptr, count, &params), "cuGraphAddNode for " + node.path);
      for (size_t b = 0; b < node.bodies.size(); ++b) {
        buildBody(node.bodies[b], params.conditional.phGraph_out[b], depth + 1);
      }
      break;
    }
    default:
      throw NotReplayable(node.path + ": a node kind this replay does not know (a newer trace?)");
  }
  if (!node.enabled) disabled_.emplace_back(&node, made);
  return made;
}

}  // namespace kcap::replay
