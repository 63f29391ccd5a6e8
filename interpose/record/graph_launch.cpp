// Graph launches (cuGraphLaunch): which executable ran, and in full mode the
// memory its nodes can reach before it ran (GraphLaunch, written before the
// call) and after it completed (GraphLaunchEnd), as a kernel launch's.
//
// What a graph reaches comes from its definition (graph_reach.h), resolved
// against the allocations live at the launch: the whole allocation each
// pointer word, copy or memset side falls into, and the globals of each
// kernel node's module. Synchronization follows the launches' rules
// (launch_capture.cpp): the context before the pre snapshot (its stream
// only while some stream captures), the stream after the launch; a graph
// launched into a capturing stream does not run and gets no snapshot.
//
// Host-source copy nodes read host memory each time the graph runs: what
// they read is stored with the launch (full and checkpoint modes), read when
// the program queues the launch. In checkpoint mode the slots of kcap's copy
// nodes (captured_copies.h) are read back behind the launch, in stream order.
#include "record/recorder.h"

#include "core/event_recycler.h"
#include "record/driver_api.h"

#include <set>

namespace kcap {
namespace {

// A graph launch in metadata mode (or into a capturing stream): only its
// facts, built into the event on the writer's thread as a launch's are
// (launch_capture.cpp), so that the call pays for no message.
struct GraphLaunchFacts final : format::DeferredEvent {
  GraphLaunchFacts* nextFree = nullptr;  // Recycler
  Recycler<GraphLaunchFacts>* home = nullptr;

  TraceClock* clock = nullptr;
  uint64_t stamp = 0;
  uint32_t threadId = 0;
  uint64_t exec = 0;
  uint64_t stream = 0;
  uint64_t index = 0;
  bool perThreadStream = false;
  CUresult result = CUDA_SUCCESS;

