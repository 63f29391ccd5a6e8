// A call of NCCL's API that moves data between ranks, as the shim's NCCL
// entry points (hooks/nccl_exports.cpp) hand it to the recorder, and what
// such a call writes on this rank. NCCL's types are plain integers and
// pointers in its C ABI; the shim declares the few it needs rather than
// build against nccl.h, which the CUDA toolkit does not always ship.
#pragma once

#include <cstdint>
#include <optional>

#include "kcap.capnp.h"

namespace kcap {

struct CollectiveCall {
  schema::CollectiveOp op = schema::CollectiveOp::ALL_REDUCE;
  uint64_t comm = 0;
  uint64_t stream = 0;
  uint64_t sendBuffer = 0;
  uint64_t recvBuffer = 0;
  uint64_t count = 0;  // elements, as passed
  int dataType = -1;   // ncclDataType_t
  int reduceOp = -1;   // ncclRedOp_t; -1 for operations that do not reduce
  int root = -1;       // root or peer; -1 for operations without one
  int rank = -1;       // this process's rank in comm; -1 unknown
  int ranks = -1;      // ranks in comm; -1 unknown
  int result = 0;      // ncclResult_t
  bool grouped = false;
};

// Bytes per element of an ncclDataType_t; 0 for a type this build does not know.
uint32_t ncclElementSize(int dataType);

// The bytes `call` writes at its recvBuffer on this rank (Collective.written
// in format/kcap.capnp); nullopt when that is unknown (a data type this
// build does not know, the rank or the number of ranks unknown where the
// operation needs them) or overflows 64 bits.
std::optional<uint64_t> collectiveWrittenBytes(const CollectiveCall& call);

}  // namespace kcap
