// What a graph launch runs: the executable's newest definition before the
// launch, with the node updates made since applied. A trace is untrusted:
// edge indices, body counts and nesting depth are checked here, once, so
// that the rebuild (graph_rebuild.h) and the node-by-node replay can index
// freely.
#include <algorithm>
#include <cstdio>
#include <set>

#include "driver.h"
#include "hex_text.h"
#include "trace_model.h"

namespace kcap::replay {
namespace {

// Builds the tree of nodes of `body`, checking what the rebuild indexes.
class TreeBuilder {
 public:
  explicit TreeBuilder(std::string where) : where_(std::move(where)) {}

  void body(schema::GraphBody::Reader body, const std::shared_ptr<StoredEvent>& source, unsigned depth,
            const std::string& prefix, GraphBodyRun& out) {
    if (depth > kMaxGraphDepth) {
      throw ReplayError(where_ + ": " + prefix + "graphs nested deeper than " + std::to_string(kMaxGraphDepth));
    }
    const auto nodes = body.getNodes();
    total_ += nodes.size();
    if (total_ > kMaxGraphNodes) {
      throw ReplayError(where_ + ": more than " + std::to_string(kMaxGraphNodes) + " nodes");
    }
    out.nodes.clear();
    out.nodes.reserve(nodes.size());
    for (uint32_t i = 0; i < nodes.size(); ++i) {
      GraphNodeRun node;
      node.path = prefix + "node " + std::to_string(i);
      node.handles.push_back(nodes[i].getHandle());
      node.enabled = nodes[i].getEnabled();  // as defined; an update keeps it (but for enable)
      this->node(nodes[i], source, depth, node);
      out.nodes.push_back(std::move(node));
    }
    out.edges.clear();
    uint32_t e = 0;
    for (const auto edge : body.getEdges()) {
      if (edge.getFrom() >= nodes.size() || edge.getTo() >= nodes.size()) {
        throw ReplayError(where_ + ": " + prefix + "edge " + std::to_string(e) + " joins node " +
                          std::to_string(edge.getFrom()) + " to node " + std::to_string(edge.getTo()) + ", of " +
                          std::to_string(nodes.size()) + " nodes");
      }
      out.edges.push_back(edge);
      ++e;
    }
    // A cycle is refused here, once, rather than by the driver later.
    topologicalOrder(out, where_ + ": " + (prefix.empty() ? "the graph" : prefix.substr(0, prefix.size() - 3)));
  }

  // The parameters and nested bodies of one node.
  void node(schema::GraphNode::Reader params, const std::shared_ptr<StoredEvent>& source, unsigned depth,
            GraphNodeRun& node) {
    node.source = source;
    node.params = params;
    node.bodies.clear();
    if (params.isChildGraph()) {
      node.bodies.resize(1);
      body(params.getChildGraph(), source, depth + 1, node.path + " > ", node.bodies[0]);
    } else if (params.isConditional()) {
      const auto c = params.getConditional();
      const uint32_t count = c.getBodies().size();
      const bool fits = (c.getType() == 0 && (count == 1 || count == 2)) || (c.getType() == 1 && count == 1) ||
                        (c.getType() == 2 && count >= 1);
      if (!fits) {
        throw ReplayError(where_ + ": " + node.path + ": a conditional node of type " + std::to_string(c.getType()) +
                          " with " + std::to_string(count) + " bodies (if: 1 or 2, while: 1, switch: at least 1)");
      }
      node.bodies.resize(count);
      for (uint32_t b = 0; b < count; ++b) {
        body(c.getBodies()[b], source, depth + 1, node.path + " > body " + std::to_string(b) + " > ", node.bodies[b]);
      }
    }
  }

