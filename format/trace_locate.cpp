// Where the chunks are: the footer index when it is valid, else a scan of
// the file that resynchronises after damage, with its work bounded.
#include "trace_reader.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <capnp/serialize.h>

#include "errors.h"
#include "trace_reader_internal.h"

namespace kcap::format {

using namespace reader_internal;

// Checks the chunk header at `offset` and what its first bytes say, reading
// nothing more: "" when a chunk could start there, else what is wrong.
// `head` holds the file's bytes from `offset` on, min(kProbeHeadSize, what
// the file has) of them.
std::string TraceReader::checkHead(uint64_t offset, const uint8_t* head, size_t have, ChunkHeader& header) const {
  if (fileSize_ - offset < kChunkHeaderSize) {
    return "file ends inside a chunk header (" + std::to_string(fileSize_ - offset) + " of " +
           std::to_string(kChunkHeaderSize) + " bytes)";
  }
  if (!decodeChunkHeader(head, header)) return "no valid chunk header";
  const std::string kind = chunkKindName(header.kind);
  const uint64_t prefix = prefixOf(header.kind);
  if (header.rawSize > rawLimit(header.kind)) {
    return kind + " chunk claims " + sizeText(header.rawSize) + " uncompressed, over the limit of " +
           sizeText(rawLimit(header.kind));
  }
  const uint64_t maxStored = prefix + ZSTD_compressBound(header.rawSize);
  if (header.storedSize < prefix || header.storedSize > maxStored ||
      (header.codec == Codec::kNone && header.storedSize != prefix + header.rawSize)) {
    return kind + " chunk has an impossible stored size (" + sizeText(header.storedSize) + " for " +
           sizeText(header.rawSize) + ")";
  }
  if (header.storedSize > fileSize_ - offset - kChunkHeaderSize) {
    return "file ends inside a " + kind + " chunk (payload of " + sizeText(header.storedSize) + ", " +
           sizeText(fileSize_ - offset - kChunkHeaderSize) + " present)";
  }
  if (header.codec != Codec::kZstd) return {};
  const uint64_t body = header.storedSize - prefix;
  if (beyondExpansion(header.rawSize, body)) {
    return kind + " chunk claims " + sizeText(header.rawSize) + " uncompressed from a zstd frame of " + sizeText(body) +
           ", more than zstd can expand it to";
  }
  const size_t at = kChunkHeaderSize + prefix;
  return frameSizeProblem(header.kind, head + at, static_cast<size_t>(std::min<uint64_t>(body, have - at)),
                          header.rawSize);
}

// The recovery scan's bound on wasted work. Candidates whose checksum holds
// cost nothing extra: the scan moves past each, so their payloads are hashed
// once in all. Candidates whose checksum fails are what a file of fake
// headers multiplies; their payloads are hashed only while the bytes so spent
// stay within kRecoveryHashAllowance + kRecoveryHashFactor * (bytes the scan
// has passed). So the scan's hashing is at most the file size plus that, and
// the rest of its work (finding magics, checking headers) is a constant per
// byte: linear in the file. A damaged chunk costs at most its own size and
// the scan then passes it, so only a file built to waste work exhausts the
// allowance.
bool TraceReader::withinRecoveryBudget(uint64_t offset, uint64_t size) const {
  uint64_t budget = 0;
  if (__builtin_mul_overflow(offset - std::min(offset, scanFrom_), kRecoveryHashFactor, &budget) ||
      __builtin_add_overflow(budget, kRecoveryHashAllowance, &budget)) {
    return true;
  }
  return failedChecksumBytes_ <= budget && size <= budget - failedChecksumBytes_;
}

// Checks the chunk at `offset` (its header, then its payload's checksum) and
// fills `out` when it is intact; else says in `why` what is wrong. `head`:
// the bytes from `offset` when the caller has them, else nullptr. `budgeted`:
// a candidate of the recovery scan, checksummed only within its budget.
bool TraceReader::probeChunk(uint64_t offset, const uint8_t* head, size_t have, ChunkInfo& out, std::string& why,
                             bool budgeted) {
  uint8_t local[kProbeHeadSize];
  const size_t want = static_cast<size_t>(std::min<uint64_t>(kProbeHeadSize, fileSize_ - offset));
  if (head == nullptr || have < want) {
    readAt(offset, local, want);
    head = local;
    have = want;
  }
  ChunkHeader header;
  why = checkHead(offset, head, have, header);
  if (!why.empty()) return false;
  const std::string kind = chunkKindName(header.kind);
  if (budgeted && !withinRecoveryBudget(offset, header.storedSize)) {
    why = kind + " chunk of " + sizeText(header.storedSize) + " not verified: the recovery scan already spent " +
          sizeText(failedChecksumBytes_) + " on candidates whose checksums failed";
    if (!budgetSpent_) {
      budgetSpent_ = true;
      addProblem(offset,
                 "the recovery scan stops verifying large candidate chunks here: " + sizeText(failedChecksumBytes_) +
                     " of checksums already failed (the file looks built to slow readers); "
                     "intact chunks after this may be missed");
    }
    return false;
  }
  // Hashed a block at a time: a candidate's claimed payload is never held whole.
  XXH3_state_t* state = scratch_->checksumState;
  if (state == nullptr || XXH3_64bits_reset_withSeed(state, checksum64(head, 24)) != XXH_OK) {
    throw FormatError(path_ + ": cannot compute a checksum");
  }
  constexpr size_t kBlock = 256 << 10;
  std::vector<uint8_t>& block = scratch_->block;
  block.resize(kBlock);
  for (uint64_t done = 0; done < header.storedSize;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, header.storedSize - done));
    readAt(offset + kChunkHeaderSize + done, block.data(), n);
    XXH3_64bits_update(state, block.data(), n);
    done += n;
  }
  if (XXH3_64bits_digest(state) != header.checksum) {
    failedChecksumBytes_ += header.storedSize;
    why = kind + " chunk is damaged (checksum mismatch)";
    return false;
  }
  out = ChunkInfo{};
  out.offset = offset;
  out.kind = header.kind;
  out.storedSize = header.storedSize;
  out.rawSize = header.rawSize;
  if (header.kind == ChunkKind::kBlob) {
    std::memcpy(&out.hash.high, head + kChunkHeaderSize, 8);
    std::memcpy(&out.hash.low, head + kChunkHeaderSize + 8, 8);
  }
  return true;
}

