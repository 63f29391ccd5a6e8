// kcap_fill and kcap_read_sum: a large buffer written with data of a chosen
// compressibility, then read in full.
//
// Benchmark material (bench/capture_throughput.cpp): full capture snapshots
// every byte a launch can reach, so a launch of kcap_read_sum over a 4 GiB
// buffer makes the shim copy, hash, compress and write 4 GiB (8 GiB in full
// mode: before and after).
//
// kcap_fill(words, n, seed, mask): words[i] = mix(i, seed) & mask. The mix is
// a 32-bit finalizer (murmur3's), so with mask 0xffffffff the data is
// incompressible for zstd (the worst case for the writer: it tries, then
// stores the piece raw); a mask of 0x0000ffff keeps 16 random bits a word
// (zstd 3 gets to roughly 60-65%). A different seed gives pieces that do not
// deduplicate against an earlier fill.
//
// kcap_read_sum(words, n, out): *out += sum of all words as 64-bit integers
// (exact, so the result does not depend on the grid or on atomic order: a
// program can print it and compare runs bit for bit). Reads 16 bytes a
// thread per step; n must be a multiple of 4 and words 16-byte aligned
// (cuMemAlloc's are); blockDim.x a multiple of 32 (a warp sums, then adds
// once). Launch either with any 1-D grid (grid-strided).

#include <cstdint>

namespace {

__device__ __forceinline__ uint32_t mix(uint64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) ^ (static_cast<uint32_t>(i >> 32) * 0x9e3779b9u) ^ seed;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

}  // namespace

extern "C" __global__ void kcap_fill(uint32_t* words, unsigned long long n, uint32_t seed, uint32_t mask) {
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    words[i] = mix(i, seed) & mask;
  }
}

extern "C" __global__ void kcap_read_sum(const uint32_t* words, unsigned long long n, unsigned long long* out) {
  const uint4* vectors = reinterpret_cast<const uint4*>(words);
  const unsigned long long count = n / 4;
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long sum = 0;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    const uint4 v = vectors[i];
    sum += static_cast<unsigned long long>(v.x) + v.y + v.z + v.w;
  }
  // Warp sum, then one atomic per warp.
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
  }
  if ((threadIdx.x & 31u) == 0) {
    atomicAdd(out, sum);
  }
}
