// CUDA graphs: what an executable runs, read from the graph it was made
// from at the moment it was made (graphDefine), and each change made to one
// of its nodes afterwards (graphNodeUpdate).
//
// Why read at instantiation: an executable holds a copy of its graph taken
// then; the graph may change or be destroyed later, and there is no query of
// an executable's nodes. The driver's node queries (cuGraph*NodeGetParams)
// give every type's parameters but a conditional node's, which only the
// cuGraphAddNode that made it saw: the shim remembers those (recording or
// not). A node it cannot read is written `unreadable` and the definition
// incomplete, never guessed.
#include "record/recorder.h"

#include "record/driver_api.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace kcap {
namespace {

// Child graphs and conditional bodies nested deeper than this are not read
// (the driver allows far less in practice; this bounds the recursion).
constexpr unsigned kMaxGraphDepth = 16;

struct ConditionalNode {
  CUgraphConditionalHandle handle = 0;
  CUgraphConditionalNodeType type = CU_GRAPH_COND_TYPE_IF;
  std::vector<CUgraph> bodies;
};

struct ConditionalDefault {
  unsigned value = 0;
  bool assign = false;  // CU_GRAPH_COND_ASSIGN_DEFAULT
};

struct Conditionals {
  std::mutex mutex;
  std::unordered_map<CUgraphNode, ConditionalNode> nodes;
  std::unordered_map<CUgraphConditionalHandle, ConditionalDefault> handles;
};

// Never destroyed: threads may make graphs while the process exits.
Conditionals& conditionals() {
  static auto* known = new Conditionals;
  return *known;
}

// The attributes a kernel node can carry (CUlaunchAttributeID values valid
// for graph nodes); those set are recorded.
constexpr CUlaunchAttributeID kKernelNodeAttributes[] = {CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                                         CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
                                                         CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                                                         CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
                                                         CU_LAUNCH_ATTRIBUTE_PRIORITY,
                                                         CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
                                                         CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
                                                         CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION,
                                                         CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE};

bool allZero(const void* bytes, size_t size) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  for (size_t i = 0; i < size; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// A node's parameters through the driver's queries, in the generic form.
// `bodies` holds a conditional node's body graphs (params point into it).
// False, with `why`, when they cannot be read.
bool queryNode(CUgraphNode node, CUgraphNodeParams& params, std::vector<CUgraph>& bodies, std::string& why) {
  const DriverApi& api = driverApi();
  params = CUgraphNodeParams{};
  if (api.graphNodeGetType == nullptr || api.graphNodeGetType(node, &params.type) != CUDA_SUCCESS) {
    why = "cuGraphNodeGetType failed";
    return false;
  }
  const auto query = [&why](auto fn, const char* name, auto... args) {
    if (fn != nullptr && fn(args...) == CUDA_SUCCESS) return true;
    why = std::string(name) + (fn == nullptr ? " is missing from the driver" : " failed");
    return false;
  };
  switch (params.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      CUDA_KERNEL_NODE_PARAMS p{};
      if (!query(api.graphKernelNodeGetParams, "cuGraphKernelNodeGetParams", node, &p)) return false;
      params.kernel = kernelNodeParams(p);
      return true;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return query(api.graphMemcpyNodeGetParams, "cuGraphMemcpyNodeGetParams", node, &params.memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS p{};
      if (!query(api.graphMemsetNodeGetParams, "cuGraphMemsetNodeGetParams", node, &p)) return false;
      params.memset = {.dst = p.dst,
                       .pitch = p.pitch,
                       .value = p.value,
                       .elementSize = p.elementSize,
                       .width = p.width,
                       .height = p.height,
                       .ctx = nullptr};
      return true;
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
      CUDA_HOST_NODE_PARAMS p{};
      if (!query(api.graphHostNodeGetParams, "cuGraphHostNodeGetParams", node, &p)) return false;
      params.host.fn = p.fn;
      params.host.userData = p.userData;
      return true;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return query(api.graphChildGraphNodeGetGraph, "cuGraphChildGraphNodeGetGraph", node, &params.graph.graph);
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return true;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return query(api.graphEventWaitNodeGetEvent, "cuGraphEventWaitNodeGetEvent", node, &params.eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return query(api.graphEventRecordNodeGetEvent, "cuGraphEventRecordNodeGetEvent", node, &params.eventRecord.event);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      if (!query(api.graphMemAllocNodeGetParams, "cuGraphMemAllocNodeGetParams", node, &p)) return false;
      params.alloc.poolProps = p.poolProps;
      params.alloc.bytesize = p.bytesize;
      params.alloc.dptr = p.dptr;
      return true;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return query(api.graphMemFreeNodeGetParams, "cuGraphMemFreeNodeGetParams", node, &params.free.dptr);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
      Conditionals& known = conditionals();
      std::lock_guard lock(known.mutex);
      const auto it = known.nodes.find(node);
      if (it == known.nodes.end()) {
        why = "a conditional node not made by cuGraphAddNode in this process (a copy: cuGraphClone, a child graph)";
        return false;
      }
      bodies = it->second.bodies;
      params.conditional.handle = it->second.handle;
      params.conditional.type = it->second.type;
      params.conditional.size = static_cast<unsigned>(bodies.size());
      params.conditional.phGraph_out = bodies.data();
      return true;
    }
    default:
      why = "a node type kcap does not record";
      return false;
  }
}

void writeUnreadable(schema::GraphNode::Builder out, int type, const std::string& why) {
  auto unreadable = out.initUnreadable();
  unreadable.setType(type);
  unreadable.setWhy(why);
}

}  // namespace

CUDA_KERNEL_NODE_PARAMS_v3 kernelNodeParams(const CUDA_KERNEL_NODE_PARAMS_v2& p) {
  return {.func = p.func,
          .gridDimX = p.gridDimX,
          .gridDimY = p.gridDimY,
          .gridDimZ = p.gridDimZ,
          .blockDimX = p.blockDimX,
          .blockDimY = p.blockDimY,
          .blockDimZ = p.blockDimZ,
          .sharedMemBytes = p.sharedMemBytes,
          .kernelParams = p.kernelParams,
          .extra = p.extra,
          .kern = p.kern,
          .ctx = p.ctx};
}

void conditionalNodeAdded(CUgraphNode node, const CUDA_CONDITIONAL_NODE_PARAMS& params) {
  ConditionalNode entry{params.handle, params.type, {}};
  if (params.phGraph_out != nullptr) {
    entry.bodies.assign(params.phGraph_out, params.phGraph_out + params.size);
  }
  Conditionals& known = conditionals();
  std::lock_guard lock(known.mutex);
  known.nodes[node] = std::move(entry);
}

void conditionalHandleCreated(CUgraphConditionalHandle handle, unsigned defaultValue, unsigned flags) {
  Conditionals& known = conditionals();
  std::lock_guard lock(known.mutex);
  known.handles[handle] = {defaultValue, (flags & CU_GRAPH_COND_ASSIGN_DEFAULT) != 0};
}

void Recorder::graphDefined(const GraphDefineCall& call) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  EventMessage message(*this);
  auto define = message.event().initGraphDefine();
  define.setGraphExec(reinterpret_cast<uint64_t>(call.exec));
  define.setGraph(reinterpret_cast<uint64_t>(call.graph));
  define.setApi(call.api);
  define.setFlags(call.flags);
  const uint64_t context = currentContext();
  define.setContext(context);
  define.setDevice(deviceOf(context));
  define.setResult(call.result);
  if (call.result == CUDA_SUCCESS) {
    GraphWalk walk;
    writeGraphBody(call.graph, define.initBody(), 0, walk);
    define.setComplete(walk.complete);
    graphReach_.define(reinterpret_cast<uint64_t>(call.exec), std::move(walk.nodes),
                       call.api == schema::GraphDefineApi::EXEC_UPDATE);
  }
  append(message);
  if (call.result == CUDA_SUCCESS && (call.flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0) {
    // A kernel can launch it (cudaGraphLaunch on the device): no host call
    // says when, so those launches are not in the trace.
    noteOnce(notedDeviceLaunch_, schema::Message::Level::WARNING,
             "a graph was instantiated for device launch (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH): its launches "
             "from kernels are not seen, so not recorded; its launches from the host are");
  }
}

void Recorder::graphNodeUpdated(const GraphNodeUpdateCall& call) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  EventMessage message(*this);
  auto update = message.event().initGraphNodeUpdate();
  update.setGraphExec(reinterpret_cast<uint64_t>(call.exec));
  update.setNode(reinterpret_cast<uint64_t>(call.node));
  update.setApi(call.api);
  update.setResult(call.result);
  auto node = update.initParams();
  node.setHandle(reinterpret_cast<uint64_t>(call.node));
  if (call.api == schema::GraphUpdateApi::ENABLE) {
    node.setEnabled(call.enabled);
  } else if (call.result == CUDA_SUCCESS && call.params != nullptr) {
    GraphWalk walk;
    writeGraphNode(call.node, *call.params, node, 0, walk);
    // A new child graph's nodes all count as the node's reach.
    GraphNodeReach reach = walk.nodes.empty() ? GraphNodeReach{} : std::move(walk.nodes.front());
    for (size_t i = 1; i < walk.nodes.size(); ++i) {
      reach.addresses.insert(reach.addresses.end(), walk.nodes[i].addresses.begin(), walk.nodes[i].addresses.end());
    }
    graphReach_.update(reinterpret_cast<uint64_t>(call.exec), reinterpret_cast<uint64_t>(call.node), std::move(reach));
  }
  append(message);
}

void Recorder::writeGraphBody(CUgraph graph, schema::GraphBody::Builder body, unsigned depth, GraphWalk& walk) {
  const DriverApi& api = driverApi();
  size_t count = 0;
  if (api.graphGetNodes == nullptr || api.graphGetNodes(graph, nullptr, &count) != CUDA_SUCCESS) {
    walk.complete = false;
    return;
  }
  std::vector<CUgraphNode> nodes(count);
  if (count != 0 && api.graphGetNodes(graph, nodes.data(), &count) != CUDA_SUCCESS) {
    walk.complete = false;
    return;
  }
  nodes.resize(std::min(count, nodes.size()));
  auto list = body.initNodes(static_cast<unsigned>(nodes.size()));
  std::unordered_map<CUgraphNode, uint32_t> index;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    index.emplace(nodes[i], i);
    CUgraphNodeParams params{};
    std::vector<CUgraph> bodies;
    std::string why;
    if (queryNode(nodes[i], params, bodies, why)) {
      writeGraphNode(nodes[i], params, list[i], depth, walk);
    } else {
      list[i].setHandle(reinterpret_cast<uint64_t>(nodes[i]));
      walk.nodes.emplace_back().handle = reinterpret_cast<uint64_t>(nodes[i]);  // keeps positions paired
      // A failed type query leaves the type unknown (-1).
      const bool typed = why.rfind("cuGraphNodeGetType", 0) != 0;
      writeUnreadable(list[i], typed ? static_cast<int>(params.type) : -1, why);
      walk.complete = false;
    }
  }

