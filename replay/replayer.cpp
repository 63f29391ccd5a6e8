#include "replayer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>

#include "checkers.h"
#include "driver.h"
#include "message_check.h"

namespace kcap::replay {
namespace {

// Launch attributes that name objects of the recorded process (events):
// meaningless here, so not re-applied.
bool namesRecordedObject(int32_t id) {
  return id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT || id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
}

void appendDetail(LaunchOutcome& o, const std::string& text) { o.detail += (o.detail.empty() ? "" : "; ") + text; }

bool sameContent(schema::Content::Reader a, schema::Content::Reader b) {
  if (a.getSize() != b.getSize() || a.getPieceSize() != b.getPieceSize() ||
      a.getPieces().size() != b.getPieces().size()) {
    return false;
  }
  for (unsigned i = 0; i < a.getPieces().size(); ++i) {
    if (a.getPieces()[i].getHigh() != b.getPieces()[i].getHigh() ||
        a.getPieces()[i].getLow() != b.getPieces()[i].getLow()) {
      return false;
    }
  }
  return true;
}

}  // namespace

uint64_t Replayer::nsSince(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

bool startsBeforeEnd(const TraceModel& model, const LaunchRecord& previous, const LaunchRecord& next) {
  const auto a = previous.event(), b = next.event();
  if (a.getStream() != b.getStream() || a.getPerThreadStream() != b.getPerThreadStream() ||
      a.getContext() != b.getContext() || b.getCapturing() || a.getCapturing()) {
    return false;
  }
  if (!model.memoryOpsBetween(previous.seq(), next.seq()).empty()) return false;
  for (const auto attribute : b.getAttributes()) {
    int32_t allowed = 0;
    if (attribute.getId() == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
        attribute.getValue().size() >= sizeof allowed) {
      std::memcpy(&allowed, attribute.getValue().begin(), sizeof allowed);
      if (allowed != 0) return true;
    }
  }
  return false;
}

std::set<uint64_t> rangesChangedBy(const LaunchRecord& launch) {
  std::set<uint64_t> changed;
  if (launch.end == nullptr) return changed;
  for (const auto post : launch.end->get().getLaunchEnd().getPost()) {
    bool same = false;
    for (const auto pre : launch.event().getPre()) {
      if (pre.getAddress() == post.getAddress()) same = sameContent(pre.getContent(), post.getContent());
    }
    if (!same) changed.insert(post.getAddress());
  }
  return changed;
}

// The checkers' view of the launch just replayed (checkers.h).
class LaunchCheckTarget : public CheckTarget {
 public:
  LaunchCheckTarget(Replayer& r, const LaunchRecord& launch, const LoadedKernel& kernel, const LaunchOutcome& outcome)
      : r_(r), launch_(launch), kernel_(kernel), outcome_(outcome) {}
  ~LaunchCheckTarget() override {
    for (const CUdeviceptr p : scratch_) r_.driver_.cuMemFree(p);
  }
  const LaunchRecord& launch() const override { return launch_; }
  const TraceModel& model() const override { return r_.model_; }
  const ReplayOptions& options() const override { return r_.options_; }
  format::TraceReader& reader() override { return r_.reader_; }
  void restore() override { r_.restore(launch_, kernel_, true); }
  void write(uint64_t recorded, const uint8_t* data, uint64_t size) override {
    r_.copyToDevice(at(recorded), data, size);
  }
  std::vector<uint8_t> read(uint64_t recorded, uint64_t size) override {
    std::vector<uint8_t> bytes(size);
    r_.copyFromDevice(bytes.data(), at(recorded), size);
    return bytes;
  }
  std::vector<uint8_t> params() override { return r_.buildParams(launch_, kernel_); }
  void run(std::vector<uint8_t>& params) override {
    if (r_.onLaunchStart) r_.onLaunchStart(outcome_);  // the watchdog covers every check launch
    r_.launchOnce(launch_, kernel_, params);
    if (r_.onLaunchEnd) r_.onLaunchEnd(launch_.launchIndex);
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
    r_.memory_->placeGuarded(r_.regionsOf(launch_));
    return r_.memory_->guarded();
  }

 private:
  CUdeviceptr at(uint64_t recorded) const {
    const auto p = r_.translate(recorded, kernel_);
    if (!p) throw ReplayError("recorded address " + std::to_string(recorded) + " has no place in this replay");
    return *p;
  }
  Replayer& r_;
  const LaunchRecord& launch_;
  const LoadedKernel& kernel_;
  const LaunchOutcome& outcome_;
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
  check(driver_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  memory_ = std::make_unique<DeviceMemory>(driver_, device_, options_.fixedAddresses);
  code_ = std::make_unique<CodeCache>(driver_, reader_, sm_, options_);
}

Replayer::~Replayer() {
  memory_.reset();
  code_.reset();
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
  std::vector<CUlaunchAttribute> attributes;
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

  std::vector<void*> arguments;
  for (const auto info : e.getParamLayout()) {
    if (uint64_t{info.getOffset()} + info.getSize() > params.size()) {
      throw ReplayError("the recorded parameter layout does not fit the recorded parameter bytes");
    }
    arguments.push_back(params.data() + info.getOffset());
  }
  size_t paramSize = params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &paramSize,
                   CU_LAUNCH_PARAM_END};
  const bool useExtra = arguments.empty() && !params.empty();
  check(driver_.cuLaunchKernelEx(&config, kernel.function, useExtra ? nullptr : arguments.data(),
                                 useExtra ? extra : nullptr),
        "cuLaunchKernelEx");
  if (synchronize) check(driver_.cuStreamSynchronize(stream_), "the launch");
}

// The replayed bytes of the ranges the launch could reach: those of its
// recorded post-state, or of its pre-state when the trace has no post-state.
void Replayer::saveOutputs(const LaunchRecord& launch, const LoadedKernel& kernel) {
  auto ranges = launch.event().getPre();
  if (launch.end != nullptr && launch.end->get().getLaunchEnd().getPost().size() != 0) {
    ranges = launch.end->get().getLaunchEnd().getPost();
  }
  for (const auto range : ranges) {
    const auto src = translate(range.getAddress(), kernel);
    if (!src) continue;
    const uint64_t size = range.getContent().getSize();
    uint8_t* bytes = staging(size);
    copyFromDevice(bytes, *src, size);
    char name[64];
    std::snprintf(name, sizeof name, "/%llu-%llx.bin", static_cast<unsigned long long>(launch.launchIndex),
                  static_cast<unsigned long long>(range.getAddress()));
    writeFile(options_.saveOutputsDir + name, bytes, size);
  }
}

void Replayer::compare(const LaunchRecord& launch, const LoadedKernel& kernel, LaunchOutcome& outcome,
                       const std::set<uint64_t>& comparedLater) {
  const bool preOnly = model_.traceBegin() != nullptr &&
                       model_.traceBegin()->get().getTraceBegin().getCaptureMode() == schema::CaptureMode::PRE_ONLY;
  if (launch.end == nullptr || preOnly) {
    // (In full mode a launch that reaches no memory has an empty post-state:
    // nothing to differ, so it reproduces.)
    outcome.verdict = Verdict::unverified;
    outcome.detail = launch.end == nullptr ? "the trace has no end of this launch (the recorded run ended first)"
                                           : "no post-launch memory recorded (--mode pre)";
    return;
  }
  const auto e = launch.event();
  // Which parameter points into which allocation, for labels and --dtype.
  const auto paramOf = [&](uint64_t base, uint64_t size) { return parameterPointingInto(e, base, size); };
  bool differs = false;
  for (const auto range : launch.end->get().getLaunchEnd().getPost()) {
    if (comparedLater.count(range.getAddress()) != 0) continue;
    const auto content = range.getContent();
    const uint64_t size = content.getSize();
    BufferReport report;
    report.address = range.getAddress();
    report.size = size;
    const auto param = paramOf(range.getAddress(), size);
    if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) {
      report.label = "global";
      for (const auto& g : kernel.globals) {
        if (g.recordedAddress == range.getAddress()) report.label = "global " + g.name;
      }
    } else {
      report.label = param ? "param " + std::to_string(*param) : "buffer";
    }
    const auto src = translate(range.getAddress(), kernel);
    if (!src) {
      throw ReplayError("recorded post-state at " + std::to_string(range.getAddress()) +
                        " has no place in this replay");
    }
    // The whole range must lie in the memory placed for it: what is read
    // back (and held here twice) is then bounded by the device's memory,
    // not by what the trace claims.
    uint64_t last = 0;
    const auto lastPlaced = size == 0 || __builtin_add_overflow(range.getAddress(), size - 1, &last)
                                ? std::nullopt
                                : translate(last, kernel);
    if (size != 0 && (!lastPlaced || *lastPlaced != *src + (size - 1))) {
      throw ReplayError("recorded post-state at " + std::to_string(range.getAddress()) + " (" + std::to_string(size) +
                        " bytes) reaches past the memory placed for it");
    }
    std::vector<uint8_t> expected = reader_.readContent(content);
    // Stored pointers that replay rewrote are expected at their new values.
    for (const auto p : e.getIndirectPointers()) {
      uint64_t at = 0;
      if (__builtin_add_overflow(p.getBufferAddress(), p.getOffset(), &at)) continue;
      if (at < range.getAddress() || at - range.getAddress() > size || size - (at - range.getAddress()) < 8) continue;
      uint64_t word = 0;
      std::memcpy(&word, expected.data() + (at - range.getAddress()), 8);
      const auto moved = translate(word, kernel);
      if (word == p.getValue() && moved) std::memcpy(expected.data() + (at - range.getAddress()), &*moved, 8);
    }
    uint8_t* actual = staging(size);
    copyFromDevice(actual, *src, size);
    if (keptOutputs_ != nullptr) {
      char where[64];
      std::snprintf(where, sizeof where, " (0x%llx, %llu bytes)", static_cast<unsigned long long>(range.getAddress()),
                    static_cast<unsigned long long>(size));
      (*keptOutputs_)[launch.launchIndex].push_back(
          {report.label + where, std::vector<uint8_t>(actual, actual + size)});
    }
    const ByteDiff diff = compareBytes(expected.data(), actual, size);
    report.differingBytes = diff.differingBytes;
    report.firstOffset = diff.firstOffset;
    std::optional<DType> type = options_.dtype;
    if (param) {
      if (const auto it = options_.paramDtypes.find(*param); it != options_.paramDtypes.end()) type = it->second;
    }
    if (type && !diff.same()) report.stats = elementStats(*type, expected.data(), actual, size);
    if (!diff.same()) {
      report.withinTolerance = options_.tolerance && report.stats && options_.tolerance->accepts(*report.stats);
      differs = differs || !report.withinTolerance;
    }
    outcome.buffers.push_back(std::move(report));
  }
  outcome.verdict = differs ? Verdict::differs : Verdict::reproduced;
}

void Replayer::timeRepeats(const LaunchRecord& launch, const LoadedKernel& kernel, std::vector<uint8_t>& params,
                           LaunchOutcome& outcome) {
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
    launchOnce(launch, kernel, params);
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
LaunchOutcome Replayer::replayLaunch(const LaunchRecord& l, const std::function<void()>& place,
                                     const std::function<void(const LoadedKernel&)>& prepare,
                                     const std::function<void(const LaunchOutcome&)>& report) {
  LaunchOutcome o = outcomeOf(l);
  bool launched = false;
  companion_.reset();  // a companion prepared for a launch that then failed runs on its own
  try {
    if (model_.traceBegin() != nullptr &&
        model_.traceBegin()->get().getTraceBegin().getCaptureMode() == schema::CaptureMode::METADATA) {
      throw ReplayError("the trace was recorded with --mode metadata: it holds no memory to replay from");
    }
    if (l.event().getCapturing()) throw ReplayError("captured into a CUDA graph: it never ran as a launch");
    if (const std::string bad = format::launchParamProblem(l.event()); !bad.empty()) {
      throw ReplayError("the trace is malformed at event #" + std::to_string(l.seq()) + ": " + bad);
    }
    const CodeRef code = model_.codeFor(l);
    // Memory is placed before the code is loaded: a module's own memory must
    // not take a recorded address first.
    const auto placeStart = std::chrono::steady_clock::now();
    place();
    const LoadedKernel kernel = code_->kernelFor(code);
    o.kernel = code.kernelName;
    o.code = kernel.code;
    allocateRestoreBuffers(l);
    restoredBytes_ = 0;
    restoreWaitNs_ = 0;
    o.placeNs = nsSince(placeStart);
    const auto restoreStart = std::chrono::steady_clock::now();
    prepare(kernel);
    o.restoreNs = nsSince(restoreStart);
    o.restoredBytes = restoredBytes_;
    o.restoreWaitNs = restoreWaitNs_;
    o.memory = memory_->path();
    if (options_.fixedAddresses && !memory_->refusal().empty()) {
      o.detail = "recorded addresses not granted: " + memory_->refusal();
    }
    std::vector<uint8_t> params = buildParams(l, kernel);
    if (!reencodedFrom_.empty()) {
      std::string from;
      for (const uint64_t seq : reencodedFrom_) from += (from.empty() ? "#" : ", #") + std::to_string(seq);
      appendDetail(o, std::to_string(reencodedFrom_.size()) +
                          (reencodedFrom_.size() == 1 ? " tensor map re-encoded" : " tensor maps re-encoded") +
                          " here (tensorMapEncode " + from + ")");
    }
    if (onLaunchStart) onLaunchStart(o);
    launched = true;
    std::set<uint64_t> comparedLater;  // ranges the companion changes: compared with its outcome
    if (submittedAhead_ == l.launchIndex) {
      // Already run, behind the launch before it (programmatic dependent launch).
      appendDetail(o, "ran overlapped with the launch before it (programmatic dependent launch)");
    } else if (companion_) {
      launchOnce(l, kernel, params, false);
      launchOnce(*companion_->launch, companion_->kernel, companion_->params, true);
      submittedAhead_ = companion_->launch->launchIndex;
      comparedLater = rangesChangedBy(*companion_->launch);
      appendDetail(o, "launch " + std::to_string(companion_->launch->launchIndex) +
                          " ran overlapped with it (programmatic dependent launch); compared after both" +
                          (comparedLater.empty() ? std::string() : ", but for the ranges that launch changes"));
    } else {
      launchOnce(l, kernel, params);
    }
    if (onLaunchEnd) onLaunchEnd(l.launchIndex);
    if (!options_.saveOutputsDir.empty()) saveOutputs(l, kernel);
    if (l.end != nullptr && l.end->get().getLaunchEnd().getResult() != 0) {
      o.verdict = Verdict::differs;
      o.detail = "the recorded launch was refused with CUresult " +
                 std::to_string(l.end->get().getLaunchEnd().getResult()) + "; here it ran";
      return o;
    }
    compare(l, kernel, o, comparedLater);
    timeRepeats(l, kernel, params, o);
    if (!options_.checks.empty() && perLaunchChecks_) {
      LaunchCheckTarget target(*this, l, kernel, o);
      if (!runChecks(target, o)) {
        report(o);  // the checks' findings, then the context is gone
        throw ContextLost{};
      }
    }
  } catch (const CudaError& error) {
    o.verdict = launched ? Verdict::fault : Verdict::error;
    const std::string memoryNote = o.detail;  // "recorded addresses not granted: ..." when there is one
    o.detail = error.what();
    if (!memoryNote.empty()) o.detail += "; " + memoryNote;
    // A launch the driver refused when it was recorded (a program testing
    // its error path) reproduces by being refused the same way.
    if (launched && l.end != nullptr &&
        l.end->get().getLaunchEnd().getResult() == static_cast<int32_t>(error.result())) {
      o.verdict = Verdict::reproduced;
      o.detail = std::string("refused as recorded: ") + error.what() + (memoryNote.empty() ? "" : "; " + memoryNote);
    }
    if (error.sticky()) {
      report(o);
      throw ContextLost{};
    }
  } catch (const std::exception& error) {  // ReplayError, a damaged trace (FormatError), ...
    o.verdict = Verdict::error;
    o.detail = error.what() + (o.detail.empty() ? "" : "; " + o.detail);
  }
  return o;
}

void Replayer::run(const Selection& selection, const std::function<void(const LaunchOutcome&)>& report) {
  std::vector<const LaunchRecord*> launches;
  for (const uint64_t index : selection.launchIndices) {
    if (const LaunchRecord* l = model_.launch(index)) launches.push_back(l);
  }
  if (!selection.sequence) {
    for (const LaunchRecord* l : launches) {
      report(replayLaunch(
          *l,
          [&] {
            memory_->release();
            memory_->place(regionsOf(*l));
          },
          [&](const LoadedKernel& kernel) { restore(*l, kernel, true); }, report));
    }
    return;
  }

  const bool determinism =
      std::find(options_.checks.begin(), options_.checks.end(), "determinism") != options_.checks.end();
  if (determinism) {
    runSequenceForDeterminism(launches, report);
  } else {
    runSequence(launches, report);
  }
}

void Replayer::runSequence(const std::vector<const LaunchRecord*>& launches,
                           const std::function<void(const LaunchOutcome&)>& report) {
  perLaunchChecks_ = false;
  // A sequence: every range any of its launches reaches is placed once; the
  // first launch's pre-state is restored, then each later launch gets the
  // recorded copies and memsets made before it, and the pre-state of ranges
  // no earlier launch reached.
  std::vector<Region> regions;
  for (const LaunchRecord* l : launches) {
    const auto more = regionsOf(*l);
    regions.insert(regions.end(), more.begin(), more.end());
  }
  memory_->release();
  bool placed = false;
  std::string stopped;
  uint64_t previousSeq = launches.empty() ? 0 : launches.front()->seq();
  submittedAhead_.reset();
  for (size_t i = 0; i < launches.size(); ++i) {
    const LaunchRecord* l = launches[i];
    const LaunchRecord* next = i + 1 < launches.size() ? launches[i + 1] : nullptr;
    if (!stopped.empty()) {
      LaunchOutcome o = outcomeOf(*l);
      o.verdict = Verdict::skipped;
      o.detail = stopped;
      report(o);
      continue;
    }
    LaunchOutcome o = replayLaunch(
        *l,
        [&] {
          if (!placed) {
            memory_->place(regions);
            placed = true;
          }
        },
        [&](const LoadedKernel& kernel) {
          if (l != launches.front()) {
            for (const StoredEvent* op : model_.memoryOpsBetween(previousSeq, l->seq())) applyMemoryOp(*op);
          }
          restore(*l, kernel, l == launches.front());
          if (next != nullptr && submittedAhead_ != l->launchIndex && startsBeforeEnd(model_, *l, *next)) {
            // Everything the companion needs is in place before the pair is
            // submitted: a copy between the two would serialize them.
            LoadedKernel nextKernel = code_->kernelFor(model_.codeFor(*next));
            restore(*next, nextKernel, false);
            std::vector<uint8_t> nextParams = buildParams(*next, nextKernel);
            companion_ = Companion{next, std::move(nextKernel), std::move(nextParams)};
          }
        },
        report);
    if (o.verdict == Verdict::fault || o.verdict == Verdict::error) {
      stopped = "launch " + std::to_string(l->launchIndex) + " of the sequence did not run cleanly";
    }
    previousSeq = l->seq();
    report(o);
  }
  if (stopped.empty() && placed && options_.saveSequenceEnd && !options_.saveOutputsDir.empty()) {
    saveRegions(regions);
  }
}

// --check determinism over a sequence: the whole sequence is replayed --runs
// times, each from its first launch's pre-state, and a launch whose compared
// outputs are not the same in every run gets a finding. (A race between
// launches, e.g. a consumer that does not wait for its producer under
// programmatic dependent launch, shows only when they run together.) The
// outcomes reported are the first run's, once every run is done; the
// outputs of one run are held in memory to compare the others with.
void Replayer::runSequenceForDeterminism(const std::vector<const LaunchRecord*>& launches,
                                         const std::function<void(const LaunchOutcome&)>& report) {
  const unsigned runs = std::max(2u, options_.checkRuns);
  std::vector<LaunchOutcome> outcomes;  // of the first run
  std::map<uint64_t, std::vector<KeptOutput>> first;
  std::map<uint64_t, std::vector<std::vector<bool>>> varies;  // per launch, per kept range, per byte
  std::string notRun;                                         // why the check could not finish
  const auto reportAll = [&] {
    for (LaunchOutcome& o : outcomes) {
      const bool clean = o.verdict == Verdict::reproduced || o.verdict == Verdict::differs;
      if (!clean || !notRun.empty()) {
        o.checks.push_back({"determinism",
                            CheckStatus::notRun,
                            o.verdict == Verdict::unverified ? "nothing compared: " + o.detail
                            : !clean                         ? "the launch did not replay cleanly"
                                                             : notRun,
                            {}});
        report(o);
        continue;
      }
      std::vector<std::string> labels;
      for (const KeptOutput& k : first[o.launchIndex]) labels.push_back(k.label);
      o.checks.push_back(determinismFinding(
          labels, varies[o.launchIndex],
          std::to_string(runs) + " runs of the " + std::to_string(launches.size()) + "-launch sequence",
          "a race, within the launch or with the launches around it"));
      report(o);
    }
  };
  try {
    keptOutputs_ = &first;
    runSequence(launches, [&](const LaunchOutcome& o) { outcomes.push_back(o); });
    for (auto& [index, kept] : first) {
      for (const auto& k : kept) varies[index].emplace_back(k.bytes.size(), false);
    }
    for (unsigned run = 1; run < runs && notRun.empty(); ++run) {
      std::map<uint64_t, std::vector<KeptOutput>> again;
      keptOutputs_ = &again;
      runSequence(launches, [&](const LaunchOutcome& o) {
        const bool clean = o.verdict == Verdict::reproduced || o.verdict == Verdict::differs;
        if (!clean && notRun.empty()) {
          notRun = "run " + std::to_string(run + 1) + " of the sequence stopped at launch " +
                   std::to_string(o.launchIndex) + " (" + verdictName(o.verdict) + ": " + o.detail + ")";
        }
      });
      for (auto& [index, kept] : first) {
        const auto& other = again[index];
        for (size_t r = 0; r < kept.size(); ++r) {
          if (r >= other.size() || other[r].bytes.size() != kept[r].bytes.size()) continue;
          for (size_t b = 0; b < kept[r].bytes.size(); ++b) {
            if (other[r].bytes[b] != kept[r].bytes[b]) varies[index][r][b] = true;
          }
        }
      }
    }
  } catch (const ContextLost&) {
    keptOutputs_ = nullptr;
    if (notRun.empty()) notRun = "a launch of the sequence ended the CUDA context";
    reportAll();
    throw;
  }
  keptOutputs_ = nullptr;
  reportAll();
}

// The memory state a sequence left: every placed range, read back.
void Replayer::saveRegions(const std::vector<Region>& regions) {
  std::set<uint64_t> saved;
  for (const Region& region : regions) {
    if (!saved.insert(region.address).second) continue;
    const auto src = memory_->addresses().translate(region.address);
    if (!src) continue;
    uint8_t* bytes = staging(region.size);
    copyFromDevice(bytes, *src, region.size);
    char name[64];
    std::snprintf(name, sizeof name, "/end-%llx.bin", static_cast<unsigned long long>(region.address));
    writeFile(options_.saveOutputsDir + name, bytes, region.size);
  }
}

void Replayer::writeFile(const std::string& path, const uint8_t* bytes, uint64_t size) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(bytes, 1, size, file) != size) {
    if (file != nullptr) std::fclose(file);
    throw ReplayError("cannot write " + path);
  }
  std::fclose(file);
}

}  // namespace kcap::replay
