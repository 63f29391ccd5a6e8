#include "replayer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>

#include "checkers.h"
#include "driver.h"
#include "hex_text.h"
#include "message_check.h"
#include "piece_hashes.h"

namespace kcap::replay {
namespace {

// Launch attributes that name objects of the recorded process (events):
// meaningless here, so not re-applied.
bool namesRecordedObject(int32_t id) {
  return id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT || id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
}

void appendDetail(LaunchOutcome& o, const std::string& text) { o.detail += (o.detail.empty() ? "" : "; ") + text; }

}  // namespace

uint64_t Replayer::nsSince(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

// The checkers' view of the launch just replayed (checkers.h).
class LaunchCheckTarget : public CheckTarget {
 public:
  LaunchCheckTarget(Replayer& r, const LaunchRun& run, ReplayListener& listener)
      : r_(r), run_(run), listener_(listener) {}
  ~LaunchCheckTarget() override {
    for (const CUdeviceptr p : scratch_) r_.driver_.cuMemFree(p);
  }
  const LaunchRecord& launch() const override { return run_.launch; }
  const TraceModel& model() const override { return r_.model_; }
  const ReplayOptions& options() const override { return r_.options_; }
  format::TraceReader& reader() override { return r_.reader_; }
  void restore() override {
    RestoreStats ignored;
    r_.restore(run_.launch, run_.kernel, ignored);
  }
  void write(uint64_t recorded, const uint8_t* data, uint64_t size) override {
    r_.copyToDevice(at(recorded), data, size);
  }
  std::vector<uint8_t> read(uint64_t recorded, uint64_t size) override {
    std::vector<uint8_t> bytes(size);
    r_.copyFromDevice(bytes.data(), at(recorded), size);
    return bytes;
  }
  std::vector<uint8_t> params() override { return r_.buildParams(run_.launch, run_.kernel).bytes; }
  void run(std::vector<uint8_t>& params) override {
    listener_.launchStarting(run_.outcome);  // the watchdog covers every check launch
    r_.launchOnce(run_.launch, run_.kernel, params);
    listener_.launchDone(run_.launch.launchIndex);
  }
  uint64_t scratch(uint64_t size) override {
    CUdeviceptr p = 0;
    check(r_.driver_.cuMemAlloc(&p, std::max<uint64_t>(size, 1)), "cuMemAlloc of " + std::to_string(size) + " bytes");
    scratch_.push_back(p);
    return p;
  }
  void writeDevice(uint64_t address, const uint8_t* data, uint64_t size) override {
    r_.copyToDevice(address, data, size);
  }
  std::vector<uint8_t> readDevice(uint64_t address, uint64_t size) override {
    std::vector<uint8_t> bytes(size);
    r_.copyFromDevice(bytes.data(), address, size);
    return bytes;
  }
  const std::vector<DeviceMemory::GuardedSpan>& placeGuarded() override {
    r_.memory_->release();
    r_.memory_->placeGuarded(r_.regionsOf(run_.launch));
    return r_.memory_->guarded();
  }

 private:
  CUdeviceptr at(uint64_t recorded) const {
    const auto p = r_.translate(recorded, run_.kernel);
    if (!p) throw ReplayError("recorded address " + std::to_string(recorded) + " has no place in this replay");
    return *p;
  }
  Replayer& r_;
  const LaunchRun& run_;
  ReplayListener& listener_;
  std::vector<CUdeviceptr> scratch_;
};

Replayer::Replayer(const TraceModel& model, format::TraceReader& reader, const ReplayOptions& options)
    : model_(model), reader_(reader), options_(options), driver_(driver()) {
  int count = 0;
  check(driver_.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (options_.device < 0 || options_.device >= count) {
    throw ReplayError("--device " + std::to_string(options_.device) + ": this machine has " + std::to_string(count) +
                      " GPU(s)");
  }
  check(driver_.cuDeviceGet(&device_, options_.device), "cuDeviceGet");
  int major = 0, minor = 0;
  check(driver_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_),
        "compute capability");
  check(driver_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_),
        "compute capability");
  sm_ = major * 10 + minor;
  char name[256] = {};
  if (driver_.cuDeviceGetName(name, sizeof name - 1, device_) == CUDA_SUCCESS) deviceName_ = name;
  check(driver_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  // The device the context is on, as the driver tells it (kcap bisect
  // --devices shows that the two sides ran on two GPUs).
  CUdevice current = 0;
  char bus[32] = {};
  if (driver_.cuCtxGetDevice != nullptr && driver_.cuDeviceGetPCIBusId != nullptr &&
      driver_.cuCtxGetDevice(&current) == CUDA_SUCCESS &&
      driver_.cuDeviceGetPCIBusId(bus, sizeof bus - 1, current) == CUDA_SUCCESS) {
    pciBusId_ = bus;
  }
  check(driver_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  memory_ = std::make_unique<DeviceMemory>(driver_, device_, options_.fixedAddresses);
  code_ = std::make_unique<CodeCache>(driver_, reader_, sm_, options_);
  hasher_ = std::make_unique<PieceHasher>(driver_, stream_);
}

Replayer::~Replayer() {
  memory_.reset();
  code_.reset();
  hasher_.reset();
  if (staging_ != nullptr) driver_.cuMemFreeHost(staging_);
  for (uint8_t* buffer : windows_) {
    if (buffer != nullptr) driver_.cuMemFreeHost(buffer);
  }
  for (CUevent event : windowDone_) {
    if (event != nullptr) driver_.cuEventDestroy(event);
  }
  if (stream_ != nullptr) driver_.cuStreamDestroy(stream_);
}

uint8_t* Replayer::staging(uint64_t size) {
  if (size > stagingSize_) {
    if (staging_ != nullptr) driver_.cuMemFreeHost(staging_);
    staging_ = nullptr;
    stagingSize_ = 0;
    void* p = nullptr;
    check(driver_.cuMemAllocHost(&p, size), "cuMemAllocHost of " + std::to_string(size) + " bytes");
    staging_ = static_cast<uint8_t*>(p);
    stagingSize_ = size;
  }
  return staging_;
}

// Copies between host and device go on the replay stream and are waited
// for. A plain cuMemcpyHtoD would go on the legacy default stream, which the
// replay stream (non-blocking) does not wait for, and from pageable memory
// it returns before the bytes arrive: a launch right after it could run on
// memory not yet restored or poisoned.
void Replayer::copyToDevice(CUdeviceptr dst, const uint8_t* src, uint64_t size) {
  check(driver_.cuMemcpyHtoDAsync(dst, src, size, stream_), "restoring " + std::to_string(size) + " bytes");
  check(driver_.cuStreamSynchronize(stream_), "restoring " + std::to_string(size) + " bytes");
}

void Replayer::copyFromDevice(uint8_t* dst, CUdeviceptr src, uint64_t size) {
  check(driver_.cuMemcpyDtoHAsync(dst, src, size, stream_), "reading back " + std::to_string(size) + " bytes");
  check(driver_.cuStreamSynchronize(stream_), "reading back " + std::to_string(size) + " bytes");
}

std::optional<uint64_t> Replayer::translate(uint64_t recorded, const LoadedKernel& kernel) const {
  // Globals first: they are exact, while a placed group spans whole granules
  // and may cover a global's recorded address without holding it.
  for (const GlobalPlacement& g : kernel.globals) {
    if (recorded >= g.recordedAddress && recorded - g.recordedAddress < g.size) {
      return g.address + (recorded - g.recordedAddress);
    }
  }
  return memory_->addresses().translate(recorded);
}

// Where a recorded write of `size` bytes at `recorded` lands (or, `reads`,
// where a device-to-device copy reads them): nullopt when its first byte is
// in no placed memory (memory no replayed launch reaches). An extent that
// starts in placed memory and runs past it cannot come from a program (a
// copy stays inside one allocation): the trace is damaged, and writing it
// would overwrite whatever replay placed next.
std::optional<uint64_t> Replayer::writeTarget(const StoredEvent& op, uint64_t recorded, uint64_t size,
                                              const LoadedKernel& kernel, bool reads) const {
  const auto first = translate(recorded, kernel);
  if (!first || size == 0) return first;
  uint64_t last = 0;
  const auto lastPlaced = __builtin_add_overflow(recorded, size - 1, &last) ? std::nullopt : translate(last, kernel);
  if (!lastPlaced || *lastPlaced != *first + (size - 1)) {
    throw ReplayError("the trace is malformed at event #" + std::to_string(op.seq()) +
                      (reads ? ": it reads " : ": it writes ") + std::to_string(size) + " bytes at " +
                      hexText(recorded) + ", past the end of the memory they start in");
  }
  return first;
}

std::vector<Region> Replayer::regionsOf(const LaunchRecord& launch) const {
  std::vector<Region> regions;
  const auto add = [&](capnp::List<schema::MemoryRange>::Reader ranges) {
    for (const auto range : ranges) {
      if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) continue;
      regions.push_back({range.getAddress(), range.getContent().getSize()});
    }
  };
  add(launch.event().getPre());
  if (launch.end != nullptr) add(launch.end->get().getLaunchEnd().getPost());
  return regions;
}

LaunchOutcome outcomeOf(const LaunchRecord& launch) {
  const auto e = launch.event();
  LaunchOutcome o;
  o.launchIndex = launch.launchIndex;
  o.kernel = e.getKernelName();
  o.grid[0] = e.getGridX(), o.grid[1] = e.getGridY(), o.grid[2] = e.getGridZ();
  o.block[0] = e.getBlockX(), o.block[1] = e.getBlockY(), o.block[2] = e.getBlockZ();
  o.sharedMemBytes = e.getSharedMemBytes();
  o.recordedDurationNs = launch.recordedDurationNs;
  return o;
}

void Replayer::launchOnce(const LaunchRecord& launch, const LoadedKernel& kernel, std::vector<uint8_t>& params,
                          bool synchronize) {
  const auto e = launch.event();
  CUlaunchConfig config{};
  config.gridDimX = e.getGridX(), config.gridDimY = e.getGridY(), config.gridDimZ = e.getGridZ();
  config.blockDimX = e.getBlockX(), config.blockDimY = e.getBlockY(), config.blockDimZ = e.getBlockZ();
  config.sharedMemBytes = e.getSharedMemBytes();
  config.hStream = stream_;
  // Reused from launch to launch: re-execution submits launches back to back.
  std::vector<CUlaunchAttribute>& attributes = attributeScratch_;
  attributes.clear();
  for (const auto recorded : e.getAttributes()) {
    if (namesRecordedObject(recorded.getId())) continue;
    CUlaunchAttribute a{};
    a.id = static_cast<CUlaunchAttributeID>(recorded.getId());
    std::memcpy(&a.value, recorded.getValue().begin(), std::min(sizeof a.value, recorded.getValue().size()));
    attributes.push_back(a);
  }
  if (e.getApi() == schema::LaunchApi::LAUNCH_COOPERATIVE_KERNEL) {
    CUlaunchAttribute a{};
    a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    a.value.cooperative = 1;
    attributes.push_back(a);
  }
  config.attrs = attributes.data();
  config.numAttrs = static_cast<unsigned>(attributes.size());

  std::vector<void*>& arguments = argumentScratch_;
  arguments.clear();
  for (const auto info : e.getParamLayout()) {
    if (uint64_t{info.getOffset()} + info.getSize() > params.size()) {
      throw ReplayError("the recorded parameter layout does not fit the recorded parameter bytes");
    }
    arguments.push_back(params.data() + info.getOffset());
  }
  size_t paramSize = params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &paramSize,
                   CU_LAUNCH_PARAM_END};
  // A buffer the program passed as one (`extra`) goes back as one: without
  // the kernel's layout the recording only knows the buffer as a whole.
  const bool useExtra = !params.empty() && (e.getParamsFromExtra() || arguments.empty());
  check(driver_.cuLaunchKernelEx(&config, kernel.function, useExtra ? nullptr : arguments.data(),
                                 useExtra ? extra : nullptr),
        "cuLaunchKernelEx");
  if (synchronize) check(driver_.cuStreamSynchronize(stream_), "the launch");
}

void Replayer::timeRepeats(LaunchRun& run, std::vector<uint8_t>& params) {
  LaunchOutcome& outcome = run.outcome;
  if (options_.repeat == 0) return;
  if (driver_.cuEventElapsedTime == nullptr) {
    appendDetail(outcome, "--repeat: the driver has no cuEventElapsedTime");
    return;
  }
  CUevent start = nullptr, stop = nullptr;
  check(driver_.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(driver_.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  for (unsigned i = 0; i < options_.repeat; ++i) {
    check(driver_.cuEventRecord(start, stream_), "cuEventRecord");
    launchOnce(run.launch, run.kernel, params);
    check(driver_.cuEventRecord(stop, stream_), "cuEventRecord");
    check(driver_.cuEventSynchronize(stop), "cuEventSynchronize");
    float ms = 0;
    check(driver_.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    outcome.timesNs.push_back(static_cast<uint64_t>(static_cast<double>(ms) * 1e6));
  }
  driver_.cuEventDestroy(start);
  driver_.cuEventDestroy(stop);
}

// One launch, whatever the mode: `place` places its memory, `prepare`
// restores it (once the code, and so the module's globals, are loaded).
// A sticky error is reported, then ends the run (ContextLost).
void Replayer::replayLaunch(LaunchRun& run, const std::function<void()>& place,
                            const std::function<void(LaunchRun&)>& prepare, ReplayListener& listener) {
  const LaunchRecord& l = run.launch;
  LaunchOutcome& o = run.outcome;
  bool launched = false;
  run.companion.reset();  // a companion prepared for a launch that then failed runs on its own
  try {
    if (model_.traceBegin() != nullptr &&
        model_.traceBegin()->get().getTraceBegin().getCaptureMode() == schema::CaptureMode::METADATA) {
      throw ReplayError("the trace was recorded with --mode metadata: it holds no memory to replay from");
    }
    if (l.event().getCapturing()) throw ReplayError("captured into a CUDA graph: it never ran as a launch");
    if (const auto why = l.event().getNoSnapshotReason(); why.size() != 0) {
      throw ReplayError(std::string("NOT REPLAYABLE: recorded without its memory: ") + why.cStr());
    }
    if (const std::string bad = format::launchParamProblem(l.event()); !bad.empty()) {
      throw ReplayError("the trace is malformed at event #" + std::to_string(l.seq()) + ": " + bad);
    }
    const CodeRef code = model_.codeFor(l);
    // Memory is placed before the code is loaded: a module's own memory must
    // not take a recorded address first.
    const auto placeStart = std::chrono::steady_clock::now();
    place();
    run.kernel = code_->kernelFor(code);
    o.kernel = code.kernelName;
    o.code = run.kernel.code;
    if (const std::string missing = missingParameters(l, run.kernel); !missing.empty()) throw ReplayError(missing);
    allocateRestoreBuffers(l);
    run.restore = {};
    o.placeNs = nsSince(placeStart);
    const auto restoreStart = std::chrono::steady_clock::now();
    prepare(run);
    o.restoreNs = nsSince(restoreStart);
    o.restoredBytes = run.restore.bytes;
    o.uploadedBytes = run.restore.uploadedBytes;
    o.restoreWaitNs = run.restore.waitNs;
    o.memory = memory_->path();
    if (options_.fixedAddresses && !memory_->refusal().empty()) {
      o.detail = "recorded addresses not granted: " + memory_->refusal();
    }
    LaunchParams params = buildParams(l, run.kernel);
    if (!params.reencodedFrom.empty()) {
      std::string from;
      for (const uint64_t seq : params.reencodedFrom) from += (from.empty() ? "#" : ", #") + std::to_string(seq);
      appendDetail(o, std::to_string(params.reencodedFrom.size()) +
                          (params.reencodedFrom.size() == 1 ? " tensor map re-encoded" : " tensor maps re-encoded") +
                          " here (tensorMapEncode " + from + ")");
    }
    listener.launchStarting(o);
    launched = true;
    std::set<uint64_t> comparedLater;  // ranges the companion changes: compared with its outcome
    if (run.ranAhead) {
      // Already run, behind the launch before it (programmatic dependent launch).
      appendDetail(o, "ran overlapped with the launch before it (programmatic dependent launch)");
    } else if (run.companion) {
      Companion& companion = *run.companion;
      launchOnce(l, run.kernel, params.bytes, false);
      launchOnce(*companion.launch, companion.kernel, companion.params, true);
      run.submittedBehind = companion.launch->launchIndex;
      comparedLater = rangesChangedBy(*companion.launch);
      appendDetail(o, "launch " + std::to_string(companion.launch->launchIndex) +
                          " ran overlapped with it (programmatic dependent launch); compared after both" +
                          (comparedLater.empty() ? std::string() : ", but for the ranges that launch changes"));
    } else {
      launchOnce(l, run.kernel, params.bytes);
    }
    listener.launchDone(l.launchIndex);
    if (!options_.saveOutputsDir.empty()) saveOutputs(l, run.kernel);
    if (const int32_t recorded = l.result().value_or(0); recorded != 0) {
      o.verdict = Verdict::kDiffers;
      o.detail = "the recorded launch was refused with CUresult " + std::to_string(recorded) + "; here it ran";
      return;
    }
    compare(run, comparedLater);
    timeRepeats(run, params.bytes);
    if (!options_.checks.empty() && run.runChecks) {
      LaunchCheckTarget target(*this, run, listener);
      if (!runChecks(target, o)) {
        listener.outcome(o);  // the checks' findings, then the context is gone
        throw ContextLost{};
      }
    }
  } catch (const CudaError& error) {
    o.verdict = launched ? Verdict::kFault : Verdict::kError;
    const std::string memoryNote = o.detail;  // "recorded addresses not granted: ..." when there is one
    o.detail = error.what();
    if (!memoryNote.empty()) o.detail += "; " + memoryNote;
    // A launch the driver refused when it was recorded (a program testing
    // its error path) reproduces by being refused the same way.
    if (launched && l.result() == static_cast<int32_t>(error.result())) {
      o.verdict = Verdict::kReproduced;
      o.detail = std::string("refused as recorded: ") + error.what() + (memoryNote.empty() ? "" : "; " + memoryNote);
    }
    if (error.sticky()) {
      listener.outcome(o);
      throw ContextLost{};
    }
  } catch (const std::exception& error) {  // ReplayError, a damaged trace (FormatError), ...
    o.verdict = Verdict::kError;
    o.detail = error.what() + (o.detail.empty() ? "" : "; " + o.detail);
  }
}

void Replayer::run(const Selection& selection, ReplayListener& listener) {
  std::vector<const LaunchRecord*> launches;
  for (const uint64_t index : selection.launchIndices) {
    if (const LaunchRecord* l = model_.launch(index)) launches.push_back(l);
  }
  if (selection.sequence) {
    const bool determinism =
        std::find(options_.checks.begin(), options_.checks.end(), "determinism") != options_.checks.end();
    if (determinism) {
      runSequenceForDeterminism(launches, listener);
    } else {
      runSequence(launches, listener);
    }
    return;
  }
  for (const LaunchRecord* l : launches) {
    LaunchRun run(*l);
    replayLaunch(
        run,
        [&] {
          // Memory placed for an earlier launch that holds every range of
          // this one stays: its restore then copies only what differs
          // (a pool every launch reaches is placed once, not per launch).
          const std::vector<Region> regions = regionsOf(*l);
          if (memory_->holds(regions)) return;
          memory_->release();
          memory_->place(regions);
        },
        [&](LaunchRun& r) { restore(*l, r.kernel, r.restore); }, listener);
    listener.outcome(run.outcome);
  }
  for (const uint64_t index : selection.graphLaunchIndices) {
    if (const GraphLaunchRecord* g = model_.graphLaunch(index)) listener.outcome(replayGraphLaunch(*g, listener));
  }
}
}  // namespace kcap::replay
