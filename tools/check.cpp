// kcap check FILE: verifies a trace completely.
//
// Every record and blob chunk is verified (checksum, decompression, content
// hash, every event message); every Content an event references must have all
// its pieces, each of the right size; event seq numbers must increase strictly
// without gaps, starting with traceBegin; the file must be closed (footer
// index) and not torn; when the index is used, its entries must match the
// chunks. Prints "OK: ..." and exits 0 only when all of that holds. Otherwise
// prints one line per problem, "FILE: at byte N: WHAT", ordered by offset (so
// the first line names the first damage), and exits 1.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include <CLI/CLI.hpp>

#include "common.h"
#include "errors.h"
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
  std::string message;
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
  void add(uint64_t offset, std::string message) { findings_.push_back({offset, std::move(message)}); }

  void verifyChunks() {
    for (const auto& chunk : reader_.chunks()) {
      std::string why = reader_.verifyChunk(chunk);
      if (!why.empty()) {
        add(chunk.offset, bareProblem(opt_.path, why));
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
      add(ref.chunkOffset, where() + strf(" lists %u pieces of %llu bytes for %llu bytes", pieces.size(),
                                          static_cast<unsigned long long>(pieceSize),
                                          static_cast<unsigned long long>(size)));
      return;
    }
    // One line per content and kind of trouble, not one per piece: deduplicated
    // pieces make one lost blob show up in many places.
    std::vector<unsigned> missing, damaged;
    format::Hash128 firstMissing, firstDamaged;
    for (unsigned i = 0; i < pieces.size(); ++i) {
      format::Hash128 hash{pieces[i].getHigh(), pieces[i].getLow()};
      uint64_t length = std::min<uint64_t>(pieceSize, size - uint64_t{i} * pieceSize);
      auto it = blobs_.find(hash);
      if (it == blobs_.end()) {
        if (missing.empty()) firstMissing = hash;
        missing.push_back(i);
      } else if (badChunks_.count(it->second.offset)) {
        if (damaged.empty()) firstDamaged = hash;
        damaged.push_back(i);
      } else if (it->second.rawSize != length) {
        add(ref.chunkOffset, where() + strf(" piece %u (blob %s) needs %llu bytes, the blob holds %llu", i,
                                            hash.hex().c_str(), static_cast<unsigned long long>(length),
                                            static_cast<unsigned long long>(it->second.rawSize)));
      }
    }
    missingPieces_ += missing.size();
    damagedPieces_ += damaged.size();
    if (!missing.empty()) {
      add(ref.chunkOffset, where() + " " + piecesText(missing, pieces.size()) + " missing (" +
                               (missing.size() > 1 ? "first: " : "") + "blob " + firstMissing.hex() + ")");
    }
    if (!damaged.empty()) {
      add(ref.chunkOffset, where() + " " + piecesText(damaged, pieces.size()) + " in damaged blob chunks (" +
                               (damaged.size() > 1 ? "first: " : "") + "blob " + firstDamaged.hex() +
                               strf(" at byte %llu)", static_cast<unsigned long long>(blobs_.at(firstDamaged).offset)));
    }
  }

  static std::string piecesText(const std::vector<unsigned>& which, unsigned total) {
    std::string out = which.size() == 1 ? "piece " : "pieces ";
    for (size_t i = 0; i < which.size() && i < 8; ++i) out += (i ? "," : "") + std::to_string(which[i]);
    if (which.size() > 8) out += strf(",... (%zu)", which.size());
    return out + strf(" of %u %s", total, which.size() == 1 ? "is" : "are");
  }

  void checkEvents() {
    bool first = true;
    uint64_t lastSeq = 0;
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
        add(ref.chunkOffset, strf("event #%llu (%s) follows #%llu: seq numbers must increase",
                                  static_cast<unsigned long long>(seq), type.c_str(),
                                  static_cast<unsigned long long>(lastSeq)));
      } else if (seq != lastSeq + 1) {
        add(ref.chunkOffset, strf("events #%llu to #%llu are missing (seq jumps from %llu to %llu)",
                                  static_cast<unsigned long long>(lastSeq + 1),
                                  static_cast<unsigned long long>(seq - 1), static_cast<unsigned long long>(lastSeq),
                                  static_cast<unsigned long long>(seq)));
      }
      if (seq > lastSeq || events_ == 1) lastSeq = seq;

      if (sawEnd_) {
        add(ref.chunkOffset, strf("event #%llu (%s) follows traceEnd", static_cast<unsigned long long>(seq),
                                  type.c_str()));
      }
      if (e.which() == schema::Event::TRACE_END) {
        sawEnd_ = true;
        uint64_t before = e.getTraceEnd().getEventCount();
        if (before != seq) {
          add(ref.chunkOffset, strf("traceEnd #%llu says %llu events precede it", static_cast<unsigned long long>(seq),
                                    static_cast<unsigned long long>(before)));
        }
      }

      forEachContent(e, [&](const std::string& path, schema::Content::Reader content) {
        checkContent(ref, type.c_str(), path, content);
      });
      return true;
    });
  }

  // The reader's own findings (damage met while scanning or reading). A record
  // chunk that verifyChunk already reported is not reported twice.
  void addReaderProblems() {
    for (const auto& p : reader_.problems()) {
      if (badChunks_.count(p.offset)) continue;
      std::string message = bareProblem(opt_.path, p.message);
      bool duplicate = std::any_of(findings_.begin(), findings_.end(), [&](const Finding& f) {
        return f.offset == p.offset && f.message == message;
      });
      if (!duplicate) add(p.offset, message);
    }
  }

  // With an index, each record chunk's entry says which events it holds.
  void checkIndexEntries() {
    if (!reader_.indexed()) return;
    for (const auto& chunk : reader_.chunks()) {
      if (chunk.kind != format::ChunkKind::kRecords || badChunks_.count(chunk.offset)) continue;
      auto it = chunkEvents_.find(chunk.offset);
      ChunkEvents seen = it == chunkEvents_.end() ? ChunkEvents{} : it->second;
      if (seen.count != chunk.eventCount || (seen.count > 0 && seen.firstSeq != chunk.firstSeq)) {
        add(chunk.offset, strf("the index says this record chunk holds %u events from #%llu; it holds %llu from #%llu",
                               chunk.eventCount, static_cast<unsigned long long>(chunk.firstSeq),
                               static_cast<unsigned long long>(seen.count),
                               static_cast<unsigned long long>(seen.firstSeq)));
      }
    }
  }

  void checkClosed() {
    // No events at all is worth saying only when nothing else explains it.
    if (events_ == 0 && findings_.empty()) add(format::kFileHeaderSize, "the trace holds no events");
    // A trailer whose index could not be used is among the reader's problems.
    if (!reader_.indexed() && !reader_.closed()) {
      add(reader_.fileSize(), "not closed (no footer index); the writer did not finish, events were recovered by scanning");
    }
  }

  int report() {
    size_t chunks = reader_.chunks().size();
    if (findings_.empty()) {
      std::printf("OK: %llu events, %zu blobs, %zu chunks verified\n", static_cast<unsigned long long>(events_),
                  blobs_.size(), chunks);
      if (!sawEnd_) std::printf("note: no traceEnd event (closed by a tool rather than the recorder?)\n");
      std::fflush(stdout);
      return kExitOk;
    }
    std::stable_sort(findings_.begin(), findings_.end(),
                     [](const Finding& a, const Finding& b) { return a.offset < b.offset; });
    std::string out;
    for (size_t i = 0; i < findings_.size() && i < kMaxListed; ++i) {
      out += format::describeAt(opt_.path, findings_[i].offset, findings_[i].message) + "\n";
    }
    if (findings_.size() > kMaxListed) out += strf("... and %zu more\n", findings_.size() - kMaxListed);
    out += strf("FAILED: %zu problem%s; %llu events read, %zu of %zu chunks intact", findings_.size(),
                findings_.size() == 1 ? "" : "s", static_cast<unsigned long long>(events_),
                chunks - badChunks_.size(), chunks);
    if (missingPieces_) out += strf(", %llu content pieces missing", static_cast<unsigned long long>(missingPieces_));
    if (damagedPieces_) out += strf(", %llu content pieces damaged", static_cast<unsigned long long>(damagedPieces_));
    out += reader_.torn() ? ", file torn\n" : "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return kExitTrace;
  }

  const Options& opt_;
  format::TraceReader& reader_;
  std::vector<Finding> findings_;
  std::set<uint64_t> badChunks_;
  std::unordered_map<format::Hash128, format::ChunkInfo, format::Hash128Hasher> blobs_;
  std::map<uint64_t, ChunkEvents> chunkEvents_;  // record chunk offset -> events delivered from it
  uint64_t events_ = 0;
  uint64_t missingPieces_ = 0;
  uint64_t damagedPieces_ = 0;
  bool sawEnd_ = false;
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
