#include "extract.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_set>

#include <capnp/message.h>

#include "driver.h"
#include "event_visitor.h"
#include "extract_graph_node.h"
#include "extract_rebuild.h"
#include "errors.h"
#include "kcap.capnp.h"
#include "reexecute.h"
#include "trace_model.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::replay {
namespace {

using format::FormatError;
using format::Hash128;

// The output is written to a temporary file beside its final path and renamed
// over it once complete: a failed extract leaves nothing half-written.
class TempOutput {
 public:
  explicit TempOutput(std::string target) : target_(std::move(target)) {
    const size_t slash = target_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target_.substr(0, slash);
    const std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
    std::string pattern = dir + "/." + base + ".extract-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw FormatError(target_ + ": cannot create a temporary file in " + dir + ": " + std::strerror(errno));
    ::close(fd);
    path_ = pattern;
  }
  ~TempOutput() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;

  const std::string& path() const { return path_; }

  // On disk first, then under its name.
  void commit() {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const std::string why = std::strerror(errno);
      if (fd >= 0) ::close(fd);
      throw FormatError(path_ + ": cannot sync: " + why);
    }
    ::close(fd);
    if (::rename(path_.c_str(), target_.c_str()) != 0) {
      throw FormatError(target_ + ": cannot rename " + path_ + " to it: " + std::strerror(errno));
    }
    path_.clear();
  }

 private:
  std::string target_;
  std::string path_;
};

