// kcap_bench_container: the .kcap container (TraceWriter / TraceReader) against
// plain zstd at the same level on the same bytes, and against raw write(), on
// 1 GiB of realistic mixed device memory:
//
//   384 MiB fp16 activations (three 128 MiB tensors: normal, post-ReLU, normal)
//   128 MiB zeros
//   256 MiB fp16 buffer B (weight-like)
//   256 MiB the same buffer B again, a separate snapshot of identical bytes
//
// The data is generated up front from a seeded PRNG (not timed). Each variant
// writes the bytes to a file under --dir and reads them back into a
// preallocated buffer; the read result is verified against the input (XXH3-64,
// untimed). Variants run round-robin (one run of each per round, --warmup
// untimed rounds first, then --repeat timed rounds) and the median is reported,
// so load from other processes on a shared machine spreads over all variants.
// No variant fsyncs inside its timed region; after each timed write the bench
// fsyncs the file untimed, so writeback of one run does not land in the next
// run's timing. Reads therefore come from the page cache (the file was just
// written): they measure the CPU cost of the format, not the disk. Before each
// timed write the variant's file from the previous round is truncated
// (untimed), so every variant writes into page-cache pages freed a moment
// earlier (docs/benchmarks.md, "Page cache", says why that matters on a VM).
//
// GB/s are 10^9 bytes of input (uncompressed) per second of wall time.
// See docs/benchmarks.md for the recorded figures and what the targets are.

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
#include "container_bench.h"
#include "errors.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace {

using namespace kcap::bench;             // host helpers and data generation shared by the benchmarks
using namespace kcap::bench::container;  // this benchmark's configuration, data and variants (container_bench.h)
using kcap::format::TraceReader;
using kcap::format::TraceWriter;

// ---- configuration ---------------------------------------------------------------

void usage() {
  std::printf(
      "usage: kcap_bench_container [options]\n"
      "  --dir DIR        directory for the files written (default /tmp)\n"
      "  --level N        zstd level for every compressed variant (default 3)\n"
      "  --piece BYTES    container piece size and plain-zstd chunk size (default 1048576)\n"
      "  --repeat N       timings per variant; the median is reported (default 3)\n"
      "  --warmup N       untimed runs of each variant before the timed ones (default 1)\n"
      "  --mib N          total input size in MiB, a multiple of 8 (default 1024)\n"
      "  --threads LIST   container compressionThreads variants, comma separated;\n"
      "                   0 means the writer's default (default 1,0)\n"
      "  --no-control     skip the no-duplicates control table\n"
      "  --variants LIST  which variants run, comma separated, from raw,pieces,stream,container\n"
      "                   (default all; the target checks need pieces and container)\n"
      "  --seed N         data generator seed (default 1)\n"
      "  --keep           keep the files of the last round (default: removed)\n");
}

uint64_t parseU64(const std::string& flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0') fail(flag + ": not a number: " + text);
  return v;
}

std::vector<std::string> splitList(const std::string& list) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    items.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

bool wanted(const Config& c, const std::string& variant) {
  return std::find(c.variants.begin(), c.variants.end(), variant) != c.variants.end();
}

Config parseArgs(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) fail(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else if (a == "--dir") {
      c.dir = value();
    } else if (a == "--level") {
      c.level = static_cast<int>(parseU64(a, value()));
    } else if (a == "--piece") {
      c.piece = static_cast<uint32_t>(parseU64(a, value()));
    } else if (a == "--repeat") {
      c.repeat = static_cast<int>(parseU64(a, value()));
    } else if (a == "--warmup") {
      c.warmup = static_cast<int>(parseU64(a, value()));
    } else if (a == "--mib") {
      c.totalMiB = parseU64(a, value());
    } else if (a == "--threads") {
      c.threads.clear();
      for (const auto& item : splitList(value())) c.threads.push_back(static_cast<unsigned>(parseU64(a, item.c_str())));
    } else if (a == "--variants") {
      c.variants = splitList(value());
      for (const auto& item : c.variants) {
        if (item != "raw" && item != "pieces" && item != "stream" && item != "container") {
          fail("--variants: unknown variant " + item);
        }
      }
    } else if (a == "--no-control") {
      c.control = false;
    } else if (a == "--seed") {
      c.seed = parseU64(a, value());
    } else if (a == "--keep") {
      c.keep = true;
    } else {
      usage();
      fail("unknown option " + a);
    }
  }
  if (c.totalMiB == 0 || c.totalMiB % 8 != 0) fail("--mib must be a positive multiple of 8");
  if (c.repeat < 1) fail("--repeat must be at least 1");
  if (c.threads.empty()) fail("--threads needs at least one value");
  return c;
}