// Searches [from, scanEnd_) for a chunk whose header and checksum hold. Each
// candidate's header is checked from the window read here, with no read of
// its own.
bool TraceReader::findNextChunk(uint64_t from, ChunkInfo& found) {
  std::vector<uint8_t> window(static_cast<size_t>(std::min<uint64_t>(1 << 20, scanEnd_ - std::min(from, scanEnd_))));
  uint64_t at = from;
  std::string ignored;
  while (at + kChunkHeaderSize <= scanEnd_) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(window.size(), scanEnd_ - at));
    readAt(at, window.data(), n);
    const bool last = at + n >= scanEnd_;
    size_t i = 0;
    for (; i + 4 <= n; ++i) {
      uint32_t word;
      std::memcpy(&word, window.data() + i, 4);
      if (word != kChunkMagic) continue;
      if (!last && n - i < kProbeHeadSize) break;  // cut by the window: the next one starts here
      if (probeChunk(at + i, window.data() + i, n - i, found, ignored, true)) return true;
    }
    if (last) break;
    at += i + 4 <= n ? i : n - 3;  // a magic may straddle two windows
  }
  return false;
}

void TraceReader::scan(uint64_t from) {
  scanFrom_ = from;
  uint64_t offset = from;
  std::string why;
  const auto take = [&](const ChunkInfo& chunk) {
    if (chunk.kind != ChunkKind::kIndex) {
      if (chunk.kind == ChunkKind::kBlob) blobs_.emplace(chunk.hash, chunks_.size());
      chunks_.push_back(chunk);
    }
    offset = chunk.offset + kChunkHeaderSize + chunk.storedSize;
  };
  while (offset < scanEnd_) {
    if (fileSize_ - offset == kTrailerSize) {
      uint8_t raw[kTrailerSize];
      Trailer trailer;
      readAt(offset, raw, sizeof raw);
      if (decodeTrailer(raw, trailer)) break;
    }
    ChunkInfo chunk;
    if (probeChunk(offset, nullptr, 0, chunk, why, true)) {
      take(chunk);
      continue;
    }
    // Damage: look for the next chunk header whose checksum holds. A size
    // field that points past the end is as likely damage as a cut, so search
    // in both cases; only when nothing intact follows is the file torn here.
    ChunkInfo next;
    if (!findNextChunk(offset + 1, next)) {
      if (why.rfind("file ends inside", 0) == 0) {
        torn_ = true;
        addProblem(offset, why + "; the trace is cut short here");
      } else {
        addProblem(offset, why + "; no intact chunk follows");
      }
      return;
    }
    addProblem(offset, why + "; skipped " + sizeText(next.offset - offset) + " to the next intact chunk");
    take(next);
  }
}

