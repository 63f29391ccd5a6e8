// kcap_bench_container's variants: raw write(), zstd by piece, one zstd
// stream, and the container (TraceWriter / TraceReader) with a number of
// compression threads; each writes a dataset to a file and reads it back.
#include <sys/utsname.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#include <capnp/message.h>
#include <xxhash.h>
#include <zstd.h>
#include "bench_data.h"
#include "bench_host.h"
#include "errors.h"
#include "trace_reader.h"
#include "trace_writer.h"
#include "container_bench.h"

namespace kcap::bench::container {

using kcap::format::TraceReader;
using kcap::format::TraceWriter;

Variant rawVariant(const Input& in) {
  Variant v;
  v.name = "raw write()";
  v.slug = "raw";
  v.write = [&in](const Dataset& d, const std::string& path) {
    int fd = openWrite(path);
    for (const auto& s : d.segments) writeAll(fd, in.bytes + s.offset, s.size);
    closeFd(fd);
  };
  v.read = [](const Dataset& d, const std::string& path, uint8_t* dst) {
    int fd = openRead(path);
    for (const auto& s : d.segments) {
      if (!readAll(fd, dst + s.offset, s.size)) fail(path + ": short file");
    }
    closeFd(fd);
  };
  return v;
}

// Plain zstd, one frame per piece (the container's piece split: each segment
// cut in --piece chunks), written as [u32 frame size][frame]; single-threaded,
// compress then write, one CCtx reused as the container's workers do.
Variant zstdPiecesVariant(const Input& in, const Config& c) {
  Variant v;
  v.name = "zstd per piece";
  v.slug = "zstd-pieces";
  v.write = [&in, &c](const Dataset& d, const std::string& path) {
    int fd = openWrite(path);
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    std::vector<uint8_t> out(4 + ZSTD_compressBound(c.piece));
    for (const auto& s : d.segments) {
      for (uint64_t off = 0; off < s.size; off += c.piece) {
        uint64_t len = std::min<uint64_t>(c.piece, s.size - off);
        size_t n = ZSTD_compressCCtx(cctx, out.data() + 4, out.size() - 4, in.bytes + s.offset + off, len, c.level);
        if (ZSTD_isError(n)) fail(std::string("ZSTD_compressCCtx: ") + ZSTD_getErrorName(n));
        uint32_t size32 = static_cast<uint32_t>(n);
        std::memcpy(out.data(), &size32, 4);
        writeAll(fd, out.data(), 4 + n);
      }
    }
    ZSTD_freeCCtx(cctx);
    closeFd(fd);
  };
  v.read = [&c](const Dataset& d, const std::string& path, uint8_t* dst) {
    int fd = openRead(path);
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    std::vector<uint8_t> frame(ZSTD_compressBound(c.piece));
    for (const auto& s : d.segments) {
      for (uint64_t off = 0; off < s.size; off += c.piece) {
        uint64_t len = std::min<uint64_t>(c.piece, s.size - off);
        uint32_t size32 = 0;
        if (!readAll(fd, reinterpret_cast<uint8_t*>(&size32), 4)) fail(path + ": short file");
        if (size32 > frame.size()) fail(path + ": bad frame size");
        if (!readAll(fd, frame.data(), size32)) fail(path + ": short file");
        size_t n = ZSTD_decompressDCtx(dctx, dst + s.offset + off, len, frame.data(), size32);
        if (ZSTD_isError(n) || n != len) fail(path + ": bad frame");
      }
    }
    ZSTD_freeDCtx(dctx);
    closeFd(fd);
  };
  return v;
}

// Plain zstd, one frame over the whole input (ZSTD_compressStream2, single
// thread, 1 MiB output buffer written as it fills); read back with
// ZSTD_decompressStream from 1 MiB reads.
Variant zstdStreamVariant(const Input& in, const Config& c) {
  Variant v;
  v.name = "zstd one stream";
  v.slug = "zstd-stream";
  v.write = [&in, &c](const Dataset& d, const std::string& path) {
    int fd = openWrite(path);
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, c.level);
    ZSTD_CCtx_setPledgedSrcSize(cctx, d.total);
    std::vector<uint8_t> out(1 << 20);
    ZSTD_inBuffer input{in.bytes, d.total, 0};
    for (;;) {
      ZSTD_outBuffer output{out.data(), out.size(), 0};
      size_t left = ZSTD_compressStream2(cctx, &output, &input, ZSTD_e_end);
      if (ZSTD_isError(left)) fail(std::string("ZSTD_compressStream2: ") + ZSTD_getErrorName(left));
      writeAll(fd, out.data(), output.pos);
      if (left == 0) break;
    }
    ZSTD_freeCCtx(cctx);
    closeFd(fd);
  };
  v.read = [](const Dataset& d, const std::string& path, uint8_t* dst) {
    int fd = openRead(path);
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    std::vector<uint8_t> buf(1 << 20);
    ZSTD_outBuffer output{dst, d.total, 0};
    size_t last = 1;
    for (;;) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) failErrno("read " + path);
      if (n == 0) break;
      ZSTD_inBuffer input{buf.data(), static_cast<size_t>(n), 0};
      while (input.pos < input.size) {
        last = ZSTD_decompressStream(dctx, &output, &input);
        if (ZSTD_isError(last)) fail(std::string("ZSTD_decompressStream: ") + ZSTD_getErrorName(last));
      }
    }
    if (last != 0 || output.pos != d.total) fail(path + ": truncated zstd stream");
    ZSTD_freeDCtx(dctx);
    closeFd(fd);
  };
  return v;
}