  // Edges with their data where the driver has it (CUDA 12.3), else plain.
  size_t edgeCount = 0;
  std::vector<CUgraphNode> from;
  std::vector<CUgraphNode> to;
  std::vector<CUgraphEdgeData> data;
  bool listed = false;
  if (api.graphGetEdges != nullptr && api.graphGetEdges(graph, nullptr, nullptr, nullptr, &edgeCount) == CUDA_SUCCESS) {
    from.resize(edgeCount);
    to.resize(edgeCount);
    data.resize(edgeCount);
    listed =
        edgeCount == 0 || api.graphGetEdges(graph, from.data(), to.data(), data.data(), &edgeCount) == CUDA_SUCCESS;
  } else if (api.graphGetEdgesV1 != nullptr &&
             api.graphGetEdgesV1(graph, nullptr, nullptr, &edgeCount) == CUDA_SUCCESS) {
    from.resize(edgeCount);
    to.resize(edgeCount);
    data.assign(edgeCount, CUgraphEdgeData{});
    listed = edgeCount == 0 || api.graphGetEdgesV1(graph, from.data(), to.data(), &edgeCount) == CUDA_SUCCESS;
  }
  if (!listed) {
    walk.complete = false;
    return;
  }
  edgeCount = std::min(edgeCount, from.size());
  std::vector<uint32_t> kept;
  for (uint32_t e = 0; e < edgeCount; ++e) {
    if (index.contains(from[e]) && index.contains(to[e])) {
      kept.push_back(e);
    } else {
      walk.complete = false;  // an edge to a node the node list lacked
    }
  }
  auto edges = body.initEdges(static_cast<unsigned>(kept.size()));
  for (uint32_t i = 0; i < kept.size(); ++i) {
    const uint32_t e = kept[i];
    edges[i].setFrom(index[from[e]]);
    edges[i].setTo(index[to[e]]);
    edges[i].setFromPort(data[e].from_port);
    edges[i].setToPort(data[e].to_port);
    edges[i].setType(data[e].type);
  }
}

