// Launches: the Launch event before the real call (parameters, pointer
// words, reachable memory), the LaunchEnd after it (result, memory after);
// in metadata and checkpoint modes one Launch event, handed over before the
// call, that carries its outcome (`ended`), stored into it after the call
// (launch_outcome.h).
//
// Synchronization, and why (full and pre modes):
//   Before the pre snapshot the recorder synchronizes the launch's CONTEXT.
//   The memory a launch reads may be written by work queued on any stream of
//   the context (the program orders it with events the recorder does not
//   follow), so the stream alone is not enough; without tracking cross-stream
//   dependencies, the context is the smallest safe scope. This is the known
//   cost of full capture: every recorded launch waits for all queued work.
//   While any stream of the process is capturing into a graph, a context
//   synchronization could break that capture, so the recorder synchronizes
//   the launch's own stream only.
//   After the launch (full mode) it synchronizes the launch's stream: the
//   launch is then complete, and the post snapshot sees what it wrote.
//   A launch into a capturing stream does not run: it is recorded with
//   capturing = true, no snapshot and no synchronization at all. Metadata
//   mode never synchronizes.
//   Kernels that wait for work launched after them (NCCL's collectives wait
//   for their peers) would never finish under a synchronize: they are
//   recorded without snapshots (a note in the trace says so).
//
// The recorder's own driver calls run in relaxed stream-capture mode, so
// that they are never "unsafe" calls invalidating another thread's capture.
#include "record/recorder.h"

#include "core/event_recycler.h"
#include "core/param_buffer.h"
#include "hooks/nccl_calls.h"
#include "record/driver_api.h"
#include "record/launch_outcome.h"

#include <algorithm>
#include <mutex>
#include <set>

namespace kcap {
namespace {

// Buffers at most this large that pointer words hit are scanned for more
// pointers (pointer arrays of grouped kernels); one level deep.
constexpr uint64_t kIndirectScanLimit = 64u << 10;

size_t rangesHint(const std::vector<TakenRange>& taken) {
  size_t bytes = 0;
  for (const TakenRange& entry : taken) {
    bytes += 64 + 16 * entry.content.pieces.size();
  }
  return bytes;
}

// A LaunchEnd event's fields, less the snapshots (LaunchEndData adds them).
void buildLaunchEnd(schema::Event::Builder event, TraceClock& clock, uint64_t stamp, uint32_t threadId,
                    uint64_t launchIndex, CUresult result) {
  event.setTimeNs(clock.toNs(stamp));
  event.setThreadId(threadId);
  auto end = event.initLaunchEnd();
  end.setLaunchIndex(launchIndex);
  end.setResult(result);
}

// A Launch event as the launching thread gathers it. The writer builds the
// message on its own thread (format::DeferredEvent): on the launch path the
// shim only copies these facts. In metadata and checkpoint modes the object
// also carries the launch's outcome, which the launching thread stores after
// the call, and the event says it: one object, one hand-over and one message
// a launch (the writer's cost a launch is mostly per message:
// docs/benchmarks.md).
struct LaunchEventData final : format::DeferredEvent {
  LaunchEventData* nextFree = nullptr;  // Recycler
  Recycler<LaunchEventData>* home = nullptr;

  TraceClock* clock = nullptr;
  uint64_t stamp = 0;  // clock->stamp(): nanoseconds once built
  uint32_t threadId = 0;
  uint64_t launchIndex = 0;
  // Set: launchIndex is taken from this counter when the writer orders the
  // event (Recorder::numberedByWriter_).
  std::atomic<uint64_t>* launchCounter = nullptr;
  LaunchCall call;              // its pointers are not followed after the launch returns
  std::string_view kernelName;  // interned by the code registry: lives as long as the process
  uint64_t context = 0;
  int device = -1;
  std::vector<CUlaunchAttribute> attributes;
  ParamBuffer params;
  std::vector<ParamPointer> pointers;
  bool capturing = false;
  bool collectiveCall = false;             // an NCCL kernel launched inside a hooked NCCL call
  bool synchronized = false;               // snapshots were attempted: syncResult and pre are meaningful
  const char* noSnapshotReason = nullptr;  // a static string: why a snapshotting mode took none
  CUresult syncResult = CUDA_SUCCESS;
  CUresult snapshotError = CUDA_SUCCESS;
  std::vector<TakenRange> pre;
  std::vector<IndirectPointer> indirect;
  bool outcomeFollows = false;  // metadata and checkpoint modes: `outcome` is stored after the call
  LaunchOutcome outcome;

