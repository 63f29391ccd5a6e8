// Full-capture throughput: what one launch that reaches a large buffer costs
// under `kcap record --mode full|pre`, for bench/capture_throughput.py to set
// against the same launch without the shim and against pinned device-to-host
// bandwidth (docs/benchmarks.md).
//
//   kcap_bench_capture [--mib N] [--rounds R] [--seed S] [--mask M]
//                      [--d2h-mib N] [--d2h-reps R] [--host-rates DIR]
//
// Allocates N MiB (default 4096) of device memory and, R times (default 2):
//   1. fills it with kcap_fill (kernels/bench_memory.cu; seed S + round, so no
//      round's data deduplicates against another's; mask M, default
//      0xffffffff = incompressible) and synchronizes: untimed, and excluded
//      from the recording by the script (--include kcap_read_sum);
//   2. "fresh": launches kcap_read_sum over the whole buffer, timing the
//      launch call and the launch call + cuCtxSynchronize (in full mode the
//      shim snapshots before and after inside the call; in pre mode, before);
//   3. "repeat": the same launch again over the same, unchanged data (every
//      piece is already in the trace: the shim copies and hashes, stores
//      nothing).
// Then (plain runs; --d2h-mib 0 skips it) pinned device-to-host bandwidth:
// cuMemcpyDtoH of N MiB (default 1024) into cuMemAllocHost memory, in one call
// and in 32 MiB calls (the shim's staging size), best of --d2h-reps (5); and
// pinned host-to-device of the same bytes back, in one call.
// --host-rates DIR: what the shim's snapshot path costs per byte on this host,
// on the first 1 GiB of the data (host side only): XXH3-128 per 1 MiB piece
// (the dedup key), the piece copy into the writer's job, zstd at the writer's
// default level per piece on one thread, plain write() of the same bytes into a file in DIR in
// 32 MiB calls, closed (the storage path's own limit: the page cache, then
// the disk), and a TraceWriter with the shim's default settings storing
// 1 GiB into DIR; then page-locked allocation of 32 MiB buffers (what the
// shim's staging pool costs as it grows), first touch of plain memory, and
// cuMemHostRegister of memory already touched.
//
// Prints one fact a line:
//   result round I KIND sum X               the kernel's exact result (same with and without the shim)
//   launch round I KIND call_ns X total_ns Y
//   d2h whole|chunked gbps X
//   h2d whole gbps X                        pinned host-to-device, one call (best of --d2h-reps)
//   host hash|copy|zstd|filewrite|writer|pinalloc|touch|register gbps X [ratio R]
#include "gpu_bench.h"

#include "hash.h"
#include "kcap.capnp.h"
#include "trace_writer.h"

#include <capnp/message.h>
#include <zstd.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace {

constexpr size_t kMiB = 1u << 20;
constexpr size_t kStagingBytes = 32 * kMiB;  // interpose/record/recorder.cpp stagingBytes() at 1 MiB pieces

struct Options {
  unsigned long long mib = 4096;
  unsigned long long rounds = 2;
  unsigned long long seed = 1;
  unsigned long long mask = 0xffffffffu;
  unsigned long long d2hMib = 1024;
  unsigned long long d2hReps = 5;
  std::string hostRatesDir;  // empty: skip
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];
    if (std::strcmp(flag, "--help") == 0) {
      std::printf(
          "usage: %s [--mib N] [--rounds R] [--seed S] [--mask M] [--d2h-mib N] [--d2h-reps R]"
          " [--host-rates DIR]\n",
          argv[0]);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: needs a value\n", flag);
      std::exit(2);
    }
    const char* text = argv[++i];
    if (std::strcmp(flag, "--host-rates") == 0) {
      options.hostRatesDir = text;
      continue;
    }
    const unsigned long long value = bench::number(flag, text);
    if (std::strcmp(flag, "--mib") == 0) {
      options.mib = value;
    } else if (std::strcmp(flag, "--rounds") == 0) {
      options.rounds = value;
    } else if (std::strcmp(flag, "--seed") == 0) {
      options.seed = value;
    } else if (std::strcmp(flag, "--mask") == 0) {
      options.mask = value;
    } else if (std::strcmp(flag, "--d2h-mib") == 0) {
      options.d2hMib = value;
    } else if (std::strcmp(flag, "--d2h-reps") == 0) {
      options.d2hReps = value;
    } else {
      std::fprintf(stderr, "unknown flag %s (--help)\n", flag);
      std::exit(2);
    }
  }
  if (options.mib == 0 || options.mask > 0xffffffffu || options.d2hMib > options.mib ||
      (options.d2hMib > 0 && options.d2hReps == 0)) {
    std::fprintf(stderr, "need --mib >= 1, --mask <= 0xffffffff, --d2h-mib <= --mib, --d2h-reps >= 1\n");
    std::exit(2);
  }
  return options;
}

double gbps(double bytes, double ns) { return ns > 0 ? bytes / ns : 0; }  // 10^9 bytes per second

