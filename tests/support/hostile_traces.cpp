#include "hostile_traces.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <stdexcept>

#include <capnp/message.h>
#include <zstd.h>

#include "container.h"
#include "hash.h"
#include "hostile_files.h"
#include "trace_files.h"

namespace kcap::test {
namespace {

using format::ChunkKind;
using format::Codec;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint32_t kZeroPiece = 64 << 10;

class Corpus {
 public:
  Corpus(std::string dir, std::string recorded) : dir_(std::move(dir)), recorded_(std::move(recorded)) {}

  // A file built byte by byte.
  void add(HostileTrace c, const std::vector<uint8_t>& bytes) {
    writeFileBytes(path(c.name), bytes);
    cases_.push_back(std::move(c));
  }

  // An edit of the recorded trace: `change` returns true for each event it
  // changed; a case that changed nothing is an error in the recording.
  void edit(HostileTrace c, const std::function<bool(schema::Event::Builder)>& change,
            const std::vector<RawBlob>& extraBlobs = {}) {
    bool any = false;
    rewriteEvents(
        recorded_, path(c.name),
        [&](schema::Event::Builder e) {
          const bool changed = change(e);
          any = any || changed;
          return changed;
        },
        4, true, extraBlobs);
    if (!any) throw std::runtime_error(c.name + ": " + recorded_ + " has no event to edit");
    cases_.push_back(std::move(c));
  }

