#include "trace_summary.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "event_visitor.h"
#include "launch_table.h"
#include "schema_names.h"
#include "trace_reader.h"

namespace kcap::format {

namespace {

using schema::AllocKind;

// Kinds whose bytes occupy device memory until freed. Address reservations,
// mappings (the physical memory is counted at vmmCreate) and host memory are
// listed by kind but not counted as live device memory.
bool isDeviceMemory(AllocKind kind) {
  switch (kind) {
    case AllocKind::MEM_ALLOC:
    case AllocKind::MEM_ALLOC_PITCH:
    case AllocKind::MANAGED:
    case AllocKind::ASYNC:
    case AllocKind::FROM_POOL:
    case AllocKind::VMM_CREATE:
      return true;
    default:
      return false;
  }
}

// The summary and what building it needs to remember between events.
class SummaryBuilder {
 public:
  void add(schema::Event::Reader event);
  void addChunks(const TraceReader& reader);
  TraceSummary take() {
    s_.externalWrites.notLogged += awaitingData_.size();  // the trace ends before their read-back
    s_.firstContentsMissing += awaitingFirstContent_.size();
    return std::move(s_);
  }

 private:
  void addAlloc(uint64_t seq, schema::Alloc::Reader a);
  void addFree(schema::Free::Reader f);
  void addLaunch(schema::Launch::Reader l);
  void addModule(uint64_t seq, schema::ModuleLoad::Reader m);
  void countGraphNodes(schema::GraphBody::Reader body, unsigned depth);
  // A collective or cross-device copy: `written` bytes, `data` what the
  // event holds, `deferred` its data to come in a writtenData event.
  void addExternalWrite(uint64_t seq, uint64_t written, uint64_t data, bool missing, bool deferred);