// ---- data ------------------------------------------------------------------------

Input generate(const Config& c, uint8_t* bytes) {
  Input in;
  in.bytes = bytes;
  in.size = c.totalMiB * kMiB;
  uint64_t activations = in.size / 8 * 3;
  uint64_t tensor = activations / 3 / kMiB * kMiB;
  uint64_t zeros = in.size / 8;
  uint64_t buffer = in.size / 4;
  in.bufferSize = buffer;
  uint64_t at = 0;
  auto add = [&](const std::string& name, uint64_t size, uint64_t address) {
    in.mixed.segments.push_back({name, at, size, address});
    at += size;
  };
  // Distinct allocations get distinct addresses; the second snapshot of B is
  // the same allocation seen again by a later launch.
  add("activations.0 (normal)", tensor, kDeviceBase + 0x00000000ull);
  add("activations.1 (post-ReLU)", tensor, kDeviceBase + 0x40000000ull);
  add("activations.2 (normal)", activations - 2 * tensor, kDeviceBase + 0x80000000ull);
  add("zeros", zeros, kDeviceBase + 0xc0000000ull);
  add("buffer B", buffer, kDeviceBase + 0x100000000ull);
  add("buffer B again", buffer, kDeviceBase + 0x100000000ull);
  in.mixed.name = "mixed";
  in.mixed.total = at;

  const auto& seg = in.mixed.segments;
  std::vector<std::thread> workers;  // one generator per segment, in parallel; each is seeded on its own
  workers.emplace_back([&] { fillHalfs(bytes + seg[0].offset, seg[0].size, c.seed * 16 + 0, false, 1.0); });
  workers.emplace_back([&] { fillHalfs(bytes + seg[1].offset, seg[1].size, c.seed * 16 + 1, true, 1.0); });
  workers.emplace_back([&] { fillHalfs(bytes + seg[2].offset, seg[2].size, c.seed * 16 + 2, false, 4.0); });
  workers.emplace_back([&] { std::memset(bytes + seg[3].offset, 0, seg[3].size); });
  workers.emplace_back([&] { fillHalfs(bytes + seg[4].offset, seg[4].size, c.seed * 16 + 4, false, 0.02); });
  for (auto& t : workers) t.join();
  std::memcpy(bytes + seg[5].offset, bytes + seg[4].offset, seg[5].size);
  in.mixed.checksum = XXH3_64bits(bytes, in.mixed.total);

  in.control.name = "control";
  in.control.segments.assign(seg.begin(), seg.begin() + 3);
  in.control.total = activations;
  in.control.checksum = XXH3_64bits(bytes, in.control.total);
  return in;
}

// ---- measurement -----------------------------------------------------------------

