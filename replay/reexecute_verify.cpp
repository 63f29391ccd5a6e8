// Verification at a checkpoint (reexecute.h): the replayed device memory
// hashed with the recording's change-hash kernel, piece by piece, and
// compared with the hashes the checkpoint recorded; the first differing
// byte found where the trace holds the recorded piece.
#include <algorithm>
#include <cstring>
#include <map>

#include "change_hash.h"
#include "driver.h"
#include "reexecutor.h"
#include "schema_names.h"

namespace kcap::replay {
namespace {

constexpr size_t kReportedRanges = 5;  // differing ranges named in a report

}  // namespace

bool Reexecutor::read(uint64_t recorded, uint8_t* dst, uint64_t size) {
  if (coverage(recorded, size) != Coverage::kInside) return false;
  if (size != 0) r_.copyFromDevice(dst, here(recorded), size);
  return true;
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

}  // namespace kcap::replay
