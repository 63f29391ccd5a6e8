// The Replayer's graph launches: the memory the graph's nodes could reach
// placed and restored from GraphLaunch.pre, the code of every kernel node
// loaded as a launch's is, the graph made again (graph_rebuild.h) and
// launched, or (--graph-nodes) its nodes run one by one in an order that
// respects its edges; then every range of GraphLaunchEnd.post compared.
#include <cstdio>
#include <cstring>
#include <set>

#include "driver.h"
#include "hex_text.h"
#include "piece_hashes.h"
#include "graph_rebuild.h"
#include "replayer.h"

namespace kcap::replay {
namespace {

void appendDetail(LaunchOutcome& o, const std::string& text) { o.detail += (o.detail.empty() ? "" : "; ") + text; }

// Every kernel node at any depth, in the tree's order.
void eachKernelNode(const GraphBodyRun& body, const std::function<void(const GraphNodeRun&)>& use) {
  for (const GraphNodeRun& node : body.nodes) {
    if (node.params.isKernel()) use(node);
    for (const GraphBodyRun& nested : node.bodies) eachKernelNode(nested, use);
  }
}

// The conditional handles of the graph that some kernel node's parameters
// hold (an 8-byte slot equal to the handle): conditions set on the GPU.
std::set<uint64_t> conditionalsSet(const GraphBodyRun& root) {
  std::set<uint64_t> handles;
  const std::function<void(const GraphBodyRun&)> collect = [&](const GraphBodyRun& body) {
    for (const GraphNodeRun& node : body.nodes) {
      if (node.params.isConditional()) handles.insert(node.params.getConditional().getHandle());
      for (const GraphBodyRun& nested : node.bodies) collect(nested);
    }
  };
  collect(root);
  std::set<uint64_t> set;
  eachKernelNode(root, [&](const GraphNodeRun& node) {
    const auto params = node.params.getKernel().getParams();
    for (size_t offset = 0; offset + 8 <= params.size(); offset += 8) {
      uint64_t value = 0;
      std::memcpy(&value, params.begin() + offset, sizeof value);
      if (handles.count(value) != 0) set.insert(value);
    }
  });
  return set;
}

// "axpy", "memset", ...: what a node is, in its line of --graph-nodes.
std::string nodeName(const GraphNodeRun& node) {
  switch (node.params.which()) {
    case schema::GraphNode::KERNEL:
      return node.params.getKernel().getKernelName();
    case schema::GraphNode::MEMCPY:
      return "memcpy";
    case schema::GraphNode::MEMSET:
      return "memset";
    case schema::GraphNode::HOST:
      return "host function";
    case schema::GraphNode::CHILD_GRAPH:
      return "child graph";
    case schema::GraphNode::EMPTY:
      return "empty";
    case schema::GraphNode::EVENT_RECORD:
      return "event record";
    case schema::GraphNode::EVENT_WAIT:
      return "event wait";
    case schema::GraphNode::MEM_ALLOC:
      return "memAlloc";
    case schema::GraphNode::MEM_FREE:
      return "memFree";
    case schema::GraphNode::CONDITIONAL:
      return "conditional";
    default:
      return "unreadable";
  }
}

}  // namespace

LaunchOutcome Replayer::replayGraphLaunch(const GraphLaunchRecord& g, ReplayListener& listener) {
  LaunchOutcome o;
  o.graph = true;
  o.launchIndex = g.graphLaunchIndex;
  o.kernel = "exec " + hexText(g.event().getGraphExec());
  bool launched = false;
  try {
    const auto mode = model_.traceBegin() != nullptr ? model_.traceBegin()->get().getTraceBegin().getCaptureMode()
                                                     : schema::CaptureMode::FULL;
    if (mode != schema::CaptureMode::FULL) {
      throw ReplayError(
          "the trace was not recorded in full mode: a graph launch's memory is recorded in full mode only");
    }
    const GraphRun run = model_.graphRun(g);
    o.kernel += ", " + graphNodeSummary(run.root);
    if (const auto why = g.event().getNoSnapshotReason(); why.size() != 0) {
      throw NotReplayable(std::string("recorded without its memory: ") + why.cStr());
    }

    // Memory first, then the code: a module's own memory must not take a
    // recorded address first.
    const auto placeStart = std::chrono::steady_clock::now();
    std::vector<Region> regions;
    const auto addRegions = [&](capnp::List<schema::MemoryRange>::Reader ranges) {
      for (const auto range : ranges) {
        if (range.getKind() != schema::MemoryKind::MODULE_GLOBAL) {
          regions.push_back({range.getAddress(), range.getContent().getSize()});
        }
      }
    };
    addRegions(g.event().getPre());
    if (g.end != nullptr) addRegions(g.end->get().getGraphLaunchEnd().getPost());
    memory_->release();
    memory_->place(regions);

    std::map<const GraphNodeRun*, LoadedKernel> kernels;
    LoadedKernel globals;  // every kernel node's module globals
    std::set<std::string> codes;
    eachKernelNode(run.root, [&](const GraphNodeRun& node) {
      if (isNcclKernelNode(node)) return;  // not run: the rebuild refuses it
      const LoadedKernel& kernel = kernels[&node] =
          code_->kernelFor(model_.codeFor(graphNodeLaunch(node, o.launchIndex)));
      codes.insert(kernel.code);
      for (const GlobalPlacement& global : kernel.globals) {
        bool known = false;
        for (const GlobalPlacement& have : globals.globals)
          known = known || have.recordedAddress == global.recordedAddress;
        if (!known) globals.globals.push_back(global);
      }
    });
    for (const std::string& code : codes) o.code += (o.code.empty() ? "" : ", ") + code;
    allocateRestoreBuffers(g.event().getPre());
    o.placeNs = nsSince(placeStart);

    const auto restoreStart = std::chrono::steady_clock::now();
    RestoreStats stats;
    restoreRanges(g.event().getPre(), globals, stats);
    o.restoreNs = nsSince(restoreStart);
    o.restoredBytes = stats.bytes;
    o.uploadedBytes = stats.uploadedBytes;
    o.restoreWaitNs = stats.waitNs;
    o.memory = memory_->path();

    GraphRebuildContext context;
    context.driver = &driver_;
    context.context = context_;
    context.device = options_.device;
    context.reader = &reader_;
    context.translate = [&](uint64_t recorded) { return translate(recorded, globals); };
    context.kernel = [&](const GraphNodeRun& node) {
      const LoadedKernel& kernel = kernels.at(&node);
      return KernelNodeCode{kernel.function, buildParams(graphNodeLaunch(node, o.launchIndex), kernel).bytes};
    };
    RebuiltGraph graph(context, run, !options_.graphNodes);
    for (const std::string& note : graph.notes()) appendDetail(o, note);

    listener.launchStarting(o);
    launched = true;
    if (options_.graphNodes) {
      GraphNodesRun nodes{graph, g, kernels, globals, conditionalsSet(run.root)};
      runGraphNodes(run.root, nodes, o);
    } else {
      check(driver_.cuGraphLaunch(graph.exec(), stream_), "cuGraphLaunch");
      check(driver_.cuStreamSynchronize(stream_), "the graph launch");
    }
    listener.launchDone(o.launchIndex);
    if (!options_.saveOutputsDir.empty()) saveGraphOutputs(g, globals);
    if (g.end != nullptr && g.end->get().getGraphLaunchEnd().getResult() != 0) {
      o.verdict = Verdict::kDiffers;
      o.detail = "the recorded graph launch was refused with CUresult " +
                 std::to_string(g.end->get().getGraphLaunchEnd().getResult()) + "; here it ran";
      return o;
    }
    compareGraph(g, run, globals, o);
  } catch (const NotReplayable& error) {
    o.verdict = Verdict::kError;
    o.detail = std::string("NOT REPLAYABLE: ") + error.what();
  } catch (const CudaError& error) {
    o.verdict = launched ? Verdict::kFault : Verdict::kError;
    const std::string before = o.detail;
    o.detail = error.what() + (before.empty() ? "" : "; " + before);
    if (launched && g.end != nullptr &&
        g.end->get().getGraphLaunchEnd().getResult() == static_cast<int32_t>(error.result())) {
      o.verdict = Verdict::kReproduced;
      o.detail = std::string("refused as recorded: ") + error.what();
    }
    if (error.sticky()) {
      listener.outcome(o);
      throw ContextLost{};
    }
  } catch (const std::exception& error) {
    o.verdict = Verdict::kError;
    o.detail = error.what() + (o.detail.empty() ? "" : "; " + o.detail);
  }
  return o;
}

// --graph-nodes: each node alone, in an order that respects the edges, the
// stream drained after each, a line for each. A fault names its node.
void Replayer::runGraphNodes(const GraphBodyRun& body, GraphNodesRun& run, LaunchOutcome& o) {
  RebuiltGraph& graph = run.graph;
  const std::string where = body.nodes.empty() ? "the graph" : body.nodes[0].path;
  for (const size_t i : topologicalOrder(body, where)) {
    const GraphNodeRun& node = body.nodes[i];
    const std::string line = node.path + " (" + nodeName(node) + ")";
    if (!node.enabled) {
      o.nodeLines.push_back(line + ": disabled, not run");
      continue;
    }
    try {
      const auto p = node.params;
      std::string what = "ran";
      switch (p.which()) {
        case schema::GraphNode::KERNEL: {
          KernelNodeCode code = graph.kernelOf(node);
          launchOnce(graphNodeLaunch(node, run.launch.graphLaunchIndex), run.kernels.at(&node), code.params);
          break;
        }
        case schema::GraphNode::MEMCPY: {
          if (driver_.cuMemcpy3DAsync == nullptr) throw ReplayError("this driver lacks cuMemcpy3DAsync");
          const CUDA_MEMCPY3D copy = graph.copyOf(node);
          check(driver_.cuMemcpy3DAsync(&copy, stream_), "cuMemcpy3DAsync");
          break;
        }
        case schema::GraphNode::MEMSET: {
          const CUDA_MEMSET_NODE_PARAMS set = graph.memsetOf(node);
          for (uint64_t row = 0; row < set.height; ++row) {
            const CUdeviceptr dst = set.dst + row * set.pitch;
            if (set.elementSize == 1) {
              check(driver_.cuMemsetD8Async(dst, static_cast<unsigned char>(set.value), set.width, stream_), "memset");
            } else if (set.elementSize == 2) {
              check(driver_.cuMemsetD16Async(dst, static_cast<unsigned short>(set.value), set.width, stream_),
                    "memset");
            } else {
              check(driver_.cuMemsetD32Async(dst, set.value, set.width, stream_), "memset");
            }
          }
          break;
        }
        case schema::GraphNode::HOST:
          what = "a host function, not called";
          break;
        case schema::GraphNode::CHILD_GRAPH:
          o.nodeLines.push_back(line + ": its nodes:");
          runGraphNodes(node.bodies.at(0), run, o);
          continue;
        case schema::GraphNode::MEM_ALLOC: {
          CUdeviceptr made = 0;
          const auto a = p.getMemAlloc();
          check(driver_.cuMemAlloc(&made, a.getSize()), "cuMemAlloc for " + node.path);
          graph.addAllocation(a.getAddress(), a.getSize(), made);
          break;
        }
        case schema::GraphNode::MEM_FREE: {
          const auto address = graph.allocationAt(p.getMemFree());
          if (!address) throw NotReplayable(node.path + " frees memory no allocation node of this graph made");
          check(driver_.cuMemFree(*address), "cuMemFree for " + node.path);
          break;
        }
        case schema::GraphNode::CONDITIONAL: {
          // Only a condition no kernel sets is known before the graph runs:
          // its default, assigned at each launch.
          const auto c = p.getConditional();
          const uint32_t value = c.getDefaultValue();
          const size_t none = node.bodies.size();
          size_t taken = none;
          if (c.getType() == 0) taken = value != 0 ? 0 : node.bodies.size() == 2 ? 1 : none;
          if (c.getType() == 2 && value < node.bodies.size()) taken = value;
          if (!c.getSetDefault() || run.handlesSet.count(c.getHandle()) != 0 || (c.getType() == 1 && value != 0)) {
            throw NotReplayable(node.path +
                                " is a conditional node whose condition is set on the GPU while the graph runs, "
                                "so --graph-nodes cannot run it (replay the graph launch without --graph-nodes)");
          }
          o.nodeLines.push_back(line + ": condition " + std::to_string(value) +
                                " (its default, which no kernel sets): " +
                                (taken == none ? std::string("no body runs") : "body " + std::to_string(taken) + ":"));
          if (taken != none) runGraphNodes(node.bodies[taken], run, o);
          continue;
        }
        case schema::GraphNode::EMPTY:
        case schema::GraphNode::EVENT_RECORD:
        case schema::GraphNode::EVENT_WAIT:
          what = "nothing to do alone";
          break;
        default:
          throw NotReplayable(node.path + ": a node kind this replay does not know");
      }
      check(driver_.cuStreamSynchronize(stream_), node.path.c_str());
      if (p.isKernel() && !options_.saveOutputsDir.empty()) saveNodeOutputs(node, i, run);
      o.nodeLines.push_back(line + ": " + what);
    } catch (const CudaError& error) {
      o.nodeLines.push_back(line + ": FAULT: " + error.what());
      throw;
    }
  }
}

// The replayed bytes of the graph launch's ranges (those of its recorded
// post-state, or of its pre-state when the trace has none), to
// DIR/g<graphLaunchIndex>-<recorded address in hex>.bin.
void Replayer::saveGraphOutputs(const GraphLaunchRecord& g, const LoadedKernel& globals) {
  auto ranges = g.event().getPre();
  if (g.end != nullptr && g.end->get().getGraphLaunchEnd().getPost().size() != 0) {
    ranges = g.end->get().getGraphLaunchEnd().getPost();
  }
  saveRanges(ranges, globals, "g", g.graphLaunchIndex);
}

// Node by node, right after kernel node number k (of those run, in order):
// the ranges of the graph launch's memory it reaches (a parameter points
// into it, or it is a global of the node's module) to
// DIR/g<graphLaunchIndex>-n<k>-<address>.bin, and what the node is to
// DIR/g<graphLaunchIndex>-n<k>.node: its index in its graph, its path and
// its kernel, a line each. `kcap bisect` compares the two sides' files.
void Replayer::saveNodeOutputs(const GraphNodeRun& node, size_t index, GraphNodesRun& run) {
  const uint64_t k = run.kernelNodesRun++;
  const auto kernel = node.params.getKernel();
  const LoadedKernel& loaded = run.kernels.at(&node);
  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "/g%llu-n%llu", static_cast<unsigned long long>(run.launch.graphLaunchIndex),
                static_cast<unsigned long long>(k));
  for (const auto range : run.launch.event().getPre()) {
    const uint64_t size = range.getContent().getSize();
    bool reached = parameterPointingInto(kernel, range.getAddress(), size).has_value();
    if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) {
      reached = false;
      for (const GlobalPlacement& global : loaded.globals)
        reached = reached || global.recordedAddress == range.getAddress();
    }
    if (!reached) continue;
    const auto src = translate(range.getAddress(), run.globals);
    if (!src) continue;
    uint8_t* bytes = staging(size);
    copyFromDevice(bytes, *src, size);
    writeFile(options_.saveOutputsDir + prefix + "-" + hexText(range.getAddress()).substr(2) + ".bin", bytes, size);
  }
  const std::string about = std::to_string(index) + "\n" + node.path + "\n" + kernel.getKernelName().cStr() + "\n";
  writeFile(options_.saveOutputsDir + prefix + ".node", reinterpret_cast<const uint8_t*>(about.data()), about.size());
}

