// What `kcap info` reports about a trace, as data: event counts, the recorded
// environment, modules, kernels and their GPU time, memory traffic and how the
// file stores its bytes. Built in one pass over the events (summarizeTrace);
// the text and JSON presentations (tools/info.cpp) only format it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <capnp/message.h>

#include "kcap.capnp.h"

namespace kcap::format {

class TraceReader;

struct ModuleSummary {
  uint64_t seq = 0;
  uint64_t handle = 0;
  bool isLibrary = false;
  std::string api;
  std::string imageKind;
  uint64_t imageBytes = 0;
  size_t extraImages = 0;
  std::string path;
  size_t globals = 0;
  int32_t result = 0;
  bool unloaded = false;
};

struct KernelSummary {
  std::string name;  // "<function 0x...>" when the launch recorded none
  uint64_t launches = 0;
  uint64_t firstLaunchIndex = 0;
  uint32_t grid[3] = {};
  uint32_t block[3] = {};
  uint32_t sharedMemBytes = 0;
  std::vector<uint64_t> durationsNs;  // kernelTiming of its launches (--timing)
  uint64_t totalNs = 0;
};

struct CountBytes {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct TraceEndSummary {
  uint64_t seq = 0;
  std::string reason;
  int32_t signal = 0;
  uint64_t eventCount = 0;
  uint64_t launchCount = 0;
  uint64_t droppedLaunches = 0;
  std::string message;
};

struct TriggerSummary {
  uint64_t seq = 0;
  uint64_t timeNs = 0;
  std::string kind;  // enumerant name: api, error, signal, exit, hang
  std::string reason;
  uint64_t droppedEvents = 0;
};

// CUDA graphs: executables, their definitions' nodes, their launches.
struct GraphsSummary {
  uint64_t executables = 0;         // distinct graphExec values with a definition
  uint64_t definitions = 0;         // graphDefine events that succeeded
  uint64_t incomplete = 0;          // of those, not complete (a node not recorded)
  uint64_t updates = 0;             // graphNodeUpdate events that succeeded
  uint64_t launches = 0;            // graphLaunch events
  uint64_t launchesWithMemory = 0;  // with their memory before them (full mode)
  // Nodes of every definition by kind ("kernel", "memcpy", ...), nested
  // bodies included (to a depth of 16).
  std::map<std::string, uint64_t> nodesByKind;
};

// What NCCL calls and copies from another device wrote into this process's
// memory, and how much of it the trace holds (checkpoint mode logs it, in
// the event or in a later writtenData event).
struct ExternalWritesSummary {
  uint64_t collectives = 0;
  std::map<std::string, uint64_t> collectivesByOperation;  // enumerant name -> calls
  uint64_t collectiveBytes = 0;                            // written on this rank, all calls
  uint64_t crossDeviceCopies = 0;
  uint64_t crossDeviceBytes = 0;
  CountBytes logged;           // calls and copies whose bytes the trace holds
  uint64_t readBackLater = 0;  // of those that wrote, marked dataDeferred
  uint64_t notLogged = 0;      // checkpoint mode: bytes missing (the reason is in the trace), or never read back
  // NCCL calls captured into graphs with kcap's copy after them
  // (Collective.capturedCopy), and their bytes read back after each graph
  // launch (writtenData naming a node; missing ones count in notLogged).
  uint64_t captured = 0;
  std::set<uint64_t> capturedSlots;  // the slots those copies write: graphs captured alike share them
  CountBytes graphReadBacks;
};

struct TraceSummary {
  // events
  uint64_t events = 0;
  std::map<uint16_t, uint64_t> byType;  // union discriminant -> count
  uint64_t firstTimeNs = 0;
  uint64_t lastTimeNs = 0;
  std::unique_ptr<capnp::MallocMessageBuilder> begin;  // a copy of the first traceBegin
  uint64_t beginSeq = 0;
  std::optional<TraceEndSummary> end;

  // code
  std::vector<ModuleSummary> modules;
  uint64_t functionBinds = 0;

  // launches
  uint64_t launches = 0;
  uint64_t failedLaunches = 0;
  uint64_t capturedIntoGraph = 0;
  std::map<int32_t, uint64_t> launchesByDevice;  // Launch.device -> launches
  std::vector<KernelSummary> kernels;            // in order of first launch
  uint64_t timedLaunches = 0;                    // kernelTiming events matched to a launch
  uint64_t timedTotalNs = 0;

  GraphsSummary graphs;
  ExternalWritesSummary externalWrites;

  // memory
  std::map<std::string, CountBytes> allocByKind;
  CountBytes allocTotal;
  uint64_t failedAllocs = 0;
  uint64_t frees = 0;
  uint64_t peakLiveBytes = 0;
  // Checkpoint mode: allocations made after the first checkpoint that log
  // their first content (Alloc.initial, or a WrittenData completing one
  // marked initialDeferred: `readBack` of them), and those whose read-back
  // holds no bytes or never came.
  CountBytes firstContents;
  uint64_t firstContentsReadBack = 0;
  uint64_t firstContentsMissing = 0;
  // Stream-ordered allocations captured into graphs (Alloc.captured): the
  // graphs' own memory, which their launches make.
  CountBytes graphMemory;
  std::map<std::string, CountBytes> memcpyByDirection;
  CountBytes memcpyTotal;
  uint64_t memcpyCapturedBytes = 0;
  CountBytes memsetTotal;

  // checkpoint mode and the flight recorder
  uint64_t checkpoints = 0;
  uint64_t incompleteCheckpoints = 0;  // result != 0
  uint64_t checkpointChangedBytes = 0;
  uint64_t checkpointMaxBytes = 0;  // the largest checkpoint's live memory
  uint64_t checkpointMaxHoldNs = 0;
  uint64_t checkpointHoldNs = 0;  // all checkpoints together
  int32_t checkpointDevice = -1;  // the device whose memory the first checkpoint holds
  std::vector<TriggerSummary> triggers;

  // bytes
  uint64_t contentRaw = 0;
  std::map<std::string, uint64_t> contentRawByType;  // event type -> raw bytes of its contents
  uint64_t blobChunks = 0;
  uint64_t blobRaw = 0;
  uint64_t blobStored = 0;
  uint64_t recordChunks = 0;
  uint64_t recordRaw = 0;
  uint64_t recordStored = 0;

  // The recorded traceBegin, or nullopt when the trace has none.
  std::optional<schema::TraceBegin::Reader> traceBegin() const;
};

// Reads every event of `reader` and its chunk list. `alsoEach`, when set,
// is handed every event too: a consumer that needs more than the summary
// (each rank's launch order, for `kcap ranks`) still reads the trace once.
TraceSummary summarizeTrace(TraceReader& reader, const std::function<void(schema::Event::Reader)>& alsoEach = {});

// Kernels, most launches first (first launched first among equals).
std::vector<const KernelSummary*> kernelsByCount(const TraceSummary& summary);
// Kernels with durations, most GPU time first.
std::vector<const KernelSummary*> kernelsByGpuTime(const TraceSummary& summary);
// The upper median for an even count: a duration that occurred.
uint64_t medianNs(std::vector<uint64_t> values);
// (event type name or "unknown(N)", count), most frequent first.
std::vector<std::pair<std::string, uint64_t>> eventTypesByCount(const TraceSummary& summary);

}  // namespace kcap::format