  // Back to the state of a new one; vectors keep their capacity.
  void clear() {
    clock = nullptr;
    stamp = 0;
    threadId = 0;
    launchIndex = 0;
    launchCounter = nullptr;
    call = LaunchCall{};
    kernelName = {};
    context = 0;
    device = -1;
    attributes.clear();
    params.bytes.clear();
    params.kernelLayout = nullptr;
    params.wholeBuffer = ParamSlot{0, 0};
    params.fromExtra = false;
    params.complete = false;
    pointers.clear();
    capturing = false;
    collectiveCall = false;
    synchronized = false;
    noSnapshotReason = nullptr;
    syncResult = CUDA_SUCCESS;
    snapshotError = CUDA_SUCCESS;
    pre.clear();
    indirect.clear();
    outcomeFollows = false;
    outcome.reset(nullptr);
  }
  // An event whose call has not returned is never reused: its launching
  // thread may still store the outcome into it (launch_outcome.h). Not
  // when it comes back on that very thread while it is being handed over
  // (the writer refused it): the call was never made.
  void release() noexcept override {
    if (outcomeFollows && this != t_handingOver &&
        outcome.state.load(std::memory_order_acquire) == LaunchOutcome::kPending) [[unlikely]] {
      return;
    }
    Recycler<LaunchEventData>::release(this);
  }
  // The event the calling thread is handing to the writer, during the append.
  static inline thread_local const LaunchEventData* t_handingOver [[gnu::tls_model("initial-exec")]] = nullptr;
  // Recycler::take: the buffers a launch writes into (a few lines at most).
  void prefetchBuffers() const {
    prefetchForWrite(params.bytes.data(), std::min<size_t>(params.bytes.capacity(), 256));
    prefetchForWrite(pointers.data(), std::min<size_t>(pointers.capacity() * sizeof(ParamPointer), 256));
  }

  void sequenced(uint64_t) noexcept override {
    if (launchCounter != nullptr) {
      // On the writer's merger thread, in seq order: the only place the
      // counter changes (readers that need the final number call
      // waitSequenced() first).
      launchIndex = launchCounter->load(std::memory_order_relaxed);
      launchCounter->store(launchIndex + 1, std::memory_order_relaxed);
    }
  }

  size_t sizeHint() const override {
    size_t hint = 272 + kernelName.size() + params.bytes.size() + 8 * params.layout().size() + 32 * pointers.size();
    if (!attributes.empty() || !indirect.empty() || !pre.empty()) [[unlikely]] {  // (on the launch path)
      hint += 24 * attributes.size() + 40 * indirect.size() + rangesHint(pre);
    }
    return hint;
  }

