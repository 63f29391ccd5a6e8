// The versions of the CUDA libraries loaded into the process (NCCL, cuDNN,
// cuBLASLt, the CUDA runtime), for the trace's traceBegin: which NCCL a
// rank ran is what a multi-process job's traces are compared by.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kcap {

struct LibraryVersions {
  std::vector<std::pair<std::string, std::string>> libraries;  // name -> "major.minor.patch"
  int runtimeVersion = 0;                                      // cudaRuntimeGetVersion's, 0 when not loaded
};

// Each known library the process has loaded, asked for its version by its
// own version function (which needs no initialization). Never loads a
// library: one not loaded is not listed.
LibraryVersions loadedLibraryVersions();

// A version number as these libraries encode it, as text: major * 10000 +
// minor * 100 + patch (NCCL from 2.9, cuDNN from 9, cuBLASLt), or with
// `thousandsMajor` major * 1000 + minor * 100 + patch (NCCL before 2.9,
// cuDNN 8). "" for a code <= 0.
std::string versionText(long long code, bool thousandsMajor = false);

}  // namespace kcap
