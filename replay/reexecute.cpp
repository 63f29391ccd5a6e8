// The re-execution engine (reexecute.h), built on the Replayer's parts:
// its device, stream, memory placement, code cache, content restore,
// memory operations, parameters and launch.
#include "reexecute.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "change_hash.h"
#include "checkpoints.h"
#include "driver.h"
#include "message_check.h"
#include "reexecutor.h"
#include "replayer.h"
#include "schema_names.h"

namespace kcap::replay {
namespace {

std::string hexText(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

constexpr uint64_t kHashBatch = uint64_t{1} << 16;  // pieces hashed per kernel launch
constexpr size_t kReportedRanges = 5;               // differing ranges named in a report

}  // namespace

const char* intervalVerdictName(IntervalVerdict verdict) {
  switch (verdict) {
    case IntervalVerdict::kReproduced:
      return "REPRODUCED";
    case IntervalVerdict::kDiffers:
      return "DIFFERS";
    case IntervalVerdict::kFault:
      return "FAULT";
    case IntervalVerdict::kHang:
      return "HANG";
    case IntervalVerdict::kNotReexecutable:
      return "NOT RE-EXECUTABLE";
    case IntervalVerdict::kUnverified:
      return "NOT VERIFIED";
  }
  return "?";
}

bool isCheckpointTrace(const TraceModel& model) {
  return model.traceBegin() != nullptr &&
         model.traceBegin()->get().getTraceBegin().getCaptureMode() == schema::CaptureMode::CHECKPOINT;
}

Reexecutor::~Reexecutor() {
  if (piecesBuffer_ != 0) r_.driver_.cuMemFree(piecesBuffer_);
  if (hashModule_ != nullptr) r_.driver_.cuModuleUnload(hashModule_);
}

void Reexecutor::place(ReexecutionListener& listener) {
  const std::vector<Region>& regions = plan_.regions();
  std::vector<Region> sorted = regions;
  std::sort(sorted.begin(), sorted.end(), [](const Region& a, const Region& b) { return a.address < b.address; });
  for (const Region& region : sorted) {
    if (!merged_.empty() && region.address <= merged_.back().address + merged_.back().size) {
      merged_.back().size = std::max(merged_.back().size, region.address + region.size - merged_.back().address);
    } else {
      merged_.push_back(region);
    }
  }
  r_.memory_->place(regions);
  uint64_t bytes = 0, moved = 0;
  for (const Region& region : merged_) {
    bytes += region.size;
    const auto placed = r_.memory_->addresses().translate(region.address);
    if (!placed) throw ReplayError("re-execution could not place " + hexText(region.address));
    if (*placed != region.address) ++moved;
  }
  // A region the driver would not give back at its recorded address is
  // relocated with its group, as a launch replay does: launch parameters,
  // copies, memsets, tensor maps and checkpoints are translated, but a
  // pointer the program stored inside device memory is not (the checkpoint
  // after an interval that depends on one then differs).
  relocated_ = moved != 0;
  listener.note("placed " + std::to_string(merged_.size()) + " device memory region(s), " + std::to_string(bytes) +
                " bytes");
  if (moved != 0) {
    listener.note(std::to_string(moved) + " of " + std::to_string(merged_.size()) +
                  " device memory regions relocated, the driver not granting their recorded addresses (" +
                  r_.memory_->refusal() + "): pointers stored inside device memory are not rewritten");
  }
}

uint64_t Reexecutor::here(uint64_t recorded) const {
  if (auto it = globals_.upper_bound(recorded); it != globals_.begin()) {
    const GlobalPlacement& g = (--it)->second;
    if (recorded - g.recordedAddress < g.size) return g.address + (recorded - g.recordedAddress);
  }
  return r_.memory_->addresses().translate(recorded).value_or(recorded);
}

// The code of every launch after `afterSeq`, loaded before any restore: the
// modules' globals must exist to be restored, and a module loaded later
// could take memory a restore is about to write.
void Reexecutor::loadCode(uint64_t afterSeq) {
  for (const LaunchRecord& launch : model_.launches()) {
    if (launch.seq() <= afterSeq || launch.event().getCapturing()) continue;
    try {
      const CodeRef code = model_.codeFor(launch);
      std::string key = std::to_string(code.load->seq()) + " " + code.kernelName;
      for (const auto& attribute : code.attributes) key += " " + std::to_string(attribute->seq());
      auto it = kernels_.find(key);
      if (it == kernels_.end()) {
        it = kernels_.emplace(key, r_.code_->kernelFor(code)).first;
        for (const GlobalPlacement& g : it->second.globals) {
          if (globals_.emplace(g.recordedAddress, g).second) r_.opGlobals_.globals.push_back(g);
        }
      }
      launchKernel_[launch.launchIndex] = &it->second;
    } catch (const std::exception& e) {
      launchCodeError_[launch.launchIndex] = e.what();
    }
  }
  const std::vector<uint8_t> image = changeHashImage();
  if (image.empty()) {
    throw ReplayError("this kcap was built without the change-hash kernel (no nvcc): it cannot verify checkpoints");
  }
  check(r_.driver_.cuModuleLoadDataEx(&hashModule_, image.data(), 0, nullptr, nullptr),
        "loading the change-hash kernel");
  check(r_.driver_.cuModuleGetFunction(&hashFunction_, hashModule_, "kcap_change_hash"), "finding kcap_change_hash");
  check(r_.driver_.cuMemAlloc(&piecesBuffer_, kHashBatch * 2 * sizeof(HashPiece)), "cuMemAlloc for hashing");
}

const GlobalPlacement* Reexecutor::globalAt(uint64_t recorded) const {
  const auto it = globals_.find(recorded);
  return it == globals_.end() ? nullptr : &it->second;
}

Reexecutor::Coverage Reexecutor::coverage(uint64_t address, uint64_t size) const {
  uint64_t end = 0;
  if (size == 0) return Coverage::kInside;
  if (__builtin_add_overflow(address, size, &end)) return Coverage::kPartial;
  if (auto it = globals_.upper_bound(address); it != globals_.begin()) {
    const GlobalPlacement& g = (--it)->second;
    if (address - g.recordedAddress < g.size) {
      return end - g.recordedAddress <= g.size ? Coverage::kInside : Coverage::kPartial;
    }
  }
  // merged_ is sorted and disjoint: the region at or before `address`, and the one after.
  const auto next = std::upper_bound(merged_.begin(), merged_.end(), address,
                                     [](uint64_t a, const Region& r) { return a < r.address; });
  if (next != merged_.begin()) {
    const Region& region = *(next - 1);
    if (address - region.address < region.size) {
      return end - region.address <= region.size ? Coverage::kInside : Coverage::kPartial;
    }
  }
  if (next != merged_.end() && end > next->address) return Coverage::kPartial;
  return Coverage::kOutside;
}

// Memory not in the checkpoint starts as zeros: everything placed is
// cleared, then every range written.
void Reexecutor::restore(const CheckpointInfo& checkpoint) {
  for (const Region& region : merged_) {
    check(r_.driver_.cuMemsetD8Async(here(region.address), 0, region.size, r_.stream_), "clearing device memory");
  }
  check(r_.driver_.cuStreamSynchronize(r_.stream_), "clearing device memory");
  RestoreStats stats;
  for (const auto range : checkpoint.get().getRanges()) {
    const auto content = range.getContent();
    if (content.getSize() == 0) continue;
    uint64_t at = here(range.getAddress());
    if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) {
      const GlobalPlacement* g = globalAt(range.getAddress());
      if (g == nullptr || content.getSize() > g->size) continue;  // a module no re-executed launch uses
      at = g->address;
    }
    r_.restoreContent(content, at, stats);
  }
}

IntervalReport Reexecutor::intervalBetween(const CheckpointInfo* from, const CheckpointInfo* to) const {
  IntervalReport report;
  if (from != nullptr) report.number = from->ordinal, report.fromCheckpoint = from->ordinal;
  if (to != nullptr) report.toCheckpoint = to->ordinal;
  const auto launches = plan_.launchesBetween(from != nullptr ? from->seq : 0, to != nullptr ? to->seq : UINT64_MAX);
  report.firstLaunch = launches.first;
  report.lastLaunch = launches.second;
  return report;
}

void Reexecutor::runLaunch(const LaunchRecord& launch, IntervalReport& report, ReexecutionListener& listener) {
  const auto e = launch.event();
  if (e.getCapturing()) return;  // captured into a graph: it runs in a graph launch
  if (launch.end != nullptr && launch.end->get().getLaunchEnd().getResult() != 0) return;  // refused: never ran
  const std::string where = "launch " + std::to_string(launch.launchIndex);
  if (const std::string bad = format::launchParamProblem(e); !bad.empty()) {
    throw IntervalStop{IntervalVerdict::kNotReexecutable, where + " is malformed: " + bad};
  }
  if (const auto it = launchCodeError_.find(launch.launchIndex); it != launchCodeError_.end()) {
    throw IntervalStop{IntervalVerdict::kNotReexecutable, where + ": " + it->second};
  }
  const auto it = launchKernel_.find(launch.launchIndex);
  if (it == launchKernel_.end())
    throw IntervalStop{IntervalVerdict::kNotReexecutable, where + ": its code was not loaded"};
  LaunchParams params = r_.buildParams(launch, *it->second);
  const bool around = around_ && aroundIndex_ == launch.launchIndex;
  if (around) {
    check(r_.driver_.cuStreamSynchronize(r_.stream_),
          "finishing the work before launch " + std::to_string(launch.launchIndex));
    around_(true);
  }
  listener.launchStarting(launch.launchIndex);
  try {
    r_.launchOnce(launch, *it->second, params.bytes, true);
  } catch (const CudaError&) {
    report.faultLaunch = launch.launchIndex;
    report.faultKernel = e.getKernelName();
    throw;
  }
  listener.launchDone(launch.launchIndex);
  if (around) around_(false);
  if (afterLaunch_) afterLaunch_(launch);
}

bool Reexecutor::read(uint64_t recorded, uint8_t* dst, uint64_t size) {
  if (coverage(recorded, size) != Coverage::kInside) return false;
  if (size != 0) r_.copyFromDevice(dst, here(recorded), size);
  return true;
}

void Reexecutor::runMemoryOp(const StoredEvent& op) {
  const auto event = op.get();
  const std::string where = " at event #" + std::to_string(op.seq());
  const auto stop = [&](const std::string& what) { throw IntervalStop{IntervalVerdict::kNotReexecutable, what}; };
  // Whether [address, address + size) is memory re-execution holds: false
  // when it lies outside all of it (host memory: passed over), a stop when
  // it lies partly outside.
  const auto writes = [&](uint64_t address, uint64_t size, const char* what) {
    const Coverage c = coverage(address, size);
    if (c == Coverage::kPartial) {
      stop(std::string(what) + where + " reaches " + hexText(address) + " + " + std::to_string(size) +
           " bytes, past the recorded device memory");
    }
    return c == Coverage::kInside;
  };
  if (event.isMemcpy()) {
    const auto copy = event.getMemcpy();
    if (copy.getResult() != 0) return;
    const auto direction = copy.getDirection();
    if (direction == schema::CopyDirection::DEVICE_TO_HOST || direction == schema::CopyDirection::HOST_TO_HOST) return;
    const uint64_t data = copy.getData().getSize();
    const bool deviceSource = direction == schema::CopyDirection::DEVICE_TO_DEVICE ||
                              (direction == schema::CopyDirection::UNKNOWN && copy.getSrc() != 0);
    if (!deviceSource && data == 0 && copy.getSize() != 0) {
      stop("the host-to-device copy" + where + " was recorded without its data");
    }
    if (copy.getWidth() == 0) {
      const uint64_t size = copy.getSize();
      if (data != 0 && data != size) {
        stop("the copy" + where + " holds " + std::to_string(data) + " bytes for its " + std::to_string(size));
      }
      if (!writes(copy.getDst(), size, "the copy")) return;
      if (deviceSource && data == 0 && !writes(copy.getSrc(), size, "the device-to-device copy")) {
        stop("the device-to-device copy" + where + " reads " + hexText(copy.getSrc()) +
             ", outside the recorded device memory");
      }
    } else if (const auto rows = copyRows(copy); rows && rows->rows != 0) {
      // The whole span of the rows (copyRows checked it does not wrap).
      const auto span = [&](uint64_t slicePitch, uint64_t pitch) {
        return (rows->slices - 1) * slicePitch + (rows->rows - 1) * pitch + rows->width;
      };
      if (!writes(copy.getDst(), span(rows->dstSlicePitch, rows->dstPitch), "the 2D/3D copy")) return;
      if (deviceSource && data == 0 &&
          !writes(copy.getSrc(), span(rows->srcSlicePitch, rows->srcPitch), "the 2D/3D device-to-device copy")) {
        stop("the 2D/3D device-to-device copy" + where + " reads outside the recorded device memory");
      }
    }
  } else if (event.isMemset()) {
    const auto set = event.getMemset();
    if (set.getResult() != 0) return;
    // What applyMemoryOp writes: rows of count elements of 1, 2 or else 4 bytes.
    const uint64_t element = set.getElementSize() == 1 ? 1 : set.getElementSize() == 2 ? 2 : 4;
    const uint64_t rows = std::max<uint64_t>(set.getHeight(), 1);
    uint64_t width = 0, last = 0, span = 0;
    if (set.getPitch() == 0 && rows > 1)
      stop("the memset" + where + " has " + std::to_string(rows) + " rows of pitch 0");
    if (__builtin_mul_overflow(set.getCount(), element, &width) ||
        __builtin_mul_overflow(rows - 1, set.getPitch(), &last) || __builtin_add_overflow(last, width, &span)) {
      stop("the memset" + where + " reaches past the end of the address space");
    }
    if (set.getPitch() != 0 && set.getHeight() == 0) return;  // a 2D memset of no rows
    if (!writes(set.getDst(), span, "the memset")) return;
  } else {
    return;
  }
  r_.applyMemoryOp(op);
}

// Runs the events in (afterSeq, beforeSeq). Ends with IntervalStop when
// the interval cannot go on; a CudaError passes through.
void Reexecutor::reexecute(uint64_t afterSeq, uint64_t beforeSeq, IntervalReport& report, ReexecutionListener& listener,
                           std::optional<uint64_t> reportLaunch) {
  for (const TimelineEvent& event : plan_.eventsBetween(afterSeq, beforeSeq)) {
    switch (event.kind) {
      case TimelineEvent::Kind::kLaunch:
        runLaunch(*event.launch, report, listener);
        if (reportLaunch && event.launch->launchIndex == *reportLaunch) {
          LaunchOutcome o = outcomeOf(*event.launch);
          o.verdict = Verdict::kUnverified;
          o.memory = MemoryPath::kFixed;
          if (const auto it = launchKernel_.find(*reportLaunch); it != launchKernel_.end()) o.code = it->second->code;
          o.detail = "re-executed from checkpoint " + std::to_string(report.fromCheckpoint.value_or(0)) +
                     "; its results are verified with the interval";
          listener.launch(o);
        }
        break;
      case TimelineEvent::Kind::kMemoryOp:
        try {
          runMemoryOp(*event.event);
        } catch (const CudaError& e) {
          throw CudaError(e.result(), "the copy or memset at event #" + std::to_string(event.seq) + ": " + e.what());
        } catch (const IntervalStop&) {
          throw;
        } catch (const std::exception& e) {
          throw IntervalStop{IntervalVerdict::kNotReexecutable, e.what()};
        }
        break;
      case TimelineEvent::Kind::kGraphLaunch:
        if (event.event->get().getGraphLaunch().getResult() == 0) {
          throw IntervalStop{IntervalVerdict::kNotReexecutable, "graph launch at event #" + std::to_string(event.seq)};
        }
        break;
      case TimelineEvent::Kind::kAllocation:
        break;  // placed from the start; a new allocation's memory is zeros or its first writer's
    }
  }
  check(r_.driver_.cuStreamSynchronize(r_.stream_), "finishing the interval");
}
void Reexecutor::hashBatch(const std::vector<HashPiece>& pieces, std::vector<uint64_t>& out) {
  const uint64_t count = pieces.size();
  out.assign(2 * count, 0);
  if (count == 0) return;
  const CUdeviceptr list = piecesBuffer_, hashes = piecesBuffer_ + kHashBatch * sizeof(HashPiece);
  r_.copyToDevice(list, reinterpret_cast<const uint8_t*>(pieces.data()), count * sizeof(HashPiece));
  CUlaunchConfig config{};
  config.gridDimX = static_cast<unsigned>(count), config.gridDimY = 1, config.gridDimZ = 1;
  config.blockDimX = 512, config.blockDimY = 1, config.blockDimZ = 1;  // kChangeHashThreads
  config.hStream = r_.stream_;
  uint64_t listArg = list, countArg = count, outArg = hashes;
  void* args[] = {&listArg, &countArg, &outArg};
  check(r_.driver_.cuLaunchKernelEx(&config, hashFunction_, args, nullptr), "launching kcap_change_hash");
  r_.copyFromDevice(reinterpret_cast<uint8_t*>(out.data()), hashes, 2 * count * sizeof(uint64_t));
}

std::vector<uint64_t> Reexecutor::hashAll(const std::vector<HashPiece>& pieces) {
  std::vector<uint64_t> all, part;
  all.reserve(2 * pieces.size());
  for (size_t at = 0; at < pieces.size(); at += kHashBatch) {
    const size_t count = std::min<size_t>(kHashBatch, pieces.size() - at);
    hashBatch(std::vector<HashPiece>(pieces.begin() + static_cast<std::ptrdiff_t>(at),
                                     pieces.begin() + static_cast<std::ptrdiff_t>(at + count)),
              part);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

std::vector<HashPiece> Reexecutor::piecesOf(const CheckpointInfo& checkpoint, const std::vector<unsigned>* positions) {
  const auto ranges = checkpoint.get().getRanges();
  std::vector<HashPiece> pieces;
  const auto add = [&](unsigned i) {
    const auto range = ranges[i];
    const auto content = range.getContent();
    uint64_t base = here(range.getAddress());
    if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) {
      const GlobalPlacement* g = globalAt(range.getAddress());
      if (g == nullptr || content.getSize() > g->size) return;
      base = g->address;
    }
    const uint64_t pieceSize = content.getPieceSize();
    // Counted once: each get of a list counts all of it against the reader's traversal limit.
    const uint64_t count = content.getPieces().size();
    for (uint64_t p = 0; p < count; ++p) {
      pieces.push_back({base + p * pieceSize, std::min(pieceSize, content.getSize() - p * pieceSize)});
    }
  };
  if (positions != nullptr) {
    for (const unsigned i : *positions) add(i);
  } else {
    for (unsigned i = 0; i < ranges.size(); ++i) add(i);
  }
  return pieces;
}

// Where the replayed piece first differs from the recorded one, when the
// trace holds the recorded piece.
void Reexecutor::findFirstDifference(schema::Content::Reader content, uint64_t piece, uint64_t deviceAddress,
                                     RangeDifference& difference) {
  const auto hash = content.getPieces()[static_cast<unsigned>(piece)];
  const format::Hash128 name{hash.getHigh(), hash.getLow()};
  if (!reader_.hasBlob(name)) return;
  const uint64_t pieceSize = content.getPieceSize();
  const uint64_t length = std::min(pieceSize, content.getSize() - piece * pieceSize);
  std::vector<uint8_t> recorded;
  try {
    recorded = reader_.readBlob(name);
  } catch (const std::exception&) {
    return;  // a damaged blob: no offset to give
  }
  if (recorded.size() != length) return;
  std::vector<uint8_t> replayed(length);
  r_.copyFromDevice(replayed.data(), deviceAddress, length);
  for (uint64_t i = 0; i < length; ++i) {
    if (recorded[i] != replayed[i]) {
      difference.firstOffset = piece * pieceSize + i;
      return;
    }
  }
  difference.sameBytes = true;
}

void Reexecutor::verify(const CheckpointInfo& checkpoint, IntervalReport& report) {
  check(r_.driver_.cuStreamSynchronize(r_.stream_), "finishing the interval");
  const auto ranges = checkpoint.get().getRanges();
  struct Owner {
    unsigned range;
    uint64_t piece;
    uint64_t device;  // the piece's address here
  };
  std::vector<HashPiece> batch;
  std::vector<Owner> owners;
  std::vector<uint64_t> hashes;
  std::map<unsigned, RangeDifference> differing;                 // by range position
  std::map<unsigned, std::pair<uint64_t, uint64_t>> firstPiece;  // range -> (piece, device address)
  uint64_t skippedGlobals = 0;
  // Each range's hashes taken once: every get of a Data counts all of it
  // against the reader's traversal limit.
  std::vector<const uint8_t*> recordedHashes;
  for (const auto range : ranges) recordedHashes.push_back(range.getChangeHashes().begin());
  const auto flush = [&] {
    hashBatch(batch, hashes);
    for (size_t i = 0; i < batch.size(); ++i) {
      const Owner& o = owners[i];
      const auto range = ranges[o.range];
      const uint8_t* recorded = recordedHashes[o.range] + format::kChangeHashBytes * o.piece;
      uint64_t high = 0, low = 0;
      std::memcpy(&high, recorded, 8);
      std::memcpy(&low, recorded + 8, 8);
      report.piecesCompared += 1;
      report.bytesCompared += batch[i].length;
      if (hashes[2 * i] == high && hashes[2 * i + 1] == low) continue;
      auto [it, added] = differing.try_emplace(o.range);
      RangeDifference& d = it->second;
      if (added) {
        d.address = range.getAddress();
        d.allocationBase = range.getAllocationBase();
        d.kind = format::enumName(range.getKind());
        d.size = range.getContent().getSize();
        d.pieces = range.getContent().getPieces().size();
        firstPiece[o.range] = {o.piece, o.device};
      }
      ++d.differingPieces;
    }
    batch.clear();
    owners.clear();
  };
  for (unsigned i = 0; i < ranges.size(); ++i) {
    const auto range = ranges[i];
    const auto content = range.getContent();
    uint64_t base = here(range.getAddress());
    if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) {
      const GlobalPlacement* g = globalAt(range.getAddress());
      if (g == nullptr || content.getSize() > g->size) {
        ++skippedGlobals;
        continue;
      }
      base = g->address;
    }
    const uint64_t pieceSize = content.getPieceSize(), pieces = content.getPieces().size();
    for (uint64_t p = 0; p < pieces; ++p) {
      const uint64_t offset = p * pieceSize;
      batch.push_back({base + offset, std::min(pieceSize, content.getSize() - offset)});
      owners.push_back({i, p, base + offset});
      if (batch.size() == kHashBatch) flush();
    }
  }
  flush();
  report.differingRanges = differing.size();
  for (auto& [position, d] : differing) {
    if (report.differences.size() == kReportedRanges) break;
    const auto [piece, device] = firstPiece[position];
    findFirstDifference(ranges[position].getContent(), piece, device, d);
    report.differences.push_back(d);
  }
  report.verdict = differing.empty() ? IntervalVerdict::kReproduced : IntervalVerdict::kDiffers;
  if (skippedGlobals != 0) {
    report.detail =
        std::to_string(skippedGlobals) + " module global(s) of modules no re-executed launch uses not compared";
  }
  if (report.piecesCompared == 0) {
    report.verdict = IntervalVerdict::kUnverified;
    report.detail = "nothing compared: checkpoint " + std::to_string(checkpoint.ordinal) + " holds no memory";
  }
}

void Reexecutor::unverified(const CheckpointInfo& from, const CheckpointInfo* to, const std::string& why,
                            ReexecutionListener& listener) {
  IntervalReport report = intervalBetween(&from, to);
  if (report.firstLaunch > report.lastLaunch) return;  // no launch, nothing lost
  report.verdict = IntervalVerdict::kUnverified;
  report.detail = why;
  listener.interval(report);
}

// Restores checkpoint `at`, or when it cannot be restored the next that
// can, saying what is lost between; false when none is left.
bool Reexecutor::restoreOrSkip(size_t& at, ReexecutionListener& listener) {
  const auto& checkpoints = plan_.checkpoints();
  for (size_t k = at; k < checkpoints.size(); ++k) {
    const CheckpointInfo& c = checkpoints[k];
    std::string damage = c.damage.empty() ? c.restoreDamage : c.damage;
    if (damage.empty()) {
      try {
        restore(c);
        if (k != at) listener.note("replay goes on from " + c.name());
        at = k;
        return true;
      } catch (const CudaError&) {
        throw;
      } catch (const std::exception& e) {  // a blob that does not read back (FormatError)
        damage = std::string("its content cannot be read: ") + e.what();
      }
    }
    const CheckpointInfo* next = nullptr;
    for (size_t n = k + 1; n < checkpoints.size() && next == nullptr; ++n) {
      if (checkpoints[n].restorable()) next = &checkpoints[n];
    }
    listener.note(c.name() + " is damaged (" + damage + "): intervals after it cannot be verified" +
                  (next != nullptr ? " until " + next->name() : std::string()));
    unverified(c, next, "starts at a damaged checkpoint", listener);
  }
  return false;
}

// Runs one interval from `from`'s state (restored or reached) to `to`;
// the report goes to the listener. Throws ContextLost after a sticky fault.
IntervalReport Reexecutor::runInterval(const CheckpointInfo& from, const CheckpointInfo* to,
                                       ReexecutionListener& listener, std::optional<uint64_t> reportLaunch) {
  IntervalReport report = intervalBetween(&from, to);
  listener.intervalStarting(report);
  bool sticky = false;
  try {
    reexecute(from.seq, to != nullptr ? to->seq : UINT64_MAX, report, listener, reportLaunch);
    if (to != nullptr) {
      verify(*to, report);
      const auto& checks = r_.options_.checks;
      if (report.verdict == IntervalVerdict::kDiffers &&
          std::find(checks.begin(), checks.end(), "determinism") != checks.end()) {
        checkDeterminism(from, *to, report, listener);
      }
    } else {
      report.verdict = IntervalVerdict::kUnverified;
      report.detail = "nothing compared: no intact checkpoint after it";
    }
  } catch (const IntervalStop& stop) {
    report.verdict = stop.verdict;
    report.detail = stop.detail;
  } catch (const CudaError& error) {
    report.verdict = IntervalVerdict::kFault;
    report.detail = error.what();
    sticky = error.sticky();
  }
  listener.interval(report);
  if (sticky) throw ContextLost{};
  return report;
}

void Reexecutor::run(const ReexecutionRequest& request, ReexecutionListener& listener) {
  const auto& checkpoints = plan_.checkpoints();
  if (checkpoints.empty()) {
    throw ReplayError("the trace holds no checkpoint: nothing to re-execute from");
  }
  if (reader_.torn() || !reader_.problems().empty()) {
    const CheckpointInfo* last = nullptr;
    for (const CheckpointInfo& c : checkpoints) {
      if (c.comparable()) last = &c;
    }
    listener.note(
        "the trace is damaged or cut short" +
        (reader_.problems().empty() ? std::string() : " at byte " + std::to_string(reader_.problems().front().offset)) +
        ": it is usable up to " + (last != nullptr ? last->name() : std::string("its last checkpoint")));
  }
  const auto firstRestorable = [&](uint64_t beforeSeq) {
    std::optional<size_t> found;
    for (size_t k = 0; k < checkpoints.size() && checkpoints[k].seq < beforeSeq; ++k) {
      if (checkpoints[k].restorable()) found = k;
      if (found && beforeSeq == UINT64_MAX) break;  // the first one
    }
    return found;
  };

  if (request.launch) {
    const LaunchRecord* target = model_.launch(*request.launch);
    if (target == nullptr) throw ReplayError("the trace has no launch " + std::to_string(*request.launch));
    if (target->event().getCapturing()) {
      throw ReplayError("launch " + std::to_string(*request.launch) +
                        " was captured into a CUDA graph: it never ran as a launch");
    }
    const auto start = firstRestorable(target->seq());
    if (!start) {
      throw ReplayError("no intact checkpoint before launch " + std::to_string(*request.launch) +
                        ": it cannot be reconstructed");
    }
    const CheckpointInfo& from = checkpoints[*start];
    for (size_t k = *start + 1; k < checkpoints.size() && checkpoints[k].seq < target->seq(); ++k) {
      listener.note(checkpoints[k].name() + " is damaged (" +
                    (checkpoints[k].damage.empty() ? checkpoints[k].restoreDamage : checkpoints[k].damage) +
                    "): re-execution starts from " + from.name());
    }
    const CheckpointInfo* to = nullptr;
    for (size_t k = *start + 1; k < checkpoints.size() && to == nullptr; ++k) {
      if (checkpoints[k].seq > target->seq() && checkpoints[k].comparable()) to = &checkpoints[k];
    }
    place(listener);
    loadCode(from.seq);
    try {
      restore(from);
    } catch (const CudaError&) {
      throw;
    } catch (const std::exception& e) {
      throw ReplayError(from.name() + " cannot be restored: " + e.what());
    }
    listener.note("restored " + from.name());
    runInterval(from, to, listener, *request.launch);
    return;
  }

  const auto start = firstRestorable(UINT64_MAX);
  if (!start) {
    std::string why;
    for (const CheckpointInfo& c : checkpoints) {
      why += "; " + c.name() + ": " + (c.damage.empty() ? c.restoreDamage : c.damage);
    }
    throw ReplayError("no checkpoint of the trace can be restored" + why);
  }
  for (size_t k = 0; k < *start; ++k) {
    listener.note(checkpoints[k].name() + " is damaged (" +
                  (checkpoints[k].damage.empty() ? checkpoints[k].restoreDamage : checkpoints[k].damage) +
                  "): replay starts from " + checkpoints[*start].name());
  }
  if (*start != 0) unverified(checkpoints[0], &checkpoints[*start], "starts at a damaged checkpoint", listener);
  place(listener);
  loadCode(checkpoints[*start].seq);
  size_t current = *start;
  if (!restoreOrSkip(current, listener)) return;
  size_t next = current + 1;
  while (next < checkpoints.size()) {
    if (!checkpoints[next].comparable()) {
      listener.note(checkpoints[next].name() + " is damaged (" + checkpoints[next].damage +
                    "): not compared; re-execution goes on to the next checkpoint");
      ++next;
      continue;
    }
    const IntervalReport report = runInterval(checkpoints[current], &checkpoints[next], listener);
    if (report.verdict == IntervalVerdict::kReproduced) {
      current = next++;
      continue;
    }
    current = next;
    if (!restoreOrSkip(current, listener)) return;
    next = current + 1;
  }
  // The launches after the last intact checkpoint run too, with nothing to
  // compare at their end: a fault among them (a flight recorder's trigger)
  // shows.
  const IntervalReport tail = intervalBetween(&checkpoints[current], nullptr);
  if (tail.firstLaunch <= tail.lastLaunch) runInterval(checkpoints[current], nullptr, listener);
}

void reexecuteInProcess(const TraceModel& model, const ReplayOptions& options, const ReexecutionRequest& request,
                        ReexecutionListener& listener, ReplayDevice* device) {
  auto reader = format::TraceReader::open(options.tracePath);
  Reexecutor reexecutor(model, *reader, options);
  const ReplayDevice here{options.device, reexecutor.replayer().deviceName(), reexecutor.replayer().smVersion(),
                          driver().version};
  if (device != nullptr) *device = here;
  listener.started(here);
  try {
    reexecutor.run(request, listener);
  } catch (const ContextLost&) {}
}
}  // namespace kcap::replay
