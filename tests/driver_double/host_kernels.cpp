// Host versions of kernels/*.cu. Each loops over the launch's blocks and
// threads as the GPU would run them; the arithmetic is the kernel's own, in
// the same order where that matters (the reduction tree).
#include "host_kernels.h"

#include <cmath>

#include <xxhash.h>

#include "change_hash.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace kcap_double {
namespace {

template <class T>
T param(void* const* params, std::size_t i) {
  T value;
  std::memcpy(&value, params[i], sizeof value);
  return value;
}

// axpy(float a, const float* x, float* y, int n): y[i] = a * x[i] + y[i]
constexpr ParamSlot kAxpyParams[] = {{0, 4}, {8, 8}, {16, 8}, {24, 4}};
void axpy(const LaunchShape& shape, void* const* params, const ModuleGlobals&) {
  const auto a = param<float>(params, 0);
  const auto* x = param<const float*>(params, 1);
  auto* y = param<float*>(params, 2);
  const auto n = param<int>(params, 3);
  for (unsigned long long i = 0; i < shape.threadsX(); ++i) {
    if (i < static_cast<unsigned long long>(n < 0 ? 0 : n)) {
      y[i] = a * x[i] + y[i];
    }
  }
}

// axpy as kernels/axpy_changed.cu computes it: element 100 gets the right
// value with its lowest bit flipped.
void axpyChanged(const LaunchShape& shape, void* const* params, const ModuleGlobals& globals) {
  axpy(shape, params, globals);
  auto* y = param<float*>(params, 2);
  const auto n = param<int>(params, 3);
  if (n > 100 && shape.threadsX() > 100) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &y[100], sizeof bits);
    bits ^= 1u;
    std::memcpy(&y[100], &bits, sizeof bits);
  }
}

// reduce_sum(const float* in, float* out, unsigned n): *out += sum(in), one
// shared-memory tree per block of 256 threads, one atomicAdd per block.
constexpr ParamSlot kReduceParams[] = {{0, 8}, {8, 8}, {16, 4}};
void reduceSum(const LaunchShape& shape, void* const* params, const ModuleGlobals&) {
  constexpr unsigned kBlock = 256;
  const auto* in = param<const float*>(params, 0);
  auto* out = param<float*>(params, 1);
  const auto n = param<unsigned>(params, 2);
  const unsigned long long stride = 1ULL * shape.grid[0] * kBlock;
  std::array<float, kBlock> partial{};
  for (unsigned block = 0; block < shape.grid[0]; ++block) {
    for (unsigned tid = 0; tid < kBlock; ++tid) {
      float acc = 0.0f;
      for (unsigned long long i = 1ULL * block * kBlock + tid; i < n; i += stride) {
        acc += in[i];
      }
      partial[tid] = acc;
    }
    for (unsigned s = kBlock / 2; s > 0; s >>= 1) {
      for (unsigned tid = 0; tid < s; ++tid) {
        partial[tid] += partial[tid + s];
      }
    }
    *out += partial[0];
  }
}

// scale_struct(ScaleArgs): dst[i * stride] = src[i * stride] * scale
struct ScaleArgs {
  const float* src;
  float* dst;
  float scale;
  int n;
  long long stride;
};
static_assert(sizeof(ScaleArgs) == 32);
constexpr ParamSlot kScaleParams[] = {{0, 32}};
void scaleStruct(const LaunchShape& shape, void* const* params, const ModuleGlobals&) {
  const auto args = param<ScaleArgs>(params, 0);
  (void)shape;  // grid-strided: every i < n is done once whatever the grid
  for (long long i = 0; i < args.n; ++i) {
    const long long j = i * args.stride;
    args.dst[j] = args.src[j] * args.scale;
  }
}

