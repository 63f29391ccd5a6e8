#include "collective_call.h"

namespace kcap {

uint32_t ncclElementSize(int dataType) {
  // ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
  // ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3,
  // ncclFloat8e5m2: the enum's values 0 to 11, stable across NCCL releases.
  constexpr uint32_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  if (dataType < 0 || static_cast<unsigned>(dataType) >= sizeof kSizes / sizeof kSizes[0]) return 0;
  return kSizes[dataType];
}

std::optional<uint64_t> collectiveWrittenBytes(const CollectiveCall& call) {
  using Op = schema::CollectiveOp;
  uint64_t elements = 0;
  switch (call.op) {
    case Op::SEND:
      return 0;
    case Op::ALL_REDUCE:
    case Op::BROADCAST:
    case Op::REDUCE_SCATTER:
    case Op::SCATTER:
    case Op::RECV:
      elements = call.count;
      break;
    case Op::REDUCE:
      if (call.rank < 0) return std::nullopt;
      elements = call.rank == call.root ? call.count : 0;
      break;
    case Op::ALL_GATHER:
    case Op::ALL_TO_ALL:
    case Op::GATHER:
      if (call.ranks <= 0 || (call.op == Op::GATHER && call.rank < 0)) return std::nullopt;
      if (call.op == Op::GATHER && call.rank != call.root) return 0;
      if (__builtin_mul_overflow(call.count, static_cast<uint64_t>(call.ranks), &elements)) return std::nullopt;
      break;
  }
  const uint32_t size = ncclElementSize(call.dataType);
  uint64_t bytes = 0;
  if (elements != 0 && size == 0) return std::nullopt;
  if (__builtin_mul_overflow(elements, uint64_t{size}, &bytes)) return std::nullopt;
  return bytes;
}

}  // namespace kcap
