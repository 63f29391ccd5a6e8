// kcap_bench_read_content: how fast TraceReader::readContentInto turns stored
// pieces back into memory, the CPU side of `kcap replay`'s restore,
// with no GPU: the windows are ordinary heap buffers, not page-locked ones.
//
//   kcap_bench_read_content [--mib 1024] [--repeat 5] [--dir /tmp] [--window-mib 64]
//
// For each kind of data (incompressible random bytes, stored raw; fp16-like
// values that zstd level 3 shrinks a little) it writes one content of --mib MiB
// with TraceWriter (1 MiB pieces, level 3; untimed), then reads it back
// --repeat times the way Replayer::restoreContent does: a window of whole
// pieces at a time, alternating between two buffers. The first pass is
// checked against the input's hash (untimed). Reads come from the page cache
// (the file was just written), so this measures the format's CPU cost, not
// the disk. Each pass opens the trace anew (the reader's setup is timed).
// GB/s are 10^9 bytes of content per second; the median is printed.
// Restrict the cores with taskset to compare thread counts.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <capnp/message.h>
#include <xxhash.h>

#include "trace_reader.h"
#include "trace_writer.h"

namespace {

using kcap::format::TraceReader;
using kcap::format::TraceWriter;

std::vector<uint8_t> randomBytes(size_t size) {
  std::vector<uint8_t> bytes(size);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    std::memcpy(bytes.data() + i, &v, 8);
  }
  return bytes;
}

// fp16 bit patterns of values near zero: sign, a few exponents, random
// mantissas. zstd level 3 stores them in somewhat fewer bytes (Huffman-coded
// literals), so every piece is a real zstd frame.
std::vector<uint8_t> fp16Like(size_t size) {
  std::vector<uint8_t> bytes(size);
  std::mt19937_64 rng(7);
  for (size_t i = 0; i + 8 <= size; i += 8) {
    uint64_t r = rng();
    for (int k = 0; k < 4; ++k) {
      uint16_t bits = static_cast<uint16_t>(r >> (16 * k));
      uint16_t exponent = static_cast<uint16_t>(12 + (bits >> 13) % 4);  // 2^-3 .. 2^0
      uint16_t half = static_cast<uint16_t>((bits & 0x8000) | (exponent << 10) | (bits & 0x3ff));
      std::memcpy(bytes.data() + i + 2 * k, &half, 2);
    }
  }
  return bytes;
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void runKind(const char* name, const std::vector<uint8_t>& input, const std::string& dir, int repeat,
             uint64_t windowBytes) {
  const std::string path = dir + "/kcap-read-bench-" + name + ".kcap";
  capnp::MallocMessageBuilder message;
  auto content = message.initRoot<kcap::schema::Content>();
  {
    TraceWriter::Options options;
    options.zstdLevel = 3;
    auto writer = TraceWriter::create(path, options);
    writer->storeContent(input.data(), input.size(), content);
    writer->close();
  }
  const uint64_t want = XXH3_64bits(input.data(), input.size());
  std::unique_ptr<TraceReader> reader;
  const uint64_t size = content.getSize();
  const uint64_t pieceSize = content.getPieceSize();
  const uint64_t perWindow = std::max<uint64_t>(1, windowBytes / pieceSize) * pieceSize;
  std::vector<uint8_t> windows[2] = {std::vector<uint8_t>(perWindow), std::vector<uint8_t>(perWindow)};
  const auto pieces = content.asReader().getPieces();

  std::vector<double> rates;
  for (int pass = 0; pass <= repeat; ++pass) {  // pass 0: checked, untimed
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    const auto start = std::chrono::steady_clock::now();
    // Opened anew each pass, as by a replay process: what the reader makes
    // once (threads, buffers, a mapping and its page tables) is timed too.
    reader = TraceReader::open(path);
    uint64_t window = 0;
    for (uint64_t offset = 0; offset < size; offset += perWindow, ++window) {
      const uint64_t bytes = std::min(perWindow, size - offset);
      const uint64_t first = offset / pieceSize;
      const uint64_t count = (bytes + pieceSize - 1) / pieceSize;
      capnp::MallocMessageBuilder partMessage;
      auto part = partMessage.initRoot<kcap::schema::Content>();
      part.setSize(bytes);
      part.setPieceSize(static_cast<uint32_t>(pieceSize));
      auto list = part.initPieces(static_cast<unsigned>(count));
      for (uint64_t i = 0; i < count; ++i) {
        list.setWithCaveats(static_cast<unsigned>(i), pieces[static_cast<unsigned>(first + i)]);
      }
      uint8_t* dst = windows[window % 2].data();
      reader->readContentInto(part.asReader(), dst, bytes);
      if (pass == 0) XXH3_64bits_update(state, dst, bytes);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pass == 0) {
      if (XXH3_64bits_digest(state) != want) {
        std::fprintf(stderr, "%s: the bytes read back differ from the input\n", name);
        std::exit(1);
      }
    } else {
      rates.push_back(static_cast<double>(size) / seconds / 1e9);
    }
    XXH3_freeState(state);
  }
  std::printf("%-14s %6.0f MiB  trace %6.0f MiB  read GB/s median %.2f (runs", name,
              static_cast<double>(size) / 1048576.0, static_cast<double>(reader->fileSize()) / 1048576.0,
              medianOf(rates));
  for (double r : rates) std::printf(" %.2f", r);
  std::printf(")\n");
  reader.reset();
  std::remove(path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 1024;
  int repeat = 5;
  uint64_t windowMib = 64;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--mib")
      mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--repeat")
      repeat = std::atoi(argv[i + 1]);
    else if (flag == "--window-mib")
      windowMib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--mib N] [--repeat N] [--window-mib N] [--dir DIR]\n", argv[0]);
      return 2;
    }
  }
  if (mib == 0 || repeat < 1 || windowMib == 0) return 2;
  std::printf("build %s, hardware threads %u, %llu MiB windows\n", KCAP_BENCH_BUILD_TYPE,
              std::thread::hardware_concurrency(), static_cast<unsigned long long>(windowMib));
  const size_t size = static_cast<size_t>(mib) << 20;
  runKind("incompressible", randomBytes(size), dir, repeat, windowMib << 20);
  runKind("fp16-like", fp16Like(size), dir, repeat, windowMib << 20);
  return 0;
}
