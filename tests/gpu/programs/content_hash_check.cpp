// gpu_content_hash: the shim's device-side content hash (interpose/record/
// content_hash.cu) against format::contentHash on the host, on a real GPU.
// Not a recording: this checks the kernel the shim is to use for hashing
// device memory where it lies, piece by piece, bit for bit.
//
// Memory: 64 MiB + 777 bytes in 1 MiB pieces (random pieces, zero pieces, a
// repeated piece, a short last piece), then the same at an offset whose
// last piece is too short for the kernel (left to the host: zero). Prints
// each mismatch and the kernel's and pinned D2H's GB/s; exit 0 when every
// piece matches.
#include "gpu_bench.h"  // bench/: driver-API setup shared with the GPU benchmarks
#include "hash.h"
#include "xxh3_long.h"

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

namespace {

// Hashes [address, address + size) in pieces on the device; returns {high, low} a piece.
std::vector<uint64_t> deviceHashes(CUfunction kernel, CUdeviceptr address, uint64_t size, uint32_t pieceSize,
                                   double* elapsed) {
  const uint64_t pieces = (size + pieceSize - 1) / pieceSize;
  CUdeviceptr out = 0;
  BENCH_CHECK(cuMemAlloc(&out, pieces * 16));
  kcap::xxh3::Secret secret = kcap::xxh3::defaultSecret();
  void* params[] = {&address, &size, &pieceSize, &secret, &out};
  const unsigned threads = 256;  // 8 warps, 8 pieces a block
  const unsigned blocks = static_cast<unsigned>((pieces * 32 + threads - 1) / threads);
  BENCH_CHECK(cuCtxSynchronize());
  const double start = bench::nowNs() / 1e9;
  BENCH_CHECK(cuLaunchKernel(kernel, blocks, 1, 1, threads, 1, 1, 0, nullptr, params, nullptr));
  BENCH_CHECK(cuCtxSynchronize());
  *elapsed = bench::nowNs() / 1e9 - start;
  std::vector<uint64_t> hashes(pieces * 2);
  BENCH_CHECK(cuMemcpyDtoH(hashes.data(), out, hashes.size() * 8));
  BENCH_CHECK(cuMemFree(out));
  return hashes;
}

int compare(const std::vector<uint64_t>& device, const uint8_t* host, uint64_t size, uint32_t pieceSize,
            const char* what) {
  int mismatches = 0;
  for (uint64_t p = 0; p * pieceSize < size; ++p) {
    const uint64_t length = std::min<uint64_t>(pieceSize, size - p * pieceSize);
    kcap::format::Hash128 expected{0, 0};
    if (length >= kcap::xxh3::kMinLength) {
      expected = kcap::format::contentHash(host + p * pieceSize, length);
    }
    if (device[2 * p] != expected.high || device[2 * p + 1] != expected.low) {
      std::printf("MISMATCH %s piece %llu (%llu bytes): device %016llx%016llx, host %016llx%016llx\n", what,
                  static_cast<unsigned long long>(p), static_cast<unsigned long long>(length),
                  static_cast<unsigned long long>(device[2 * p]), static_cast<unsigned long long>(device[2 * p + 1]),
                  static_cast<unsigned long long>(expected.high), static_cast<unsigned long long>(expected.low));
      ++mismatches;
    }
  }
  return mismatches;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s content_hash.fatbin\n", argv[0]);
    return 2;
  }
  bench::primaryContext();
  CUmodule module = nullptr;
  if (const CUresult r = cuModuleLoad(&module, argv[1]); r != CUDA_SUCCESS) {
    bench::die(argv[1], r);
  }
  CUfunction kernel = nullptr;
  BENCH_CHECK(cuModuleGetFunction(&kernel, module, "kcap_content_hash"));

  constexpr uint32_t kPiece = 1u << 20;
  const uint64_t size = 64ull * kPiece + 777;
  std::vector<uint8_t> host(size);
  std::mt19937_64 random(7);
  for (auto& b : host) {
    b = static_cast<uint8_t>(random());
  }
  std::fill(host.begin() + 5 * kPiece, host.begin() + 7 * kPiece, 0);         // zero pieces
  std::copy(host.begin(), host.begin() + kPiece, host.begin() + 9 * kPiece);  // a repeat
  CUdeviceptr memory = 0;
  BENCH_CHECK(cuMemAlloc(&memory, size));
  BENCH_CHECK(cuMemcpyHtoD(memory, host.data(), size));

  double kernelSeconds = 0;
  int mismatches =
      compare(deviceHashes(kernel, memory, size, kPiece, &kernelSeconds), host.data(), size, kPiece, "whole range");
  // From 1 MiB + 16 bytes in, 64 KiB pieces: a last piece of 761 bytes,
  // then from further in so that the last is 200 bytes (host's).
  double ignored = 0;
  mismatches += compare(deviceHashes(kernel, memory + kPiece + 16, size - kPiece - 16, 64u << 10, &ignored),
                        host.data() + kPiece + 16, size - kPiece - 16, 64u << 10, "offset range");
  const uint64_t shortTail = (size - kPiece - 16) - ((size - kPiece - 16) % (64u << 10)) + 200;
  mismatches += compare(deviceHashes(kernel, memory + kPiece + 16, shortTail, 64u << 10, &ignored),
                        host.data() + kPiece + 16, shortTail, 64u << 10, "short last piece");

  // Rates, for the record (not asserted): the kernel over 64 MiB, pinned D2H of it.
  void* pinned = nullptr;
  BENCH_CHECK(cuMemAllocHost(&pinned, size));
  const double start = bench::nowNs() / 1e9;
  BENCH_CHECK(cuMemcpyDtoH(pinned, memory, size));
  const double d2h = bench::nowNs() / 1e9 - start;
  std::printf("kernel GB/s %.1f (first launch, 64 MiB), pinned D2H GB/s %.1f\n", size / kernelSeconds / 1e9,
              size / d2h / 1e9);
  BENCH_CHECK(cuMemFreeHost(pinned));
  BENCH_CHECK(cuMemFree(memory));
  std::printf("%s: %d mismatching pieces\n", mismatches == 0 ? "OK" : "FAILED", mismatches);
  return mismatches == 0 ? 0 : 1;
}
