#include "extract_rebuild.h"

#include <capnp/message.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "checkpoints.h"
#include "driver.h"
#include "reexecutor.h"

namespace kcap::replay {
namespace {

// Bytes read from the device at a time: a multiple of every piece size.
constexpr uint64_t kWindow = uint64_t{64} << 20;

// The smallest region of `regions` holding `address`, if any.
std::optional<Region> regionHolding(const std::vector<Region>& regions, uint64_t address) {
  std::optional<Region> best;
  for (const Region& r : regions) {
    if (address - r.address < r.size && (!best || r.size < best->size)) best = r;
  }
  return best;
}

// What the launch can reach, as full mode would snapshot it.
std::vector<RebuiltRange> reachOf(const TraceModel& model, const CheckpointPlan& plan, const LaunchRecord& launch) {
  std::map<uint64_t, RebuiltRange> ranges;  // by address
  for (const auto word : launch.event().getPointers()) {
    const auto region = regionHolding(plan.regions(), word.getValue());
    if (region && ranges.count(region->address) == 0) {
      RebuiltRange r;
      r.address = region->address;
      r.allocationBase = region->address;
      r.size = region->size;
      ranges.emplace(r.address, r);
    }
  }
  try {
    for (const auto global : model.codeFor(launch).load->get().getModuleLoad().getGlobals()) {
      if (global.getSize() == 0 || ranges.count(global.getAddress()) != 0) continue;
      RebuiltRange r;
      r.address = global.getAddress();
      r.allocationBase = global.getAddress();
      r.kind = schema::MemoryKind::MODULE_GLOBAL;
      r.size = global.getSize();
      ranges.emplace(r.address, r);
    }
  } catch (const ReplayError&) {
    // no code: re-execution says so
  }
  std::vector<RebuiltRange> out;
  for (auto& [address, range] : ranges) out.push_back(std::move(range));
  return out;
}

// Reads every range from the replayed memory into the writer, a window at a time.
void store(Reexecutor& reexecutor, format::TraceWriter& writer, std::vector<RebuiltRange>& ranges,
           std::vector<std::string>& notes) {
  const uint32_t pieceSize = writer.pieceSize();
  const uint64_t window = std::max<uint64_t>(kWindow / pieceSize, 1) * pieceSize;
  std::vector<uint8_t> bytes;
  std::vector<RebuiltRange> stored;
  for (RebuiltRange& range : ranges) {
    range.pieceSize = pieceSize;
    range.pieces.clear();
    bool whole = true;
    for (uint64_t offset = 0; offset < range.size; offset += window) {
      const uint64_t length = std::min(window, range.size - offset);
      bytes.resize(length);
      if (!reexecutor.read(range.address + offset, bytes.data(), length)) {
        whole = false;
        break;
      }
      capnp::MallocMessageBuilder message;
      auto content = message.initRoot<schema::Content>();
      writer.storeContent(bytes.data(), length, content);
      for (const auto piece : content.asReader().getPieces()) range.pieces.push_back({piece.getHigh(), piece.getLow()});
    }
    if (whole) {
      stored.push_back(range);
    } else {
      char at[32];
      std::snprintf(at, sizeof at, "0x%llx", static_cast<unsigned long long>(range.address));
      notes.push_back(std::string("the memory at ") + at + " is not all in the replayed memory: left out");
    }
  }
  ranges = std::move(stored);
}

class Collect : public ReexecutionListener {
 public:
  explicit Collect(RebuiltLaunch& out) : out_(out) {}
  void note(const std::string& text) override { out_.notes.push_back(text); }
  void interval(const IntervalReport& report) override {
    out_.verification = "interval " + std::to_string(report.number) + ": " + intervalVerdictName(report.verdict) +
                        (report.detail.empty() ? "" : " (" + report.detail + ")");
    out_.verified = report.verdict == IntervalVerdict::kReproduced;
    if (report.verdict == IntervalVerdict::kFault || report.verdict == IntervalVerdict::kHang ||
        report.verdict == IntervalVerdict::kNotReexecutable) {
      out_.fault = out_.verification;
    }
  }

 private:
  RebuiltLaunch& out_;
};

}  // namespace

void RebuiltRange::writeTo(schema::MemoryRange::Builder out) const {
  out.setAddress(address);
  out.setAllocationBase(allocationBase);
  out.setKind(kind);
  auto content = out.initContent();
  content.setSize(size);
  content.setPieceSize(pieceSize);
  auto list = content.initPieces(static_cast<unsigned>(pieces.size()));
  for (unsigned i = 0; i < pieces.size(); ++i) {
    list[i].setHigh(pieces[i].high);
    list[i].setLow(pieces[i].low);
  }
}

RebuiltLaunch rebuildLaunch(const TraceModel& model, const std::string& tracePath, uint64_t launchIndex, int device,
                            format::TraceWriter& writer) {
  const LaunchRecord* launch = model.launch(launchIndex);
  if (launch == nullptr) throw ReplayError("the trace has no launch " + std::to_string(launchIndex));
  if (const std::string other = model.onOtherDevice(*launch); !other.empty()) {
    throw ReplayError(other + ": its memory cannot be rebuilt");
  }
  auto reader = format::TraceReader::open(tracePath);
  ReplayOptions options;
  options.tracePath = tracePath;
  options.device = device;
  options.isolate = false;
  RebuiltLaunch out;
  Reexecutor reexecutor(model, *reader, options);
  std::vector<RebuiltRange> reach = reachOf(model, CheckpointPlan::build(model, *reader), *launch);
  reexecutor.aroundLaunch(launchIndex, [&](bool before) {
    std::vector<RebuiltRange> ranges = reach;
    store(reexecutor, writer, ranges, out.notes);
    (before ? out.pre : out.post) = std::move(ranges);
    if (!before) out.ran = true;
  });
  Collect listener(out);
  ReexecutionRequest request;
  request.launch = launchIndex;
  try {
    reexecutor.run(request, listener);
  } catch (const ContextLost&) {
    // the fault is in the verdict
  }
  return out;
}

}  // namespace kcap::replay