void Replayer::compareGraph(const GraphLaunchRecord& g, const GraphRun& run, const LoadedKernel& globals,
                            LaunchOutcome& o) {
  if (g.end == nullptr) {
    o.verdict = Verdict::kUnverified;
    appendDetail(o, "the trace has no end of this graph launch (the recorded run ended first)");
    return;
  }
  const auto post = g.end->get().getGraphLaunchEnd().getPost();
  if (post.size() == 0) {
    o.verdict = Verdict::kUnverified;
    appendDetail(o, "nothing recorded to compare with (no memory after the graph launch)");
    return;
  }
  bool differs = false;
  for (const auto range : post) {
    const auto content = range.getContent();
    const uint64_t size = content.getSize();
    BufferReport report;
    report.address = range.getAddress();
    report.size = size;
    report.label = "buffer";
    // Named by the first kernel node with a parameter pointing into it.
    bool named = false;
    eachKernelNode(run.root, [&](const GraphNodeRun& node) {
      if (named) return;
      if (const auto param = parameterPointingInto(node.params.getKernel(), range.getAddress(), size)) {
        report.label = node.path + " (" + std::string(node.params.getKernel().getKernelName().cStr()) + ") param " +
                       std::to_string(*param);
        named = true;
      }
    });
    if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) {
      report.label = "global";
      for (const auto& global : globals.globals) {
        if (global.recordedAddress == range.getAddress()) report.label = "global " + global.name;
      }
    }
    const auto src = translate(range.getAddress(), globals);
    uint64_t last = 0;
    const auto lastPlaced = size == 0 || __builtin_add_overflow(range.getAddress(), size - 1, &last)
                                ? std::nullopt
                                : translate(last, globals);
    if (!src || (size != 0 && (!lastPlaced || *lastPlaced != *src + (size - 1)))) {
      throw ReplayError("recorded post-state at " + hexText(range.getAddress()) + " (" + std::to_string(size) +
                        " bytes) has no place in this replay");
    }
    if (hasher_->suits(*src, size, content.getPieceSize())) {
      differs = compareByPieces(content, *src, report, std::nullopt, o) || differs;
      o.buffers.push_back(std::move(report));
      continue;
    }
    const std::vector<uint8_t> expected = reader_.readContent(content);
    uint8_t* actual = staging(size);
    copyFromDevice(actual, *src, size);
    o.readBackBytes += size;
    differs = compareRange(report, expected.data(), actual, size, std::nullopt, options_) || differs;
    o.buffers.push_back(std::move(report));
  }
  o.verdict = differs ? Verdict::kDiffers : Verdict::kReproduced;
}

}  // namespace kcap::replay
