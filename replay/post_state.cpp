// The Replayer's output side: the replayed bytes of a launch read back and
// compared with its recorded post-state, and (for bisect) written to files.
#include "replayer.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>

#include "driver.h"
#include "piece_hashes.h"

namespace kcap::replay {

void Replayer::compare(LaunchRun& run, const std::set<uint64_t>& comparedLater) {
  const LaunchRecord& launch = run.launch;
  const LoadedKernel& kernel = run.kernel;
  LaunchOutcome& outcome = run.outcome;
  const bool preOnly = model_.traceBegin() != nullptr &&
                       model_.traceBegin()->get().getTraceBegin().getCaptureMode() == schema::CaptureMode::PRE_ONLY;
  if (launch.end == nullptr || preOnly) {
    // (In full mode a launch that reaches no memory has an empty post-state:
    // nothing to differ, so it reproduces.)
    outcome.verdict = Verdict::kUnverified;
    outcome.detail = launch.end == nullptr ? "the trace has no end of this launch (the recorded run ended first)"
                                           : "no post-launch memory recorded (--mode pre)";
    // An extract that left the post-state out on purpose says why (kcap extract --graph-launch).
    if (launch.end == nullptr && model_.traceBegin() != nullptr) {
      for (const auto option : model_.traceBegin()->get().getTraceBegin().getOptions()) {
        if (option.getKey() == "notCompared")
          outcome.detail = std::string("nothing compared: ") + option.getValue().cStr();
      }
    }
    return;
  }
  const auto e = launch.event();
  bool differs = false;
  for (const auto range : launch.end->get().getLaunchEnd().getPost()) {
    if (comparedLater.count(range.getAddress()) != 0) continue;
    const auto content = range.getContent();
    const uint64_t size = content.getSize();
    BufferReport report;
    report.address = range.getAddress();
    report.size = size;
    // Which parameter points into which allocation, for labels and --dtype.
    const auto param = parameterPointingInto(e, range.getAddress(), size);
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
    // A range holding stored pointers (words replay may have rewritten) is
    // compared on the host, where the expected words are rewritten too.
    bool holdsPointers = false;
    for (const auto p : e.getIndirectPointers()) {
      uint64_t at = 0;
      if (__builtin_add_overflow(p.getBufferAddress(), p.getOffset(), &at)) continue;
      if (at >= range.getAddress() && at - range.getAddress() < size) holdsPointers = true;
    }
    if (!run.keepOutputs && !holdsPointers && hasher_->suits(*src, size, content.getPieceSize())) {
      differs = compareByPieces(content, *src, report, param, outcome) || differs;
      outcome.buffers.push_back(std::move(report));
      continue;
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
    outcome.readBackBytes += size;
    if (run.keepOutputs) {
      char where[64];
      std::snprintf(where, sizeof where, " (0x%llx, %llu bytes)", static_cast<unsigned long long>(range.getAddress()),
                    static_cast<unsigned long long>(size));
      run.kept.push_back({report.label + where, std::vector<uint8_t>(actual, actual + size)});
    }
    differs = compareRange(report, expected.data(), actual, size, param, options_) || differs;
    outcome.buffers.push_back(std::move(report));
  }
  outcome.verdict = differs ? Verdict::kDiffers : Verdict::kReproduced;
}

// A range compared by its pieces' hashes, computed on the GPU
// (piece_hashes.h): only the pieces whose hashes differ from the recorded
// ones (and those too short to hash there) are read back and compared.
bool Replayer::compareByPieces(schema::Content::Reader content, CUdeviceptr src, BufferReport& report,
                               std::optional<uint32_t> param, LaunchOutcome& outcome) {
  const uint64_t size = content.getSize();
  const uint32_t pieceSize = content.getPieceSize();
  const std::vector<bool> differs = hasher_->differing(src, content);
  RangeComparison comparison(report, size, param, options_);
  for (uint64_t i = 0; i < differs.size(); ++i) {
    if (!differs[i]) continue;
    const uint64_t offset = i * pieceSize, bytes = std::min<uint64_t>(pieceSize, size - offset);
    capnp::MallocMessageBuilder message;
    const std::vector<uint8_t> expected = reader_.readContent(contentPart(message, content, i, 1));
    uint8_t* actual = staging(bytes);
    copyFromDevice(actual, src + offset, bytes);
    outcome.readBackBytes += bytes;
    comparison.add(expected.data(), actual, bytes, offset);
  }
  return comparison.finish();
}

// The replayed bytes of the ranges the launch could reach: those of its
// recorded post-state, or of its pre-state when the trace has no post-state.
void Replayer::saveOutputs(const LaunchRecord& launch, const LoadedKernel& kernel) {
  auto ranges = launch.event().getPre();
  if (launch.end != nullptr && launch.end->get().getLaunchEnd().getPost().size() != 0) {
    ranges = launch.end->get().getLaunchEnd().getPost();
  }
  saveRanges(ranges, kernel, "", launch.launchIndex);
}

void Replayer::saveRanges(capnp::List<schema::MemoryRange>::Reader ranges, const LoadedKernel& kernel,
                          const char* prefix, uint64_t index) {
  for (const auto range : ranges) {
    const auto src = translate(range.getAddress(), kernel);
    if (!src) continue;
    const uint64_t size = range.getContent().getSize();
    uint8_t* bytes = staging(size);
    copyFromDevice(bytes, *src, size);
    char name[80];
    std::snprintf(name, sizeof name, "/%s%llu-%llx.bin", prefix, static_cast<unsigned long long>(index),
                  static_cast<unsigned long long>(range.getAddress()));
    writeFile(options_.saveOutputsDir + name, bytes, size);
  }
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