  std::vector<uint8_t> recordedBytes() const {
    std::ifstream in(recorded_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  std::vector<HostileTrace> take() { return std::move(cases_); }

 private:
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_, recorded_;
  std::vector<HostileTrace> cases_;
};

// A content of `size` bytes, every piece the same 64 KiB of zeros: what
// deduplication lets a few bytes of trace claim.
void claimZeros(schema::Content::Builder content, uint64_t size) {
  const format::Hash128 zero = format::contentHash(std::vector<uint8_t>(kZeroPiece, 0).data(), kZeroPiece);
  const uint64_t count = size / kZeroPiece;
  content.setSize(count * kZeroPiece);
  content.setPieceSize(kZeroPiece);
  auto pieces = content.initPieces(static_cast<unsigned>(count));
  for (unsigned i = 0; i < count; ++i) {
    pieces[i].setHigh(zero.high);
    pieces[i].setLow(zero.low);
  }
}

RawBlob zeroPiece() {
  std::vector<uint8_t> zeros(kZeroPiece, 0);
  const format::Hash128 hash = format::contentHash(zeros.data(), zeros.size());
  return {hash, std::move(zeros)};
}

// Edits the first event `pick` accepts.
std::function<bool(schema::Event::Builder)> first(const std::function<bool(schema::Event::Builder)>& pick) {
  auto done = std::make_shared<bool>(false);
  return [done, pick](schema::Event::Builder e) {
    if (*done || !pick(e)) return false;
    *done = true;
    return true;
  };
}

// Container-level cases: built from scratch around small message events.
void containerCases(Corpus& corpus) {
  {  // Fake chunk headers every 32 bytes, each claiming the rest of the
     // region: the recovery scan once re-read and hashed each claim.
    std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 2), {}, 2, false);
    const uint64_t start = file.size(), end = start + (4 << 20);
    file.resize(end);
    for (uint64_t at = start; at + 32 <= end; at += 32) {
      format::ChunkHeader header;
      header.kind = ChunkKind::kRecords;
      header.codec = Codec::kNone;
      header.storedSize = end - at - format::kChunkHeaderSize;
      header.rawSize = header.storedSize;
      header.checksum = 0x5eed + at;
      format::encodeChunkHeader(header, file.data() + at);
    }
    appendChunk(file, ChunkKind::kRecords, Codec::kNone, concat(messageEvents(2, 1)),
                concat(messageEvents(2, 1)).size());
    corpus.add({"fake-chunk-headers.kcap", "4 MiB of fake chunk headers every 32 bytes, no index"}, file);
  }
  {  // A record chunk of 64 stored bytes that claims 256 MiB.
    const std::vector<uint8_t> zeros(format::kMaxRecordChunkRaw, 0);
    std::vector<uint8_t> frame = zstdFrame(zeros.data(), zeros.size());
    frame.resize(64);
    std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 1), {}, 1, false);
    appendChunk(file, ChunkKind::kRecords, Codec::kZstd, frame, format::kMaxRecordChunkRaw);
    appendChunk(file, ChunkKind::kRecords, Codec::kNone, concat(messageEvents(1, 1)),
                concat(messageEvents(1, 1)).size());
    corpus.add({"record-chunk-claims-256MiB.kcap", "a record chunk of 64 stored bytes claiming 256 MiB raw"}, file);
  }
  {  // A footer index of 200 bytes that claims 1 GiB.
    const std::vector<uint8_t> zeros(64 << 20, 0);
    std::vector<uint8_t> frame = zstdFrame(zeros.data(), zeros.size());
    frame.resize(200);
    std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 3), {}, 3, false);
    const uint64_t indexAt = file.size();
    appendChunk(file, ChunkKind::kIndex, Codec::kZstd, frame, format::kMaxIndexRaw);
    appendTrailer(file, indexAt);
    corpus.add({"index-claims-1GiB.kcap", "a footer index of 200 stored bytes claiming 1 GiB raw"}, file);
  }
  {  // A blob of 100 stored bytes that claims a 64 MiB piece.
    const std::vector<uint8_t> zeros(format::kMaxBlobRaw, 0);
    std::vector<uint8_t> frame = zstdFrame(zeros.data(), zeros.size());
    frame.resize(100);
    std::vector<uint8_t> payload(format::kBlobHashSize + frame.size(), 0x42);
    std::memcpy(payload.data() + format::kBlobHashSize, frame.data(), frame.size());
    std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 1), {}, 1, false);
    appendChunk(file, ChunkKind::kBlob, Codec::kZstd, payload, format::kMaxBlobRaw);
    corpus.add({"blob-claims-64MiB.kcap", "a blob of 100 stored bytes claiming a 64 MiB piece"}, file);
  }
  {  // An index entry at 2^64 - 16: offset + header + size wraps to 32.
    std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 4), {}, 2, false);
    const uint64_t indexAt = file.size();
    capnp::MallocMessageBuilder message;
    auto index = message.initRoot<schema::TraceIndex>();
    index.setEventCount(4);
    auto entries = index.initChunks(1);
    entries[0].setOffset(~uint64_t{0} - 15);
    entries[0].setEventCount(4);
    entries[0].setStoredSize(16);
    entries[0].setRawSize(16);
    const auto payload = flatBytes(message);
    appendChunk(file, ChunkKind::kIndex, Codec::kNone, payload, payload.size());
    appendTrailer(file, indexAt);
    corpus.add({"index-entry-wraps.kcap", "an index entry at byte 2^64-16, whose end wraps"}, file);
  }
  {  // 20,000 damaged chunks: worth that many findings, of which check keeps 1000.
    std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 1), {}, 1, false);
    for (uint64_t seq = 1; seq <= 20000; ++seq) {
      const auto event = concat(messageEvents(seq, 1));
      appendChunk(file, ChunkKind::kRecords, Codec::kNone, event, event.size(), false);
    }
    corpus.add({"many-damaged-chunks.kcap", "20,000 record chunks with wrong checksums"}, file);
  }
  {
    std::vector<uint8_t> noise(4096);
    std::mt19937 rng(25);
    for (auto& b : noise) b = static_cast<uint8_t>(rng());
    corpus.add({"not-a-trace.kcap", "4 KiB of noise"}, noise);
    corpus.add({"empty.kcap", "no bytes at all"}, {});
  }
  {  // A recording cut in the middle of a chunk.
    std::vector<uint8_t> file = corpus.recordedBytes();
    file.resize(file.size() * 3 / 5);
    // Replay runs the launches whose events are intact (exit 0, saying
    // which it could not verify).
    corpus.add({"truncated.kcap", "the recorded trace cut at 60%", 1, 0}, file);
  }
}

