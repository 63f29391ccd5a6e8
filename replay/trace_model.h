// What replay needs from a trace, read once: the launches, the code and
// memory events around them, in file order.
//
// Events are kept as compact copies of their messages (the reader's buffers
// do not outlive a callback), and looked up the way the schema says handles
// resolve: by the most recent event, before the launch, that bound them.
// Pure host code: no driver.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kcap.capnp.h"
#include "trace_reader.h"

namespace kcap::replay {

// One event, copied out of the reader.
class StoredEvent {
 public:
  explicit StoredEvent(schema::Event::Reader event);
  schema::Event::Reader get() const { return root_; }
  uint64_t seq() const { return root_.getSeq(); }

 private:
  kj::Array<capnp::word> words_;
  std::unique_ptr<capnp::FlatArrayMessageReader> message_;
  schema::Event::Reader root_;
};

struct LaunchRecord {
  uint64_t launchIndex = 0;
  std::shared_ptr<StoredEvent> launch;         // the Launch event (a graph kernel node: the event holding it)
  std::shared_ptr<StoredEvent> end;            // its LaunchEnd; null when the trace has none (crash, fault)
  std::optional<uint64_t> recordedDurationNs;  // from kernelTiming (--timing)
  // A graph's kernel node (graphNodeLaunch): its Launch inside `launch`, a
  // graphDefine or graphNodeUpdate, and the node's name in messages.
  std::optional<schema::Launch::Reader> node;
  std::string label;

  schema::Launch::Reader event() const { return node ? *node : launch->get().getLaunch(); }
  uint64_t seq() const { return launch->seq(); }
  bool hasPre() const { return event().getPre().size() != 0; }
  bool hasPost() const { return end != nullptr && end->get().getLaunchEnd().getPost().size() != 0; }
  // What the launch call returned: from its LaunchEnd, or from the launch
  // itself where it carries its outcome (Launch.ended); none when the trace
  // has neither (the process died in the call, a graph's node).
  std::optional<int32_t> result() const {
    if (end != nullptr) return end->get().getLaunchEnd().getResult();
    if (!node && event().getEnded()) return event().getResult();
    return std::nullopt;
  }
};

// One graph launch: the GraphLaunch event and, in full mode, its end.
struct GraphLaunchRecord {
  uint64_t graphLaunchIndex = 0;
  std::shared_ptr<StoredEvent> launch;  // GraphLaunch
  std::shared_ptr<StoredEvent> end;     // its GraphLaunchEnd; null when the trace has none