// poly_eval(const float* x, float* y, int n) with __constant__ float
// coeffs[16] and __device__ int call_count, incremented once per block.
constexpr ParamSlot kPolyParams[] = {{0, 8}, {8, 8}, {16, 4}};
void polyEval(const LaunchShape& shape, void* const* params, const ModuleGlobals& globals) {
  const auto* x = param<const float*>(params, 0);
  auto* y = param<float*>(params, 1);
  const auto n = param<int>(params, 2);
  const auto* coeffs = static_cast<const float*>(globals.find("coeffs"));
  auto* callCount = static_cast<int*>(globals.find("call_count"));
  for (unsigned long long i = 0; i < shape.threadsX(); ++i) {
    if (i < static_cast<unsigned long long>(n < 0 ? 0 : n)) {
      const float v = x[i];
      float acc = coeffs[15];
      for (int k = 14; k >= 0; --k) {
        acc = acc * v + coeffs[k];
      }
      y[i] = acc;
    }
  }
  // One atomicAdd per block; other threads may run poly_eval on the same
  // module concurrently.
  __atomic_fetch_add(callCount, static_cast<int>(shape.blocks()), __ATOMIC_RELAXED);
}

// kernels/checks.cu: (const float* x, float* y, int n) each, for replay's --check.
constexpr ParamSlot kCheckParams[] = {{0, 8}, {8, 8}, {16, 4}};
struct CheckArgs {
  const float* x;
  float* y;
  long long n;
};
CheckArgs checkArgs(void* const* params) {
  const auto n = param<int>(params, 2);
  return {param<const float*>(params, 0), param<float*>(params, 1), n < 0 ? 0 : n};
}

// racy_sum: the GPU's float atomicAdds land in any order. Emulated: each
// call in the process starts the sum at another element.
void racySum(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  static std::atomic<unsigned> calls{0};
  const CheckArgs a = checkArgs(params);
  if (a.n == 0) {
    return;
  }
  const long long start = static_cast<long long>(calls.fetch_add(1) * 97u) % a.n;
  float acc = *a.y;
  for (long long k = 0; k < a.n; ++k) {
    acc += a.x[(start + k) % a.n];
  }
  *a.y = acc;
}

void fillEmpty(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const CheckArgs a = checkArgs(params);
  for (long long i = 0; i < a.n; ++i) {
    if (a.y[i] == 0.0f) {
      a.y[i] = a.x[i];
    }
  }
}

void padScale(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const CheckArgs a = checkArgs(params);
  for (long long i = 0; i < a.n; ++i) {
    a.y[i] = a.x[i] + 0.0f * a.x[i + a.n];
  }
}

// fmaxf as the GPU's: a NaN operand gives the other one.
void padMax(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const CheckArgs a = checkArgs(params);
  for (long long i = 0; i < a.n; ++i) {
    a.y[i] = std::fmax(a.x[i], a.x[i + a.n]);
  }
}

// One element past x's end and past y's end on purpose (what the overrun
// checker must find): inside the double's 256-byte allocation rounding.
__attribute__((no_sanitize("address"))) void scaleNext(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const CheckArgs a = checkArgs(params);
  for (long long i = 0; i < a.n; ++i) {
    a.y[i] = a.x[i] + 0.0f * a.x[i + 1];
  }
}

__attribute__((no_sanitize("address"))) void shiftStore(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const CheckArgs a = checkArgs(params);
  for (long long i = a.n - 1; i >= 0; --i) {
    a.y[i + 1] = a.x[i];
  }
}

// In thread order, as one GPU thread after another would run.
void addFirst(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const CheckArgs a = checkArgs(params);
  for (long long i = 0; i < a.n; ++i) {
    a.y[i] = a.x[0] + a.x[i];
  }
}

// Reads one float past x's end on purpose (the overrun the checker must
// find): not an error of the double's for AddressSanitizer to report.
__attribute__((no_sanitize("address"))) void sumNext(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const CheckArgs a = checkArgs(params);
  for (long long i = 0; i < a.n; ++i) {
    const volatile float* next = a.x + i + 1;  // past the end for the last i
    std::uint32_t bits = 0;
    const float value = *next;
    std::memcpy(&bits, &value, sizeof bits);
    a.y[i] = a.x[i] + (bits == 0x7fc0beefu ? 1.0f : 0.0f);
  }
}

void skipRows(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const CheckArgs a = checkArgs(params);
  for (long long i = 0; i < a.n; ++i) {
    if (i % 8 < 6) {
      a.y[i] = a.x[i];
    }
  }
}

