// What the writer's direct blocks cost and give (docs/capture.md, "Direct
// blocks"): page-locking host memory the process has not touched, touching
// it first on several threads, page-locking it again once touched, and
// device-to-host copies into 1 MiB blocks of it, in order and out of order,
// beside threads reading other blocks (compression threads do). With the
// pinned bandwidth of one large copy, in the same run.
//
//   kcap_bench_page_locking [--mib N]      (default 2048; GPU 0)
//
// Prints one `name gbps X` line a measurement. Memory is in 64 MiB slabs
// advised for transparent huge pages (as format/piece_memory.cpp makes
// them), unless the line says `4k`.
#include "gpu_bench.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr size_t kSlab = size_t{64} << 20;
constexpr size_t kBlock = size_t{1} << 20;
constexpr size_t kSegment = size_t{32} << 20;  // one wait for the copies per segment
constexpr size_t kHugePage = size_t{2} << 20;

struct Slab {
  void* mapping;
  uint8_t* data;  // 2 MiB-aligned
};

std::vector<Slab> mapSlabs(size_t count, bool huge) {
  std::vector<Slab> slabs;
  for (size_t i = 0; i < count; ++i) {
    void* mapping = mmap(nullptr, kSlab + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED) {
      std::fprintf(stderr, "FAILED: mmap\n");
      std::exit(1);
    }
    auto* data = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mapping) + kHugePage - 1) & ~(kHugePage - 1));
    if (huge) {
      madvise(data, kSlab, MADV_HUGEPAGE);
    }
    slabs.push_back({mapping, data});
  }
  return slabs;
}

void unmapSlabs(std::vector<Slab>& slabs) {
  for (const Slab& slab : slabs) {
    munmap(slab.mapping, kSlab + kHugePage);
  }
  slabs.clear();
}

// fn(i) for i in [0, count) on `threads` threads, each with `context` current.
void inParallel(unsigned threads, size_t count, CUcontext context, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      BENCH_CHECK(cuCtxSetCurrent(context));
      for (size_t i = t; i < count; i += threads) {
        fn(i);
      }
    });
  }
  for (auto& worker : workers) {
    worker.join();
  }
}