struct Result {
  std::string name;
  uint64_t bytesIn = 0;
  uint64_t bytesOut = 0;
  double writeWall = 0, writeUser = 0, writeSys = 0;  // medians, seconds
  double readWall = 0, readUser = 0, readSys = 0;
  double othersCores = 0;  // average CPU cores other processes used during the timed runs
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Runs every variant once per round, round after round (warmup rounds first,
// untimed), so that a burst of load from other processes on a shared machine
// lands on all variants alike rather than on whichever variant ran at the time.
std::vector<Result> measureAll(const std::vector<Variant>& variants, const Dataset& d, const Config& c, uint8_t* dst,
                               const std::string& pathPrefix) {
  struct Samples {
    std::vector<double> ww, wu, ws, rw, ru, rs;
    double othersBusy = 0, timedWall = 0;
  };
  std::vector<Result> results(variants.size());
  std::vector<Samples> samples(variants.size());
  for (int round = -c.warmup; round < c.repeat; ++round) {
    for (size_t k = 0; k < variants.size(); ++k) {
      const Variant& v = variants[k];
      Result& r = results[k];
      Samples& s = samples[k];
      std::string path = pathPrefix + "." + v.slug;
      // Untimed: empty this variant's file from the previous round right before
      // the timed write, which then reuses the page-cache pages just freed (see
      // "Page cache" in docs/benchmarks.md: on a VM that hands free memory back to
      // the host, pages freed long ago cost a host fault each on first touch).
      truncateIfExists(path);
      double b0 = systemBusySeconds();
      double w0 = wallNow();
      Cpu c0 = cpuNow();
      v.write(d, path);
      double w1 = wallNow();
      Cpu c1 = cpuNow();
      double b1 = systemBusySeconds();
      uint64_t size = fileSize(path);
      if (round > -c.warmup && size != r.bytesOut) fail(v.name + ": file size differs between runs");
      r.bytesOut = size;
      syncFile(path);  // untimed: keep this run's writeback out of the next timing
      std::memset(dst, 0xa5, d.total);
      double b2 = systemBusySeconds();
      double w2 = wallNow();
      Cpu c2 = cpuNow();
      v.read(d, path, dst);
      double w3 = wallNow();
      Cpu c3 = cpuNow();
      Cpu wcpu = c1 - c0, rcpu = c3 - c2;
      double b3 = systemBusySeconds();
      double others = std::max(0.0, (b1 - b0) - wcpu.total()) + std::max(0.0, (b3 - b2) - rcpu.total());
      if (XXH3_64bits(dst, d.total) != d.checksum) fail(v.name + ": the bytes read back differ from the input");
      std::fprintf(stderr,
                   "  %-28s %s %d: write %.3f s (user %.3f sys %.3f), read %.3f s (user %.3f sys %.3f), %llu bytes, "
                   "others %.2f cores\n",
                   v.name.c_str(), round < 0 ? "warmup" : "run", round < 0 ? round + c.warmup + 1 : round + 1, w1 - w0,
                   wcpu.user, wcpu.sys, w3 - w2, rcpu.user, rcpu.sys, static_cast<unsigned long long>(size),
                   others / ((w1 - w0) + (w3 - w2)));
      if (round < 0) continue;
      s.othersBusy += others;
      s.timedWall += (w1 - w0) + (w3 - w2);
      s.ww.push_back(w1 - w0);
      s.wu.push_back(wcpu.user);
      s.ws.push_back(wcpu.sys);
      s.rw.push_back(w3 - w2);
      s.ru.push_back(rcpu.user);
      s.rs.push_back(rcpu.sys);
    }
  }
  for (size_t k = 0; k < variants.size(); ++k) {
    if (!c.keep) ::unlink((pathPrefix + "." + variants[k].slug).c_str());
    Result& r = results[k];
    const Samples& s = samples[k];
    r.name = variants[k].name;
    r.bytesIn = d.total;
    r.writeWall = median(s.ww);
    r.writeUser = median(s.wu);
    r.writeSys = median(s.ws);
    r.readWall = median(s.rw);
    r.readUser = median(s.ru);
    r.readSys = median(s.rs);
    r.othersCores = s.othersBusy / s.timedWall;
  }
  return results;
}

double gbps(uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

void printTable(const std::string& title, const std::vector<Result>& results) {
  std::printf("\n%s\n\n", title.c_str());
  std::printf(
      "| variant | bytes in | bytes out | ratio | write GB/s | read GB/s | write CPU s user/sys | read CPU s user/sys "
      "| others |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : results) {
    std::printf("| %s | %llu | %llu | %.4f | %.3f | %.3f | %.2f / %.2f | %.2f / %.2f | %.2f |\n", r.name.c_str(),
                static_cast<unsigned long long>(r.bytesIn), static_cast<unsigned long long>(r.bytesOut),
                static_cast<double>(r.bytesOut) / static_cast<double>(r.bytesIn), gbps(r.bytesIn, r.writeWall),
                gbps(r.bytesIn, r.readWall), r.writeUser, r.writeSys, r.readUser, r.readSys, r.othersCores);
  }
  std::printf(
      "\nratio = bytes out / bytes in; GB/s = 10^9 input bytes per wall second (median); CPU s = process\n"
      "CPU time, all threads, user / system (medians); others = CPU cores other processes kept busy during\n"
      "the timed runs (machine noise: figures with others well above 0 are not trustworthy).\n");
  std::fflush(stdout);
}

void printMachine(const Config& c) {
  char date[64];
  std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&t));
  utsname u{};
  ::uname(&u);
  std::printf("kcap_bench_container\n\n");
  std::printf("- date: %s\n", date);
  std::printf("- host: %s, kernel %s\n", u.nodename, u.release);
  std::printf("- cpu: %s, nproc %ld, memory %s\n", cpuModel().c_str(), ::sysconf(_SC_NPROCESSORS_ONLN),
              memTotal().c_str());
  std::printf("- files in: %s (%s); reads come from the page cache\n", c.dir.c_str(), fsType(c.dir).c_str());
  std::printf("- load average at start: %s\n", loadAverage().c_str());
  std::printf("- zstd %s, xxhash %u, compiler %s, build %s\n", ZSTD_versionString(), XXH_versionNumber(), __VERSION__,
              KCAP_BENCH_BUILD_TYPE);
  std::printf(
      "- zstd level %d, piece %u bytes, %d warmup + %d timed runs per variant (median reported), "
      "container default compressionThreads = %u\n",
      c.level, c.piece, c.warmup, c.repeat, defaultCompressionThreads());
  std::fflush(stdout);
}

// ---- main ------------------------------------------------------------------------

struct Check {
  std::string what;
  bool met;
  std::string detail;
};

std::string pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", x * 100);
  return buf;
}

