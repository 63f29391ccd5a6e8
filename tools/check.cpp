// kcap check FILE: verifies a trace completely.
//
// Every record and blob chunk is verified (checksum, decompression, content
// hash, every event message); every Content an event references must have all
// its pieces, each of the right size; event seq numbers must increase strictly
// without gaps (but in a flight recorder's trace, whose one trigger event
// counts the events its ring let go: exactly that many missing), starting
// with traceBegin; the file must be closed (footer
// index) and not torn; when the index is used, its entries must match the
// chunks; no module image may be larger than any consumer loads
// (kMaxCodeImageSize); every checkpoint's change hashes must be those of
// the pieces it names; every writtenData event must complete, once, an
// earlier event waiting for its data. Prints "OK: ..." and exits 0 only when all of that
// holds. Otherwise prints one line per problem, "FILE: at byte N: WHAT",
// ordered by offset (so the first line names the first damage), and exits 1.
//
// Every problem is counted, but only the kMaxListed first by offset are kept
// and listed, then how many more: a small hostile file can hold millions. A
// content is one line per kind of trouble however many of its pieces share
// it, and a run of pieces naming one blob is looked up once.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <CLI/CLI.hpp>

#include "change_hash.h"
#include "common.h"
#include "errors.h"
#include "event_visitor.h"
#include "message_check.h"
#include "subcommands.h"
#include "trace_reader.h"

namespace kcap::tools {
namespace {

constexpr size_t kMaxListed = 1000;

struct Options {
  std::string path;
};

struct Finding {
  uint64_t offset;
  uint64_t order;  // when it was found: ties of offset keep it
  std::string message;
};

// Pieces of one content with one kind of trouble: how many, the first few,
// and the blob of the first.
struct Tally {
  uint64_t count = 0;
  unsigned first[8] = {};
  format::Hash128 hash;
  void add(unsigned piece, const format::Hash128& blob) {
    if (count < 8) first[count] = piece;
    if (count == 0) hash = blob;
    ++count;
  }
};

struct ChunkEvents {
  uint64_t firstSeq = 0;
  uint64_t count = 0;
};

class Checker {
 public:
  Checker(const Options& opt, format::TraceReader& reader) : opt_(opt), reader_(reader) {}

  int run() {
    verifyChunks();
    checkEvents();
    addReaderProblems();
    checkIndexEntries();
    checkClosed();
    return report();
  }

 private:
  void add(uint64_t offset, std::string message) {
    addWith(offset, [&] { return std::move(message); });
  }

  // Counts a finding; keeps it only while it can be among the kMaxListed
  // first by offset, and only then calls `make` for its text.
  template <typename Make>
  void addWith(uint64_t offset, Make&& make) {
    const uint64_t order = count_++;
    if (cut_ && offset >= cutoff_) return;
    findings_.push_back({offset, order, make()});
    if (findings_.size() < 2 * kMaxListed) return;
    sortFindings();
    findings_.resize(kMaxListed);
    cut_ = true;
    cutoff_ = findings_.back().offset;
  }

  void sortFindings() {
    std::sort(findings_.begin(), findings_.end(), [](const Finding& a, const Finding& b) {
      return a.offset != b.offset ? a.offset < b.offset : a.order < b.order;
    });
  }

  void verifyChunks() {
    for (const auto& chunk : reader_.chunks()) {
      std::string why = reader_.verifyChunk(chunk);
      if (!why.empty()) {
        std::string message = bareProblem(opt_.path, why);
        chunkFindings_.insert(format::checksum64(message.data(), message.size(), chunk.offset));
        add(chunk.offset, std::move(message));
        badChunks_.insert(chunk.offset);
      }
      if (chunk.kind == format::ChunkKind::kBlob) blobs_.emplace(chunk.hash, chunk);
    }
  }

