// Tensor maps: cuTensorMapEncode* and cuTensorMapReplaceAddress as far as
// the tests need them (what a real driver checks first, deterministic maps
// that carry the driver's tag).
#include "driver_exports.h"
#include "state.h"

#include <cuda.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>

// ---- tensor maps ------------------------------------------------------------------

// The double's tensor maps hold their global address in the first 8 bytes
// (a real driver's layout is opaque); replacing it is all a replay needs.
DOUBLE_API CUresult cuTensorMapReplaceAddress(CUtensorMap* map, void* address) {
  if (map == nullptr || reinterpret_cast<std::uintptr_t>(address) % 16 != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto value = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(address));
  std::memcpy(map->opaque, &value, sizeof value);
  return CUDA_SUCCESS;
}

namespace kcap_double {

// The last word of the double's maps: a tag that stands for "made by this
// driver". KCAP_DOUBLE_TENSOR_MAP_SALT=N makes it another driver's, whose
// launches refuse the maps of the default one (a map encoded by one driver
// or GPU need not be valid on another): only a re-encoded map passes.
std::uint64_t tensorMapTag() {
  static const std::uint64_t tag = [] {
    const char* salt = std::getenv("KCAP_DOUBLE_TENSOR_MAP_SALT");
    return 0x7e45044d41500000ull ^ (salt != nullptr ? std::strtoull(salt, nullptr, 10) : 0);
  }();
  return tag;
}

// KCAP_DOUBLE_TENSOR_MAP_REFUSE=1: every encode fails with
// CUDA_ERROR_NOT_SUPPORTED (a device that cannot take the recorded map).
bool tensorMapsRefused() {
  static const bool refused = [] {
    const char* value = std::getenv("KCAP_DOUBLE_TENSOR_MAP_REFUSE");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return refused;
}

bool tensorMapIsOurs(const void* map) {
  std::uint64_t last = 0;
  std::memcpy(&last, static_cast<const char*>(map) + sizeof(CUtensorMap) - sizeof last, sizeof last);
  return last == tensorMapTag();
}

}  // namespace kcap_double

using kcap_double::tensorMapTag;

// The double's encodes check what the real driver checks first (a map, rank
// 1..5, a 16-byte aligned address, strides that are multiples of 16 and
// below 2^40, boxes of 1..256) and write a map whose first 8 bytes are the
// global address (as cuTensorMapReplaceAddress above assumes), whose next
// 112 bytes are a hash of every other argument (the same arguments give the
// same map, other ones another) and whose last 8 are the driver's tag.
namespace {

struct MapHash {
  std::uint64_t state = 0xcbf29ce484222325ull;
  void add(std::uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      state ^= (value >> (8 * i)) & 0xff;
      state *= 0x100000001b3ull;
    }
  }
};

CUresult checkCommon(CUtensorMap* map, cuuint32_t rank, void* address, const cuuint64_t* dims,
                     const cuuint64_t* strides, const cuuint32_t* elementStrides) {
  if (kcap_double::tensorMapsRefused()) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (map == nullptr || rank < 1 || rank > 5 || address == nullptr || dims == nullptr || elementStrides == nullptr ||
      (rank > 1 && strides == nullptr) || reinterpret_cast<std::uintptr_t>(address) % 16 != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || elementStrides[i] == 0 || elementStrides[i] > 8) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    if (strides[i] % 16 != 0 || strides[i] >= (1ull << 40)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

void writeMap(CUtensorMap* map, void* address, MapHash hash) {
  const auto value = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(address));
  std::memcpy(map->opaque, &value, sizeof value);
  constexpr std::size_t kLast = std::size(CUtensorMap{}.opaque) - 1;
  for (std::size_t i = 1; i < kLast; ++i) {
    hash.add(i);
    map->opaque[i] = hash.state;
  }
  map->opaque[kLast] = tensorMapTag();
}

MapHash hashCommon(int kind, CUtensorMapDataType type, cuuint32_t rank, const cuuint64_t* dims,
                   const cuuint64_t* strides, const cuuint32_t* elementStrides, int interleave, int swizzle, int l2,
                   int oob) {
  MapHash h;
  for (const std::uint64_t v :
       {std::uint64_t(kind), std::uint64_t(type), std::uint64_t(rank), std::uint64_t(interleave),
        std::uint64_t(swizzle), std::uint64_t(l2), std::uint64_t(oob)}) {
    h.add(v);
  }
  for (cuuint32_t i = 0; i < rank; ++i) {
    h.add(dims[i]);
    h.add(elementStrides[i]);
    if (i + 1 < rank) {
      h.add(strides[i]);
    }
  }
  return h;
}

}  // namespace

DOUBLE_API CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                           const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                           const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                                           CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                           CUtensorMapFloatOOBfill oob) {
  if (const CUresult r = checkCommon(map, rank, address, dims, strides, elementStrides); r != CUDA_SUCCESS) {
    return r;
  }
  if (box == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (box[i] == 0 || box[i] > 256) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  MapHash h = hashCommon(1, type, rank, dims, strides, elementStrides, interleave, swizzle, l2, oob);
  for (cuuint32_t i = 0; i < rank; ++i) {
    h.add(box[i]);
  }
  writeMap(map, address, h);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuTensorMapEncodeIm2col(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                            const cuuint64_t* dims, const cuuint64_t* strides, const int* lower,
                                            const int* upper, cuuint32_t channels, cuuint32_t pixels,
                                            const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                                            CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                            CUtensorMapFloatOOBfill oob) {
  if (const CUresult r = checkCommon(map, rank, address, dims, strides, elementStrides); r != CUDA_SUCCESS) {
    return r;
  }
  if (rank < 3 || lower == nullptr || upper == nullptr || channels == 0 || channels > 256 || pixels == 0 ||
      pixels > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  MapHash h = hashCommon(2, type, rank, dims, strides, elementStrides, interleave, swizzle, l2, oob);
  for (cuuint32_t i = 0; i + 2 < rank; ++i) {
    h.add(static_cast<std::uint64_t>(static_cast<std::int64_t>(lower[i])));
    h.add(static_cast<std::uint64_t>(static_cast<std::int64_t>(upper[i])));
  }
  h.add(channels);
  h.add(pixels);
  writeMap(map, address, h);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuTensorMapEncodeIm2colWide(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                                void* address, const cuuint64_t* dims, const cuuint64_t* strides,
                                                int lowerWidth, int upperWidth, cuuint32_t channels, cuuint32_t pixels,
                                                const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                                                CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
                                                CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  if (const CUresult r = checkCommon(map, rank, address, dims, strides, elementStrides); r != CUDA_SUCCESS) {
    return r;
  }
  if (rank < 3 || channels == 0 || channels > 256 || pixels == 0 || pixels > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  MapHash h = hashCommon(3, type, rank, dims, strides, elementStrides, interleave, swizzle, l2, oob);
  h.add(static_cast<std::uint64_t>(static_cast<std::int64_t>(lowerWidth)));
  h.add(static_cast<std::uint64_t>(static_cast<std::int64_t>(upperWidth)));
  h.add(channels);
  h.add(pixels);
  h.add(static_cast<std::uint64_t>(mode));
  writeMap(map, address, h);
  return CUDA_SUCCESS;
}
