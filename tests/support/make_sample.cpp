// kcap_make_sample: writes the synthetic sample trace of sample_trace.h.
//
//   kcap_make_sample OUT.kcap [--preset compat|example|tiny]
//                    [--seed N] [--launches N] [--elements N] [--weights N]
//                    [--piece-size N] [--batch-bytes N] [--synthetic-images]
//                    [--kernels-dir DIR] [--no-index] [--uncompressed EVENTS_PER_CHUNK]
//                    [--cut BYTES]
//
// Presets (later options override them):
//   compat   tests/data/compat-v1.kcap: real images, 2 axpy launches, 1536 floats
//   example  examples/sample.kcap: real images, 4 axpy launches, 8192 floats
//   tiny     fuzz seeds: synthetic images, 1 launch, 256 floats, 1 KiB batches
// --no-index leaves the trace as a killed writer would (no traceEnd, no index);
// --uncompressed rewrites the result with uncompressed chunks (Codec::kNone,
// which the writer never produces) so the Cap'n Proto bytes are exposed: fuzz
// seeds whose mutations reach the message decoder.
// --cut truncates the result to BYTES bytes (a torn trace).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include "sample_trace.h"
#include "trace_files.h"

namespace {

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s OUT.kcap [--preset compat|example|tiny] [--seed N] [--launches N] [--elements N]\n"
               "       [--weights N] [--piece-size N] [--batch-bytes N] [--synthetic-images]\n"
               "       [--kernels-dir DIR] [--no-index] [--uncompressed EVENTS_PER_CHUNK] [--cut BYTES]\n",
               argv0);
  return 2;
}

unsigned long long number(const char* text, const char* what) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0') {
    throw std::runtime_error(std::string("bad number for ") + what + ": " + text);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage(argv[0]);
  const std::string out = argv[1];
  kcap::test::SampleOptions options;
  long long cut = -1;
  size_t uncompressed = 0;
  try {
    for (int i = 2; i < argc; ++i) {
      std::string arg = argv[i];
      auto value = [&]() -> const char* {
        if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--preset") {
        std::string p = value();
        if (p == "compat") {
          options.axpyLaunches = 2;
          options.elements = 1536;
          options.weightElements = 2048;
        } else if (p == "example") {
          options.axpyLaunches = 4;
          options.elements = 8192;
          options.weightElements = 8192;
          options.batchBytes = 16384;
        } else if (p == "tiny") {
          options.axpyLaunches = 1;
          options.elements = 256;
          options.weightElements = 256;
          options.batchBytes = 1024;
          options.realImages = false;
        } else {
          throw std::runtime_error("unknown preset " + p);
        }
      } else if (arg == "--seed") {
        options.seed = number(value(), "--seed");
      } else if (arg == "--launches") {
        options.axpyLaunches = static_cast<unsigned>(number(value(), "--launches"));
      } else if (arg == "--elements") {
        options.elements = static_cast<uint32_t>(number(value(), "--elements"));
      } else if (arg == "--weights") {
        options.weightElements = static_cast<uint32_t>(number(value(), "--weights"));
      } else if (arg == "--piece-size") {
        options.pieceSize = static_cast<uint32_t>(number(value(), "--piece-size"));
      } else if (arg == "--batch-bytes") {
        options.batchBytes = static_cast<size_t>(number(value(), "--batch-bytes"));
      } else if (arg == "--synthetic-images") {
        options.realImages = false;
      } else if (arg == "--kernels-dir") {
        options.kernelsDir = value();
      } else if (arg == "--no-index") {
        options.orderly = false;
      } else if (arg == "--uncompressed") {
        uncompressed = static_cast<size_t>(number(value(), "--uncompressed"));
        if (uncompressed == 0) throw std::runtime_error("--uncompressed needs at least 1 event per chunk");
      } else if (arg == "--cut") {
        cut = static_cast<long long>(number(value(), "--cut"));
      } else {
        return usage(argv[0]);
      }
    }
    if (options.realImages && options.kernelsDir.empty() && !kcap::test::haveKernelImages()) {
      std::fprintf(stderr, "%s: this build has no kernel images; using synthetic ones\n", argv[0]);
    }
    kcap::test::writeSampleTrace(out, options);
    if (uncompressed > 0) {
      const std::string tmp = out + ".tmp";
      kcap::test::rewriteUncompressed(out, tmp, uncompressed, options.orderly);
      if (std::rename(tmp.c_str(), out.c_str()) != 0) {
        throw std::runtime_error(out + ": rename: " + std::strerror(errno));
      }
    }
    if (cut >= 0 && ::truncate(out.c_str(), static_cast<off_t>(cut)) != 0) {
      throw std::runtime_error(out + ": truncate: " + std::strerror(errno));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  std::printf("%s: %llu events\n", out.c_str(), static_cast<unsigned long long>(kcap::test::sampleEventCount(options)));
  return 0;
}