  void checkContent(const format::EventRef& ref, const char* type, const std::string& path,
                    schema::Content::Reader content) {
    auto where = [&] {
      return strf("event #%llu (%s): ", static_cast<unsigned long long>(ref.event.getSeq()), type) + path;
    };
    uint64_t size = content.getSize();
    uint64_t pieceSize = content.getPieceSize();
    auto pieces = content.getPieces();
    if (size == 0) return;
    if (pieceSize == 0 || pieces.size() != size / pieceSize + (size % pieceSize != 0)) {
      add(ref.chunkOffset,
          where() + strf(" lists %u pieces of %llu bytes for %llu bytes", pieces.size(),
                         static_cast<unsigned long long>(pieceSize), static_cast<unsigned long long>(size)));
      return;
    }
    // One line per content and kind of trouble, not one per piece: deduplicated
    // pieces make one lost blob show up in many places.
    Tally missing, damaged, wrongSize;
    uint64_t wrongNeeds = 0, wrongHolds = 0;
    format::Hash128 previous;
    const format::ChunkInfo* blob = nullptr;
    bool looked = false;
    for (unsigned i = 0; i < pieces.size(); ++i) {
      format::Hash128 hash{pieces[i].getHigh(), pieces[i].getLow()};
      uint64_t length = std::min<uint64_t>(pieceSize, size - uint64_t{i} * pieceSize);
      if (!looked || !(hash == previous)) {  // a run of one piece (zero pages) is looked up once
        auto it = blobs_.find(hash);
        blob = it == blobs_.end() ? nullptr : &it->second;
        previous = hash;
        looked = true;
      }
      if (blob == nullptr) {
        missing.add(i, hash);
      } else if (badChunks_.count(blob->offset)) {
        damaged.add(i, hash);
      } else if (blob->rawSize != length) {
        if (wrongSize.count == 0) {
          wrongNeeds = length;
          wrongHolds = blob->rawSize;
        }
        wrongSize.add(i, hash);
      }
    }
    missingPieces_ += missing.count;
    damagedPieces_ += damaged.count;
    if (missing.count) {
      addWith(ref.chunkOffset, [&] {
        return where() + " " + piecesText(missing, pieces.size()) + " missing (" +
               (missing.count > 1 ? "first: " : "") + "blob " + missing.hash.hex() + ")";
      });
    }
    if (damaged.count) {
      addWith(ref.chunkOffset, [&] {
        return where() + " " + piecesText(damaged, pieces.size()) + " in damaged blob chunks (" +
               (damaged.count > 1 ? "first: " : "") + "blob " + damaged.hash.hex() +
               strf(" at byte %llu)", static_cast<unsigned long long>(blobs_.at(damaged.hash).offset));
      });
    }
    if (wrongSize.count) {
      addWith(ref.chunkOffset, [&] {
        return where() + " " + piecesText(wrongSize, pieces.size()) + " the wrong size (" +
               (wrongSize.count > 1 ? "first: " : "") +
               strf("piece %u needs %llu bytes, blob %s holds %llu bytes)", wrongSize.first[0],
                    static_cast<unsigned long long>(wrongNeeds), wrongSize.hash.hex().c_str(),
                    static_cast<unsigned long long>(wrongHolds));
      });
    }
  }

  static std::string piecesText(const Tally& which, unsigned total) {
    std::string out = which.count == 1 ? "piece " : "pieces ";
    for (uint64_t i = 0; i < which.count && i < 8; ++i) out += (i ? "," : "") + std::to_string(which.first[i]);
    if (which.count > 8) out += strf(",... (%llu)", static_cast<unsigned long long>(which.count));
    return out + strf(" of %u %s", total, which.count == 1 ? "is" : "are");
  }

  // A module image is loaded whole (replay, doctor): one larger than they
  // load is refused there, so it is a finding here.
  void checkImages(const format::EventRef& ref, const char* type) {
    const auto load = ref.event.getModuleLoad();
    const auto check = [&](schema::Content::Reader image, const std::string& name) {
      if (image.getSize() <= format::kMaxCodeImageSize) return;
      addWith(ref.chunkOffset, [&] {
        return strf("event #%llu (%s): %s of %llu bytes is larger than kcap loads (%llu bytes)",
                    static_cast<unsigned long long>(ref.event.getSeq()), type, name.c_str(),
                    static_cast<unsigned long long>(image.getSize()),
                    static_cast<unsigned long long>(format::kMaxCodeImageSize));
      });
    };
    check(load.getImage(), "module image");
    const auto extras = load.getExtraImages();
    for (unsigned i = 0; i < extras.size(); ++i) check(extras[i], strf("extra image %u", i));
  }

