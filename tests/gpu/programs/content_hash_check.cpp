// gpu_content_hash: the shim's device-side content hash (interpose/
// content_hash.cu) against format::contentHash on the host, on a real GPU.
// Not a recording: this checks the kernel the shim is to use for hashing
// device memory where it lies, piece by piece, bit for bit.
//
// Memory: 64 MiB + 777 bytes in 1 MiB pieces (random pieces, zero pieces, a
// repeated piece, a short last piece), then the same at an offset whose
// last piece is too short for the kernel (left to the host: zero). Prints
// each mismatch and the kernel's and pinned D2H's GB/s; exit 0 when every
// piece matches.
#include "hash.h"
#include "xxh3_long.h"

#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#define CHECK_CU(call)                                                                          \
    do {                                                                                        \
        const CUresult r_ = (call);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                               \
            const char* name_ = nullptr;                                                        \
            cuGetErrorName(r_, &name_);                                                         \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, name_ ? name_ : "?"); \
            std::exit(1);                                                                       \
        }                                                                                       \
    } while (0)

namespace {

double seconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Hashes [address, address + size) in pieces on the device; returns {high, low} a piece.
std::vector<uint64_t> deviceHashes(CUfunction kernel, CUdeviceptr address, uint64_t size, uint32_t pieceSize,
                                   double* elapsed)
{
    const uint64_t pieces = (size + pieceSize - 1) / pieceSize;
    CUdeviceptr out = 0;
    CHECK_CU(cuMemAlloc(&out, pieces * 16));
    kcap::xxh3::Secret secret = kcap::xxh3::defaultSecret();
    void* params[] = {&address, &size, &pieceSize, &secret, &out};
    const unsigned threads = 256;  // 8 warps, 8 pieces a block
    const unsigned blocks = static_cast<unsigned>((pieces * 32 + threads - 1) / threads);
    CHECK_CU(cuCtxSynchronize());
    const double start = seconds();
    CHECK_CU(cuLaunchKernel(kernel, blocks, 1, 1, threads, 1, 1, 0, nullptr, params, nullptr));
    CHECK_CU(cuCtxSynchronize());
    *elapsed = seconds() - start;
    std::vector<uint64_t> hashes(pieces * 2);
    CHECK_CU(cuMemcpyDtoH(hashes.data(), out, hashes.size() * 8));
    CHECK_CU(cuMemFree(out));
    return hashes;
}

int compare(const std::vector<uint64_t>& device, const uint8_t* host, uint64_t size, uint32_t pieceSize,
            const char* what)
{
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
                        static_cast<unsigned long long>(device[2 * p]),
                        static_cast<unsigned long long>(device[2 * p + 1]),
                        static_cast<unsigned long long>(expected.high), static_cast<unsigned long long>(expected.low));
            ++mismatches;
        }
    }
    return mismatches;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s content_hash.fatbin\n", argv[0]);
        return 2;
    }
    std::string image;
    if (std::FILE* file = std::fopen(argv[1], "rb")) {
        char chunk[65536];
        for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, file)) > 0;) {
            image.append(chunk, n);
        }
        std::fclose(file);
    }
    if (image.empty()) {
        std::fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    CHECK_CU(cuInit(0));
    CUdevice device = 0;
    CHECK_CU(cuDeviceGet(&device, 0));
    CUcontext context = nullptr;
    CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_CU(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_CU(cuModuleLoadData(&module, image.data()));
    CUfunction kernel = nullptr;
    CHECK_CU(cuModuleGetFunction(&kernel, module, "kcap_content_hash"));

    constexpr uint32_t kPiece = 1u << 20;
    const uint64_t size = 64ull * kPiece + 777;
    std::vector<uint8_t> host(size);
    std::mt19937_64 random(7);
    for (auto& b : host) {
        b = static_cast<uint8_t>(random());
    }
    std::fill(host.begin() + 5 * kPiece, host.begin() + 7 * kPiece, 0);                 // zero pieces
    std::copy(host.begin(), host.begin() + kPiece, host.begin() + 9 * kPiece);          // a repeat
    CUdeviceptr memory = 0;
    CHECK_CU(cuMemAlloc(&memory, size));
    CHECK_CU(cuMemcpyHtoD(memory, host.data(), size));

    double kernelSeconds = 0;
    int mismatches = compare(deviceHashes(kernel, memory, size, kPiece, &kernelSeconds), host.data(), size, kPiece,
                             "whole range");
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
    CHECK_CU(cuMemAllocHost(&pinned, size));
    const double start = seconds();
    CHECK_CU(cuMemcpyDtoH(pinned, memory, size));
    const double d2h = seconds() - start;
    std::printf("kernel GB/s %.1f (first launch, 64 MiB), pinned D2H GB/s %.1f\n", size / kernelSeconds / 1e9,
                size / d2h / 1e9);
    CHECK_CU(cuMemFreeHost(pinned));
    CHECK_CU(cuMemFree(memory));
    std::printf("%s: %d mismatching pieces\n", mismatches == 0 ? "OK" : "FAILED", mismatches);
    return mismatches == 0 ? 0 : 1;
}