void Recorder::writeGraphNode(CUgraphNode node, const CUgraphNodeParams& params, schema::GraphNode::Builder out,
                              unsigned depth, GraphWalk& walk) {
  out.setHandle(reinterpret_cast<uint64_t>(node));
  walk.nodes.emplace_back().handle = reinterpret_cast<uint64_t>(node);
  const size_t at = walk.nodes.size() - 1;  // (nested nodes grow the list)
  const bool nested = params.type == CU_GRAPH_NODE_TYPE_GRAPH || params.type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
  if (nested && depth + 1 > kMaxGraphDepth) {
    writeUnreadable(out, params.type, "nested deeper than " + std::to_string(kMaxGraphDepth) + " graphs");
    walk.complete = false;
    return;
  }
  switch (params.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      writeKernelNode(node, params.kernel, out.initKernel(), walk.nodes[at]);
      return;
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
      const void* hostSource = nullptr;
      const CopyCall call = copyCallOf(params.memcpy.copyParams, hostSource);
      const schema::CopyDirection direction = copyDirection(call, hostSource);
      writeCopyShape(out.initMemcpy(), call, direction);
      GraphNodeReach& reach = walk.nodes[at];
      const bool toHost = direction == schema::CopyDirection::DEVICE_TO_HOST;
      const bool fromHost = direction == schema::CopyDirection::HOST_TO_DEVICE;
      if (direction == schema::CopyDirection::DEVICE_TO_DEVICE) {
        if (const auto slot = capturedCopies_.slotAt(call.dst); slot && call.size <= *slot) {
          // kcap's copy after a captured NCCL call: read back at each launch
          // (as many bytes as the call wrote: a shared slot may be larger).
          out.setWrittenReadBack(true);
          reach.readBackSlot = call.dst;
          reach.readBackSize = call.size;
          reach.addresses.push_back(call.src);
          return;
        }
      }
      if (!toHost && call.dst != 0) reach.addresses.push_back(call.dst);
      if (!fromHost && call.src != 0) reach.addresses.push_back(call.src);
      if (fromHost && hostSource != nullptr) {
        reach.hostSource = hostSource;
        reach.rows = hostRowsOf(call);
      }
      return;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      auto set = out.initMemset();
      set.setDst(params.memset.dst);
      set.setValue(params.memset.value);
      set.setElementSize(static_cast<uint8_t>(params.memset.elementSize));
      set.setCount(params.memset.width);
      set.setHeight(params.memset.height);
      set.setPitch(params.memset.height > 1 ? params.memset.pitch : 0);
      walk.nodes[at].addresses.push_back(params.memset.dst);
      return;
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
      auto host = out.initHost();
      host.setFunction(reinterpret_cast<uint64_t>(params.host.fn));
      host.setUserData(reinterpret_cast<uint64_t>(params.host.userData));
      return;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH:
      writeGraphBody(params.graph.graph, out.initChildGraph(), depth + 1, walk);
      return;
    case CU_GRAPH_NODE_TYPE_EMPTY:
      out.setEmpty();
      return;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      out.setEventWait(reinterpret_cast<uint64_t>(params.eventWait.event));
      return;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      out.setEventRecord(reinterpret_cast<uint64_t>(params.eventRecord.event));
      return;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      auto alloc = out.initMemAlloc();
      alloc.setAddress(params.alloc.dptr);
      alloc.setSize(params.alloc.bytesize);
      alloc.setDevice(params.alloc.poolProps.location.id);
      walk.nodes[at].allocates = params.alloc.dptr;
      walk.nodes[at].allocationSize = params.alloc.bytesize;
      walk.nodes[at].allocationDevice = params.alloc.poolProps.location.id;
      return;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      out.setMemFree(params.free.dptr);
      walk.nodes[at].frees = params.free.dptr;
      return;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
      const CUDA_CONDITIONAL_NODE_PARAMS& c = params.conditional;
      auto conditional = out.initConditional();
      conditional.setHandle(c.handle);
      conditional.setType(static_cast<uint8_t>(c.type));
      {
        Conditionals& known = conditionals();
        std::lock_guard lock(known.mutex);
        if (const auto it = known.handles.find(c.handle); it != known.handles.end()) {
          conditional.setDefaultValue(it->second.value);
          conditional.setSetDefault(it->second.assign);
        }
      }
      const unsigned count = c.phGraph_out != nullptr ? c.size : 0;
      auto bodies = conditional.initBodies(count);
      for (unsigned i = 0; i < count; ++i) {
        writeGraphBody(c.phGraph_out[i], bodies[i], depth + 1, walk);
      }
      return;
    }
    default:
      writeUnreadable(out, params.type, "a node type kcap does not record");
      walk.complete = false;
      return;
  }
}