// kernels/empty.cu: no parameters, no work (the launch-overhead benchmark's
// kernel, so that the shim's own cost per launch can be measured on the double).
void kcap_empty(const LaunchShape&, void* const*, const ModuleGlobals&) {}

// tma_scale(const __grid_constant__ CUtensorMap map, float* out, int n):
// out[i] = 2 * src[i], src being the tensor map's global address, which the
// double's maps hold in their first 8 bytes (api_memory.cpp). Test material
// only (tests/support/driver_program.h holds its PTX): a map whose address
// was not rewritten for the replay's memory reads the recorded address.
constexpr ParamSlot kTmaParams[] = {{0, 128}, {128, 8}, {136, 4}};
void tmaScale(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  const auto* src = param<const float*>(params, 0);
  auto* out = param<float*>(params, 1);
  const auto n = param<int>(params, 2);
  for (int i = 0; i < n; ++i) {
    out[i] = 2.0f * src[i];
  }
}

// The shim's own kernel (interpose/record/content_hash.cu): kcap_content_hash(const
// uint8_t* base, uint64_t size, uint32_t pieceSize, Secret secret (192
// bytes), uint64_t* out): out[2p], out[2p + 1] = the XXH3-128 (high, low) of
// piece p, one warp a piece; zeros for pieces under 241 bytes. Here
// libxxhash computes what the GPU's warps do (gpu_content_hash holds the
// kernel to it).
constexpr ParamSlot kContentHashParams[] = {{0, 8}, {8, 8}, {16, 4}, {20, 192}, {216, 8}};
void kcap_content_hash(const LaunchShape& shape, void* const* params, const ModuleGlobals&) {
  const auto* base = param<const std::uint8_t*>(params, 0);
  const auto size = param<std::uint64_t>(params, 1);
  const auto pieceSize = param<std::uint32_t>(params, 2);
  const auto* secret = static_cast<const std::uint8_t*>(params[3]);
  auto* out = param<std::uint64_t*>(params, 4);
  const std::uint64_t pieces = (size + pieceSize - 1) / pieceSize;
  const std::uint64_t warps = shape.threadsX() / 32;
  for (std::uint64_t p = 0; p < std::min(pieces, warps); ++p) {
    const std::uint64_t length = std::min<std::uint64_t>(pieceSize, size - p * pieceSize);
    XXH128_hash_t hash{0, 0};
    if (length >= 241 && p == 0 && contentHashFault() == "stale") {
      static std::atomic<std::uint8_t> launches{0};
      std::vector<std::uint8_t> changed(base, base + length);
      changed[0] ^= static_cast<std::uint8_t>(1 + launches.fetch_add(1) % 255);
      hash = XXH3_128bits_withSecret(changed.data(), length, secret, 192);
    } else if (length >= 241) {
      hash = XXH3_128bits_withSecret(base + p * pieceSize, length, secret, 192);
    }
    out[2 * p] = hash.high64;
    out[2 * p + 1] = hash.low64;
  }
}

// The shim's second kernel (interpose/record/change_hash.cuh):
// kcap_change_hash(const ChangeHashPiece* pieces, uint64_t count, uint64_t*
// out): the change hash of each {address, length} piece, computed here with
// the host reference (format/change_hash.h) the GPU test holds the kernel to.
// KCAP_DOUBLE_CHANGE_HASH=zero makes every piece hash as if it held zeros
// (memory whose changes the hash would miss); =flip gives every hash one bit
// flipped (a kernel that hashes wrongly).
constexpr ParamSlot kChangeHashParams[] = {{0, 8}, {8, 8}, {16, 8}};
void kcap_change_hash(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  struct Piece {
    std::uint64_t address, length;
  };
  const auto* pieces = reinterpret_cast<const Piece*>(param<std::uintptr_t>(params, 0));
  const auto count = param<std::uint64_t>(params, 1);
  auto* out = param<std::uint64_t*>(params, 2);
  const char* fault = std::getenv("KCAP_DOUBLE_CHANGE_HASH");
  const bool zero = fault != nullptr && std::string_view(fault) == "zero";
  const bool flip = fault != nullptr && std::string_view(fault) == "flip";
  for (std::uint64_t p = 0; p < count; ++p) {
    const auto hash =
        zero ? kcap::format::zeroChangeHash(pieces[p].length)
             : kcap::format::changeHash(reinterpret_cast<const std::uint8_t*>(pieces[p].address), pieces[p].length);
    out[2 * p] = hash.high ^ (flip ? 1 : 0);
    out[2 * p + 1] = hash.low;
  }
}

