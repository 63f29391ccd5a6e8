// `kcap extract --graph-launch G --node K`: one kernel node of a recorded
// graph launch as a plain launch, to extract and replay on its own.
//
// A full-mode trace holds a graph launch's memory before the graph ran and
// after it, not before and after each node. The node's launch gets the
// graph launch's pre-state of the ranges it reaches (the allocations its
// pointer parameters point into, its module's globals): that is the node's
// own pre-state only where no node that ran before it changed those ranges.
// And the graph's post-state is the node's own only where no node that ran
// after it changed them. Neither is known without running the other nodes
// on a GPU, so the extract holds a post-state only when it is certain from
// the recording alone: when every range the node reaches is either reached
// by no other node of the graph (no other kernel node's parameters point
// into it, no copy or memset node writes it), or left unchanged by the
// whole graph launch (its recorded bytes before and after are the same).
// Otherwise the extract's launch has no post-state, and a replay of it says
// that nothing was compared; `notCompared` says why. Pure host code.
#pragma once

#include <memory>
#include <string>

#include "trace_model.h"

namespace kcap::replay {

struct GraphNodeExtract {
  LaunchRecord record;      // the node as launch 0: its Launch and LaunchEnd events, made here
  std::string selection;    // "graph launch 2 node 3"
  std::string notCompared;  // why the extract holds no post-state; empty when it holds one
};

// Throws ExtractUsageError naming what is wrong (no such graph launch or
// node, a node that is no kernel, a trace not recorded in full mode), and
// ReplayError when the graph launch's definition is damaged.
GraphNodeExtract extractGraphNode(const TraceModel& model, uint64_t graphLaunchIndex, const std::string& node);

}  // namespace kcap::replay
