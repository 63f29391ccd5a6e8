// What each executable graph's nodes can touch, kept from the moment it is
// made (and changed with it) so that a graph launch can snapshot the memory
// its nodes reach (full mode) and read what its host-source copy nodes copy
// (full and checkpoint modes) without asking the driver anything.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kcap {

// The rows a copy reads from host memory: `depth` slices (0: one) of
// `height` rows (0 or 1 for 1D: one) of `width` bytes, rows `pitch` bytes
// apart and slices `pitch * sliceHeight`; 1D copies give width = size.
struct HostRows {
  uint64_t size = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t depth = 0;
  uint64_t pitch = 0;
  uint64_t sliceHeight = 0;
};

// The rows as the trace stores a copy's data: packed, slice after slice,
// `size` bytes (the gaps between rows were never copied and may not be
// readable). Returns `source` itself when the rows are contiguous.
const uint8_t* packHostRows(const void* source, const HostRows& rows, std::vector<uint8_t>& packed);

struct GraphNodeReach {
  uint64_t handle = 0;
  std::vector<uint64_t> addresses;  // device addresses it names: pointer words, copy and memset sides
  CUfunction function = nullptr;    // a kernel node's: its module's globals are in reach
  // A memcpy node with a host source: where it reads, and the copy's shape.
  const void* hostSource = nullptr;
  HostRows rows;
  // A copy kcap captured after an NCCL call (captured_copies.h): the slot
  // it writes, read back after each launch.
  uint64_t readBackSlot = 0;
  uint64_t readBackSize = 0;
  // An allocation node: the memory each launch makes (until a free node or
  // a later free); a free node: the address it frees.
  uint64_t allocates = 0;
  uint64_t allocationSize = 0;
  int allocationDevice = -1;
  uint64_t frees = 0;
};

// What one launch of a graph does to the process's memory, node by node in
// definition order: an allocation node's memory made, or a free node's
// address freed (`size` 0).
struct GraphMemoryChange {
  uint64_t address = 0;
  uint64_t size = 0;
  int device = -1;
};

// A graph being read into a definition: whether every node could be, and
// each node's reach in the order written (nested bodies after their node).
struct GraphWalk {
  bool complete = true;
  std::vector<GraphNodeReach> nodes;
};

class GraphReach {
 public:
  // An executable made, or updated as a whole (cuGraphExecUpdate: `paired`,
  // its nodes pair by position with the previous definition's, whose
  // handles then keep naming them).
  void define(uint64_t exec, std::vector<GraphNodeReach> nodes, bool paired);
  // One node changed (its handle as the update named it).
  void update(uint64_t exec, uint64_t node, GraphNodeReach reach);
  // The executable's nodes now; empty for one never defined.
  std::vector<GraphNodeReach> of(uint64_t exec) const;
  // The executable's allocation and free nodes; empty (without taking the
  // lock while no executable has any) for one without.
  std::vector<GraphMemoryChange> memoryOf(uint64_t exec) const;

 private:
  struct Exec {
    std::vector<GraphNodeReach> nodes;              // in definition order (nested bodies flattened)
    std::unordered_map<uint64_t, size_t> byHandle;  // every handle that names a node, old ones included
    std::vector<GraphMemoryChange> memory;          // its allocation and free nodes (a launch reads only these)
  };
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Exec> execs_;
  std::atomic<size_t> memoryNodes_{0};  // allocation and free nodes over every executable's definition
};

}  // namespace kcap