  void build(schema::Event::Builder event, unsigned) const override {
    const uint64_t startNs = clock->toNs(stamp);
    event.setTimeNs(startNs);
    event.setThreadId(threadId);
    auto launch = event.initLaunch();
    launch.setLaunchIndex(launchIndex);
    launch.setApi(call.api);
    launch.setPerThreadStream(call.perThreadStream);
    launch.setFunction(reinterpret_cast<uint64_t>(call.function));
    launch.setKernelName(capnp::Text::Reader(kernelName.data(), kernelName.size()));
    launch.setGridX(call.grid[0]);
    launch.setGridY(call.grid[1]);
    launch.setGridZ(call.grid[2]);
    launch.setBlockX(call.block[0]);
    launch.setBlockY(call.block[1]);
    launch.setBlockZ(call.block[2]);
    launch.setSharedMemBytes(call.sharedMemBytes);
    launch.setStream(reinterpret_cast<uint64_t>(call.stream));
    launch.setContext(context);
    launch.setDevice(device);
    if (!attributes.empty()) {
      auto list = launch.initAttributes(static_cast<unsigned>(attributes.size()));
      for (unsigned i = 0; i < attributes.size(); ++i) {
        list[i].setId(static_cast<int32_t>(attributes[i].id));
        list[i].setValue(
            capnp::Data::Reader(reinterpret_cast<const uint8_t*>(&attributes[i].value), sizeof attributes[i].value));
      }
    }
    writeLaunchParams(launch, params, pointers);
    launch.setCapturing(capturing);
    if (collectiveCall) {
      launch.setCollectiveCall(true);
    }
    if (noSnapshotReason != nullptr) {
      launch.setNoSnapshotReason(noSnapshotReason);
    }
    if (synchronized) {
      launch.setSyncResult(syncResult);
      if (snapshotError != CUDA_SUCCESS) {
        launch.setSnapshotError(snapshotError);
      }
      writeRanges(launch.initPre(static_cast<unsigned>(pre.size())), pre);
    }
    if (!indirect.empty()) {  // an empty list reads as an unset one: not made for every launch
      auto indirectList = launch.initIndirectPointers(static_cast<unsigned>(indirect.size()));
      for (unsigned i = 0; i < indirect.size(); ++i) {
        indirectList[i].setBufferAddress(indirect[i].bufferAddress);
        indirectList[i].setOffset(indirect[i].offset);
        indirectList[i].setValue(indirect[i].value);
        indirectList[i].setAllocationBase(indirect[i].allocationBase);
      }
    }
    // A call that has not returned (the process died in it, or it
    // blocked past the writer's wait) leaves the event without its end.
    if (outcomeFollows && outcome.await() == LaunchOutcome::kReturned) {
      launch.setEnded(true);
      launch.setResult(outcome.result);
      const uint64_t endNs = clock->toNs(outcome.endStamp);
      launch.setCallNs(endNs > startNs ? endNs - startNs : 0);
    }
  }
};

// Checkpoint mode: page-locked host memory, managed memory and another
// process's memory a launch can reach are inputs re-execution cannot
// recompute (the host or that process writes them), so their content at
// the launch goes into the launch's `pre` (identical pieces are stored
// once). Managed memory holds what the device's earlier work wrote too,
// and another process's writes reach this one through the launch's stream
// (an IPC event waited for, or the host's synchronization): the stream is
// synchronized before such memory is read, so that it is read as the
// launch will see it. Returns whether the launch reaches page-locked host
// memory.
bool captureLoggedInputs(LaunchEventData& data, const AllocationMap& allocations, format::TraceWriter& writer,
                         StagingPool& staging, CUstream stream, bool hashOnDevice) {
  // Most launches reach no such memory: no set made for them.
  if (std::none_of(data.pointers.begin(), data.pointers.end(),
                   [](const ParamPointer& pointer) { return pointer.loggedInput; })) {
    return false;
  }
  bool readsHost = false;
  bool synchronized = false;
  std::set<uint64_t> seen;
  for (const ParamPointer& pointer : data.pointers) {
    if (!pointer.loggedInput) {
      continue;
    }
    const auto extent = allocations.findExtent(pointer.value);
    // NCCL's own memory: only NCCL's kernels, which re-execution does not run, use it.
    if (!extent || extent->byNccl || !seen.insert(extent->base).second) {
      continue;
    }
    const bool waits = extent->kind == AllocationKind::kImported || extent->kind == AllocationKind::kManaged;
    readsHost = readsHost || extent->kind == AllocationKind::kHostMapped;
    if (waits && !synchronized) {
      const RelaxedCaptureMode relaxed;
      if (driverApi().streamSynchronize == nullptr || driverApi().streamSynchronize(stream) != CUDA_SUCCESS) {
        continue;  // not logged: re-execution says the launch's input is not placed
      }
      synchronized = true;
    }
    TakenRange entry{{extent->base, extent->size, extent->base, memoryKind(extent->kind)}, {}};
    // Another process's device memory is hashed on the device (most of a
    // shared pool is as it was at the last launch); host and managed memory
    // are read on the host, where their writer put them.
    const bool onDevice = hashOnDevice && extent->kind == AllocationKind::kImported;
    if (snapshot(writer, staging, entry.range, entry.content, nullptr, onDevice) == CUDA_SUCCESS) {
      data.pre.push_back(std::move(entry));
      data.synchronized = true;  // `pre` is meaningful
    }
  }
  return readsHost;
}

// A LaunchEnd event, the same way.
struct LaunchEndData final : format::DeferredEvent {
  LaunchEndData* nextFree = nullptr;  // Recycler
  Recycler<LaunchEndData>* home = nullptr;

  TraceClock* clock = nullptr;
  uint64_t stamp = 0;
  uint32_t threadId = 0;
  uint64_t launchIndex = 0;
  CUresult result = CUDA_SUCCESS;
  bool synchronized = false;  // a post snapshot was attempted
  CUresult syncResult = CUDA_SUCCESS;
  CUresult snapshotError = CUDA_SUCCESS;
  std::vector<TakenRange> post;

