// `kcap extract` on a checkpoint trace: a launch's memory, rebuilt.
//
// A checkpoint trace holds no launch's memory, only checkpoints and the log
// between them. To extract launch N as a full-mode trace (which every tool
// and checker takes), its pre-state is rebuilt by re-execution (the last
// intact checkpoint before N, then every logged event up to N), its
// post-state is what running N leaves, and re-execution goes on to the next
// checkpoint, so that the interval the memory was rebuilt in is verified.
// What N can reach is what full mode would snapshot: the allocations its
// pointer words point into (as the trace's checkpoints and allocations
// know them) and its module's globals. Needs the GPU (replay/reexecute.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hash.h"
#include "kcap.capnp.h"
#include "trace_model.h"
#include "trace_writer.h"

namespace kcap::replay {

struct RebuiltRange {
  uint64_t address = 0;
  uint64_t allocationBase = 0;
  schema::MemoryKind kind = schema::MemoryKind::ALLOCATION;
  uint64_t size = 0;
  uint32_t pieceSize = 0;
  std::vector<format::Hash128> pieces;  // stored in the writer given to rebuildLaunch

  void writeTo(schema::MemoryRange::Builder out) const;
};

struct RebuiltLaunch {
  std::vector<RebuiltRange> pre, post;
  std::string verification;  // the interval's verdict line, e.g. "interval 3 (...): REPRODUCED (...)"
  bool verified = false;     // that interval reproduced
  bool ran = false;          // the launch ran (no fault before or in it)
  std::string fault;         // what stopped re-execution, when it did not run cleanly
  std::vector<std::string> notes;
};

// Rebuilds launch `launchIndex` of the checkpoint trace at `tracePath` (its
// model `model`) on GPU `device`, storing the memory in `writer`. Throws
// ReplayError when it cannot (no intact checkpoint before it, no driver).
RebuiltLaunch rebuildLaunch(const TraceModel& model, const std::string& tracePath, uint64_t launchIndex, int device,
                            format::TraceWriter& writer);

}  // namespace kcap::replay