  schema::GraphLaunch::Reader event() const { return launch->get().getGraphLaunch(); }
  uint64_t seq() const { return launch->seq(); }
};

// One node of a graph as a graph launch runs it: the node of the definition
// with the updates made since applied.
struct GraphNodeRun {
  std::string path;                     // "node 3", "node 3 > body 0 > node 1": the node in messages
  std::vector<uint64_t> handles;        // the handles that name it (its own; earlier definitions' after execUpdate)
  std::shared_ptr<StoredEvent> source;  // the graphDefine or graphNodeUpdate its parameters come from
  schema::GraphNode::Reader params;     // those parameters
  bool enabled = true;
  struct Body {
    std::vector<GraphNodeRun> nodes;
    std::vector<schema::GraphEdge::Reader> edges;  // indices checked against nodes
  };
  std::vector<Body> bodies;  // a child graph: one; a conditional: its bodies
};
using GraphBodyRun = GraphNodeRun::Body;

// What a graph launch runs (TraceModel::graphRun).
struct GraphRun {
  const GraphLaunchRecord* launch = nullptr;
  std::shared_ptr<StoredEvent> define;  // the graphDefine it starts from
  size_t updates = 0;                   // graphNodeUpdates applied
  GraphBodyRun root;
};

// Nesting and size limits on a recorded graph (the recorder nests at most 16).
constexpr unsigned kMaxGraphDepth = 16;
constexpr uint64_t kMaxGraphNodes = 1u << 20;

// The nodes of `body` in an order that respects its edges (of the nodes
// ready, the first listed); throws ReplayError naming `where` on a cycle.
std::vector<size_t> topologicalOrder(const GraphBodyRun& body, const std::string& where);

// The node of `body` (at any depth) whose path is `path`; nullptr if none.
const GraphNodeRun* findGraphNode(const GraphBodyRun& body, const std::string& path);

// A kernel node as a launch: codeFor, buildParams and launchOnce take it as
// they take a recorded launch. `graphLaunchIndex` numbers it in outcomes.
LaunchRecord graphNodeLaunch(const GraphNodeRun& node, uint64_t graphLaunchIndex);

// A recorded code object the launch needs: the ModuleLoad, and the kernel.
struct CodeRef {
  std::shared_ptr<StoredEvent> load;  // ModuleLoad
  std::string kernelName;
  std::vector<std::shared_ptr<StoredEvent>> attributes;  // FunctionAttribute events that apply, in order
  // The FunctionBind events the launch handle resolved through, in the order
  // followed: the handle's own, then its CUkernel's (cuKernelGetFunction) or
  // its module's (cuLibraryGetModule). What `kcap extract` keeps.
  std::vector<std::shared_ptr<StoredEvent>> binds;
};

// The index (in the parameter layout) of the first parameter holding a
// pointer into [base, base + size), if any: names a compared range.
std::optional<uint32_t> parameterPointingInto(schema::Launch::Reader launch, uint64_t base, uint64_t size);

// Same size and the same pieces: the same bytes (compared by their hashes,
// nothing read from the trace).
bool sameContent(schema::Content::Reader a, schema::Content::Reader b);

// The rows of a recorded 2D or 3D copy (width != 0): `slices` slices (1 for
// a 2D copy) of `rows` rows of `width` bytes. Row y of slice z starts
// dstAt(y, z) bytes past the copy's dst, srcAt(y, z) past its src, and
// packedAt(y, z) into the packed rows a host-to-device copy stores.
struct CopyRows {
  uint64_t width = 0, rows = 0, slices = 1;
  uint64_t dstPitch = 0, dstSlicePitch = 0, srcPitch = 0, srcSlicePitch = 0;

  uint64_t dstAt(uint64_t y, uint64_t z) const { return z * dstSlicePitch + y * dstPitch; }
  uint64_t srcAt(uint64_t y, uint64_t z) const { return z * srcSlicePitch + y * srcPitch; }
  uint64_t packedAt(uint64_t y, uint64_t z) const { return (z * rows + y) * width; }
};

// The rows of `copy`; nullopt when, on either side, a slice pitch or a row's
// end would not fit in 64 bits (only a damaged trace says so), so that no
// offset the CopyRows gives wraps around. packedAt is bounded by the packed
// data's size only once that size is checked against width, rows and slices.
std::optional<CopyRows> copyRows(schema::Memcpy::Reader copy);

class TraceModel {
 public:
  // Reads every event. Problems the reader found stay in reader.problems().
  static TraceModel load(format::TraceReader& reader);

  const std::vector<LaunchRecord>& launches() const { return launches_; }
  const LaunchRecord* launch(uint64_t launchIndex) const;
  const StoredEvent* traceBegin() const { return traceBegin_.get(); }

  // Graph launches in file order, and one by graphLaunchIndex.
  const std::vector<GraphLaunchRecord>& graphLaunchRecords() const { return graphLaunchRecords_; }
  const GraphLaunchRecord* graphLaunch(uint64_t graphLaunchIndex) const;
  // What graph launch `record` runs: the newest graphDefine for its
  // executable before it, with every graphNodeUpdate between them applied
  // (trace_model_graph.cpp). Throws ReplayError naming what is missing or
  // damaged (edge indices, body counts, nesting depth).
  GraphRun graphRun(const GraphLaunchRecord& record) const;
  // Every successful graphDefine, in seq order.
  const std::vector<std::shared_ptr<StoredEvent>>& graphDefines() const { return graphDefineList_; }

  // The code of a launch: resolves its handle through FunctionBind events
  // (CUkernel -> library, CUfunction from cuKernelGetFunction -> its CUkernel)
  // to the ModuleLoad. Throws ReplayError naming what is missing.
  CodeRef codeFor(const LaunchRecord& launch) const;

  // Memory operations (memcpy and memset into device memory) with seq in
  // (afterSeq, beforeSeq), in order: what ran between two launches.
  std::vector<const StoredEvent*> memoryOpsBetween(uint64_t afterSeq, uint64_t beforeSeq) const;