unsigned defaultCompressionThreads() {
  unsigned hw = std::max(2u, std::thread::hardware_concurrency());
  return std::min(4u, hw - 1);
}

std::string threadsLabel(unsigned threads) {
  if (threads == 0) return "default=" + std::to_string(defaultCompressionThreads());
  return std::to_string(threads);
}

void writeTrace(const Input& in, const Dataset& d, const Config& c, unsigned threads, const std::string& path,
                const std::function<void(TraceWriter&, size_t)>& between) {
  TraceWriter::Options options;
  options.zstdLevel = c.level;
  options.compressionThreads = threads;
  options.pieceSize = c.piece;
  auto writer = TraceWriter::create(path, options);
  {
    capnp::MallocMessageBuilder message;
    auto begin = message.initRoot<kcap::schema::Event>().initTraceBegin();
    begin.setHostName("kcap_bench_container");
    begin.setProcessId(static_cast<uint32_t>(::getpid()));
    begin.setKcapVersion("bench");
    begin.setCaptureMode(kcap::schema::CaptureMode::PRE_ONLY);
    writer->append(message);
  }
  for (size_t i = 0; i < d.segments.size(); ++i) {
    const Segment& s = d.segments[i];
    if (between) between(*writer, i);
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<kcap::schema::Event>();
    event.setThreadId(1);
    auto launch = event.initLaunch();
    launch.setLaunchIndex(i);
    launch.setKernelName("bench_kernel");
    launch.setGridX(1);
    launch.setGridY(1);
    launch.setGridZ(1);
    launch.setBlockX(256);
    launch.setBlockY(1);
    launch.setBlockZ(1);
    auto range = launch.initPre(1)[0];
    range.setAddress(s.address);
    range.setAllocationBase(s.address);
    range.setKind(kcap::schema::MemoryKind::ALLOCATION);
    writer->storeContent(in.bytes + s.offset, s.size, range.initContent());
    writer->append(message);
  }
  if (between) between(*writer, d.segments.size());
  {
    capnp::MallocMessageBuilder message;
    auto end = message.initRoot<kcap::schema::Event>().initTraceEnd();
    end.setReason(kcap::schema::EndReason::EXPLICIT);
    end.setEventCount(d.segments.size() + 1);
    end.setLaunchCount(d.segments.size());
    writer->append(message);
  }
  writer->close();
}

Variant containerVariant(const Input& in, const Config& c, unsigned threads) {
  Variant v;
  v.name = "container threads=" + threadsLabel(threads);
  v.slug = "container-t" + std::to_string(threads) + ".kcap";
  v.write = [&in, &c, threads](const Dataset& d, const std::string& path) { writeTrace(in, d, c, threads, path); };
  v.read = [](const Dataset& d, const std::string& path, uint8_t* dst) {
    auto reader = TraceReader::open(path);
    uint64_t ranges = 0;
    reader->forEachEvent([&](const kcap::format::EventRef& ref) {
      if (!ref.event.isLaunch()) return true;
      auto launch = ref.event.getLaunch();
      uint64_t index = launch.getLaunchIndex();
      if (index >= d.segments.size()) fail(path + ": unexpected launch index");
      const Segment& s = d.segments[index];
      for (auto range : launch.getPre()) {
        uint64_t off = s.offset + (range.getAddress() - s.address);
        if (off > d.total) fail(path + ": range outside the input");
        reader->readContentInto(range.getContent(), dst + off, d.total - off);
        ++ranges;
      }
      return true;
    });
    if (ranges != d.segments.size()) fail(path + ": expected " + std::to_string(d.segments.size()) + " ranges");
    if (!reader->indexed() || !reader->problems().empty()) fail(path + ": the reader found no index or problems");
  };
  return v;
}

}  // namespace kcap::bench::container