  // A writtenData event completes an earlier event marked dataDeferred,
  // once, or holds what one copy node of an earlier graph launch read back,
  // once. `gapless`: no event is missing so far, so one it names that is
  // not marked is in the trace, unmarked (a flight recorder's ring may have
  // let the one it names go).
  void checkWrittenData(const format::EventRef& ref, bool gapless) {
    const auto& e = ref.event;
    const uint64_t seq = e.getSeq();
    if (format::awaitsWrittenData(e)) {
      awaitingData_.insert(seq);
      return;
    }
    if (e.isGraphLaunch()) graphLaunches_.insert(seq);
    if (!e.isWrittenData()) return;
    const uint64_t of = e.getWrittenData().getOf();
    const uint64_t node = e.getWrittenData().getNode();
    const auto where = [&] { return strf("event #%llu (writtenData)", static_cast<unsigned long long>(seq)); };
    if (of >= seq) {
      add(ref.chunkOffset,
          where() + strf(" names event #%llu, not an earlier one", static_cast<unsigned long long>(of)));
    } else if (node != 0) {
      if (graphLaunches_.count(of) == 0) {
        if (gapless) {
          add(ref.chunkOffset, where() + strf(" names event #%llu and a graph node, and that event is no graph launch",
                                              static_cast<unsigned long long>(of)));
        }
      } else if (!completedNodes_.emplace(of, node).second) {
        add(ref.chunkOffset,
            where() + strf(" holds node 0x%llx of graph launch #%llu a second time",
                           static_cast<unsigned long long>(node), static_cast<unsigned long long>(of)));
      }
    } else if (completedData_.count(of) != 0) {
      add(ref.chunkOffset, where() + strf(" completes event #%llu a second time", static_cast<unsigned long long>(of)));
    } else if (awaitingData_.erase(of) != 0) {
      completedData_.insert(of);
    } else if (gapless) {
      add(ref.chunkOffset, where() + strf(" names event #%llu, which is not waiting for its data (dataDeferred)",
                                          static_cast<unsigned long long>(of)));
    }
  }

  // A checkpoint's change hashes: one per piece, each the change hash of
  // the bytes its content address names (what replay compares with). Each
  // distinct piece is read and hashed once.
  void checkCheckpoint(const format::EventRef& ref) {
    const auto checkpoint = ref.event.getCheckpoint();
    const auto seq = static_cast<unsigned long long>(ref.event.getSeq());
    // Every checkpoint of a recording holds one device's memory.
    if (const int device = checkpoint.getDevice(); device >= 0) {
      if (checkpointDevice_ < 0) {
        checkpointDevice_ = device;
      } else if (device != checkpointDevice_) {
        add(ref.chunkOffset,
            strf("event #%llu (checkpoint %llu) holds device %d's memory; the first holds device %d's", seq,
                 static_cast<unsigned long long>(checkpoint.getOrdinal()), device, checkpointDevice_));
      }
    }
    for (const auto range : checkpoint.getRanges()) {
      const auto content = range.getContent();
      const auto hashes = range.getChangeHashes();
      const auto where = [&] {
        return strf("event #%llu (checkpoint %llu): range 0x%llx", seq,
                    static_cast<unsigned long long>(checkpoint.getOrdinal()),
                    static_cast<unsigned long long>(range.getAddress()));
      };
      if (hashes.size() != uint64_t{content.getPieces().size()} * format::kChangeHashBytes) {
        add(ref.chunkOffset,
            where() + strf(" has %zu bytes of change hashes for %u pieces", hashes.size(), content.getPieces().size()));
        continue;
      }
      if (content.getPieceSize() == 0) continue;  // checkContent says so
      // Taken once: each get of a list counts all of it against the reader's traversal limit.
      const auto pieces = content.getPieces();
      for (unsigned p = 0; p < pieces.size(); ++p) {
        const format::Hash128 blob{pieces[p].getHigh(), pieces[p].getLow()};
        const uint64_t offset = uint64_t{p} * content.getPieceSize();
        if (offset >= content.getSize()) break;
        const uint64_t length = std::min<uint64_t>(content.getPieceSize(), content.getSize() - offset);
        const auto chunk = blobs_.find(blob);
        if (chunk == blobs_.end() || badChunks_.count(chunk->second.offset) || chunk->second.rawSize != length) {
          continue;  // checkContent says so
        }
        auto known = changeHashes_.find(blob);
        if (known == changeHashes_.end()) {
          std::vector<uint8_t> bytes;
          try {
            bytes = reader_.readBlob(blob);
          } catch (const std::exception&) {
            continue;  // damaged: the chunk checks say so
          }
          known = changeHashes_.emplace(blob, format::changeHash(bytes.data(), bytes.size())).first;
        }
        format::ChangeHash recorded;
        std::memcpy(&recorded.high, hashes.begin() + p * format::kChangeHashBytes, 8);
        std::memcpy(&recorded.low, hashes.begin() + p * format::kChangeHashBytes + 8, 8);
        if (!(recorded == known->second)) {
          add(ref.chunkOffset, where() + strf(": the change hash of piece %u does not match its content (blob %s)", p,
                                              blob.hex().c_str()));
          break;  // one line a range
        }
      }
    }
  }