  // The tensor map encode (a TensorMapEncode event that succeeded) that made
  // `map`: the newest with seq < beforeSeq whose 128 recorded bytes equal
  // map[0..size). nullptr when none did (size other than 128, a map the
  // program built itself or copied from elsewhere, a trace from before
  // encodes were recorded).
  const StoredEvent* tensorMapEncodeFor(const uint8_t* map, size_t size, uint64_t beforeSeq) const;
  // The same for a word of `launch` the recorder marked as a tensor map's
  // address: the encode that made the 128 parameter bytes starting there.
  const StoredEvent* tensorMapEncodeFor(const LaunchRecord& launch, schema::PointerWord::Reader word) const;

  // What re-execution of a checkpoint trace needs besides the launches
  // (checkpoints.h orders them into one timeline), each in seq order:
  // Memcpy (every direction) and Memset; Checkpoint; Alloc and Free;
  // GraphLaunch.
  const std::vector<std::shared_ptr<StoredEvent>>& memoryOps() const { return memoryOps_; }
  const std::vector<std::shared_ptr<StoredEvent>>& checkpoints() const { return checkpoints_; }
  // The device whose memory the checkpoints hold (Checkpoint.device, the
  // same in each), -1 when none says. Re-execution runs that device's
  // launches only.
  int checkpointDevice() const { return checkpointDevice_; }
  // Why re-execution does not run `launch` because it ran on another device
  // than the checkpoints' ("" when it does).
  std::string onOtherDevice(const LaunchRecord& launch) const;
  const std::vector<std::shared_ptr<StoredEvent>>& allocations() const { return allocations_; }
  const std::vector<std::shared_ptr<StoredEvent>>& graphLaunches() const { return graphLaunches_; }

  // Seqs missing between two events the reader delivered, as [first, last]:
  // events a damaged record chunk held. The first such range inside
  // (afterSeq, beforeSeq), if any: what runs between two checkpoints there
  // is not what the program ran.
  std::optional<std::pair<uint64_t, uint64_t>> missingBetween(uint64_t afterSeq, uint64_t beforeSeq) const;

 private:
  std::shared_ptr<StoredEvent> traceBegin_;
  std::vector<LaunchRecord> launches_;  // by launchIndex order (file order)
  std::map<uint64_t, size_t> byIndex_;  // launchIndex -> position in launches_
  // handle -> events that bound it, in seq order
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> loads_;       // ModuleLoad by module/library handle
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> binds_;       // FunctionBind by launch handle
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> attributes_;  // FunctionAttribute by handle
  std::vector<std::shared_ptr<StoredEvent>> memoryOps_;                       // Memcpy / Memset / Collective, seq order
  std::vector<std::shared_ptr<StoredEvent>> checkpoints_;                     // seq order
  int checkpointDevice_ = -1;                                                 // checkpointDevice()
  std::vector<std::shared_ptr<StoredEvent>> allocations_;                     // Alloc / Free, seq order
  std::vector<std::shared_ptr<StoredEvent>> graphLaunches_;                   // seq order
  std::vector<GraphLaunchRecord> graphLaunchRecords_;                         // file order
  std::map<uint64_t, size_t> byGraphIndex_;  // graphLaunchIndex -> position in graphLaunchRecords_
  // graphExec -> its successful graphDefines / graphNodeUpdates, seq order
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> graphDefines_;
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> graphUpdates_;
  std::vector<std::shared_ptr<StoredEvent>> graphDefineList_;
  // TensorMapEncode events that succeeded, by the 128 bytes they made, in seq order
  std::map<std::string, std::vector<std::shared_ptr<StoredEvent>>> tensorMaps_;

  std::vector<std::pair<uint64_t, uint64_t>> missing_;  // missingBetween(): seq ranges, in order
  std::set<uint64_t> folded_;                           // seqs of the memory ops a WrittenData completed
  // WrittenData of graph launches' copy nodes, by the launch's seq, until
  // the load's end folds them into the launches (foldGraphReadBacks).
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> graphReadBacks_;

  void foldWrittenData(schema::WrittenData::Reader written);
  void markUnreadWrites();
  void foldGraphReadBacks();
  static std::shared_ptr<StoredEvent> latestBefore(const std::vector<std::shared_ptr<StoredEvent>>& events,
                                                   uint64_t seq);
};

}  // namespace kcap::replay