void Recorder::writeKernelNode(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v3& p, schema::Launch::Builder launch,
                               GraphNodeReach& reach) {
  // A node made from a launch of a CUkernel (cudart's lazy loading) names
  // both the kernel and the function the driver resolved it to in the
  // node's context; the program launched, and the trace binds, the kernel.
  const auto function = p.kern != nullptr ? reinterpret_cast<CUfunction>(p.kern) : p.func;
  const LaunchTarget target = launchTarget(function);
  launch.setApi(schema::LaunchApi::GRAPH_KERNEL_NODE);
  launch.setFunction(reinterpret_cast<uint64_t>(function));
  launch.setKernelName(capnp::Text::Reader(target.kernelName.data(), target.kernelName.size()));
  launch.setGridX(p.gridDimX);
  launch.setGridY(p.gridDimY);
  launch.setGridZ(p.gridDimZ);
  launch.setBlockX(p.blockDimX);
  launch.setBlockY(p.blockDimY);
  launch.setBlockZ(p.blockDimZ);
  launch.setSharedMemBytes(p.sharedMemBytes);
  // The node's context when it names one, else the caller's (the one a
  // node made without a context runs in).
  const uint64_t current = currentContext();
  const uint64_t context = p.ctx != nullptr ? reinterpret_cast<uint64_t>(p.ctx) : current;
  launch.setContext(context);
  launch.setDevice(context == current ? deviceOf(current) : -1);

  ParamBuffer params;
  assembleParams(target.info.layout, p.kernelParams, p.extra, params);
  std::vector<ParamPointer> pointers;
  scanParams(params.bytes.data(), params.bytes.size(), params.layout(), allocations_, tensorMaps_, pointers);
  if (graphMemory_.size() != 0) {
    // Words into the graphs' own memory, which the map holds only while a launch left it allocated.
    std::vector<ParamPointer> intoGraphMemory;
    scanParams(params.bytes.data(), params.bytes.size(), params.layout(), graphMemory_, tensorMaps_, intoGraphMemory);
    for (const ParamPointer& word : intoGraphMemory) {
      if (std::none_of(pointers.begin(), pointers.end(),
                       [&](const ParamPointer& found) { return found.offset == word.offset; })) {
        pointers.push_back(word);
      }
    }
    std::sort(pointers.begin(), pointers.end(),
              [](const ParamPointer& a, const ParamPointer& b) { return a.offset < b.offset; });
  }
  writeLaunchParams(launch, params, pointers);
  reach.function = function;
  for (const ParamPointer& pointer : pointers) reach.addresses.push_back(pointer.value);

  const auto getAttribute = driverApi().graphKernelNodeGetAttribute;
  if (node == nullptr || getAttribute == nullptr) {
    return;
  }
  std::vector<std::pair<CUlaunchAttributeID, CUkernelNodeAttrValue>> set;
  for (const CUlaunchAttributeID id : kKernelNodeAttributes) {
    CUkernelNodeAttrValue value{};
    if (getAttribute(node, id, &value) == CUDA_SUCCESS && !allZero(&value, sizeof value)) {
      set.emplace_back(id, value);
    }
  }
  auto list = launch.initAttributes(static_cast<unsigned>(set.size()));
  for (unsigned i = 0; i < set.size(); ++i) {
    list[i].setId(static_cast<int32_t>(set[i].first));
    list[i].setValue(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(&set[i].second), sizeof set[i].second));
  }
}

}  // namespace kcap