  void checkEvents() {
    bool first = true;
    uint64_t lastSeq = 0;
    std::vector<std::pair<uint64_t, std::string>> gaps;  // offset, what
    uint64_t missingSeqs = 0;
    uint64_t unlistedGaps = 0;  // past the kMaxListed kept
    uint64_t triggers = 0;
    uint64_t droppedByRing = 0;
    reader_.forEachEvent([&](const format::EventRef& ref) {
      const auto& e = ref.event;
      const char* known = eventTypeName(e);
      std::string type = known ? known : strf("unknown(%u)", static_cast<unsigned>(e.which()));
      uint64_t seq = e.getSeq();
      ++events_;

      auto [it, inserted] = chunkEvents_.emplace(ref.chunkOffset, ChunkEvents{seq, 0});
      ++it->second.count;

      if (first) {
        if (e.which() != schema::Event::TRACE_BEGIN || seq != 0) {
          add(ref.chunkOffset, strf("the first event is #%llu (%s), not traceBegin #0",
                                    static_cast<unsigned long long>(seq), type.c_str()));
        }
        first = false;
      } else if (seq <= lastSeq) {
        add(ref.chunkOffset,
            strf("event #%llu (%s) follows #%llu: seq numbers must increase", static_cast<unsigned long long>(seq),
                 type.c_str(), static_cast<unsigned long long>(lastSeq)));
      } else if (seq != lastSeq + 1) {
        // Held until the end: a flight recorder's trace has gaps, as many
        // events as its trigger says the ring let go.
        missingSeqs += seq - lastSeq - 1;
        if (gaps.size() < kMaxListed) {
          gaps.emplace_back(ref.chunkOffset,
                            strf("events #%llu to #%llu are missing (seq jumps from %llu to %llu)",
                                 static_cast<unsigned long long>(lastSeq) + 1, static_cast<unsigned long long>(seq) - 1,
                                 static_cast<unsigned long long>(lastSeq), static_cast<unsigned long long>(seq)));
        } else {
          ++unlistedGaps;
        }
      }
      if (e.isTrigger()) {
        ++triggers;
        droppedByRing = e.getTrigger().getDroppedEvents();
      }
      if (seq > lastSeq || events_ == 1) lastSeq = seq;

      if (sawEnd_) {
        add(ref.chunkOffset,
            strf("event #%llu (%s) follows traceEnd", static_cast<unsigned long long>(seq), type.c_str()));
      }
      if (e.which() == schema::Event::TRACE_END) {
        sawEnd_ = true;
        uint64_t before = e.getTraceEnd().getEventCount();
        if (before != seq) {
          add(ref.chunkOffset, strf("traceEnd #%llu says %llu events precede it", static_cast<unsigned long long>(seq),
                                    static_cast<unsigned long long>(before)));
        }
      }

      if (e.isModuleLoad()) checkImages(ref, type.c_str());
      if (e.isCheckpoint()) checkCheckpoint(ref);
      checkWrittenData(ref, gaps.empty() && missingSeqs == 0);
      if (e.isLaunch()) {
        const std::string problem = format::launchParamProblem(e.getLaunch());
        if (!problem.empty()) {
          add(ref.chunkOffset,
              strf("event #%llu (%s): ", static_cast<unsigned long long>(seq), type.c_str()) + problem);
        }
      }
      checkLaunchForms(ref);
      forEachContent(e, [&](const std::string& path, schema::Content::Reader content) {
        checkContent(ref, type.c_str(), path, content);
      });
      return true;
    });
    if (triggers == 1 && missingSeqs == droppedByRing) return;  // the ring's gaps, all accounted for
    if (triggers == 1 && !gaps.empty()) {
      add(gaps.front().first,
          strf("the trigger event says the ring let %llu events go, but %llu are missing",
               static_cast<unsigned long long>(droppedByRing), static_cast<unsigned long long>(missingSeqs)));
    }
    if (unlistedGaps > 0) {
      add(gaps.back().first,
          strf("%llu more runs of events are missing", static_cast<unsigned long long>(unlistedGaps)));
    }
    for (auto& [offset, what] : gaps) add(offset, std::move(what));
  }

