// What NCCL calls captured into CUDA graphs write, made readable after each
// launch of the graph (checkpoint mode).
//
// A collective on a capturing stream runs nothing: its kernels become nodes
// of the graph, and each launch of the graph writes the call's result anew.
// That result comes from other GPUs, so re-execution cannot recompute it, and
// it cannot be read after the graph either: later nodes may reuse the memory
// (decode graphs share one memory pool). So, right after the call's nodes,
// kcap captures one more node into the program's graph, a device-to-device
// copy of what the call wrote into device memory of its own (a "slot"), and
// reads the slot back after each launch of the graph, in stream order
// (written_readback.h). The program's own nodes and memory are untouched.
//
// A slot belongs to one captured call for the life of the process (a graph
// may be launched at any time). Slots together take at most a budget of the
// device's memory, and never more than a fraction of what is free: past it a
// call gets no slot, and its Collective event says why.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace kcap {

class CapturedCopies {
 public:
  // Captures, on `stream` (capturing), the copy of `size` bytes at `written`
  // into a new slot, whose address it sets. Returns why it could not ("" on
  // success).
  std::string add(CUstream stream, uint64_t written, uint64_t size, uint64_t& slot);

  // The size of the slot that starts at `address`, if one does: a memcpy
  // node into it is one of kcap's.
  std::optional<uint64_t> slotAt(uint64_t address) const;

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> slots_;  // address -> size
  uint64_t bytes_ = 0;
};

}  // namespace kcap
