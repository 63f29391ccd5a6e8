// `kcap extract`: a minimal, self-contained trace of selected launches.
//
// The output holds only what replaying the selection needs, plus the
// environment: the traceBegin (with where it came from), the ModuleLoads the
// launches' code resolves to, the FunctionBind chain of each launch handle,
// the FunctionAttributes that apply to it, the Allocs of the allocations the
// launches reach (for `kcap info`), the Launch, LaunchEnd and KernelTiming
// events, and for a range the Memcpy/Memset events between its first and last
// launch (what a sequence replay re-applies); then a traceEnd (explicit).
// Events keep their handles, launchIndex values, times and contents; only
// seq is renumbered. Memory pieces are copied as stored (no recompression),
// so every content hash stays the same. Pure host code: no driver, except
// for a checkpoint trace (capture mode checkpoint), whose launch's memory
// is rebuilt by re-execution on a GPU (extract_rebuild.h) and written as a
// full-mode trace: one launch at a time. A kernel node of a graph launch is
// extracted as a plain launch (extract_graph_node.h says with which memory).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kcap::replay {

struct ExtractRequest {
  std::string source;                                  // the trace to read
  std::string output;                                  // written atomically (temp file + rename)
  std::vector<uint64_t> launches;                      // --launch N (repeatable): these, each on its own
  std::optional<std::pair<uint64_t, uint64_t>> range;  // --range A..B: a sequence
  int zstdLevel = 3;                                   // for the record chunks (pieces are copied as stored)
  int device = 0;                                      // checkpoint traces: the GPU that rebuilds the launch
  // --graph-launch G --node K: that kernel node as launch 0 (extract_graph_node.h).
  std::optional<uint64_t> graphLaunch;
  std::string node;  // "3", or a nested node's path ("node 3 > node 0")
};

struct ExtractResult {
  std::string selection;             // "3", "3,7" (trace order), "2..4" (as asked)
  std::vector<uint64_t> launches;    // the launchIndex values extracted, trace order
  uint64_t events = 0;               // events written, traceEnd included
  uint64_t modules = 0;              // ModuleLoad events written
  uint64_t pieces = 0;               // memory pieces copied
  uint64_t bytes = 0;                // size of the output file
  uint64_t sourceEvents = 0;         // events read from the source
  uint64_t sourceBytes = 0;          // size of the source file
  std::vector<std::string> skipped;  // what of the source could not be carried over, and why
  // Checkpoint traces: the verdict of the interval the memory was rebuilt
  // in, and what re-execution said on the way.
  std::string rebuiltVerification;
  std::vector<std::string> rebuildNotes;
  // A graph node: why the extract holds no post-state to compare with; empty when it holds one.
  std::string notCompared;
};

// The request cannot be done as asked (an unknown launch, the output is the
// input): nothing was written. Other failures throw format::FormatError (the
// source cannot be read, the output cannot be written) and leave no output.
class ExtractUsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

ExtractResult extract(const ExtractRequest& request);

}  // namespace kcap::replay