bool sameFile(const std::string& a, const std::string& b) {
  if (a == b) return true;
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

uint64_t fileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw FormatError(path + ": cannot stat: " + std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

// Every Content of the events extract keeps (moduleLoad, launch, launchEnd,
// memcpy, collective; the others hold none). A Content field added to the schema for
// one of these events must be added here.
void forEachContent(schema::Event::Reader event, const std::function<void(schema::Content::Reader)>& fn) {
  format::visitEvent(event, format::Overloaded{
                                [&](schema::ModuleLoad::Reader load) {
                                  fn(load.getImage());
                                  for (const auto image : load.getExtraImages()) fn(image);
                                },
                                [&](schema::Launch::Reader launch) {
                                  for (const auto range : launch.getPre()) fn(range.getContent());
                                },
                                [&](schema::LaunchEnd::Reader end) {
                                  for (const auto range : end.getPost()) fn(range.getContent());
                                },
                                [&](schema::Memcpy::Reader copy) { fn(copy.getData()); },
                                [&](schema::Collective::Reader collective) { fn(collective.getData()); },
                                [](const auto&) {},
                            });
}

std::string describe(schema::Event::Reader event) {
  const std::string seq = std::to_string(event.getSeq());
  return format::visitEvent(
      event,
      format::Overloaded{
          [&](schema::ModuleLoad::Reader) { return "the module loaded at event #" + seq; },
          [](schema::Launch::Reader launch) { return "launch " + std::to_string(launch.getLaunchIndex()) + " (pre)"; },
          [](schema::LaunchEnd::Reader end) { return "launch " + std::to_string(end.getLaunchIndex()) + " (post)"; },
          [&](schema::Memcpy::Reader) { return "the memcpy at event #" + seq; },
          [&](schema::Collective::Reader) { return "the collective at event #" + seq; },
          [&](const auto&) { return "event #" + seq; },
      });
}

std::string rangeText(const TraceModel& model) {
  const auto& launches = model.launches();
  if (launches.empty()) return "0 launches";
  return std::to_string(launches.size()) + (launches.size() == 1 ? " launch, " : " launches, ") +
         std::to_string(launches.front().launchIndex) + ".." + std::to_string(launches.back().launchIndex);
}

// The launches asked for, in trace order; `text` says which ("3", "1,3", "2..4").
std::vector<const LaunchRecord*> select(const ExtractRequest& request, const TraceModel& model, std::string& text) {
  if (request.launches.empty() == !request.range.has_value()) {
    throw ExtractUsageError("choose one of --launch N and --range A..B");
  }
  std::vector<const LaunchRecord*> selected;
  if (request.range) {
    const auto [first, last] = *request.range;
    if (last < first)
      throw ExtractUsageError("--range " + std::to_string(first) + ".." + std::to_string(last) +
                              ": expected A..B with A <= B");
    for (const auto& l : model.launches()) {
      if (l.launchIndex >= first && l.launchIndex <= last) selected.push_back(&l);
    }
    text = std::to_string(first) + ".." + std::to_string(last);
    if (selected.empty()) {
      throw ExtractUsageError("no launches in " + text + " in " + request.source + " (it has " + rangeText(model) +
                              ")");
    }
    return selected;
  }
  std::set<uint64_t> wanted;
  for (const uint64_t index : request.launches) {
    if (model.launch(index) == nullptr) {
      throw ExtractUsageError("launch " + std::to_string(index) + " is not in " + request.source + " (it has " +
                              rangeText(model) + "; `kcap dump --type launch` lists them)");
    }
    wanted.insert(index);
  }
  for (const auto& l : model.launches()) {
    if (wanted.count(l.launchIndex) == 0) continue;
    selected.push_back(&l);
    text += (text.empty() ? "" : ",") + std::to_string(l.launchIndex);
  }
  return selected;
}

// The Alloc events of the allocations a launch reaches: for every address
// where an allocation starts, the latest successful one before the launch
// that overlaps memory the launch reaches (a VMM range brings its
// reservation, its mappings, and the physical allocations mapped there).
class Allocations {
 public:
  void add(std::shared_ptr<StoredEvent> event) {
    const auto alloc = event->get().getAlloc();
    if (alloc.getResult() != 0) return;
    if (alloc.getKind() == schema::AllocKind::VMM_CREATE) {
      creates_[alloc.getHandle()].push_back(event);
    } else if (alloc.getAddress() != 0) {
      maxSize_ = std::max<uint64_t>(maxSize_, std::max<uint64_t>(alloc.getSize(), 1));
      byBase_[alloc.getAddress()].push_back(event);
    }
  }

  void reachedBy(const LaunchRecord& launch, std::map<uint64_t, const StoredEvent*>& out) const {
    std::map<uint64_t, uint64_t> reached;  // [address, address + size)
    const auto reach = [&](uint64_t address, uint64_t size) {
      if (address == 0) return;
      uint64_t& end = reached[address];
      end = std::max(end, size == 0 || address + size < address ? address + 1 : address + size);
    };
    const auto reachRanges = [&](capnp::List<schema::MemoryRange>::Reader ranges) {
      for (const auto range : ranges) {
        if (range.getKind() == schema::MemoryKind::MODULE_GLOBAL) continue;
        reach(range.getAddress(), range.getContent().getSize());
        reach(range.getAllocationBase(), 1);
      }
    };
    const auto e = launch.event();
    reachRanges(e.getPre());
    if (launch.end != nullptr) reachRanges(launch.end->get().getLaunchEnd().getPost());
    for (const auto word : e.getPointers()) reach(word.getAllocationBase(), 1);
    for (const auto p : e.getIndirectPointers()) {
      reach(p.getAllocationBase(), 1);
      reach(p.getBufferAddress(), 1);
    }
    for (const auto& [lo, hi] : reached) {
      for (auto it = byBase_.lower_bound(hi); it != byBase_.begin();) {
        --it;
        if (it->first < lo && lo - it->first >= maxSize_) break;  // nothing further down reaches this far
        const StoredEvent* latest[2] = {nullptr, nullptr};        // memory, VMM reservation
        for (const auto& event : it->second) {
          if (event->seq() >= launch.seq()) break;
          const auto alloc = event->get().getAlloc();
          const uint64_t size = std::max<uint64_t>(alloc.getSize(), 1);
          if (it->first < lo && lo - it->first >= size) continue;  // ends before the range
          latest[alloc.getKind() == schema::AllocKind::VMM_RESERVE ? 1 : 0] = event.get();
        }
        for (const StoredEvent* event : latest) {
          if (event != nullptr) keep(event, out);
        }
      }
    }
  }

 private:
  // The allocation, and for a VMM mapping the physical allocation it maps.
  void keep(const StoredEvent* event, std::map<uint64_t, const StoredEvent*>& out) const {
    out[event->seq()] = event;
    const auto alloc = event->get().getAlloc();
    if (alloc.getKind() != schema::AllocKind::VMM_MAP) return;
    const auto created = creates_.find(alloc.getHandle());
    if (created == creates_.end()) return;
    const StoredEvent* latest = nullptr;
    for (const auto& c : created->second) {
      if (c->seq() < event->seq()) latest = c.get();
    }
    if (latest != nullptr) out[latest->seq()] = latest;
  }

  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> byBase_;   // by address, seq order
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> creates_;  // vmmCreate by handle, seq order
  uint64_t maxSize_ = 0;
};

}  // namespace

ExtractResult extract(const ExtractRequest& request) {
  if (sameFile(request.source, request.output)) {
    throw ExtractUsageError("the output " + request.output + " is the trace being read; name another file");
  }
  ExtractResult result;
  auto reader = format::TraceReader::open(request.source);
  const TraceModel model = TraceModel::load(*reader);
  std::optional<GraphNodeExtract> graphNode;
  std::vector<const LaunchRecord*> selected;
  if (request.graphLaunch) {
    if (!request.launches.empty() || request.range) {
      throw ExtractUsageError("--graph-launch extracts one graph node: not with --launch or --range");
    }
    graphNode = extractGraphNode(model, *request.graphLaunch, request.node);
    selected.push_back(&graphNode->record);
    result.selection = graphNode->selection;
    result.notCompared = graphNode->notCompared;
  } else {
    selected = select(request, model, result.selection);
  }
  const bool checkpointTrace = isCheckpointTrace(model);
  if (checkpointTrace && (selected.size() != 1 || request.range)) {
    throw ExtractUsageError("from a checkpoint trace, one launch at a time: its memory is rebuilt by re-execution");
  }

  // What the launches need, by source seq (file order).
  std::map<uint64_t, const StoredEvent*> kept;
  std::set<uint64_t> indices;
  for (const LaunchRecord* l : selected) {
    result.launches.push_back(l->launchIndex);
    if (!graphNode) indices.insert(l->launchIndex);  // a graph node's kernel was not timed
    kept[l->seq()] = l->launch.get();
    if (l->end != nullptr) kept[l->end->seq()] = l->end.get();
    try {
      const CodeRef code = model.codeFor(*l);
      kept[code.load->seq()] = code.load.get();
      for (const auto& bind : code.binds) kept[bind->seq()] = bind.get();
      for (const auto& attribute : code.attributes) kept[attribute->seq()] = attribute.get();
    } catch (const ReplayError& e) {
      result.skipped.push_back(std::string(e.what()) +
                               "; extracted without its code (as in the source, it cannot be replayed)");
    }
    // The encodes that made its tensor-map parameters: replay re-encodes from them.
    for (const auto word : l->event().getPointers()) {
      if (const StoredEvent* encode = model.tensorMapEncodeFor(*l, word)) kept[encode->seq()] = encode;
    }
  }
  if (request.range) {
    // The output numbers its events anew: a gap the damage left would be
    // gone, and its sequence would replay as if nothing had run there.
    if (const auto lost = model.missingBetween(selected.front()->seq(), selected.back()->seq())) {
      throw FormatError(request.source + ": events #" + std::to_string(lost->first) + ".." +
                        std::to_string(lost->second) + " between launches " +
                        std::to_string(selected.front()->launchIndex) + " and " +
                        std::to_string(selected.back()->launchIndex) +
                        " are missing (the trace is damaged there): a sequence across them is not what the program "
                        "ran; extract a range on one side of them");
    }
    for (const StoredEvent* op : model.memoryOpsBetween(selected.front()->seq(), selected.back()->seq())) {
      kept[op->seq()] = op;
    }
  }

  // A second pass for what replay does not keep: timings and allocations.
  std::vector<std::shared_ptr<StoredEvent>> extra;
  Allocations allocations;
  result.sourceEvents = reader->forEachEvent([&](const format::EventRef& ref) {
    const auto event = ref.event;
    if (event.isKernelTiming() && indices.count(event.getKernelTiming().getLaunchIndex()) != 0) {
      extra.push_back(std::make_shared<StoredEvent>(event));
      kept[extra.back()->seq()] = extra.back().get();
    } else if (event.isAlloc()) {
      allocations.add(std::make_shared<StoredEvent>(event));
    }
    return true;
  });
  for (const LaunchRecord* l : selected) allocations.reachedBy(*l, kept);
  for (const auto& problem : reader->problems()) {
    result.skipped.push_back("at byte " + std::to_string(problem.offset) + " of the source: " + problem.message +
                             " (what was there is not in the output)");
  }

  TempOutput temp(request.output);
  format::TraceWriter::Options options;
  options.zstdLevel = request.zstdLevel;
  auto writer = format::TraceWriter::create(temp.path(), options);

  // A checkpoint trace holds no launch's memory: rebuilt by re-execution.
  std::optional<RebuiltLaunch> rebuilt;
  if (checkpointTrace) {
    rebuilt = rebuildLaunch(model, request.source, selected.front()->launchIndex, request.device, *writer);
    if (rebuilt->pre.empty() && !rebuilt->ran) {
      const std::string why = rebuilt->fault.empty() ? rebuilt->verification : rebuilt->fault;
      throw ExtractUsageError("launch " + result.selection + " could not be rebuilt" +
                              (why.empty() ? std::string() : ": " + why));
    }
    if (!rebuilt->verified) {
      result.skipped.push_back(
          "its memory was rebuilt in an interval that did not reproduce (" +
          (rebuilt->verification.empty() ? std::string("no checkpoint after it") : rebuilt->verification) +
          "): the pre-state may not be the recorded one");
    }
    if (!rebuilt->ran) result.skipped.push_back("the launch did not complete when re-executed: no post-state");
    for (const std::string& note : rebuilt->notes) result.rebuildNotes.push_back(note);
    result.rebuiltVerification = rebuilt->verification;
  }
  const std::string origin =
      (graphNode ? "" : "launch" + std::string(selected.size() == 1 && !request.range ? " " : "es ")) +
      result.selection + " of " + request.source;

  // traceBegin: the recorded environment, and where this trace came from.
  {
    capnp::MallocMessageBuilder message;
    if (model.traceBegin() != nullptr) {
      message.setRoot(model.traceBegin()->get());
    } else {
      message.initRoot<schema::Event>().initTraceBegin();
      result.skipped.push_back("the source has no intact traceBegin: the recorded environment is not in the output");
    }
    auto begin = message.getRoot<schema::Event>().getTraceBegin();
    std::vector<std::pair<std::string, std::string>> entries;
    for (const auto kv : begin.asReader().getOptions()) entries.emplace_back(kv.getKey(), kv.getValue());
    entries.emplace_back("extractedFrom", request.source);
    entries.emplace_back(graphNode ? "extractedGraphNode" : "extractedLaunches", result.selection);
    if (graphNode && !graphNode->notCompared.empty()) entries.emplace_back("notCompared", graphNode->notCompared);
    if (rebuilt) {
      // A full-mode trace now: the launch's memory before and after it.
      begin.setCaptureMode(schema::CaptureMode::FULL);
      entries.emplace_back("rebuiltBy", "re-execution from the checkpoints; " + rebuilt->verification);
    }
    auto list = begin.initOptions(static_cast<unsigned>(entries.size()));
    for (unsigned i = 0; i < entries.size(); ++i) {
      list[i].setKey(entries[i].first);
      list[i].setValue(entries[i].second);
    }
    writer->append(message);
  }
  const auto note = [&](schema::Message::Level level, const std::string& text) {
    capnp::MallocMessageBuilder message;
    auto m = message.initRoot<schema::Event>().initMessage();
    m.setLevel(level);
    m.setText(text);
    writer->append(message);
  };
  note(schema::Message::Level::INFO, "extracted by kcap extract: " + origin);

  // The events, each after the pieces it names.
  std::unordered_set<Hash128, format::Hash128Hasher> copied;
  for (const auto& [seq, stored] : kept) {
    const auto event = stored->get();
    if (event.isTraceBegin()) continue;
    size_t missing = 0, damaged = 0, total = 0;
    std::string firstDamage;
    forEachContent(event, [&](schema::Content::Reader content) {
      for (const auto piece : content.getPieces()) {
        ++total;
        const Hash128 hash{piece.getHigh(), piece.getLow()};
        if (copied.count(hash) != 0) continue;
        const format::ChunkInfo* chunk = reader->findBlob(hash);
        if (chunk == nullptr) {
          ++missing;
          continue;
        }
        try {
          writer->storeEncodedPiece(hash, chunk->rawSize, reader->readStoredChunk(*chunk));
          copied.insert(hash);
        } catch (const FormatError& e) {
          ++damaged;
          if (firstDamage.empty()) firstDamage = e.what();
        }
      }
    });
    if (missing + damaged != 0) {
      std::string text = describe(event) + ": ";
      if (missing) text += std::to_string(missing) + " of " + std::to_string(total) + " pieces are not in the source";
      if (missing && damaged) text += ", ";
      if (damaged)
        text += std::to_string(damaged) + " of " + std::to_string(total) + " pieces are damaged (" + firstDamage + ")";
      result.skipped.push_back(text + "; not copied");
    }
    capnp::MallocMessageBuilder message;
    message.setRoot(event);
    // The launch's post-state goes into a LaunchEnd, as in a full trace:
    // the recorded one, or one made here from a launch that carried its
    // outcome itself (Launch.ended).
    std::optional<capnp::MallocMessageBuilder> madeEnd;
    const auto writePost = [&](schema::LaunchEnd::Builder end) {
      auto post = end.initPost(static_cast<unsigned>(rebuilt->post.size()));
      for (unsigned i = 0; i < rebuilt->post.size(); ++i) rebuilt->post[i].writeTo(post[i]);
    };
    if (rebuilt && event.isLaunch()) {
      auto launch = message.getRoot<schema::Event>().getLaunch();
      auto pre = launch.initPre(static_cast<unsigned>(rebuilt->pre.size()));
      for (unsigned i = 0; i < rebuilt->pre.size(); ++i) rebuilt->pre[i].writeTo(pre[i]);
      if (launch.getEnded() && rebuilt->ran) {
        auto endEvent = madeEnd.emplace().initRoot<schema::Event>();
        endEvent.setTimeNs(event.getTimeNs() + launch.getCallNs());
        endEvent.setThreadId(event.getThreadId());
        auto end = endEvent.initLaunchEnd();
        end.setLaunchIndex(launch.getLaunchIndex());
        end.setResult(launch.getResult());
        writePost(end);
        launch.setEnded(false);
        launch.setResult(0);
        launch.setCallNs(0);
      }
    } else if (rebuilt && event.isLaunchEnd() && rebuilt->ran) {
      writePost(message.getRoot<schema::Event>().getLaunchEnd());
    }
    writer->append(message);
    if (madeEnd) writer->append(*madeEnd);
    if (event.isModuleLoad()) ++result.modules;
  }
  for (const std::string& text : result.skipped) note(schema::Message::Level::WARNING, "not extracted: " + text);

  {
    capnp::MallocMessageBuilder message;
    auto end = message.initRoot<schema::Event>().initTraceEnd();
    end.setReason(schema::EndReason::EXPLICIT);
    end.setEventCount(writer->stats().events);
    end.setLaunchCount(selected.size());
    end.setMessage("kcap extract: " + origin);
    writer->append(message);
  }
  writer->close();
  result.events = writer->stats().events;
  result.pieces = copied.size();
  result.bytes = fileSize(temp.path());
  result.sourceBytes = reader->fileSize();
  temp.commit();
  return result;
}

}  // namespace kcap::replay
