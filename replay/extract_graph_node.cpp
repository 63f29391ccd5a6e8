#include "extract_graph_node.h"

#include <capnp/message.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <vector>

#include "hex_text.h"
#include "driver.h"
#include "extract.h"

namespace kcap::replay {
namespace {

using Ranges = capnp::List<schema::MemoryRange>::Reader;

// Whether `address` falls in the range.
bool inRange(schema::MemoryRange::Reader range, uint64_t address) {
  return address >= range.getAddress() && address - range.getAddress() < range.getContent().getSize();
}

// Whether the node (a kernel node: as a parameter reaches it; a copy or
// memset node: as it writes there) may touch the range. A node whose
// parameters were not recorded may touch anything.
bool touches(const GraphNodeRun& node, schema::MemoryRange::Reader range) {
  const auto p = node.params;
  switch (p.which()) {
    case schema::GraphNode::KERNEL:
      return parameterPointingInto(p.getKernel(), range.getAddress(), range.getContent().getSize()).has_value();
    case schema::GraphNode::MEMCPY:
      return p.getMemcpy().getDst() != 0 && inRange(range, p.getMemcpy().getDst());
    case schema::GraphNode::MEMSET:
      return inRange(range, p.getMemset().getDst());
    case schema::GraphNode::UNREADABLE:
      return true;
    default:
      return false;
  }
}

void eachNode(const GraphBodyRun& body, const std::function<void(const GraphNodeRun&)>& use) {
  for (const GraphNodeRun& node : body.nodes) {
    use(node);
    for (const GraphBodyRun& nested : node.bodies) eachNode(nested, use);
  }
}

}  // namespace

GraphNodeExtract extractGraphNode(const TraceModel& model, uint64_t graphLaunchIndex, const std::string& nodeName) {
  const GraphLaunchRecord* g = model.graphLaunch(graphLaunchIndex);
  if (g == nullptr) {
    throw ExtractUsageError("graph launch " + std::to_string(graphLaunchIndex) + " is not in the trace (it has " +
                            std::to_string(model.graphLaunchRecords().size()) +
                            " graph launches; `kcap dump --type graphLaunch` lists them)");
  }
  const auto mode = model.traceBegin() != nullptr ? model.traceBegin()->get().getTraceBegin().getCaptureMode()
                                                  : schema::CaptureMode::FULL;
  if (mode != schema::CaptureMode::FULL) {
    throw ExtractUsageError(
        "a graph node is extracted with the graph launch's memory, which only a trace recorded in full mode holds");
  }
  const GraphRun run = model.graphRun(*g);
  // "3" names top-level node 3; a nested node by its path ("node 3 > node 0").
  const bool digits =
      !nodeName.empty() && std::all_of(nodeName.begin(), nodeName.end(), [](char c) { return c >= '0' && c <= '9'; });
  const std::string path = digits ? "node " + nodeName : nodeName;
  const GraphNodeRun* node = findGraphNode(run.root, path);
  const std::string where = "graph launch " + std::to_string(graphLaunchIndex);
  if (node == nullptr) {
    throw ExtractUsageError(where + " has no " + path + " (`kcap replay --graph-launch " +
                            std::to_string(graphLaunchIndex) + " --graph-nodes` lists its nodes)");
  }
  if (!node->params.isKernel()) throw ExtractUsageError(where + ": " + path + " is not a kernel node");
  if (!node->enabled) throw ExtractUsageError(where + ": " + path + " is disabled there: it did not run");
  const auto kernel = node->params.getKernel();

  // The graph launch's ranges the node reaches.
  const LaunchRecord asRecorded = graphNodeLaunch(*node, graphLaunchIndex);
  std::vector<uint64_t> globals;
  try {
    const CodeRef code = model.codeFor(asRecorded);
    for (const auto global : code.load->get().getModuleLoad().getGlobals()) globals.push_back(global.getAddress());
  } catch (const ReplayError&) {
    // No code: no globals; extract says the code is missing.
  }
  const Ranges pre = g->event().getPre();
  const std::optional<Ranges> post =
      g->end != nullptr ? std::optional<Ranges>(g->end->get().getGraphLaunchEnd().getPost()) : std::nullopt;
  std::vector<unsigned> reached;
  for (unsigned i = 0; i < pre.size(); ++i) {
    const auto range = pre[i];
    const bool global = range.getKind() == schema::MemoryKind::MODULE_GLOBAL;
    if (global ? std::find(globals.begin(), globals.end(), range.getAddress()) != globals.end()
               : touches(*node, range)) {
      reached.push_back(i);
    }
  }

  // Its post-state is the graph's only where that is certain (the header says why).
  GraphNodeExtract out;
  out.selection = where + " " + path;
  std::vector<schema::MemoryRange::Reader> after;
  if (!post || post->size() == 0) {
    out.notCompared = where + " has no recorded post-state";
  } else if (reached.empty()) {
    out.notCompared = path + " reaches none of the memory recorded with " + where;
  } else if (path.find("body") != std::string::npos) {
    out.notCompared = path + " is in a conditional node's body: whether it ran, and how often, was decided on the GPU";
  }
  for (const unsigned i : reached) {
    if (!out.notCompared.empty()) break;
    const auto range = pre[i];
    std::optional<schema::MemoryRange::Reader> end;
    for (const auto candidate : *post) {
      if (candidate.getAddress() == range.getAddress()) end = candidate;
    }
    if (!end) {
      out.notCompared = "the graph launch's post-state lacks " + hexText(range.getAddress());
      break;
    }
    after.push_back(*end);
    if (sameContent(range.getContent(), end->getContent())) continue;
    const GraphNodeRun* other = nullptr;
    eachNode(run.root, [&](const GraphNodeRun& n) {
      if (&n != node && other == nullptr && n.enabled && touches(n, range)) other = &n;
    });
    if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) {
      // Which other kernels of the module write it is not known: only its own is certain.
      eachNode(run.root, [&](const GraphNodeRun& n) {
        if (&n != node && other == nullptr && n.params.isKernel() && n.enabled) other = &n;
      });
    }
    if (other != nullptr) {
      out.notCompared = "the graph launch changes " + hexText(range.getAddress()) + ", which " + other->path +
                        " reaches too: the recording holds no state between the nodes, so what " + path +
                        " alone leaves there is not known";
    }
  }

