// Each recorded launch together with what later events say of it: its
// launchEnd (result, when the call returned; in metadata and checkpoint
// modes the launch event says that itself) and its kernelTiming (GPU start
// and end, --timing). Those events come later in the file than the launch,
// timings in any order, so a consumer that wants a launch whole (the timeline
// export, the Python module) needs this table rather than the events alone.
//
// It is fed events one at a time (add), so that a consumer that also looks
// at other events reads the trace once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <capnp/message.h>

#include "kcap.capnp.h"

namespace kcap::format {

class TraceReader;

struct LaunchRecord {
  uint64_t seq = 0;  // of the launch event
  uint64_t launchIndex = 0;
  uint64_t timeNs = 0;  // the launch call, trace-relative host time
  uint32_t threadId = 0;
  std::string kernelName;  // launchKernelName()
  uint64_t function = 0;
  uint64_t stream = 0;
  int32_t device = 0;
  bool perThreadStream = false;
  bool capturing = false;  // captured into a graph: not executed
  uint32_t grid[3] = {};
  uint32_t block[3] = {};
  uint32_t sharedMemBytes = 0;

  bool ended = false;   // the call's outcome was read: a launchEnd, or the launch's own (Launch.ended)
  uint64_t endSeq = 0;  // of the event that said so
  uint64_t endTimeNs = 0;
  int32_t result = 0;

  bool timed = false;  // a kernelTiming was read
  uint64_t gpuStartNs = 0;
  uint64_t gpuEndNs = 0;  // never before gpuStartNs (a timing that says so is not kept)

  // Copies of the launch and launchEnd bodies, with LaunchTable's keepMessages.
  std::shared_ptr<capnp::MallocMessageBuilder> launchMessage;
  std::shared_ptr<capnp::MallocMessageBuilder> endMessage;
  std::optional<schema::Launch::Reader> launch() const;
  std::optional<schema::LaunchEnd::Reader> end() const;  // none where the launch carries its outcome
};

// The name a launch is listed under: its kernelName, or "<function 0x...>"
// when it recorded none.
std::string launchKernelName(schema::Launch::Reader launch);

class LaunchTable {
 public:
  // keepMessages: keep a copy of each launch's Launch and LaunchEnd (its
  // parameters and memory ranges), for consumers that show them.
  explicit LaunchTable(bool keepMessages = false) : keepMessages_(keepMessages) {}

  // Takes launch, launchEnd and kernelTiming events; returns false (and does
  // nothing) for any other event.
  bool add(schema::Event::Reader event);

  // In file order. A launchIndex met twice (a damaged trace) gives two
  // records; later launchEnd and kernelTiming events go to the newer one.
  const std::vector<LaunchRecord>& launches() const { return launches_; }
  std::vector<LaunchRecord>& launches() { return launches_; }
  const LaunchRecord* find(uint64_t launchIndex) const;

  uint64_t orphanEnds() const { return orphanEnds_; }        // launchEnds of no launch read
  uint64_t orphanTimings() const { return orphanTimings_; }  // kernelTimings of no launch read
  uint64_t badTimings() const { return badTimings_; }        // end before start

 private:
  bool keepMessages_;
  std::vector<LaunchRecord> launches_;
  std::unordered_map<uint64_t, size_t> byIndex_;  // launchIndex -> newest record
  uint64_t orphanEnds_ = 0;
  uint64_t orphanTimings_ = 0;
  uint64_t badTimings_ = 0;
};

// Every intact event of `reader` through a LaunchTable.
LaunchTable readLaunchTable(TraceReader& reader, bool keepMessages);

}  // namespace kcap::format