void TraceReader::loadIndex() {
  if (fileSize_ < kFileHeaderSize + kChunkHeaderSize + kTrailerSize) return;
  uint8_t raw[kTrailerSize];
  Trailer trailer;
  readAt(fileSize_ - kTrailerSize, raw, sizeof raw);
  if (!decodeTrailer(raw, trailer)) return;  // not closed: scan
  closed_ = true;
  uint64_t indexOffset = trailer.indexOffset;
  auto reject = [&](const std::string& why) {
    addProblem(indexOffset, "footer index unusable (" + why + "); scanned the file instead");
    chunks_.clear();
    blobs_.clear();
    // When an index chunk header really starts there, the scan stops at it, so
    // the damage is reported once and not again as a damaged chunk.
    uint8_t head[kChunkHeaderSize];
    ChunkHeader header;
    if (indexOffset >= kFileHeaderSize && indexOffset <= fileSize_ - kChunkHeaderSize) {
      readAt(indexOffset, head, sizeof head);
      if (decodeChunkHeader(head, header) && header.kind == ChunkKind::kIndex) scanEnd_ = indexOffset;
    }
  };
  if (indexOffset < kFileHeaderSize || indexOffset > fileSize_ - kTrailerSize - kChunkHeaderSize) {
    return reject("it points outside the file");
  }
  ChunkInfo chunk;
  std::string why;
  if (!probeChunk(indexOffset, nullptr, 0, chunk, why, false)) return reject(why);
  if (chunk.kind != ChunkKind::kIndex ||
      indexOffset + kChunkHeaderSize + chunk.storedSize != fileSize_ - kTrailerSize) {
    return reject("the trailer does not point at an index chunk");
  }
  try {
    std::vector<capnp::word> words((chunk.rawSize + 7) / 8);
    std::string bad = loadPayload(chunk, reinterpret_cast<uint8_t*>(words.data()));
    if (!bad.empty()) return reject(bad);
    kj::ArrayPtr<const capnp::word> view(words.data(), words.size());
    capnp::FlatArrayMessageReader message(view, messageOptions(words.size()));
    auto index = message.getRoot<schema::TraceIndex>();
    std::vector<ChunkInfo> chunks;
    for (auto ref : index.getChunks()) {
      ChunkInfo c;
      c.offset = ref.getOffset();
      c.kind = ChunkKind::kRecords;
      c.storedSize = ref.getStoredSize();
      c.rawSize = ref.getRawSize();
      c.firstSeq = ref.getFirstSeq();
      c.eventCount = ref.getEventCount();
      chunks.push_back(c);
    }
    for (auto ref : index.getBlobs()) {
      ChunkInfo c;
      c.offset = ref.getOffset();
      c.kind = ChunkKind::kBlob;
      c.storedSize = ref.getStoredSize();
      c.rawSize = ref.getRawSize();
      c.hash = {ref.getHash().getHigh(), ref.getHash().getLow()};
      chunks.push_back(c);
    }
    std::sort(chunks.begin(), chunks.end(), [](const ChunkInfo& a, const ChunkInfo& b) { return a.offset < b.offset; });
    uint64_t end = kFileHeaderSize;
    for (const auto& c : chunks) {
      // Each entry lies after the one before and ends before the index,
      // compared so that no sum wraps; its raw size is one its stored bytes
      // can decompress to (the index is trusted: this is all the checking an
      // entry gets before its raw size is allocated).
      const bool inside = c.offset >= end && c.offset <= indexOffset && indexOffset - c.offset >= kChunkHeaderSize &&
                          c.storedSize <= indexOffset - c.offset - kChunkHeaderSize;
      if (!inside || c.storedSize < prefixOf(c.kind) || c.rawSize > rawLimit(c.kind) ||
          beyondExpansion(c.rawSize, c.storedSize - prefixOf(c.kind))) {
        return reject("entry for byte " + std::to_string(c.offset) + " is inconsistent");
      }
      end = c.offset + kChunkHeaderSize + c.storedSize;
    }
    chunks_ = std::move(chunks);
    for (size_t i = 0; i < chunks_.size(); ++i) {
      if (chunks_[i].kind == ChunkKind::kBlob) blobs_.emplace(chunks_[i].hash, i);
    }
    indexed_ = true;
    indexedEventCount_ = index.getEventCount();
  } catch (const kj::Exception& e) {
    reject("malformed: " + std::string(e.getDescription().cStr()));
  } catch (const FormatError& e) {
    reject(e.what());
  }
}

}  // namespace kcap::format