  void clear() {
    clock = nullptr;
    stamp = 0;
    threadId = 0;
    exec = 0;
    stream = 0;
    index = 0;
    perThreadStream = false;
    result = CUDA_SUCCESS;
  }
  void release() noexcept override { Recycler<GraphLaunchFacts>::release(this); }
  size_t sizeHint() const override { return 96; }
  void build(schema::Event::Builder event, unsigned) const override {
    event.setTimeNs(clock->toNs(stamp));
    event.setThreadId(threadId);
    auto launch = event.initGraphLaunch();
    launch.setGraphExec(exec);
    launch.setStream(stream);
    launch.setGraphLaunchIndex(index);
    launch.setPerThreadStream(perThreadStream);
    launch.setResult(result);
  }
};

// Takes `ranges` in order; stops at the first failure, returned.
CUresult takeAll(format::TraceWriter& writer, StagingPool& staging, const std::vector<SnapshotRange>& ranges,
                 bool deviceHashing, std::vector<TakenRange>& taken) {
  for (const SnapshotRange& range : ranges) {
    TakenRange entry{range, {}};
    const CUresult result = snapshot(writer, staging, range, entry.content, nullptr, deviceHashing);
    if (result != CUDA_SUCCESS) return result;
    taken.push_back(std::move(entry));
  }
  return CUDA_SUCCESS;
}

}  // namespace

bool Recorder::graphLaunchStarting(const GraphLaunchCall& call, PendingGraphLaunch& pending) {
  Operation operation(*this);
  if (!operation) {
    return false;
  }
  const CUstream stream = call.perThreadStream && call.stream == nullptr ? CU_STREAM_PER_THREAD : call.stream;
  if (checkpoints_ != nullptr) {
    if (checkpointDue(clock_.stamp()) && !hostWaiters_.pending()) {
      checkpointNow(schema::CheckpointReason::INTERVAL, std::chrono::milliseconds(100));
    }
    checkpoints_->streamUsed(stream);
  }
  pending.recorder = this;
  pending.index = graphLaunches_.fetch_add(1, std::memory_order_relaxed);
  pending.syncStream = stream;
  pending.exec = call.exec;
  pending.stream = call.stream;
  pending.perThreadStream = call.perThreadStream;
  const bool capturing = streamCapturing(stream);
  pending.capturing = capturing;
  if (options_.mode == CaptureMode::kMetadata || capturing) {
    pending.stamp = clock_.stamp();  // its facts are handed over with its result
    pending.factsOnly = true;
    return true;
  }
  auto message = std::make_unique<EventMessage>(*this);
  auto launch = message->event().initGraphLaunch();
  const auto exec = reinterpret_cast<uint64_t>(call.exec);
  launch.setGraphExec(exec);
  launch.setStream(reinterpret_cast<uint64_t>(call.stream));
  launch.setGraphLaunchIndex(pending.index);
  launch.setPerThreadStream(call.perThreadStream);

  const std::vector<GraphNodeReach> nodes = graphReach_.of(exec);
  size_t hostCopies = 0;
  for (const GraphNodeReach& node : nodes) {
    hostCopies += node.hostSource != nullptr ? 1 : 0;
    if (node.readBackSlot != 0) pending.readBacks.push_back({node.handle, {node.readBackSlot, node.readBackSize}});
  }
  if (!pending.readBacks.empty()) {
    std::vector<uint64_t> slots;
    for (const auto& readBack : pending.readBacks) slots.push_back(readBack.second.address);
    std::string problem;
    const RelaxedCaptureMode relaxed;
    pending.slotOrder = capturedCopies_.beforeLaunch(slots, stream, problem);
    if (!problem.empty()) noteOnce(notedSlotOrder_, schema::Message::Level::WARNING, problem);
  }
  auto copies = launch.initHostCopies(static_cast<unsigned>(hostCopies));
  unsigned copy = 0;
  for (const GraphNodeReach& node : nodes) {
    if (node.hostSource == nullptr) continue;
    std::vector<uint8_t> packed;
    copies[copy].setNode(node.handle);
    writer_->storeContent(packHostRows(node.hostSource, node.rows, packed), node.rows.size, copies[copy].initData());
    ++copy;
  }
  if (perLaunchMetadataOnly(options_.mode)) {
    pending.event = std::move(message);
    return true;
  }
  if (hostWaiters_.pending()) {
    launch.setNoSnapshotReason(
        "it was queued while a kernel that waits for the host may still run: synchronizing would hold that back");
    append(*message);
    return true;  // no post-state: postSnapshot stays false
  }

  // Full and pre modes: the memory the nodes reach, before the graph runs.
  const RelaxedCaptureMode relaxed;
  const DriverApi& api = driverApi();
  CUresult sync = CUDA_SUCCESS;
  if (activeCaptures_.load() == 0 && api.ctxSynchronize != nullptr) {
    sync = api.ctxSynchronize();
  } else if (api.streamSynchronize != nullptr) {
    sync = api.streamSynchronize(stream);
  }
  launch.setSyncResult(sync);
  std::vector<SnapshotRange> ranges;
  std::set<uint64_t> seen;
  std::set<CUfunction> functions;
  {
    const AllocationMap::Reader reader(allocations_);  // not held across the driver calls below
    for (const GraphNodeReach& node : nodes) {
      if (node.function != nullptr) functions.insert(node.function);
      for (const uint64_t address : node.addresses) {
        const auto extent = reader.findExtent(address);
        if (extent && seen.insert(extent->base).second) {
          ranges.push_back({extent->base, extent->size, extent->base, memoryKind(extent->kind)});
        }
      }
    }
  }
  for (const CUfunction function : functions) {
    for (const GlobalVariable& global : CodeRegistry::instance().globalsOf(launchTarget(function).info.owner)) {
      if (seen.insert(global.address).second) {
        ranges.push_back({global.address, global.size, global.address, schema::MemoryKind::MODULE_GLOBAL});
      }
    }
  }
  std::vector<TakenRange> taken;
  CUresult failed = sync;
  if (sync == CUDA_SUCCESS) {
    failed = takeAll(*writer_, staging_, ranges, options_.hashOnDevice, taken);
    if (failed != CUDA_SUCCESS) launch.setSnapshotError(failed);
  }
  writeRanges(launch.initPre(static_cast<unsigned>(taken.size())), taken);
  pending.postSnapshot = options_.mode == CaptureMode::kFull && failed == CUDA_SUCCESS;
  pending.ranges = std::move(ranges);
  append(*message);
  if (options_.flush == FlushPolicy::kLaunch) {
    flush();  // on disk before the graph runs, as a launch's
  }
  return true;
}

void Recorder::graphLaunchFinished(PendingGraphLaunch& pending, CUresult result) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  if (result == CUDA_SUCCESS && !pending.capturing) graphMemoryChanged(reinterpret_cast<uint64_t>(pending.exec));
  if (pending.factsOnly) {
    GraphLaunchFacts* facts = Recycler<GraphLaunchFacts>::take(Recycler<GraphLaunchFacts>::ofThisThread());
    format::DeferredEventPtr event(facts);
    facts->clock = &clock_;
    facts->stamp = pending.stamp;
    facts->threadId = callerThreadId();
    facts->exec = reinterpret_cast<uint64_t>(pending.exec);
    facts->stream = reinterpret_cast<uint64_t>(pending.stream);
    facts->index = pending.index;
    facts->perThreadStream = pending.perThreadStream;
    facts->result = result;
    writer_->append(std::move(event));
    return;
  }
  if (pending.event) {
    pending.event->event().getGraphLaunch().setResult(result);
    const uint64_t seq = append(*pending.event);
    pending.event.reset();
    if (result == CUDA_SUCCESS && readback_ != nullptr) {
      // Queued behind the graph on its stream: each reads what this launch's
      // NCCL nodes wrote before a later launch writes it again.
      const RelaxedCaptureMode relaxed;
      for (const auto& [node, slot] : pending.readBacks) readback_->request({seq, node}, pending.syncStream, slot);
    }
    if (pending.slotOrder.owns_lock()) pending.slotOrder.unlock();
    return;
  }
  EventMessage message(*this);
  auto end = message.event().initGraphLaunchEnd();
  end.setGraphLaunchIndex(pending.index);
  end.setResult(result);
  if (pending.postSnapshot && result == CUDA_SUCCESS) {
    const RelaxedCaptureMode relaxed;
    const auto synchronize = driverApi().streamSynchronize;
    const CUresult sync = synchronize != nullptr ? synchronize(pending.syncStream) : CUDA_ERROR_NOT_FOUND;
    end.setSyncResult(sync);
    if (sync == CUDA_SUCCESS) {
      std::vector<TakenRange> taken;
      const CUresult failed = takeAll(*writer_, staging_, pending.ranges, options_.hashOnDevice, taken);
      if (failed != CUDA_SUCCESS) end.setSnapshotError(failed);
      writeRanges(end.initPost(static_cast<unsigned>(taken.size())), taken);
    }
  }
  append(message);
}

// A graph launch makes its allocation nodes' memory and frees what its free
// nodes name, in stream order; the map follows at the launch call, as it
// does for cuMemAllocAsync and cuMemFreeAsync. Memory the launch leaves
// allocated is the program's like any other until it is freed: checkpoints
// hold it and launches' pointer words find it.
void Recorder::graphMemoryChanged(uint64_t exec) {
  for (const GraphMemoryChange& change : graphReach_.memoryOf(exec)) {
    allocations_.remove(change.address);
    if (change.size != 0) {
      allocations_.add({change.address, change.size, AllocationKind::kDevice,
                        change.device >= 0 ? change.device : currentDevice(), 0, false});
    }
  }
}

}  // namespace kcap
