// The re-execution engine (reexecute.h), built on the Replayer's parts:
// its device, stream, memory placement, code cache, content restore,
// memory operations, parameters and launch.
#include "reexecute.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "hex_text.h"
#include "change_hash.h"
#include "checkpoints.h"
#include "driver.h"
#include "job_environment.h"
#include "message_check.h"
#include "reexecutor.h"
#include "replayer.h"
#include "schema_names.h"

namespace kcap::replay {

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
  for (CUevent event : markers_) r_.driver_.cuEventDestroy(event);
  if (arena_ != nullptr) r_.driver_.cuMemFreeHost(arena_);
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
void Reexecutor::loadCode(uint64_t afterSeq, ReexecutionListener& listener) {
  const std::vector<LaunchRecord>& launches = model_.launches();
  kernelAt_.assign(launches.size(), nullptr);
  uint64_t ncclKernels = 0, otherDevices = 0;
  for (size_t position = 0; position < launches.size(); ++position) {
    const LaunchRecord& launch = launches[position];
    if (launch.seq() <= afterSeq || launch.event().getCapturing()) continue;
    // A process driving several GPUs: the checkpoints hold one device's
    // memory, and what the others' work wrote into it is in the trace.
    if (!model_.onOtherDevice(launch).empty()) {
      passedOver_.insert(launch.launchIndex);
      ++otherDevices;
      continue;
    }
    // Checked once here, not on every re-executed launch.
    if (const std::string bad = format::launchParamProblem(launch.event()); !bad.empty()) {
      launchCodeError_[launch.launchIndex] = " is malformed: " + bad;
      continue;
    }
    try {
      const CodeRef code = model_.codeFor(launch);
      if (format::isNcclKernel(code.kernelName)) {
        // It waits for its peers, which re-execution does not run.
        if (launch.event().getCollectiveCall()) {
          passedOver_.insert(launch.launchIndex);
          ++ncclKernels;
        } else {
          launchCodeError_[launch.launchIndex] =
              " (" + code.kernelName +
              ") is an NCCL kernel that no NCCL call kcap saw launched: it waits for its peers, which re-execution "
              "does not run, and what it wrote is not in the trace";
        }
        continue;
      }
      std::string key = std::to_string(code.load->seq()) + " " + code.kernelName;
      for (const auto& attribute : code.attributes) key += " " + std::to_string(attribute->seq());
      auto it = kernels_.find(key);
      if (it == kernels_.end()) {
        it = kernels_.emplace(key, r_.code_->kernelFor(code)).first;
        for (const GlobalPlacement& g : it->second.globals) {
          if (globals_.emplace(g.recordedAddress, g).second) r_.opGlobals_.globals.push_back(g);
        }
      }
      if (const std::string missing = r_.missingParameters(launch, it->second); !missing.empty()) {
        launchCodeError_[launch.launchIndex] = ": " + missing;
        continue;
      }
      kernelAt_[position] = &it->second;
    } catch (const std::exception& e) {
      launchCodeError_[launch.launchIndex] = std::string(": ") + e.what();
    }
  }
  if (ncclKernels != 0) {
    listener.note(std::to_string(ncclKernels) +
                  " NCCL kernel launch(es) are not re-run (they wait for peers that replay does not run): what "
                  "their NCCL calls wrote on this rank is written from the trace in their place");
  }
  if (otherDevices != 0) {
    listener.note(std::to_string(otherDevices) + " launch(es) on other devices than the checkpoints' (device " +
                  std::to_string(model_.checkpointDevice()) +
                  ") are not re-run: what they wrote into its memory is written from the trace (copies from "
                  "another device, NCCL calls)");
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
  if (to != nullptr) {
    // The program's time for these launches: from the end of one
    // checkpoint's hold to the start of the next's.
    const uint64_t start = from.event->get().getTimeNs();
    const uint64_t end = to->event->get().getTimeNs(), hold = to->get().getHoldNs();
    if (end >= hold && end - hold > start) report.programNs = end - hold - start;
  }
  setMarkSpacing(report);
  listener.intervalStarting(report);
  bool sticky = false;
  try {
    // Events lost to damage between the checkpoints: running what is left
    // would compare something the program never ran.
    if (const auto missing = model_.missingBetween(from.seq, to != nullptr ? to->seq : UINT64_MAX)) {
      throw IntervalStop{IntervalVerdict::kUnverified, "not re-executed: events #" + std::to_string(missing->first) +
                                                           ".." + std::to_string(missing->second) + " after " +
                                                           from.name() + " are missing (the trace is damaged there)"};
    }
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
    if (report.faultAmong) {
      report.detail += "; launches ran without a wait between them: the failing launch is one of launches " +
                       std::to_string(report.faultAmong->first) + ".." + std::to_string(report.faultAmong->second);
    }
  }
  listener.interval(report);
  if (sticky) throw ContextLost{};
  return report;
}

void Reexecutor::run(const ReexecutionRequest& request, ReexecutionListener& listener) {
  synchronized_ = request.synchronized;
  quiet_ = request.quiet;
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
    if (const std::string other = model_.onOtherDevice(*target); !other.empty()) {
      throw ReplayError(other + ": re-execution cannot reconstruct it");
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
    loadCode(from.seq, listener);
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
  loadCode(checkpoints[*start].seq, listener);
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
                          driver().version, reexecutor.replayer().pciBusId()};
  if (device != nullptr) *device = here;
  listener.started(here);
  try {
    reexecutor.run(request, listener);
  } catch (const ContextLost&) {}
}
}  // namespace kcap::replay