double gbps(size_t bytes, double ns) { return static_cast<double>(bytes) / ns; }

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 2048;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mib") == 0 && i + 1 < argc) {
      mib = bench::number("--mib", argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--mib N]\n", argv[0]);
      return 2;
    }
  }
  const size_t slabCount = std::max<size_t>(1, mib * (size_t{1} << 20) / kSlab);
  const size_t bytes = slabCount * kSlab;
  const CUcontext context = bench::primaryContext();
  std::printf("device %s\nconfig mib %zu\n", bench::deviceName().c_str(), bytes >> 20);
  CUdeviceptr device = 0;
  BENCH_CHECK(cuMemAlloc(&device, bytes));
  BENCH_CHECK(cuMemsetD8(device, 7, bytes));
  CUstream stream = nullptr;
  BENCH_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  auto lockSlab = [&](const Slab& slab) {
    BENCH_CHECK(cuMemHostRegister(slab.data, kSlab, CU_MEMHOSTREGISTER_PORTABLE));
  };
  auto unlockAll = [&](const std::vector<Slab>& slabs) {
    for (const Slab& slab : slabs) {
      BENCH_CHECK(cuMemHostUnregister(slab.data));
    }
  };

  // Page-locking untouched memory: the driver faults the pages in.
  for (const bool huge : {true, false}) {
    for (const unsigned threads : {1u, 8u}) {
      std::vector<Slab> slabs = mapSlabs(slabCount, huge);
      double start = bench::nowNs();
      inParallel(threads, slabs.size(), context, [&](size_t i) { lockSlab(slabs[i]); });
      std::printf("register fresh%s threads %u gbps %.2f\n", huge ? "" : " 4k", threads,
                  gbps(bytes, bench::nowNs() - start));
      unlockAll(slabs);
      start = bench::nowNs();
      inParallel(threads, slabs.size(), context, [&](size_t i) { lockSlab(slabs[i]); });
      std::printf("register touched%s threads %u gbps %.2f\n", huge ? "" : " 4k", threads,
                  gbps(bytes, bench::nowNs() - start));
      unlockAll(slabs);
      unmapSlabs(slabs);
    }
  }

  // Touched first on 8 threads (a write a 4 KiB page), then page-locked
  // a slab at a time: what the writer's direct memory does.
  std::vector<Slab> slabs = mapSlabs(slabCount, true);
  double start = bench::nowNs();
  inParallel(8, bytes / kHugePage, context, [&](size_t unit) {
    uint8_t* at = slabs[unit * kHugePage / kSlab].data + unit * kHugePage % kSlab;
    for (size_t page = 0; page < kHugePage; page += 4096) {
      at[page] = 0;
    }
  });
  const double touched = bench::nowNs();
  for (const Slab& slab : slabs) {
    lockSlab(slab);
  }
  const double locked = bench::nowNs();
  std::printf("touch threads 8 gbps %.2f\nregister after touch gbps %.2f\ntouch and register gbps %.2f\n",
              gbps(bytes, touched - start), gbps(bytes, locked - touched), gbps(bytes, locked - start));

  // Copies into 1 MiB blocks, one wait a 32 MiB segment.
  std::vector<uint8_t*> inOrder;
  for (const Slab& slab : slabs) {
    for (size_t at = 0; at < kSlab; at += kBlock) {
      inOrder.push_back(slab.data + at);
    }
  }
  std::vector<uint8_t*> shuffled = inOrder;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(1));
  auto copyInto = [&](const char* name, const std::vector<uint8_t*>& blocks, bool join) {
    const double begin = bench::nowNs();
    size_t copies = 0;
    for (size_t segment = 0; segment < bytes; segment += kSegment) {
      const size_t end = (segment + kSegment) / kBlock;
      size_t run = segment / kBlock;
      for (size_t j = run; j < end; ++j) {
        if (join && j + 1 < end && blocks[j + 1] == blocks[j] + kBlock) {
          continue;
        }
        BENCH_CHECK(cuMemcpyDtoHAsync(blocks[run], device + run * kBlock, (j + 1 - run) * kBlock, stream));
        ++copies;
        run = j + 1;
      }
      BENCH_CHECK(cuStreamSynchronize(stream));
    }
    std::printf("d2h blocks %s gbps %.2f copies %zu\n", name, gbps(bytes, bench::nowNs() - begin), copies);
  };
  copyInto("in order joined", inOrder, true);
  copyInto("in order 1 MiB", inOrder, false);
  copyInto("shuffled 1 MiB", shuffled, false);
  {
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    for (unsigned t = 0; t < 8; ++t) {
      readers.emplace_back([&, t] {
        std::vector<uint8_t> sink(kBlock);
        for (size_t i = t; !stop.load(std::memory_order_relaxed); i += 8) {
          std::memcpy(sink.data(), inOrder[i % inOrder.size()], kBlock);
        }
      });
    }
    copyInto("shuffled 1 MiB, 8 threads reading blocks", shuffled, false);
    stop = true;
    for (auto& reader : readers) {
      reader.join();
    }
  }
  unlockAll(slabs);
  unmapSlabs(slabs);

  void* pinned = nullptr;
  BENCH_CHECK(cuMemHostAlloc(&pinned, bytes, CU_MEMHOSTALLOC_PORTABLE));
  BENCH_CHECK(cuMemcpyDtoH(pinned, device, bytes));  // warm
  start = bench::nowNs();
  BENCH_CHECK(cuMemcpyDtoH(pinned, device, bytes));
  std::printf("d2h pinned whole gbps %.2f\n", gbps(bytes, bench::nowNs() - start));
  BENCH_CHECK(cuMemFreeHost(pinned));
  BENCH_CHECK(cuMemFree(device));
  return 0;
}