  TraceSummary s_;
  std::set<uint64_t> graphExecs_;
  std::unordered_map<uint64_t, size_t> liveModules_;  // handle -> index in modules
  std::unordered_map<std::string, size_t> kernelIndex_;
  std::unordered_map<uint64_t, size_t> kernelOfLaunch_;  // launchIndex -> index in kernels
  std::map<std::pair<bool, uint64_t>, uint64_t> live_;   // (keyed by handle, key) -> bytes
  uint64_t liveBytes_ = 0;
  std::set<uint64_t> awaitingData_;          // seqs of external writes marked dataDeferred, not yet read back
  std::set<uint64_t> awaitingFirstContent_;  // seqs of allocations marked initialDeferred, not yet read back
};

void SummaryBuilder::addExternalWrite(uint64_t seq, uint64_t written, uint64_t data, bool missing, bool deferred) {
  ExternalWritesSummary& x = s_.externalWrites;
  if (deferred) {
    ++x.readBackLater;
    awaitingData_.insert(seq);
  } else if (data != 0) {
    ++x.logged.count;
    x.logged.bytes += data;
  } else if (missing && written != 0) {
    ++x.notLogged;
  }
}

// Nodes by kind, nested bodies included; a trace is untrusted, so the depth
// is bounded (the recorder nests at most 16 graphs).
void SummaryBuilder::countGraphNodes(schema::GraphBody::Reader body, unsigned depth) {
  if (depth > 16) return;
  for (const auto node : body.getNodes()) {
    switch (node.which()) {
      case schema::GraphNode::KERNEL:
        ++s_.graphs.nodesByKind["kernel"];
        break;
      case schema::GraphNode::CHILD_GRAPH:
        ++s_.graphs.nodesByKind["childGraph"];
        countGraphNodes(node.getChildGraph(), depth + 1);
        break;
      case schema::GraphNode::CONDITIONAL:
        ++s_.graphs.nodesByKind["conditional"];
        for (const auto nested : node.getConditional().getBodies()) countGraphNodes(nested, depth + 1);
        break;
      case schema::GraphNode::MEMCPY:
        ++s_.graphs.nodesByKind["memcpy"];
        break;
      case schema::GraphNode::MEMSET:
        ++s_.graphs.nodesByKind["memset"];
        break;
      case schema::GraphNode::HOST:
        ++s_.graphs.nodesByKind["host"];
        break;
      case schema::GraphNode::EMPTY:
        ++s_.graphs.nodesByKind["empty"];
        break;
      case schema::GraphNode::EVENT_RECORD:
        ++s_.graphs.nodesByKind["eventRecord"];
        break;
      case schema::GraphNode::EVENT_WAIT:
        ++s_.graphs.nodesByKind["eventWait"];
        break;
      case schema::GraphNode::MEM_ALLOC:
        ++s_.graphs.nodesByKind["memAlloc"];
        break;
      case schema::GraphNode::MEM_FREE:
        ++s_.graphs.nodesByKind["memFree"];
        break;
      default:
        ++s_.graphs.nodesByKind["unreadable"];
        break;
    }
  }
}

void SummaryBuilder::addAlloc(uint64_t seq, schema::Alloc::Reader a) {
  if (a.getResult() != 0) {
    ++s_.failedAllocs;
    return;
  }
  if (a.getInitial().size() != 0) {
    ++s_.firstContents.count;
    for (const auto range : a.getInitial()) s_.firstContents.bytes += range.getContent().getSize();
  }
  if (a.getInitialDeferred()) {
    ++s_.firstContentsReadBack;
    awaitingFirstContent_.insert(seq);
  }
  if (a.getCaptured()) {
    ++s_.graphMemory.count;
    s_.graphMemory.bytes += a.getSize();
  }
  auto& k = s_.allocByKind[enumName(a.getKind())];
  ++k.count;
  k.bytes += a.getSize();
  ++s_.allocTotal.count;
  s_.allocTotal.bytes += a.getSize();
  if (!isDeviceMemory(a.getKind())) return;
  bool byHandle = a.getKind() == AllocKind::VMM_CREATE;
  auto key = std::make_pair(byHandle, byHandle ? a.getHandle() : a.getAddress());
  auto [it, inserted] = live_.emplace(key, a.getSize());
  if (!inserted) {  // an address reused without a recorded free: replace
    liveBytes_ -= it->second;
    it->second = a.getSize();
  }
  liveBytes_ += a.getSize();
  s_.peakLiveBytes = std::max(s_.peakLiveBytes, liveBytes_);
}

void SummaryBuilder::addFree(schema::Free::Reader f) {
  ++s_.frees;
  if (f.getResult() != 0 || !isDeviceMemory(f.getKind())) return;
  bool byHandle = f.getKind() == AllocKind::VMM_CREATE;
  auto it = live_.find(std::make_pair(byHandle, byHandle ? f.getHandle() : f.getAddress()));
  if (it == live_.end()) return;
  liveBytes_ -= it->second;
  live_.erase(it);
}

void SummaryBuilder::addLaunch(schema::Launch::Reader l) {
  ++s_.launches;
  if (l.getCapturing()) ++s_.capturedIntoGraph;
  if (l.getEnded() && l.getResult() != 0) ++s_.failedLaunches;  // its outcome in the launch: no launchEnd
  ++s_.launchesByDevice[l.getDevice()];
  std::string name = launchKernelName(l);
  auto [it, inserted] = kernelIndex_.emplace(name, s_.kernels.size());
  if (inserted) {
    KernelSummary k;
    k.name = name;
    k.firstLaunchIndex = l.getLaunchIndex();
    k.grid[0] = l.getGridX(), k.grid[1] = l.getGridY(), k.grid[2] = l.getGridZ();
    k.block[0] = l.getBlockX(), k.block[1] = l.getBlockY(), k.block[2] = l.getBlockZ();
    k.sharedMemBytes = l.getSharedMemBytes();
    s_.kernels.push_back(std::move(k));
  }
  ++s_.kernels[it->second].launches;
  kernelOfLaunch_[l.getLaunchIndex()] = it->second;
}

void SummaryBuilder::addModule(uint64_t seq, schema::ModuleLoad::Reader m) {
  ModuleSummary info;
  info.seq = seq;
  info.handle = m.getHandle();
  info.isLibrary = m.getIsLibrary();
  info.api = enumName(m.getApi());
  info.imageKind = enumName(m.getImageKind());
  info.imageBytes = m.getImage().getSize();
  info.extraImages = m.getExtraImages().size();
  info.path = m.getPath().cStr();
  info.globals = m.getGlobals().size();
  info.result = m.getResult();
  liveModules_[info.handle] = s_.modules.size();
  s_.modules.push_back(std::move(info));
}

void SummaryBuilder::add(schema::Event::Reader e) {
  if (s_.events == 0) s_.firstTimeNs = e.getTimeNs();
  ++s_.events;
  s_.lastTimeNs = std::max(s_.lastTimeNs, e.getTimeNs());
  ++s_.byType[eventKind(e)];

  forEachContent(e, [&](const std::string& path, schema::Content::Reader c) {
    s_.contentRaw += c.getSize();
    s_.contentRawByType[path.substr(0, path.find('.'))] += c.getSize();
  });

  visitEvent(e, Overloaded{
                    [&](schema::TraceBegin::Reader b) {
                      if (s_.begin) return;
                      s_.begin = std::make_unique<capnp::MallocMessageBuilder>();
                      s_.begin->setRoot(b);
                      s_.beginSeq = e.getSeq();
                    },
                    [&](schema::TraceEnd::Reader t) {
                      s_.end = TraceEndSummary{e.getSeq(),           enumName(t.getReason()), t.getSignal(),
                                               t.getEventCount(),    t.getLaunchCount(),      t.getDroppedLaunches(),
                                               t.getMessage().cStr()};
                    },
                    [&](schema::ModuleLoad::Reader m) { addModule(e.getSeq(), m); },
                    [&](schema::ModuleUnload::Reader u) {
                      auto it = liveModules_.find(u.getHandle());
                      if (it != liveModules_.end()) {
                        s_.modules[it->second].unloaded = true;
                        liveModules_.erase(it);
                      }
                    },
                    [&](schema::FunctionBind::Reader) { ++s_.functionBinds; },
                    [&](schema::Launch::Reader l) { addLaunch(l); },
                    [&](schema::KernelTiming::Reader t) {
                      auto it = kernelOfLaunch_.find(t.getLaunchIndex());
                      if (it == kernelOfLaunch_.end()) return;
                      const uint64_t ns = t.getEndNs() >= t.getStartNs() ? t.getEndNs() - t.getStartNs() : 0;
                      KernelSummary& k = s_.kernels[it->second];
                      k.durationsNs.push_back(ns);
                      k.totalNs += ns;
                      ++s_.timedLaunches;
                      s_.timedTotalNs += ns;
                    },
                    [&](schema::LaunchEnd::Reader end) {
                      if (end.getResult() != 0) ++s_.failedLaunches;
                    },
                    [&](schema::Alloc::Reader a) { addAlloc(e.getSeq(), a); },
                    [&](schema::Free::Reader f) { addFree(f); },
                    [&](schema::Memcpy::Reader m) {
                      if (m.getCrossDevice()) {
                        ++s_.externalWrites.crossDeviceCopies;
                        s_.externalWrites.crossDeviceBytes += m.getSize();
                        addExternalWrite(e.getSeq(), m.getSize(), m.getData().getSize(), false, m.getDataDeferred());
                      }
                      auto& d = s_.memcpyByDirection[enumName(m.getDirection())];
                      ++d.count;
                      d.bytes += m.getSize();
                      ++s_.memcpyTotal.count;
                      s_.memcpyTotal.bytes += m.getSize();
                      s_.memcpyCapturedBytes += m.getData().getSize();
                    },
                    [&](schema::Memset::Reader m) {
                      ++s_.memsetTotal.count;
                      s_.memsetTotal.bytes += m.getCount() * m.getElementSize() * std::max<uint64_t>(m.getHeight(), 1);
                    },
                    [&](schema::Checkpoint::Reader c) {
                      if (s_.checkpoints++ == 0) s_.checkpointDevice = c.getDevice();
                      if (c.getResult() != 0) ++s_.incompleteCheckpoints;
                      s_.checkpointChangedBytes += c.getChangedBytes();
                      uint64_t bytes = 0;
                      for (const auto range : c.getRanges()) bytes += range.getContent().getSize();
                      s_.checkpointMaxBytes = std::max(s_.checkpointMaxBytes, bytes);
                      s_.checkpointMaxHoldNs = std::max(s_.checkpointMaxHoldNs, c.getHoldNs());
                      s_.checkpointHoldNs += c.getHoldNs();
                    },
                    [&](schema::GraphDefine::Reader d) {
                      if (d.getResult() != 0) return;
                      ++s_.graphs.definitions;
                      if (!d.getComplete()) ++s_.graphs.incomplete;
                      if (graphExecs_.insert(d.getGraphExec()).second) ++s_.graphs.executables;
                      countGraphNodes(d.getBody(), 0);
                    },
                    [&](schema::GraphNodeUpdate::Reader u) {
                      if (u.getResult() == 0) ++s_.graphs.updates;
                    },
                    [&](schema::GraphLaunch::Reader l) {
                      ++s_.graphs.launches;
                      if (l.getPre().size() != 0) ++s_.graphs.launchesWithMemory;
                    },
                    [&](schema::Collective::Reader c) {
                      ExternalWritesSummary& x = s_.externalWrites;
                      ++x.collectives;
                      ++x.collectivesByOperation[enumName(c.getOperation())];
                      x.collectiveBytes += c.getWritten();
                      if (c.getCapturedCopy() != 0) {
                        ++x.captured;  // its bytes come with each graph launch
                        x.capturedSlots.insert(c.getCapturedCopy());
                        return;
                      }
                      addExternalWrite(e.getSeq(), c.getWritten(), c.getData().getSize(),
                                       c.getDataMissing().size() != 0, c.getDataDeferred());
                    },
                    [&](schema::WrittenData::Reader w) {
                      if (w.getNode() != 0) {
                        if (w.getData().getSize() != 0) {
                          ++s_.externalWrites.graphReadBacks.count;
                          s_.externalWrites.graphReadBacks.bytes += w.getData().getSize();
                        } else {
                          ++s_.externalWrites.notLogged;
                        }
                        return;
                      }
                      if (awaitingFirstContent_.erase(w.getOf()) != 0) {  // a stream-ordered allocation's
                        if (w.getData().getSize() != 0) {
                          ++s_.firstContents.count;
                          s_.firstContents.bytes += w.getData().getSize();
                        } else {
                          ++s_.firstContentsMissing;
                        }
                        return;
                      }
                      if (awaitingData_.erase(w.getOf()) == 0) return;  // names nothing waiting (kcap check says so)
                      if (w.getData().getSize() != 0) {
                        ++s_.externalWrites.logged.count;
                        s_.externalWrites.logged.bytes += w.getData().getSize();
                      } else {
                        ++s_.externalWrites.notLogged;
                      }
                    },
                    [&](schema::Trigger::Reader t) {
                      s_.triggers.push_back({e.getSeq(), e.getTimeNs(), enumName(t.getKind()), t.getReason().cStr(),
                                             t.getDroppedEvents()});
                    },
                    [](const auto&) {},  // counted by type above; nothing more to summarise
                });
}

void SummaryBuilder::addChunks(const TraceReader& reader) {
  for (const auto& c : reader.chunks()) {
    if (c.kind == ChunkKind::kBlob) {
      ++s_.blobChunks;
      s_.blobRaw += c.rawSize;
      s_.blobStored += c.storedSize;
    } else if (c.kind == ChunkKind::kRecords) {
      ++s_.recordChunks;
      s_.recordRaw += c.rawSize;
      s_.recordStored += c.storedSize;
    }
  }
}

}  // namespace

std::optional<schema::TraceBegin::Reader> TraceSummary::traceBegin() const {
  if (!begin) return std::nullopt;
  return begin->getRoot<schema::TraceBegin>().asReader();
}

TraceSummary summarizeTrace(TraceReader& reader, const std::function<void(schema::Event::Reader)>& alsoEach) {
  SummaryBuilder builder;
  reader.forEachEvent([&](const EventRef& ref) {
    builder.add(ref.event);
    if (alsoEach) alsoEach(ref.event);
    return true;
  });
  builder.addChunks(reader);
  return builder.take();
}

std::vector<const KernelSummary*> kernelsByCount(const TraceSummary& s) {
  std::vector<const KernelSummary*> out;
  for (const auto& k : s.kernels) out.push_back(&k);
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelSummary* a, const KernelSummary* b) { return a->launches > b->launches; });
  return out;
}

std::vector<const KernelSummary*> kernelsByGpuTime(const TraceSummary& s) {
  std::vector<const KernelSummary*> out;
  for (const auto& k : s.kernels) {
    if (!k.durationsNs.empty()) out.push_back(&k);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelSummary* a, const KernelSummary* b) { return a->totalNs > b->totalNs; });
  return out;
}

uint64_t medianNs(std::vector<uint64_t> values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  return values[middle];
}

std::vector<std::pair<std::string, uint64_t>> eventTypesByCount(const TraceSummary& s) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (auto [which, count] : s.byType) {
    const char* name = eventTypeName(which);
    out.emplace_back(name ? std::string(name) : "unknown(" + std::to_string(which) + ")", count);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace kcap::format