const Result* find(const std::vector<Result>& results, const std::string& name) {
  for (const auto& r : results) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

// Size and speed of the container (threads=1) against plain zstd per piece.
void compareWithZstd(const std::vector<Result>& results, const std::string& label, std::vector<Check>& checks) {
  const Result* zp = find(results, "zstd per piece");
  if (zp == nullptr) return;
  const Result& z = *zp;
  const Result* k = find(results, "container threads=1");
  for (const auto& r : results) {
    if (r.name.rfind("container", 0) != 0) continue;
    double s = static_cast<double>(r.bytesOut) / static_cast<double>(z.bytesOut) - 1;
    checks.push_back({label + ": " + r.name + " size within 5% of zstd per piece", s <= 0.05,
                      "container " + std::to_string(r.bytesOut) + " vs zstd " + std::to_string(z.bytesOut) +
                          " bytes (" + pct(s) + ")"});
  }
  if (k == nullptr) return;
  double w = gbps(k->bytesIn, k->writeWall) / gbps(z.bytesIn, z.writeWall) - 1;
  double r = gbps(k->bytesIn, k->readWall) / gbps(z.bytesIn, z.readWall) - 1;
  char detail[160];
  std::snprintf(detail, sizeof detail, "%.3f vs %.3f GB/s (%s)", gbps(k->bytesIn, k->writeWall),
                gbps(z.bytesIn, z.writeWall), pct(w).c_str());
  checks.push_back({label + ": container threads=1 write speed within 5% of zstd per piece", w >= -0.05, detail});
  std::snprintf(detail, sizeof detail, "%.3f vs %.3f GB/s (%s)", gbps(k->bytesIn, k->readWall),
                gbps(z.bytesIn, z.readWall), pct(r).c_str());
  checks.push_back({label + ": container threads=1 read speed within 5% of zstd per piece", r >= -0.05, detail});
}

// What the second snapshot of B adds to the file, untimed. (1) Writer stats
// around the second copy: flush before it and after its event. (2) The closed
// file's size with and without the second snapshot.
void dedup(const Input& in, const Config& c, const std::string& dpath, std::vector<Check>& checks) {
  unsigned dedupThreads = c.threads.front();
  TraceWriter::Stats before, after;
  double secondSeconds = 0;
  size_t second = in.mixed.segments.size() - 1;
  writeTrace(in, in.mixed, c, dedupThreads, dpath, [&](TraceWriter& w, size_t i) {
    if (i == second) {
      w.flush();
      before = w.stats();
      secondSeconds = wallNow();
    } else if (i == second + 1) {
      secondSeconds = wallNow() - secondSeconds;  // storeContent + append of the second copy
      w.flush();
      after = w.stats();
    }
  });
  // The flushes above cut extra record chunks; the file comparison uses plain writes.
  writeTrace(in, in.mixed, c, dedupThreads, dpath);
  uint64_t withSecond = fileSize(dpath);
  ::unlink(dpath.c_str());
  Dataset once = in.mixed;
  once.segments.pop_back();
  once.total -= in.bufferSize;
  writeTrace(in, once, c, dedupThreads, dpath);
  uint64_t withoutSecond = fileSize(dpath);
  ::unlink(dpath.c_str());
  uint64_t extraStats = after.fileBytes - before.fileBytes;
  uint64_t extraFile = withSecond - withoutSecond;
  double bufferBytes = static_cast<double>(in.bufferSize);

  std::printf("\nDedup: the second snapshot of buffer B (%llu bytes, container threads=%s)\n\n",
              static_cast<unsigned long long>(in.bufferSize), threadsLabel(dedupThreads).c_str());
  std::printf("- file bytes written for it (stats.fileBytes, flushed before and after): %llu (%.4f%% of B)\n",
              static_cast<unsigned long long>(extraStats), 100.0 * static_cast<double>(extraStats) / bufferBytes);
  std::printf("- new unique bytes %llu, new blob chunks %llu, new stored blob bytes %llu\n",
              static_cast<unsigned long long>(after.uniqueBytes - before.uniqueBytes),
              static_cast<unsigned long long>(after.blobChunks - before.blobChunks),
              static_cast<unsigned long long>(after.storedBlobBytes - before.storedBlobBytes));
  std::printf("- closed file with / without the second snapshot: %llu / %llu bytes, difference %llu (%.4f%% of B)\n",
              static_cast<unsigned long long>(withSecond), static_cast<unsigned long long>(withoutSecond),
              static_cast<unsigned long long>(extraFile), 100.0 * static_cast<double>(extraFile) / bufferBytes);
  std::printf("- storeContent + append of the second copy took %.3f s (%.2f GB/s: hashing only)\n", secondSeconds,
              gbps(in.bufferSize, secondSeconds));

  uint64_t extra = std::max(extraStats, extraFile);
  checks.push_back({"second copy of B costs under 1% of its size", static_cast<double>(extra) < 0.01 * bufferBytes,
                    std::to_string(extra) + " bytes (" + pct(static_cast<double>(extra) / bufferBytes) + " of B)"});
}

// The variants --variants asks for; the control table has no one-stream row.
std::vector<Variant> variantsWanted(const Input& in, const Config& c, bool withStream) {
  std::vector<Variant> variants;
  variants.reserve(3 + c.threads.size());
  if (wanted(c, "raw")) variants.push_back(rawVariant(in));
  if (wanted(c, "pieces")) variants.push_back(zstdPiecesVariant(in, c));
  if (withStream && wanted(c, "stream")) variants.push_back(zstdStreamVariant(in, c));
  if (wanted(c, "container")) {
    for (unsigned t : c.threads) variants.push_back(containerVariant(in, c, t));
  }
  return variants;
}

int run(const Config& c) {
  printMachine(c);
  uint64_t total = c.totalMiB * kMiB;
  std::fprintf(stderr, "generating %llu MiB of input...\n", static_cast<unsigned long long>(c.totalMiB));
  Buffer input = allocate(total);
  Buffer output = allocate(total);
  std::memset(output.get(), 0, total);  // fault the pages in now, not inside a timed read
  Input in = generate(c, input.get());

  std::printf("\nInput (%llu bytes, XXH3-64 %016llx):\n\n", static_cast<unsigned long long>(in.mixed.total),
              static_cast<unsigned long long>(in.mixed.checksum));
  for (const auto& s : in.mixed.segments) {
    std::printf("- %-26s %5llu MiB at device 0x%llx\n", s.name.c_str(), static_cast<unsigned long long>(s.size / kMiB),
                static_cast<unsigned long long>(s.address));
  }
  std::fflush(stdout);

  std::string path = c.dir + "/kcap_bench_" + std::to_string(::getpid());
  std::fprintf(stderr, "mixed input\n");
  std::vector<Result> mixed = measureAll(variantsWanted(in, c, true), in.mixed, c, output.get(), path + ".mixed");
  printTable("Mixed input (the benchmark): activations, zeros, buffer B twice", mixed);

  std::vector<Result> control;
  if (c.control) {
    std::fprintf(stderr, "control input\n");
    control = measureAll(variantsWanted(in, c, false), in.control, c, output.get(), path + ".control");
    printTable("Control: activations only (no duplicate or zero pieces, so dedup cannot help)", control);
  }

  std::vector<Check> checks;
  compareWithZstd(mixed, "mixed", checks);
  if (c.control) compareWithZstd(control, "control", checks);
  if (wanted(c, "container")) dedup(in, c, path + ".dedup", checks);

  std::printf("\nTargets\n\n");
  int missed = 0;
  for (const auto& ch : checks) {
    std::printf("- [%s] %s: %s\n", ch.met ? "met" : "MISSED", ch.what.c_str(), ch.detail.c_str());
    if (!ch.met) ++missed;
  }
  std::printf("\n%d of %zu targets met\n", static_cast<int>(checks.size()) - missed, checks.size());
  std::printf("load average at end: %s\n", loadAverage().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parseArgs(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kcap_bench_container: %s\n", e.what());
    return 1;
  }
}