  // The node as launch 0 of the extract: its kernel, shape and parameters,
  // at the graph launch's place in the trace.
  capnp::MallocMessageBuilder launchMessage;
  auto event = launchMessage.initRoot<schema::Event>();
  event.setSeq(g->seq());
  event.setLaunch(kernel);
  auto launch = event.getLaunch();
  launch.setApi(kernel.getAttributes().size() != 0 ? schema::LaunchApi::LAUNCH_KERNEL_EX
                                                   : schema::LaunchApi::LAUNCH_KERNEL);
  launch.setLaunchIndex(0);
  launch.setStream(g->event().getStream());
  auto preOut = launch.initPre(static_cast<unsigned>(reached.size()));
  for (unsigned i = 0; i < reached.size(); ++i) preOut.setWithCaveats(i, pre[reached[i]]);
  out.record.launchIndex = 0;
  out.record.launch = std::make_shared<StoredEvent>(event.asReader());

  // No end at all when the post-state is not certain: an end with an empty
  // post-state would reproduce, having nothing to differ.
  if (out.notCompared.empty()) {
    capnp::MallocMessageBuilder endMessage;
    auto endEvent = endMessage.initRoot<schema::Event>();
    endEvent.setSeq(g->end->seq());
    auto end = endEvent.initLaunchEnd();
    end.setLaunchIndex(0);
    end.setResult(g->end->get().getGraphLaunchEnd().getResult());
    auto postOut = end.initPost(static_cast<unsigned>(after.size()));
    for (unsigned i = 0; i < after.size(); ++i) postOut.setWithCaveats(i, after[i]);
    out.record.end = std::make_shared<StoredEvent>(endEvent.asReader());
  }
  out.record.label = out.selection;
  return out;
}

}  // namespace kcap::replay
