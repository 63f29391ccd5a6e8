// NCCL's collective and point-to-point calls (hooks/nccl_calls.h): one
// Collective event each, after the kernels the call launched. In checkpoint
// mode what the call wrote on this rank (data from other GPUs, which
// re-executing this process cannot recompute) is read back in stream order
// and logged in a later WrittenData event (written_readback.h), or, when
// that cannot be, waited for and carried by the event itself.
#include "record/recorder.h"

#include "record/driver_api.h"

#include <algorithm>
#include <string>

namespace kcap {
namespace {

std::string ncclResultText(int result) { return "ncclResult_t " + std::to_string(result); }

}  // namespace

void Recorder::collectives(const std::vector<CollectiveCall>& calls) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  // Checkpoint mode alone: full mode snapshots what the next launches read.
  const bool logs = checkpoints_ != nullptr;
  std::vector<uint64_t> waited;  // streams waited for already, once each
  for (const CollectiveCall& call : calls) {
    EventMessage message(*this);
    auto event = message.event().initCollective();
    event.setOperation(call.op);
    event.setComm(call.comm);
    event.setStream(call.stream);
    event.setSendBuffer(call.sendBuffer);
    event.setRecvBuffer(call.recvBuffer);
    event.setCount(call.count);
    event.setDataType(call.dataType);
    event.setElementSize(ncclElementSize(call.dataType));
    event.setReduceOp(call.reduceOp);
    event.setRoot(call.root);
    event.setRank(call.rank);
    event.setRanks(call.ranks);
    event.setResult(call.result);
    event.setGrouped(call.grouped);
    const std::optional<uint64_t> written = collectiveWrittenBytes(call);
    event.setWritten(written.value_or(0));
    const bool captured = streamCapturing(reinterpret_cast<CUstream>(call.stream));
    event.setCaptured(captured);
    bool later = false;
    if (logs) {
      std::string missing;
      if (!written) {
        missing = "what it writes is not known: data type " + std::to_string(call.dataType) + ", rank " +
                  std::to_string(call.rank) + " of " + std::to_string(call.ranks);
      } else if (*written != 0 && call.result != 0) {
        missing = "the call returned " + ncclResultText(call.result) + ": what it wrote, if anything, is not known";
      } else if (*written != 0 && captured) {
        missing = captureWrittenCopy(call, *written, event);
      } else if (*written != 0) {
        later = readsBackLater(call.stream, *written);
        if (later) {
          event.setDataDeferred(true);
        } else {
          missing = logCollectiveWrite(call, *written, waited, event);
        }
      }
      if (!missing.empty()) event.setDataMissing(missing);
    }
    const uint64_t seq = append(message);
    if (later) {
      const RelaxedCaptureMode relaxed;
      readback_->request({seq, 0}, reinterpret_cast<CUstream>(call.stream), {call.recvBuffer, *written});
    }
  }
}

// A call on a capturing stream ran nothing: what it writes is copied, by a
// node captured right after its own, into a slot of kcap's that each launch
// of the graph reads back (captured_copies.h). Returns why it could not, or
// "" (the event says where the slot is).
std::string Recorder::captureWrittenCopy(const CollectiveCall& call, uint64_t written,
                                         schema::Collective::Builder event) {
  if (readback_ == nullptr || !readback_->takes(written)) {
    return "its stream was capturing into a CUDA graph, and the read-back after each launch of the graph does not "
           "take " +
           std::to_string(written) + " bytes";
  }
  const RelaxedCaptureMode relaxed;
  uint64_t slot = 0;
  const std::string why = capturedCopies_.add(reinterpret_cast<CUstream>(call.stream), call.recvBuffer, written, slot);
  if (!why.empty()) return "its stream was capturing into a CUDA graph, and " + why;
  event.setCapturedCopy(slot);
  return {};
}

// In checkpoint mode, unless the stream is capturing into a graph (the call
// ran nothing then: the waiting way says so) or the read-back refuses it.
bool Recorder::readsBackLater(uint64_t stream, uint64_t size) {
  if (readback_ == nullptr || !readback_->takes(size)) return false;
  return !streamCapturing(reinterpret_cast<CUstream>(stream));
}

// Reads what `call` wrote once its stream completed, waiting for it: the
// call returned with its work queued, and NCCL's stream semantics order
// everything it writes before the stream's later work. For what the
// read-back does not take (too large, a capturing stream). Returns why it
// could not, or "".
std::string Recorder::logCollectiveWrite(const CollectiveCall& call, uint64_t written, std::vector<uint64_t>& waited,
                                         schema::Collective::Builder event) {
  const auto stream = reinterpret_cast<CUstream>(call.stream);
  if (streamCapturing(stream)) {
    return "its stream was capturing into a CUDA graph: the call ran nothing then";
  }
  const RelaxedCaptureMode relaxed;
  const DriverApi& api = driverApi();
  if (std::find(waited.begin(), waited.end(), call.stream) == waited.end()) {
    const CUresult sync = api.streamSynchronize != nullptr ? api.streamSynchronize(stream) : CUDA_ERROR_NOT_FOUND;
    if (sync != CUDA_SUCCESS) return "waiting for its stream failed (CUresult " + std::to_string(sync) + ")";
    waited.push_back(call.stream);
  }
  StoredContent stored;
  if (const CUresult read = storeWritten(call.recvBuffer, written, stored); read != CUDA_SUCCESS) {
    return "reading it back failed (CUresult " + std::to_string(read) + ")";
  }
  stored.writeTo(event.initData());
  return {};
}

}  // namespace kcap