  void clear() {
    clock = nullptr;
    stamp = 0;
    threadId = 0;
    launchIndex = 0;
    result = CUDA_SUCCESS;
    synchronized = false;
    syncResult = CUDA_SUCCESS;
    snapshotError = CUDA_SUCCESS;
    post.clear();
  }
  void release() noexcept override { Recycler<LaunchEndData>::release(this); }

  size_t sizeHint() const override { return 96 + rangesHint(post); }

  void build(schema::Event::Builder event, unsigned) const override {
    buildLaunchEnd(event, *clock, stamp, threadId, launchIndex, result);
    auto end = event.getLaunchEnd();
    if (synchronized) {
      end.setSyncResult(syncResult);
      if (snapshotError != CUDA_SUCCESS) {
        end.setSnapshotError(snapshotError);
      }
      if (syncResult == CUDA_SUCCESS) {
        writeRanges(end.initPost(static_cast<unsigned>(post.size())), post);
      }
    }
  }
};

}  // namespace

void writeLaunchParams(schema::Launch::Builder launch, const ParamBuffer& params,
                       std::span<const ParamPointer> pointers) {
  launch.setParams(capnp::Data::Reader(params.bytes.data(), params.bytes.size()));
  launch.setParamsFromExtra(params.fromExtra);
  const std::span<const ParamSlot> slots = params.layout();
  auto layout = launch.initParamLayout(static_cast<unsigned>(slots.size()));
  for (unsigned i = 0; i < slots.size(); ++i) {
    layout[i].setOffset(slots[i].offset);
    layout[i].setSize(slots[i].size);
  }
  auto words = launch.initPointers(static_cast<unsigned>(pointers.size()));
  for (unsigned i = 0; i < pointers.size(); ++i) {
    words[i].setOffset(pointers[i].offset);
    words[i].setValue(pointers[i].value);
    words[i].setAllocationBase(pointers[i].allocationBase);
    words[i].setInTensorMap(pointers[i].inTensorMap);
  }
}

// Only called when a filter is set: launchStarting tests that inline, so
// that unfiltered launches do not pay for a call.
bool Recorder::selects(std::string_view kernelName) {
  // Names come interned from the code registry: one decision per name.
  const char* key = kernelName.data();
  {
    std::shared_lock lock(selectionMutex_);
    const auto it = selection_.find(key);
    if (it != selection_.end()) {
      return it->second;
    }
  }
  const bool selected = options_.selects(kernelName);
  std::unique_lock lock(selectionMutex_);
  selection_.emplace(key, selected);
  return selected;
}

bool Recorder::launchStarting(const LaunchCall& call, PendingLaunch& launch) {
  Operation operation(*this);
  if (!operation) {
    return false;
  }
  // The launch's time: taken first, so that the checkpoint test needs no
  // clock of its own, and again after a checkpoint taken here (the
  // checkpoint comes before the launch in time as in the trace).
  uint64_t stamp = clock_.stamp();
  if (checkpoints_ != nullptr) [[unlikely]] {
    if (checkpointDue(stamp) && !hostWaiters_.pending()) {
      checkpointNow(schema::CheckpointReason::INTERVAL, std::chrono::milliseconds(100));
      stamp = clock_.stamp();
    }
    checkpoints_->streamUsed(call.perThreadStream && call.stream == nullptr ? CU_STREAM_PER_THREAD : call.stream);
  }
  LaunchTarget target = launchTarget(call.function);
  std::string noLayoutWhy;
  if (target.info.layout == nullptr && !target.info.layoutAskedAtLaunch) [[unlikely]] {
    target.info.layout = layoutAtLaunch(call.function, target.info, noLayoutWhy);
  }
  const std::string_view kernelName = target.kernelName;
  if ((options_.includePattern || options_.excludePattern) && !selects(kernelName)) {
    filteredLaunches_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // The only count a recorded launch adds to: how many were recorded and
  // how many the launch range left out follow from it (end(): traceEnd).
  // Numbered by the writer, a launch has no number yet (nothing before
  // the call needs it).
  uint64_t eligible = 0;
  if (!numberedByWriter_) {
    eligible = eligibleLaunches_.fetch_add(1, std::memory_order_relaxed);
    if (eligible < options_.skip || eligible - options_.skip >= options_.maxLaunches) {
      return false;
    }
  }

  PendingLaunch* const pending = &launch;
  pending->recorder = this;
  pending->launchIndex = eligible - options_.skip;
  pending->syncStream = call.perThreadStream && call.stream == nullptr ? CU_STREAM_PER_THREAD : call.stream;

  LaunchEventData* data = Recycler<LaunchEventData>::take(Recycler<LaunchEventData>::ofThisThread());
  format::DeferredEventPtr event(data);  // back to the pool if anything below throws
  data->clock = &clock_;
  data->stamp = stamp;
  data->threadId = callerThreadId();
  data->launchIndex = pending->launchIndex;
  data->launchCounter = numberedByWriter_ ? &eligibleLaunches_ : nullptr;
  data->call = call;
  data->kernelName = kernelName;
  data->context = currentContext();
  data->device = deviceOf(data->context);
  if (call.attributes != nullptr && call.attributeCount != 0) {
    data->attributes.assign(call.attributes, call.attributes + call.attributeCount);
  }

  // Parameters and the words of them that are device pointers.
  const FunctionInfo& info = target.info;
  assembleParams(info.layout, call.kernelParams, call.extra, data->params);
  if (!data->params.complete) {
    noteOnce(notedNoLayout_, schema::Message::Level::WARNING,
             "the driver gave no parameter layout for " + std::string(kernelName) + " (" +
                 (noLayoutWhy.empty() ? std::string("cuFuncGetParamInfo / cuKernelGetParamInfo") : noLayoutWhy) +
                 "); launches passing kernelParams are recorded without parameters");
  }
  scanParams(data->params.bytes.data(), data->params.bytes.size(), data->params.layout(), allocations_, tensorMaps_,
             data->pointers);
  const std::vector<ParamPointer>& pointers = data->pointers;

  // No stream of the process is capturing (the capture hooks count them):
  // no need to ask the driver on every launch.
  const bool capturing = streamCapturing(pending->syncStream);
  data->capturing = capturing;
  pending->executes = !capturing;
  bool snapshots = !perLaunchMetadataOnly(options_.mode) && !capturing;
  // Tracked only where something synchronizes (snapshots, checkpoints):
  // there alone can the recorder hold such a kernel back.
  pending->waitsForHost = !capturing && target.waitsForHost && (snapshots || checkpoints_ != nullptr);
  const bool nccl = target.nccl;
  data->collectiveCall = nccl && insideCollectiveCall();
  if (snapshots && nccl) {
    snapshots = false;
    data->noSnapshotReason = "it waits for its peers (NCCL): synchronizing could hold them back";
    noteOnce(notedNoSync_, schema::Message::Level::INFO,
             "kernels that wait for their peers (" + std::string(kernelName) +
                 ") are recorded without synchronizing and without memory snapshots");
  } else if (snapshots && pending->waitsForHost) {
    snapshots = false;
    data->noSnapshotReason = "it waits for the host to release it after more work is queued behind it";
    noteOnce(notedWaitsForHost_, schema::Message::Level::INFO,
             "kernels that wait for the host (" + std::string(kernelName) +
                 ") and the launches queued while one runs are recorded without memory snapshots: "
                 "synchronizing would hold it back");
  } else if (snapshots && hostWaiters_.pending()) {
    snapshots = false;
    data->noSnapshotReason =
        "it was queued while a kernel that waits for the host may still run: synchronizing would hold that back";
  }

  if (checkpoints_ != nullptr && !capturing && !nccl) {
    pending->readsHostMemory =
        captureLoggedInputs(*data, allocations_, *writer_, staging_, pending->syncStream, options_.hashOnDevice);
  }

  if (snapshots) {
    const RelaxedCaptureMode relaxed;
    const DriverApi& api = driverApi();
    CUresult sync = CUDA_SUCCESS;
    if (activeCaptures_.load() == 0 && api.ctxSynchronize != nullptr) {
      sync = api.ctxSynchronize();
    } else if (api.streamSynchronize != nullptr) {
      sync = api.streamSynchronize(pending->syncStream);
    }
    data->synchronized = true;
    data->syncResult = sync;

    // What the launch can reach: the allocations its pointer words hit,
    // what pointers inside the small ones hit, the module's globals.
    std::vector<SnapshotRange> direct;
    std::set<uint64_t> seen;
    {
      const AllocationMap::Reader reader(allocations_);  // not held across the driver calls below
      for (const ParamPointer& pointer : pointers) {
        const auto extent = reader.findExtent(pointer.value);
        if (extent && seen.insert(extent->base).second) {
          direct.push_back({extent->base, extent->size, extent->base, memoryKind(extent->kind)});
        }
      }
    }
    std::vector<TakenRange>& taken = data->pre;
    CUresult failed = sync;
    std::vector<SnapshotRange> second;
    for (const SnapshotRange& range : direct) {
      if (failed != CUDA_SUCCESS) {
        break;
      }
      std::vector<uint8_t> bytes;
      const bool scan = range.size <= kIndirectScanLimit;
      TakenRange entry{range, {}};
      failed = snapshot(*writer_, staging_, range, entry.content, scan ? &bytes : nullptr, options_.hashOnDevice);
      if (failed != CUDA_SUCCESS) {
        break;
      }
      taken.push_back(std::move(entry));
      if (scan) {
        for (const IndirectPointer& found : scanIndirect(bytes.data(), bytes.size(), range.address, allocations_)) {
          data->indirect.push_back(found);
          const auto extent = allocations_.findExtent(found.value);
          if (extent && seen.insert(extent->base).second) {
            second.push_back({extent->base, extent->size, extent->base, memoryKind(extent->kind)});
          }
        }
      }
    }
    for (const GlobalVariable& global : CodeRegistry::instance().globalsOf(info.owner)) {
      if (seen.insert(global.address).second) {
        second.push_back({global.address, global.size, global.address, schema::MemoryKind::MODULE_GLOBAL});
      }
    }
    for (const SnapshotRange& range : second) {
      if (failed != CUDA_SUCCESS) {
        break;
      }
      TakenRange entry{range, {}};
      failed = snapshot(*writer_, staging_, range, entry.content, nullptr, options_.hashOnDevice);
      if (failed == CUDA_SUCCESS) {
        taken.push_back(std::move(entry));
      }
    }
    if (failed != CUDA_SUCCESS && sync == CUDA_SUCCESS) {
      data->snapshotError = failed;
    }
    pending->postSnapshot = options_.mode == CaptureMode::kFull && sync == CUDA_SUCCESS && failed == CUDA_SUCCESS;
    for (const TakenRange& entry : taken) {
      pending->ranges.push_back(entry.range);
    }
  }

  if (perLaunchMetadataOnly(options_.mode)) {
    // Handed over now, last before the call; its outcome follows
    // (observers.cpp stores it right after the call returns).
    data->outcomeFollows = true;
    data->outcome.reset(&clock_);
    LaunchEventData::t_handingOver = data;
    try {
      writer_->append(std::move(event));
    } catch (...) {
      LaunchEventData::t_handingOver = nullptr;
      throw;
    }
    LaunchEventData::t_handingOver = nullptr;
    pending->outcome = &data->outcome;
    pending->endsInLaunch = true;
    return true;
  }
  writer_->append(std::move(event));
  if (options_.flush == FlushPolicy::kLaunch) {
    flush();  // in the file before the launch runs: a launch that kills the process is still recorded
  }
  return true;
}

void Recorder::launchFinished(PendingLaunch& pending, CUresult result) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  if (pending.readsHostMemory && result == CUDA_SUCCESS && checkpoints_ != nullptr) {
    checkpoints_->hostReadingLaunch(pending.syncStream);
  }
  if (pending.waitsForHost && result == CUDA_SUCCESS) {
    hostWaiters_.launched(pending.syncStream);
  }
  if (pending.endsInLaunch) {
    return;  // its outcome is in its event (observers.cpp stored it)
  }
  LaunchEndData* data = Recycler<LaunchEndData>::take(Recycler<LaunchEndData>::ofThisThread());
  format::DeferredEventPtr event(data);
  data->clock = &clock_;
  data->stamp = clock_.stamp();
  data->threadId = callerThreadId();
  data->launchIndex = pending.launchIndex;
  data->result = result;
  if (pending.postSnapshot && result == CUDA_SUCCESS) {
    const RelaxedCaptureMode relaxed;
    const auto synchronize = driverApi().streamSynchronize;
    data->synchronized = true;
    data->syncResult = synchronize != nullptr ? synchronize(pending.syncStream) : CUDA_ERROR_NOT_FOUND;
    if (data->syncResult == CUDA_SUCCESS) {
      for (const SnapshotRange& range : pending.ranges) {
        TakenRange entry{range, {}};
        const CUresult failed = snapshot(*writer_, staging_, range, entry.content, nullptr, options_.hashOnDevice);
        if (failed != CUDA_SUCCESS) {
          data->snapshotError = failed;
          break;
        }
        data->post.push_back(std::move(entry));
      }
    }
  }
  writer_->append(std::move(event));
}

}  // namespace kcap
