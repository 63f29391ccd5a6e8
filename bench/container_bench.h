// What kcap_bench_container's two files share (container_bench.cpp: the
// configuration, the data, the measurement; container_bench_variants.cpp:
// the ways of writing and reading the data that are compared).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trace_writer.h"

namespace kcap::bench::container {

inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kDeviceBase = 0x7f0000000000ull;  // fake device addresses of the snapshots

struct Config {
  std::string dir = "/tmp";
  int level = 3;
  uint32_t piece = 1u << 20;
  int repeat = 3;
  int warmup = 1;                       // untimed runs of each variant first (page cache, allocator, first touch)
  uint64_t totalMiB = 1024;             // a multiple of 8: 3/8 activations, 1/8 zeros, 1/4 B, 1/4 B again
  std::vector<unsigned> threads{1, 0};  // container compressionThreads; 0 = the writer's default
  bool control = true;                  // also run the no-duplicates control (activations only)
  std::vector<std::string> variants{"raw", "pieces", "stream", "container"};
  uint64_t seed = 1;
  bool keep = false;
};

struct Segment {
  std::string name;
  uint64_t offset = 0;  // in the input buffer (and the read-back buffer)
  uint64_t size = 0;
  uint64_t address = 0;  // device address recorded in the snapshot
};

struct Dataset {
  std::string name;
  std::vector<Segment> segments;  // contiguous from offset 0
  uint64_t total = 0;
  uint64_t checksum = 0;  // XXH3-64 of input[0, total)
};

struct Input {
  uint8_t* bytes = nullptr;
  uint64_t size = 0;
  Dataset mixed;            // the benchmark proper
  Dataset control;          // activations only: no duplicate pieces, no zeros
  uint64_t bufferSize = 0;  // size of B
};

struct Variant {
  std::string name;
  std::string slug;  // file name suffix
  std::function<void(const Dataset&, const std::string& path)> write;
  std::function<void(const Dataset&, const std::string& path, uint8_t* dst)> read;
};

Variant rawVariant(const Input& in);
Variant zstdPiecesVariant(const Input& in, const Config& c);
Variant zstdStreamVariant(const Input& in, const Config& c);
Variant containerVariant(const Input& in, const Config& c, unsigned threads);

unsigned defaultCompressionThreads();  // what TraceWriterImpl does with compressionThreads = 0
std::string threadsLabel(unsigned threads);

// Writes each segment the way capture will: a traceBegin event, one launch event
// per snapshot (the memory stored with storeContent into the event's
// MemoryRange, then append), a traceEnd event, close.
// between(w, i) is called before segment i is stored, and with i = segments.size()
// after the last append, before close (the dedup measurement uses it).
void writeTrace(const Input& in, const Dataset& d, const Config& c, unsigned threads, const std::string& path,
                const std::function<void(kcap::format::TraceWriter&, size_t)>& between = nullptr);

}  // namespace kcap::bench::container
