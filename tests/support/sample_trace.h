// A realistic, deterministic sample trace: every event type of the schema, real
// kernel images from kernels/ (when the build has them), memory contents that
// look like what a recorder sees (fp16-exact floats, fp16 words, zeros) and
// snapshots that repeat, so deduplication happens.
//
// The same options always produce the same bytes (no clocks, no randomness
// beyond the seeded generator), given the same writer and zstd.
//
// What the trace holds, in seq order (L = axpyLaunches):
//   traceBegin (2 devices, argv, environment, options, libraries)
//   message(info)
//   moduleLoad axpy.fatbin (moduleLoadData) + functionBind "axpy" (4 params)
//   moduleLoad constant.fatbin (libraryLoadData, isLibrary, 2 globals, jit options)
//   functionBind "poly_eval" (libraryGetKernel, isKernel, 3 params)
//   functionAttribute (max dynamic shared memory of poly_eval)
//   sync streamCreate
//   alloc: memAlloc x, memAlloc y, managed z, async scratch, hostAlloc staging,
//          vmmReserve, vmmCreate, vmmMap (the fp16 weights)
//   memcpy H2D x (data), memset y (zero), memcpy H2D coeffs (data),
//   memcpy H2D weights (fp16 data)
//   L x [launch axpy (pre x,y), launchEnd (post y), kernelTiming]
//   launch poly_eval via cuLaunchKernelEx from a second thread (attributes, pre
//     x, z, coeffs, call_count, weights), launchEnd (post z, call_count), kernelTiming
//   apiError (cuModuleGetFunction)
//   sync streamBeginCapture, launch axpy (capturing), launchEnd, sync streamEndCapture
//   graphLaunch, sync eventCreate, eventRecord, streamSynchronize
//   memcpy D2H y (no data)
//   free scratch (async), x, y, z, staging, vmmMap, vmmCreate, vmmReserve
//   moduleUnload (the library), sync streamDestroy
//   message(warning)
//   traceEnd(exit)        -- only when `orderly`
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kcap::test {

struct SampleOptions {
  uint64_t seed = 1;
  uint32_t pieceSize = 4096;  // TraceWriter::Options::pieceSize
  size_t batchBytes = 4096;   // TraceWriter::Options::batchBytes (small: several record chunks)
  int zstdLevel = 3;
  unsigned axpyLaunches = 3;       // recorded axpy launches (each: pre x,y; post y)
  std::string axpyName = "axpy";   // the name axpy's bind and launches carry (tests of long names)
  uint32_t elements = 1536;        // floats per buffer (x, y, z); 1536 floats = 6 KiB = 2 pieces
  uint32_t weightElements = 2048;  // fp16 words in the VMM-mapped weights buffer
  bool realImages = true;          // embed kernels/axpy.fatbin and constant.fatbin; false (or a
                                   // build without kernels): small synthetic fatbin-like images
  std::string kernelsDir;          // where the fatbins are; empty: KCAP_KERNELS_DIR of the build
  bool orderly = true;             // false: no traceEnd, and the index and trailer are cut off,
                                   // as if the writer had been killed
  std::string writerVersion;       // empty: the writer's default
};

// Events writeSampleTrace writes for `options` (traceEnd included when orderly).
uint64_t sampleEventCount(const SampleOptions& options);

// Throws (FormatError from the writer, std::runtime_error for a missing image).
void writeSampleTrace(const std::string& path, const SampleOptions& options);

// Whether this build can embed real kernel images (KCAP_KERNELS_DIR is known).
bool haveKernelImages();
std::string defaultKernelsDir();  // empty without kernel images

// Fixed facts of the sample (the values writeSampleTrace writes).
inline constexpr const char* kSampleHostName = "gpu-node-07";
inline constexpr uint32_t kSampleProcessId = 41230;
inline constexpr const char* kSampleDevice0 = "NVIDIA H200";
inline constexpr const char* kSampleDevice1 = "NVIDIA A100-SXM4-80GB";
inline constexpr uint64_t kSampleX = 0x7fa3c0000000ull;
inline constexpr uint64_t kSampleY = 0x7fa3c0200000ull;
inline constexpr uint64_t kSampleZ = 0x7fa3c0400000ull;
inline constexpr float kSampleAlpha = 0.5f;
inline constexpr uint32_t kSampleBlock = 256;

}  // namespace kcap::test