// Conditional graph nodes' kernels, driver-double test material with no
// kernels/ source (cudaGraphSetConditional needs the device runtime, which
// kernels/ does not link); tests load a PTX stub that names them.
// graph_countdown(CUgraphConditionalHandle handle, int* counter): --*counter,
// then the handle = (*counter > 0): the body of a while loop run *counter times.
// graph_set_condition(CUgraphConditionalHandle handle, const unsigned* value):
// the handle = *value (an if or switch node's choice, from memory).
constexpr ParamSlot kConditionParams[] = {{0, 8}, {8, 8}};
void graphCountdown(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  auto* counter = param<int*>(params, 1);
  --*counter;
  setGraphConditional(param<std::uint64_t>(params, 0), *counter > 0 ? 1 : 0);
}
void graphSetCondition(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  setGraphConditional(param<std::uint64_t>(params, 0), *param<const unsigned*>(params, 1));
}

// ncclDevKernel_StandInSum(float* recv, const float* send, const float* peer,
// unsigned long long count): recv[i] = send[i] + peer[i], the kernel the
// tests' stand-in NCCL captures for an all-reduce (named as NCCL names its
// kernels; tests/record/programs/fake_nccl.cpp loads a PTX stub).
constexpr ParamSlot kStandInSumParams[] = {{0, 8}, {8, 8}, {16, 8}, {24, 8}};
void standInSum(const LaunchShape&, void* const* params, const ModuleGlobals&) {
  auto* recv = param<float*>(params, 0);
  const auto* send = param<const float*>(params, 1);
  const auto* peer = param<const float*>(params, 2);
  const auto count = param<std::uint64_t>(params, 3);
  for (std::uint64_t i = 0; i < count; ++i) recv[i] = send[i] + peer[i];
}

constexpr KernelDef kKernels[] = {
    {"axpy", kAxpyParams, axpy},
    {"reduce_sum", kReduceParams, reduceSum},
    {"scale_struct", kScaleParams, scaleStruct},
    {"poly_eval", kPolyParams, polyEval},
    {"racy_sum", kCheckParams, racySum},
    {"fill_empty", kCheckParams, fillEmpty},
    {"pad_scale", kCheckParams, padScale},
    {"pad_max", kCheckParams, padMax},
    {"scale_next", kCheckParams, scaleNext},
    {"shift_store", kCheckParams, shiftStore},
    {"add_first", kCheckParams, addFirst},
    {"sum_next", kCheckParams, sumNext},
    {"skip_rows", kCheckParams, skipRows},
    {"kcap_empty", {}, kcap_empty},
    {"tma_scale", kTmaParams, tmaScale},
    {"kcap_content_hash", kContentHashParams, kcap_content_hash},
    {"kcap_change_hash", kChangeHashParams, kcap_change_hash},
    {"graph_countdown", kConditionParams, graphCountdown},
    {"graph_set_condition", kConditionParams, graphSetCondition},
    {"ncclDevKernel_StandInSum", kStandInSumParams, standInSum},
};

constexpr KernelVariant kVariants[] = {
    {"kcap_axpy_changed_marker", {"axpy", kAxpyParams, axpyChanged}},
};

constexpr GlobalDef kGlobals[] = {
    {"coeffs", 16 * sizeof(float)},
    {"call_count", sizeof(int)},
};

}  // namespace

std::span<const KernelDef> hostKernels() { return kKernels; }

std::string_view contentHashFault() {
  static const char* const fault = std::getenv("KCAP_DOUBLE_CONTENT_HASH");
  return fault != nullptr ? fault : "";
}
std::span<const GlobalDef> hostGlobals() { return kGlobals; }
std::span<const KernelVariant> kernelVariants() { return kVariants; }

}  // namespace kcap_double