// Event-level cases: edits of the recorded trace, checksums valid.
void eventCases(Corpus& corpus) {
  const auto isLaunch = [](schema::Event::Builder e) { return e.isLaunch(); };
  corpus.edit({"pointer-word-wraps.kcap", "a pointer word at byte 2^32-8 of the parameters (32-bit wrap)"},
              first([&](schema::Event::Builder e) {
                if (!isLaunch(e) || e.getLaunch().getPointers().size() == 0) return false;
                e.getLaunch().getPointers()[0].setOffset(0xFFFFFFF8u);
                return true;
              }));
  corpus.edit({"param-layout-wraps.kcap", "a parameter at byte 2^32-16, 32 bytes long (32-bit wrap)"},
              first([&](schema::Event::Builder e) {
                if (!isLaunch(e) || e.getLaunch().getParamLayout().size() == 0) return false;
                e.getLaunch().getParamLayout()[0].setOffset(0xFFFFFFF0u);
                e.getLaunch().getParamLayout()[0].setSize(0x20u);
                return true;
              }));
  corpus.edit({"huge-pre-state.kcap", "a launch's pre-state claiming 16 GiB of one deduplicated zero piece", 0},
              first([&](schema::Event::Builder e) {
                if (!isLaunch(e) || e.getLaunch().getPre().size() == 0) return false;
                claimZeros(e.getLaunch().getPre()[0].getContent(), 16 * kGiB);
                return true;
              }),
              {zeroPiece()});
  corpus.edit({"huge-post-state.kcap", "a launch's post-state claiming 16 GiB of one deduplicated zero piece", 0},
              first([&](schema::Event::Builder e) {
                if (!e.isLaunchEnd() || e.getLaunchEnd().getPost().size() == 0) return false;
                claimZeros(e.getLaunchEnd().getPost()[0].getContent(), 16 * kGiB);
                return true;
              }),
              {zeroPiece()});
  corpus.edit({"huge-module-image.kcap", "a module image claiming 16 GiB of one deduplicated zero piece"},
              first([&](schema::Event::Builder e) {
                if (!e.isModuleLoad()) return false;
                claimZeros(e.getModuleLoad().getImage(), 16 * kGiB);
                return true;
              }),
              {zeroPiece()});
  corpus.edit({"missing-blob.kcap", "a pre-state piece naming a blob the file does not hold"},
              first([&](schema::Event::Builder e) {
                if (!isLaunch(e) || e.getLaunch().getPre().size() == 0) return false;
                auto pieces = e.getLaunch().getPre()[0].getContent().getPieces();
                if (pieces.size() == 0) return false;
                pieces[0].setHigh(pieces[0].getHigh() ^ 0x5a5a);
                return true;
              }));
  corpus.edit({"pieces-disagree-with-size.kcap", "a pre-state whose size needs more pieces than it lists"},
              first([&](schema::Event::Builder e) {
                if (!isLaunch(e) || e.getLaunch().getPre().size() == 0) return false;
                auto content = e.getLaunch().getPre()[0].getContent();
                content.setSize(content.getSize() + uint64_t{content.getPieceSize()} * 1000);
                return true;
              }));
  // Valid however odd: check must pass them and replay reproduce them. (The
  // 16 GiB snapshots above are valid too, but more than the double holds.)
  const std::string controls =
      "k\xc2\x9b"
      "31m\xc2\x9d"
      "0;title\xe2\x80\xae"
      "x\x1b[2J\x07";
  // The image holds no kernel of the changed name: replay refuses each launch.
  corpus.edit({"terminal-controls-in-names.kcap", "kernel names holding C0, C1 and bidi controls", 0, 1},
              [&](schema::Event::Builder e) {
                if (e.isLaunch()) {
                  e.getLaunch().setKernelName(e.getLaunch().getKernelName().cStr() + controls);
                  return true;
                }
                if (e.isFunctionBind()) {
                  e.getFunctionBind().setName(e.getFunctionBind().getName().cStr() + controls);
                  return true;
                }
                return false;
              });
  // Replay finds kernels by the function's name, which stays: it reproduces.
  corpus.edit({"long-launch-names.kcap", "launches naming kernels 60,000 bytes long", 0, 0},
              [&](schema::Event::Builder e) {
                if (!e.isLaunch()) return false;
                e.getLaunch().setKernelName(e.getLaunch().getKernelName().cStr() + std::string(60000, 'a'));
                return true;
              });
}

}  // namespace

std::vector<HostileTrace> writeHostileTraces(const std::string& dir, const std::string& recorded) {
  Corpus corpus(dir, recorded);
  containerCases(corpus);
  eventCases(corpus);
  return corpus.take();
}

}  // namespace kcap::test