  // The reader's own findings (damage met while scanning or reading). A record
  // chunk that verifyChunk already reported is not reported twice. The reader
  // keeps the first kMaxProblemsKept and a line saying how many more: those
  // count here too.
  void addReaderProblems() {
    const auto& problems = reader_.problems();
    const bool summarized = reader_.problemCount() > problems.size();
    size_t listed = problems.size();
    if (summarized && listed > 0) --listed;  // the last entry is the reader's count of the rest
    for (size_t i = 0; i < problems.size(); ++i) {
      const auto& p = problems[i];
      if (i < listed && badChunks_.count(p.offset)) continue;
      std::string message = bareProblem(opt_.path, p.message);
      if (chunkFindings_.count(format::checksum64(message.data(), message.size(), p.offset))) continue;
      add(p.offset, std::move(message));
    }
    if (summarized) count_ += reader_.problemCount() - listed - 1;
  }

  // With an index, each record chunk's entry says which events it holds.
  void checkIndexEntries() {
    if (!reader_.indexed()) return;
    for (const auto& chunk : reader_.chunks()) {
      if (chunk.kind != format::ChunkKind::kRecords || badChunks_.count(chunk.offset)) continue;
      auto it = chunkEvents_.find(chunk.offset);
      ChunkEvents seen = it == chunkEvents_.end() ? ChunkEvents{} : it->second;
      if (seen.count != chunk.eventCount || (seen.count > 0 && seen.firstSeq != chunk.firstSeq)) {
        add(chunk.offset,
            strf("the index says this record chunk holds %u events from #%llu; it holds %llu from #%llu",
                 chunk.eventCount, static_cast<unsigned long long>(chunk.firstSeq),
                 static_cast<unsigned long long>(seen.count), static_cast<unsigned long long>(seen.firstSeq)));
      }
    }
  }

  void checkClosed() {
    // No events at all is worth saying only when nothing else explains it.
    if (events_ == 0 && count_ == 0) add(format::kFileHeaderSize, "the trace holds no events");
    // A trailer whose index could not be used is among the reader's problems.
    if (!reader_.indexed() && !reader_.closed()) {
      add(reader_.fileSize(),
          "not closed (no footer index); the writer did not finish, events were recovered by scanning");
    }
  }

