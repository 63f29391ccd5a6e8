#include "trace_model.h"

#include <algorithm>
#include <limits>

#include "driver.h"
#include "event_visitor.h"

namespace kcap::replay {

StoredEvent::StoredEvent(schema::Event::Reader event) {
  capnp::MallocMessageBuilder builder(static_cast<unsigned>(event.totalSize().wordCount + 1));
  builder.setRoot(event);
  words_ = capnp::messageToFlatArray(builder);
  // The reader already traversed the original within its limits. The limit
  // counts every read for the life of a message, and replay reads these
  // copies many times: no limit.
  capnp::ReaderOptions options;
  options.traversalLimitInWords = std::numeric_limits<uint64_t>::max();
  message_ = std::make_unique<capnp::FlatArrayMessageReader>(words_.asPtr(), options);
  root_ = message_->getRoot<schema::Event>();
}

std::optional<CopyRows> copyRows(schema::Memcpy::Reader copy) {
  CopyRows r;
  r.width = copy.getWidth();
  r.rows = copy.getHeight();
  r.slices = std::max<uint64_t>(copy.getDepth(), 1);
  r.dstPitch = copy.getDstPitch();
  r.srcPitch = copy.getSrcPitch();
  // Where the last row of a side ends, past its first byte, without wrapping.
  const auto fits = [&](uint64_t base, uint64_t pitch, uint64_t sliceHeight, uint64_t& slicePitch) {
    if (__builtin_mul_overflow(pitch, sliceHeight, &slicePitch)) return false;
    if (r.rows == 0) return true;
    uint64_t last = 0, rowsIn = 0, end = 0;
    return !__builtin_mul_overflow(r.slices - 1, slicePitch, &last) &&
           !__builtin_mul_overflow(r.rows - 1, pitch, &rowsIn) && !__builtin_add_overflow(last, rowsIn, &end) &&
           !__builtin_add_overflow(end, r.width, &end) && !__builtin_add_overflow(base, end, &end);
  };
  if (!fits(copy.getDst(), r.dstPitch, copy.getDstHeight(), r.dstSlicePitch) ||
      !fits(copy.getSrc(), r.srcPitch, copy.getSrcHeight(), r.srcSlicePitch)) {
    return std::nullopt;
  }
  return r;
}

bool sameContent(schema::Content::Reader a, schema::Content::Reader b) {
  if (a.getSize() != b.getSize() || a.getPieceSize() != b.getPieceSize()) return false;
  const auto pa = a.getPieces(), pb = b.getPieces();
  if (pa.size() != pb.size()) return false;
  for (unsigned i = 0; i < pa.size(); ++i) {
    if (pa[i].getHigh() != pb[i].getHigh() || pa[i].getLow() != pb[i].getLow()) return false;
  }
  return true;
}

std::optional<uint32_t> parameterPointingInto(schema::Launch::Reader launch, uint64_t base, uint64_t size) {
  for (const auto word : launch.getPointers()) {
    if (word.getValue() < base || word.getValue() - base >= size) continue;
    const auto layout = launch.getParamLayout();
    for (uint32_t i = 0; i < layout.size(); ++i) {
      if (word.getOffset() >= layout[i].getOffset() && word.getOffset() - layout[i].getOffset() < layout[i].getSize()) {
        return i;
      }
    }
  }
  return std::nullopt;
}

namespace {

// `op` as if its data had been in it: the bytes a later WrittenData read
// back, or, for an NCCL call, why they are not there.
std::shared_ptr<StoredEvent> completed(const StoredEvent& op, const schema::Content::Reader* data,
                                       const std::string& missing) {
  capnp::MallocMessageBuilder builder;
  builder.setRoot(op.get());
  auto event = builder.getRoot<schema::Event>();
  if (event.isCollective()) {
    auto collective = event.getCollective();
    collective.setDataDeferred(false);  // what there is to know is in the event now
    if (data != nullptr) collective.setData(*data);
    if (!missing.empty()) collective.setDataMissing(missing);
  } else if (event.isMemcpy() && data != nullptr) {
    // Without its data it stays marked: re-execution names the copy's read-back as what is missing.
    event.getMemcpy().setDataDeferred(false);
    event.getMemcpy().setData(*data);
  } else if (event.isAlloc() && data != nullptr) {
    // Likewise: the whole allocation's first content, one range.
    auto alloc = event.getAlloc();
    alloc.setInitialDeferred(false);
    auto range = alloc.initInitial(1)[0];
    range.setAddress(alloc.getAddress());
    range.setAllocationBase(alloc.getAddress());
    range.setKind(schema::MemoryKind::ALLOCATION);
    range.setContent(*data);
  }
  return std::make_shared<StoredEvent>(event.asReader());
}

}  // namespace

// A WrittenData event completes the memory op it names, which came before
// it: the op is replaced by a copy holding the data, so that every consumer
// (re-execution, restore, extract, the checkers) reads one event.
void TraceModel::foldWrittenData(schema::WrittenData::Reader written) {
  const uint64_t of = written.getOf();
  const auto bySeq = [](const std::shared_ptr<StoredEvent>& op, uint64_t seq) { return op->seq() < seq; };
  auto it = std::lower_bound(memoryOps_.begin(), memoryOps_.end(), of, bySeq);
  if (it == memoryOps_.end() || (*it)->seq() != of) {
    it = std::lower_bound(allocations_.begin(), allocations_.end(), of, bySeq);  // a stream-ordered allocation's
    if (it == allocations_.end() || (*it)->seq() != of) return;
  }
  if (!format::awaitsWrittenData((*it)->get()) || folded_.count(of) != 0) {
    return;  // names no op waiting for its data (or one a ring left out): nothing to complete
  }
  folded_.insert(of);
  const std::string missing = written.getMissing();
  if (!missing.empty() || !written.hasData()) {
    *it = completed(**it, nullptr, missing.empty() ? "its read-back holds no data" : missing);
    return;
  }
  const schema::Content::Reader data = written.getData();
  *it = completed(**it, &data, {});
}

// An op whose WrittenData the trace does not hold: it ended first.
void TraceModel::markUnreadWrites() {
  for (auto& op : memoryOps_) {
    if (format::awaitsWrittenData(op->get()) && folded_.count(op->seq()) == 0) {
      op = completed(*op, nullptr, "the trace ends before the bytes it wrote were read back");
    }
  }
}

// The bytes read back at a graph launch's copy nodes (GraphNode.
// writtenReadBack) join its hostCopies, where the rebuild finds each copy
// node's bytes: the launch is replaced by a copy holding them.
void TraceModel::foldGraphReadBacks() {
  for (GraphLaunchRecord& record : graphLaunchRecords_) {
    const auto found = graphReadBacks_.find(record.seq());
    if (found == graphReadBacks_.end()) continue;
    const std::vector<std::shared_ptr<StoredEvent>>& reads = found->second;
    capnp::MallocMessageBuilder builder;
    builder.setRoot(record.launch->get());
    auto launch = builder.getRoot<schema::Event>().getGraphLaunch();
    const auto recorded = launch.asReader().getHostCopies();
    std::set<uint64_t> nodes;
    for (const auto copy : recorded) nodes.insert(copy.getNode());
    std::vector<schema::WrittenData::Reader> added;
    for (const auto& read : reads) {
      const auto written = read->get().getWrittenData();
      if (nodes.insert(written.getNode()).second) added.push_back(written);  // one per node: the first
    }
    capnp::MallocMessageBuilder copies;
    auto list =
        copies.initRoot<schema::GraphLaunch>().initHostCopies(static_cast<unsigned>(recorded.size() + added.size()));
    unsigned at = 0;
    for (const auto copy : recorded) list.setWithCaveats(at++, copy);
    for (const auto written : added) {
      auto copy = list[at++];
      copy.setNode(written.getNode());
      if (written.getMissing().size() == 0 && written.hasData()) {
        copy.setData(written.getData());
      } else {
        copy.setMissing(written.getMissing().size() != 0 ? written.getMissing().cStr() : "its read-back holds no data");
      }
    }
    launch.setHostCopies(list.asReader());
    auto replaced = std::make_shared<StoredEvent>(builder.getRoot<schema::Event>().asReader());
    // graphLaunches_ is in seq order: the launch is found, not searched for.
    const auto listed =
        std::lower_bound(graphLaunches_.begin(), graphLaunches_.end(), record.seq(),
                         [](const std::shared_ptr<StoredEvent>& event, uint64_t seq) { return event->seq() < seq; });
    if (listed != graphLaunches_.end() && *listed == record.launch) *listed = replaced;
    record.launch = std::move(replaced);
  }
  graphReadBacks_.clear();
}

std::string TraceModel::onOtherDevice(const LaunchRecord& launch) const {
  const int device = launch.event().getDevice();
  const int covered = checkpointDevice_;
  if (device < 0 || covered < 0 || device == covered) return {};
  return "launch " + std::to_string(launch.launchIndex) + " ran on device " + std::to_string(device) +
         "; the checkpoints hold device " + std::to_string(covered) + "'s memory";
}

TraceModel TraceModel::load(format::TraceReader& reader) {
  TraceModel model;
  std::map<uint64_t, uint64_t> durations;  // launchIndex -> ns
  std::optional<uint64_t> lastSeq;
  reader.forEachEvent([&](const format::EventRef& ref) {
    const schema::Event::Reader event = ref.event;
    if (const uint64_t seq = event.getSeq(); !lastSeq || seq > *lastSeq) {
      if (lastSeq && seq > *lastSeq + 1) model.missing_.emplace_back(*lastSeq + 1, seq - 1);
      lastSeq = seq;
    }
    const auto stored = [&] { return std::make_shared<StoredEvent>(event); };
    format::visitEvent(
        event, format::Overloaded{
                   [&](schema::TraceBegin::Reader) {
                     if (model.traceBegin_ == nullptr) model.traceBegin_ = stored();
                   },
                   [&](schema::ModuleLoad::Reader load) {
                     if (load.getResult() == 0) model.loads_[load.getHandle()].push_back(stored());
                   },
                   [&](schema::FunctionBind::Reader bind) { model.binds_[bind.getHandle()].push_back(stored()); },
                   [&](schema::FunctionAttribute::Reader attribute) {
                     if (attribute.getResult() == 0) model.attributes_[attribute.getHandle()].push_back(stored());
                   },
                   [&](schema::TensorMapEncode::Reader encode) {
                     if (encode.getResult() == 0 && encode.getMap().size() == sizeof(CUtensorMap)) {
                       const auto map = encode.getMap();
                       model.tensorMaps_[std::string(reinterpret_cast<const char*>(map.begin()), map.size())].push_back(
                           stored());
                     }
                   },
                   // A captured copy or memset wrote nothing: its graph's launches do.
                   [&](schema::Memcpy::Reader c) {
                     if (!c.getCaptured()) model.memoryOps_.push_back(stored());
                   },
                   [&](schema::Memset::Reader m) {
                     if (!m.getCaptured()) model.memoryOps_.push_back(stored());
                   },
                   [&](schema::Collective::Reader c) {
                     // A captured call ran nothing: its graph's launches wrote.
                     if (!c.getCaptured()) model.memoryOps_.push_back(stored());
                   },
                   [&](schema::WrittenData::Reader written) {
                     if (written.getNode() != 0) {
                       model.graphReadBacks_[written.getOf()].push_back(stored());
                     } else {
                       model.foldWrittenData(written);
                     }
                   },
                   [&](schema::Checkpoint::Reader) { model.checkpoints_.push_back(stored()); },
                   [&](schema::Alloc::Reader) { model.allocations_.push_back(stored()); },
                   [&](schema::Free::Reader) { model.allocations_.push_back(stored()); },
                   [&](schema::GraphLaunch::Reader launch) {
                     auto kept = stored();
                     model.graphLaunches_.push_back(kept);
                     const uint64_t index = launch.getGraphLaunchIndex();
                     if (model.byGraphIndex_.count(index) == 0) {
                       model.byGraphIndex_[index] = model.graphLaunchRecords_.size();
                       model.graphLaunchRecords_.push_back({index, kept, nullptr});
                     }
                   },
                   [&](schema::GraphLaunchEnd::Reader end) {
                     const auto it = model.byGraphIndex_.find(end.getGraphLaunchIndex());
                     if (it != model.byGraphIndex_.end() && model.graphLaunchRecords_[it->second].end == nullptr) {
                       model.graphLaunchRecords_[it->second].end = stored();
                     }
                   },
                   [&](schema::GraphDefine::Reader define) {
                     if (define.getResult() != 0) return;
                     auto kept = stored();
                     model.graphDefines_[define.getGraphExec()].push_back(kept);
                     model.graphDefineList_.push_back(kept);
                   },
                   [&](schema::GraphNodeUpdate::Reader update) {
                     if (update.getResult() == 0) model.graphUpdates_[update.getGraphExec()].push_back(stored());
                   },
                   [&](schema::Launch::Reader launch) {
                     const uint64_t index = launch.getLaunchIndex();
                     if (model.byIndex_.count(index) == 0) {
                       model.byIndex_[index] = model.launches_.size();
                       LaunchRecord record;
                       record.launchIndex = index;
                       record.launch = stored();
                       model.launches_.push_back(std::move(record));
                     }
                   },
                   [&](schema::LaunchEnd::Reader end) {
                     const auto it = model.byIndex_.find(end.getLaunchIndex());
                     if (it != model.byIndex_.end() && model.launches_[it->second].end == nullptr) {
                       model.launches_[it->second].end = stored();
                     }
                   },
                   [&](schema::KernelTiming::Reader timing) {
                     if (timing.getEndNs() >= timing.getStartNs()) {
                       durations[timing.getLaunchIndex()] = timing.getEndNs() - timing.getStartNs();
                     }
                   },
                   [](const auto&) {},  // the rest replay does not need
               });
    return true;
  });
  model.markUnreadWrites();
  model.foldGraphReadBacks();
  for (const auto& checkpoint : model.checkpoints_) {
    if (const int device = checkpoint->get().getCheckpoint().getDevice(); device >= 0) {
      model.checkpointDevice_ = device;
      break;
    }
  }
  for (const auto& [index, ns] : durations) {
    if (const auto it = model.byIndex_.find(index); it != model.byIndex_.end()) {
      model.launches_[it->second].recordedDurationNs = ns;
    }
  }
  return model;
}

std::optional<std::pair<uint64_t, uint64_t>> TraceModel::missingBetween(uint64_t afterSeq, uint64_t beforeSeq) const {
  // The ranges are disjoint and in order: the first that ends after afterSeq.
  const auto it = std::partition_point(missing_.begin(), missing_.end(),
                                       [&](const auto& range) { return range.second <= afterSeq; });
  if (it != missing_.end() && it->first < beforeSeq) return *it;
  return std::nullopt;
}

const LaunchRecord* TraceModel::launch(uint64_t launchIndex) const {
  const auto it = byIndex_.find(launchIndex);
  return it == byIndex_.end() ? nullptr : &launches_[it->second];
}

std::shared_ptr<StoredEvent> TraceModel::latestBefore(const std::vector<std::shared_ptr<StoredEvent>>& events,
                                                      uint64_t seq) {
  std::shared_ptr<StoredEvent> found;
  for (const auto& event : events) {
    if (event->seq() >= seq) break;
    found = event;
  }
  return found;
}

CodeRef TraceModel::codeFor(const LaunchRecord& record) const {
  const auto launch = record.event();
  const uint64_t seq = record.seq();
  const std::string where = record.label.empty() ? "launch " + std::to_string(record.launchIndex) : record.label;

  const auto bindOf = [&](uint64_t handle) -> std::shared_ptr<StoredEvent> {
    const auto it = binds_.find(handle);
    return it == binds_.end() ? nullptr : latestBefore(it->second, seq);
  };
  const auto loadOf = [&](uint64_t handle) -> std::shared_ptr<StoredEvent> {
    const auto it = loads_.find(handle);
    return it == loads_.end() ? nullptr : latestBefore(it->second, seq);
  };

  CodeRef code;
  const std::shared_ptr<StoredEvent> bind = bindOf(launch.getFunction());
  if (bind == nullptr) {
    throw ReplayError(where + ": no functionBind for handle " + std::to_string(launch.getFunction()) +
                      " (its module was loaded where kcap did not see it)");
  }
  code.binds.push_back(bind);
  auto function = bind->get().getFunctionBind();
  code.kernelName = function.getName();
  std::vector<uint64_t> attributeHandles{launch.getFunction()};
  if (function.getSourceHandle() != 0) attributeHandles.push_back(function.getSourceHandle());

  uint64_t owner = function.getModuleHandle();
  if (function.getSourceHandle() != 0) {
    // cuKernelGetFunction: the CUkernel it came from, and (when the bind
    // names no module) the CUkernel's library.
    if (const auto kernel = bindOf(function.getSourceHandle())) {
      code.binds.push_back(kernel);
      if (owner == 0) {
        owner = kernel->get().getFunctionBind().getModuleHandle();
        if (code.kernelName.empty()) code.kernelName = kernel->get().getFunctionBind().getName();
      }
    }
  }
  std::shared_ptr<StoredEvent> load = loadOf(owner);
  if (load == nullptr) {
    // A module taken from a library (cuLibraryGetModule): bound to the library.
    if (const auto module = bindOf(owner);
        module != nullptr && module->get().getFunctionBind().getApi() == schema::BindApi::LIBRARY_GET_MODULE) {
      code.binds.push_back(module);
      load = loadOf(module->get().getFunctionBind().getModuleHandle());
    }
  }
  if (load == nullptr) {
    throw ReplayError(where + ": the module of kernel " + code.kernelName + " was not recorded");
  }
  if (code.kernelName.empty()) code.kernelName = launch.getKernelName();
  if (code.kernelName.empty()) {
    throw ReplayError(where + ": the kernel's name was not recorded");
  }
  for (const auto& [handle, events] : attributes_) {
    if (std::find(attributeHandles.begin(), attributeHandles.end(), handle) == attributeHandles.end()) continue;
    for (const auto& event : events) {
      if (event->seq() < seq) code.attributes.push_back(event);
    }
  }
  std::sort(code.attributes.begin(), code.attributes.end(),
            [](const auto& a, const auto& b) { return a->seq() < b->seq(); });
  code.load = load;
  return code;
}

std::vector<const StoredEvent*> TraceModel::memoryOpsBetween(uint64_t afterSeq, uint64_t beforeSeq) const {
  std::vector<const StoredEvent*> ops;
  const auto first = std::upper_bound(memoryOps_.begin(), memoryOps_.end(), afterSeq,
                                      [](uint64_t seq, const auto& event) { return seq < event->seq(); });
  for (auto it = first; it != memoryOps_.end() && (*it)->seq() < beforeSeq; ++it) {
    ops.push_back(it->get());
  }
  return ops;
}

const StoredEvent* TraceModel::tensorMapEncodeFor(const uint8_t* map, size_t size, uint64_t beforeSeq) const {
  if (map == nullptr || size != sizeof(CUtensorMap)) return nullptr;
  const auto it = tensorMaps_.find(std::string(reinterpret_cast<const char*>(map), size));
  if (it == tensorMaps_.end()) return nullptr;
  return latestBefore(it->second, beforeSeq).get();
}

const StoredEvent* TraceModel::tensorMapEncodeFor(const LaunchRecord& launch, schema::PointerWord::Reader word) const {
  const auto params = launch.event().getParams();
  if (!word.getInTensorMap() || word.getOffset() + sizeof(CUtensorMap) > params.size()) return nullptr;
  return tensorMapEncodeFor(params.begin() + word.getOffset(), sizeof(CUtensorMap), launch.seq());
}

}  // namespace kcap::replay