 private:
  std::string where_;
  uint64_t total_ = 0;
};

// Adds the handles of `previous` (an earlier definition of the same
// executable) to the nodes of `current` at the same positions, nested bodies
// included: cuGraphExecUpdate pairs nodes by position.
void pairHandles(GraphBodyRun& current, schema::GraphBody::Reader previous, unsigned depth) {
  if (depth > kMaxGraphDepth) return;
  const auto nodes = previous.getNodes();
  for (uint32_t i = 0; i < nodes.size() && i < current.nodes.size(); ++i) {
    GraphNodeRun& node = current.nodes[i];
    node.handles.push_back(nodes[i].getHandle());
    const auto p = nodes[i];
    if (p.isChildGraph() && node.bodies.size() == 1) {
      pairHandles(node.bodies[0], p.getChildGraph(), depth + 1);
    } else if (p.isConditional()) {
      const auto bodies = p.getConditional().getBodies();
      for (uint32_t b = 0; b < bodies.size() && b < node.bodies.size(); ++b) {
        pairHandles(node.bodies[b], bodies[b], depth + 1);
      }
    }
  }
}

GraphNodeRun* findNode(GraphBodyRun& body, uint64_t handle) {
  for (GraphNodeRun& node : body.nodes) {
    if (std::find(node.handles.begin(), node.handles.end(), handle) != node.handles.end()) return &node;
    for (GraphBodyRun& nested : node.bodies) {
      if (GraphNodeRun* found = findNode(nested, handle)) return found;
    }
  }
  return nullptr;
}

}  // namespace

const GraphLaunchRecord* TraceModel::graphLaunch(uint64_t graphLaunchIndex) const {
  const auto it = byGraphIndex_.find(graphLaunchIndex);
  return it == byGraphIndex_.end() ? nullptr : &graphLaunchRecords_[it->second];
}

GraphRun TraceModel::graphRun(const GraphLaunchRecord& record) const {
  const uint64_t exec = record.event().getGraphExec();
  const std::string where = "graph launch " + std::to_string(record.graphLaunchIndex);
  GraphRun run;
  run.launch = &record;
  const auto defines = graphDefines_.find(exec);
  size_t at = 0;  // the define's position in its executable's list
  if (defines != graphDefines_.end()) {
    for (size_t i = 0; i < defines->second.size() && defines->second[i]->seq() < record.seq(); ++i) {
      run.define = defines->second[i];
      at = i;
    }
  }
  if (run.define == nullptr) {
    throw ReplayError(where + ": no graphDefine of executable " + hexText(exec) +
                      " before it (made where kcap did not see it, or by a kcap that did not record graphs)");
  }
  const std::string whereDefine = where + " (graphDefine #" + std::to_string(run.define->seq()) + ")";
  TreeBuilder(whereDefine).body(run.define->get().getGraphDefine().getBody(), run.define, 0, "", run.root);

  // Earlier definitions' handles, back to the instantiation that made the
  // executable: updates after an execUpdate may name a node by either.
  for (size_t i = at; i > 0; --i) {
    if (defines->second[i]->get().getGraphDefine().getApi() != schema::GraphDefineApi::EXEC_UPDATE) break;
    pairHandles(run.root, defines->second[i - 1]->get().getGraphDefine().getBody(), 0);
  }

  const auto updates = graphUpdates_.find(exec);
  if (updates == graphUpdates_.end()) return run;
  for (const auto& event : updates->second) {
    if (event->seq() <= run.define->seq()) continue;
    if (event->seq() >= record.seq()) break;
    const auto update = event->get().getGraphNodeUpdate();
    GraphNodeRun* node = findNode(run.root, update.getNode());
    if (node == nullptr) {
      throw ReplayError(where + ": graphNodeUpdate #" + std::to_string(event->seq()) + " changes node " +
                        hexText(update.getNode()) + ", which graphDefine #" + std::to_string(run.define->seq()) +
                        " does not hold");
    }
    if (update.getApi() == schema::GraphUpdateApi::ENABLE) {
      node->enabled = update.getParams().getEnabled();
    } else {
      TreeBuilder(where + " (graphNodeUpdate #" + std::to_string(event->seq()) + ")")
          .node(update.getParams(), event, 0, *node);
    }
    ++run.updates;
  }
  return run;
}

std::vector<size_t> topologicalOrder(const GraphBodyRun& body, const std::string& where) {
  const size_t n = body.nodes.size();
  std::vector<size_t> waiting(n, 0);
  std::vector<std::vector<size_t>> after(n);
  for (const auto edge : body.edges) {
    ++waiting[edge.getTo()];
    after[edge.getFrom()].push_back(edge.getTo());
  }
  // Of the nodes ready, the first listed: the order the driver double runs
  // them in, and a stable one for the node-by-node report.
  std::set<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.insert(i);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t next = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(next);
    for (const size_t to : after[next]) {
      if (--waiting[to] == 0) ready.insert(to);
    }
  }
  if (order.size() < n) throw ReplayError(where + ": its edges make a cycle");
  return order;
}

const GraphNodeRun* findGraphNode(const GraphBodyRun& body, const std::string& path) {
  for (const GraphNodeRun& node : body.nodes) {
    if (node.path == path) return &node;
    for (const GraphBodyRun& nested : node.bodies) {
      if (const GraphNodeRun* found = findGraphNode(nested, path)) return found;
    }
  }
  return nullptr;
}

LaunchRecord graphNodeLaunch(const GraphNodeRun& node, uint64_t graphLaunchIndex) {
  LaunchRecord record;
  record.launchIndex = graphLaunchIndex;
  record.launch = node.source;
  record.node = node.params.getKernel();
  record.label = "graph launch " + std::to_string(graphLaunchIndex) + ", " + node.path;
  return record;
}

}  // namespace kcap::replay
