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
//
// The image's second kernel, kcap_change_hash (checkpoints' change hashes,
// interpose/record/change_hash.cuh), against format::changeHash: pieces of
// every length from 0 to 64 bytes at every alignment from 0 to 17, 1 MiB
// pieces, a piece of 1 MiB + 5 bytes starting 3 bytes into the buffer.
#include "gpu_bench.h"  // bench/: driver-API setup shared with the GPU benchmarks
#include "change_hash.h"
#include "hash.h"
#include "record/change_hash.cuh"
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

// The change hash of each piece, on the device; mismatches with the host's.
int compareChangeHashes(CUfunction kernel, CUdeviceptr memory, const uint8_t* host,
                        const std::vector<kcap::ChangeHashPiece>& relative, const char* what) {
  std::vector<kcap::ChangeHashPiece> pieces = relative;
  for (auto& piece : pieces) piece.address += memory;
  CUdeviceptr list = 0, out = 0;
  BENCH_CHECK(cuMemAlloc(&list, pieces.size() * sizeof(kcap::ChangeHashPiece)));
  BENCH_CHECK(cuMemAlloc(&out, pieces.size() * 16));
  BENCH_CHECK(cuMemcpyHtoD(list, pieces.data(), pieces.size() * sizeof(kcap::ChangeHashPiece)));
  uint64_t count = pieces.size();
  void* params[] = {&list, &count, &out};
  BENCH_CHECK(cuLaunchKernel(kernel, static_cast<unsigned>(std::min<uint64_t>(count, 65535)), 1, 1,
                             kcap::kChangeHashThreads, 1, 1, 0, nullptr, params, nullptr));
  std::vector<uint64_t> hashes(count * 2);
  BENCH_CHECK(cuMemcpyDtoH(hashes.data(), out, hashes.size() * 8));
  BENCH_CHECK(cuMemFree(list));
  BENCH_CHECK(cuMemFree(out));
  int mismatches = 0;
  for (size_t p = 0; p < relative.size(); ++p) {
    const auto expected = kcap::format::changeHash(host + relative[p].address, relative[p].length);
    if (hashes[2 * p] != expected.high || hashes[2 * p + 1] != expected.low) {
      if (++mismatches <= 5) {
        std::printf("%s: change hash of %llu bytes at offset %llu differs\n", what,
                    static_cast<unsigned long long>(relative[p].length),
                    static_cast<unsigned long long>(relative[p].address));
      }
    }
  }
  return mismatches;
}

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

  CUfunction changeKernel = nullptr;
  BENCH_CHECK(cuModuleGetFunction(&changeKernel, module, "kcap_change_hash"));
  std::vector<kcap::ChangeHashPiece> small;
  for (uint64_t offset = 0; offset < 18; ++offset) {
    for (uint64_t length = 0; length <= 64; ++length) small.push_back({offset, length});
  }
  mismatches += compareChangeHashes(changeKernel, memory, host.data(), small, "change hash, short pieces");
  std::vector<kcap::ChangeHashPiece> large;
  for (uint64_t p = 0; p < 64; ++p) large.push_back({p * kPiece, kPiece});
  large.push_back({3, kPiece + 5});
  mismatches += compareChangeHashes(changeKernel, memory, host.data(), large, "change hash, 1 MiB pieces");

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