  int report() {
    size_t chunks = reader_.chunks().size();
    if (count_ == 0) {
      std::printf("OK: %llu events, %zu blobs, %zu chunks verified\n", static_cast<unsigned long long>(events_),
                  blobs_.size(), chunks);
      if (!sawEnd_) std::printf("note: no traceEnd event (closed by a tool rather than the recorder?)\n");
      std::fflush(stdout);
      return kExitOk;
    }
    sortFindings();
    std::string out;
    const size_t listed = std::min(findings_.size(), kMaxListed);
    for (size_t i = 0; i < listed; ++i) {
      out += format::describeAt(opt_.path, findings_[i].offset, findings_[i].message) + "\n";
    }
    if (count_ > listed) out += strf("... and %llu more\n", static_cast<unsigned long long>(count_ - listed));
    out += strf("FAILED: %llu problem%s; %llu events read, %zu of %zu chunks intact",
                static_cast<unsigned long long>(count_), count_ == 1 ? "" : "s",
                static_cast<unsigned long long>(events_), chunks - badChunks_.size(), chunks);
    if (missingPieces_) out += strf(", %llu content pieces missing", static_cast<unsigned long long>(missingPieces_));
    if (damagedPieces_) out += strf(", %llu content pieces damaged", static_cast<unsigned long long>(damagedPieces_));
    out += reader_.torn() ? ", file torn\n" : "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return kExitTrace;
  }

  const Options& opt_;
  format::TraceReader& reader_;
  std::vector<Finding> findings_;               // at most 2 * kMaxListed: the first by offset
  uint64_t count_ = 0;                          // every finding, kept or not
  bool cut_ = false;                            // findings_ was cut to the kMaxListed first
  uint64_t cutoff_ = 0;                         // then: a finding at or past this offset comes after all kept
  std::unordered_set<uint64_t> chunkFindings_;  // hashes of verifyChunk's findings, not repeated from the reader
  std::set<uint64_t> badChunks_;
  std::unordered_map<format::Hash128, format::ChunkInfo, format::Hash128Hasher> blobs_;
  std::unordered_map<format::Hash128, format::ChangeHash, format::Hash128Hasher> changeHashes_;  // by blob
  std::map<uint64_t, ChunkEvents> chunkEvents_;             // record chunk offset -> events delivered from it
  std::set<uint64_t> awaitingData_;                         // seqs of events marked dataDeferred, not yet completed
  std::set<uint64_t> completedData_;                        // those a writtenData completed
  std::set<uint64_t> graphLaunches_;                        // seqs of graphLaunch events
  std::set<std::pair<uint64_t, uint64_t>> completedNodes_;  // (graph launch, node) a writtenData held
  int checkpointDevice_ = -1;                               // the device the first checkpoint holds
  uint64_t events_ = 0;
  uint64_t missingPieces_ = 0;
  uint64_t damagedPieces_ = 0;
  bool sawEnd_ = false;
  // A writer gives every launch of a trace one form: its outcome in it
  // (Launch.ended) or in a launchEnd after it. Both in one trace is said
  // once, where the second form first appears.
  uint64_t firstEndedLaunch_ = kNone;
  uint64_t firstLaunchEnd_ = kNone;
  bool mixedFormsSaid_ = false;
  static constexpr uint64_t kNone = ~0ull;

  void checkLaunchForms(const format::EventRef& ref) {
    const auto e = ref.event;
    uint64_t* first = e.isLaunch() && e.getLaunch().getEnded() ? &firstEndedLaunch_
                      : e.isLaunchEnd()                        ? &firstLaunchEnd_
                                                               : nullptr;
    if (first == nullptr || *first != kNone) return;
    *first = e.getSeq();
    if (firstEndedLaunch_ == kNone || firstLaunchEnd_ == kNone || mixedFormsSaid_) return;
    mixedFormsSaid_ = true;
    add(ref.chunkOffset,
        strf("event #%llu (launch) carries its outcome (ended) and event #%llu is a launchEnd: a trace holds launches "
             "of one form",
             static_cast<unsigned long long>(firstEndedLaunch_), static_cast<unsigned long long>(firstLaunchEnd_)));
  }
};

int runCheck(const Options& opt) {
  std::unique_ptr<format::TraceReader> reader;
  try {
    reader = format::TraceReader::open(opt.path);
  } catch (const format::FormatError& e) {
    // check reports on stdout, first line first: an unopenable file too.
    std::printf("%s\n", e.what());
    std::fflush(stdout);
    return kExitTrace;
  }
  return guarded(opt.path, [&] { return Checker(opt, *reader).run(); });
}

}  // namespace

Run setupCheck(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("file", opt->path, "The .kcap trace")->required()->type_name("FILE");
  return [opt] { return runCheck(*opt); };
}

}  // namespace kcap::tools