class Buffer {
 public:
  explicit Buffer(const Options& options)
      : bytes_(options.mib * kMiB),
        fill_(bench::loadKernel("bench_memory.fatbin", "kcap_fill")),
        read_(bench::loadKernel("bench_memory.fatbin", "kcap_read_sum")) {
    BENCH_CHECK(cuMemAlloc(&data_, bytes_));
    BENCH_CHECK(cuMemAlloc(&sum_, sizeof(unsigned long long)));
    int sms = 0;
    CUdevice device = 0;
    BENCH_CHECK(cuCtxGetDevice(&device));
    BENCH_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    blocks_ = static_cast<unsigned>(sms) * 8;
  }

  CUdeviceptr data() const { return data_; }
  size_t bytes() const { return bytes_; }

  void fill(uint32_t seed, uint32_t mask) {
    unsigned long long words = bytes_ / 4;
    void* params[] = {&data_, &words, &seed, &mask};
    BENCH_CHECK(cuLaunchKernel(fill_, blocks_, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    BENCH_CHECK(cuCtxSynchronize());
  }

  struct Timed {
    double callNs;
    double totalNs;
    unsigned long long sum;
  };

  // One timed launch of kcap_read_sum over the whole buffer; nothing queued before it.
  Timed read() {
    BENCH_CHECK(cuMemsetD8(sum_, 0, sizeof(unsigned long long)));
    BENCH_CHECK(cuCtxSynchronize());
    unsigned long long words = bytes_ / 4;
    void* params[] = {&data_, &words, &sum_};
    const double start = bench::nowNs();
    BENCH_CHECK(cuLaunchKernel(read_, blocks_, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    const double called = bench::nowNs();
    BENCH_CHECK(cuCtxSynchronize());
    const double end = bench::nowNs();
    unsigned long long sum = 0;
    BENCH_CHECK(cuMemcpyDtoH(&sum, sum_, sizeof sum));
    return {called - start, end - start, sum};
  }

 private:
  size_t bytes_;
  CUfunction fill_;
  CUfunction read_;
  CUdeviceptr data_ = 0;
  CUdeviceptr sum_ = 0;
  unsigned blocks_ = 0;
};

// Pinned device-to-host bandwidth; leaves the first `bytes` of the buffer in `host`.
void measureD2H(const Buffer& buffer, uint8_t* host, size_t bytes, unsigned long long reps) {
  double whole = 0;
  double chunked = 0;
  for (unsigned long long rep = 0; rep < reps; ++rep) {
    double start = bench::nowNs();
    BENCH_CHECK(cuMemcpyDtoH(host, buffer.data(), bytes));
    whole = std::max(whole, gbps(static_cast<double>(bytes), bench::nowNs() - start));
    start = bench::nowNs();
    for (size_t done = 0; done < bytes; done += kStagingBytes) {
      BENCH_CHECK(cuMemcpyDtoH(host + done, buffer.data() + done, std::min(kStagingBytes, bytes - done)));
    }
    chunked = std::max(chunked, gbps(static_cast<double>(bytes), bench::nowNs() - start));
  }
  std::printf("d2h whole gbps %.2f\n", whole);
  std::printf("d2h chunked gbps %.2f\n", chunked);
  // The other way, for replay's restore (bench/replay_throughput.py).
  // Restores the buffer's first `bytes` from `host` (its own contents).
  double h2d = 0;
  for (unsigned long long rep = 0; rep < reps; ++rep) {
    const double start = bench::nowNs();
    BENCH_CHECK(cuMemcpyHtoD(buffer.data(), host, bytes));
    h2d = std::max(h2d, gbps(static_cast<double>(bytes), bench::nowNs() - start));
  }
  std::printf("h2d whole gbps %.2f\n", h2d);
}

// The host-side steps of a snapshot, one at a time, on `bytes` of real data.
void measureHostRates(const uint8_t* data, size_t bytes, const std::string& dir) {
  const size_t pieces = bytes / kMiB;
  const double total = static_cast<double>(pieces * kMiB);

  uint64_t sink = 0;
  double start = bench::nowNs();
  for (size_t i = 0; i < pieces; ++i) {
    sink ^= kcap::format::contentHash(data + i * kMiB, kMiB).low;
  }
  std::printf("host hash gbps %.2f\n", gbps(total, bench::nowNs() - start));

  std::vector<uint8_t> job;
  start = bench::nowNs();
  for (size_t i = 0; i < pieces; ++i) {
    job.assign(data + i * kMiB, data + (i + 1) * kMiB);  // as storeContent does, into a fresh vector
    sink ^= job[i % kMiB];
    std::vector<uint8_t>().swap(job);
  }
  std::printf("host copy gbps %.2f\n", gbps(total, bench::nowNs() - start));

  // zstd on a quarter of it is enough for a rate.
  const size_t zstdPieces = std::max<size_t>(1, pieces / 4);
  std::vector<uint8_t> out(ZSTD_compressBound(kMiB));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  size_t compressed = 0;
  start = bench::nowNs();
  for (size_t i = 0; i < zstdPieces; ++i) {
    const size_t n = ZSTD_compressCCtx(cctx, out.data(), out.size(), data + i * kMiB, kMiB,
                                       kcap::format::TraceWriter::Options{}.zstdLevel);
    compressed += ZSTD_isError(n) || n >= kMiB ? kMiB : n;  // the writer stores such a piece raw
  }
  const double zstdNs = bench::nowNs() - start;
  ZSTD_freeCCtx(cctx);
  const double zstdBytes = static_cast<double>(zstdPieces * kMiB);
  std::printf("host zstd gbps %.2f ratio %.3f\n", gbps(zstdBytes, zstdNs), static_cast<double>(compressed) / zstdBytes);

  // What writing the bytes to a file costs with nothing else to do: the
  // bound under the writer for data it cannot shrink.
  const std::string rawPath = dir + "/kcap-bench-filewrite-" + std::to_string(::getpid());
  start = bench::nowNs();
  {
    const int fd = ::open(rawPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::fprintf(stderr, "cannot create %s\n", rawPath.c_str());
      std::exit(1);
    }
    for (size_t done = 0; done < pieces * kMiB;) {
      const ssize_t n = ::write(fd, data + done, std::min(kStagingBytes, pieces * kMiB - done));
      if (n <= 0) {
        std::fprintf(stderr, "write to %s failed\n", rawPath.c_str());
        std::exit(1);
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  std::printf("host filewrite gbps %.2f\n", gbps(total, bench::nowNs() - start));
  std::filesystem::remove(rawPath);

  // The writer as the shim creates it (level 3, 1 MiB pieces, default threads).
  const std::string path = dir + "/kcap-bench-writer-" + std::to_string(::getpid()) + ".kcap";
  start = bench::nowNs();
  {
    auto writer = kcap::format::TraceWriter::create(path);
    capnp::MallocMessageBuilder message;
    auto content = message.initRoot<kcap::schema::Content>();
    for (size_t done = 0; done < pieces * kMiB; done += kStagingBytes) {
      writer->storeContent(data + done, std::min(kStagingBytes, pieces * kMiB - done), content);
    }
    writer->close();
  }
  std::printf("host writer gbps %.2f\n", gbps(total, bench::nowNs() - start));
  std::filesystem::remove(path);

  // Staging buffers of the shim's size, 8 of them: page-locked allocation
  // (cuMemHostAlloc, as the shim's pool grows), first touch of plain
  // memory, and page-locking memory already touched (cuMemHostRegister).
  constexpr size_t kBuffers = 8;
  const double pinBytes = static_cast<double>(kBuffers * kStagingBytes);
  std::vector<void*> buffers(kBuffers);
  start = bench::nowNs();
  for (void*& b : buffers) {
    BENCH_CHECK(cuMemHostAlloc(&b, kStagingBytes, CU_MEMHOSTALLOC_PORTABLE));
  }
  std::printf("host pinalloc gbps %.2f\n", gbps(pinBytes, bench::nowNs() - start));
  for (void* b : buffers) {
    BENCH_CHECK(cuMemFreeHost(b));
  }
  start = bench::nowNs();
  for (void*& b : buffers) {
    b = std::aligned_alloc(4096, kStagingBytes);
    std::memset(b, 1, kStagingBytes);
  }
  std::printf("host touch gbps %.2f\n", gbps(pinBytes, bench::nowNs() - start));
  start = bench::nowNs();
  for (void* b : buffers) {
    BENCH_CHECK(cuMemHostRegister(b, kStagingBytes, CU_MEMHOSTREGISTER_PORTABLE));
  }
  std::printf("host register gbps %.2f\n", gbps(pinBytes, bench::nowNs() - start));
  for (void* b : buffers) {
    BENCH_CHECK(cuMemHostUnregister(b));
    std::free(b);
  }
  if (sink == 42) {
    std::printf("\n");  // keeps the loops above from being optimised away
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  bench::primaryContext();
  std::printf("device %s\n", bench::deviceName().c_str());
  std::printf("config mib %llu rounds %llu mask 0x%llx\n", options.mib, options.rounds, options.mask);

  Buffer buffer(options);
  for (unsigned long long round = 0; round < options.rounds; ++round) {
    buffer.fill(static_cast<uint32_t>(options.seed + round), static_cast<uint32_t>(options.mask));
    for (const char* kind : {"fresh", "repeat"}) {
      const Buffer::Timed timed = buffer.read();
      std::printf("result round %llu %s sum %llu\n", round, kind, timed.sum);
      std::printf("launch round %llu %s call_ns %.0f total_ns %.0f\n", round, kind, timed.callNs, timed.totalNs);
      std::fflush(stdout);
    }
  }

  if (options.d2hMib > 0) {
    const size_t bytes = options.d2hMib * kMiB;
    void* host = nullptr;
    BENCH_CHECK(cuMemAllocHost(&host, bytes));
    measureD2H(buffer, static_cast<uint8_t*>(host), bytes, options.d2hReps);
    if (!options.hostRatesDir.empty()) {
      measureHostRates(static_cast<const uint8_t*>(host), bytes, options.hostRatesDir);
    }
    BENCH_CHECK(cuMemFreeHost(host));
  }
  return 0;
}
