// The Recorder: turns the driver calls the observers see into trace events.
//
// Life cycle (process/lifecycle.h decides when, recorder.cpp does it):
//   - It starts lazily, at the first hooked call that matters once the driver
//     is initialized (never from dlsym, cuGetProcAddress or a constructor),
//     and only when KCAP_OUTPUT is set; otherwise the shim stays a pure
//     pass-through. Invalid KCAP_* values: one "kcap: ..." line, no recording.
//   - traceBegin is event 0. Every event carries the calling thread and the
//     time since the trace started.
//   - It ends once: at exit, on a fatal signal (process/), or on an
//     internal failure (one "kcap: ..." line; calls keep passing
//     through). Ending writes traceEnd and closes the file. In the child of
//     a fork the parent's recorder is abandoned untouched; the child starts
//     its own trace if it makes CUDA calls.
//
// Thread model: any number of threads call in at once. There is no global
// lock: state is kept in maps with their own short-held locks (what it
// knows of the program's code, in the code registry), events are
// built by the calling thread and handed to the TraceWriter, which assigns
// the sequence numbers with one atomic add and orders the events on its
// merger thread. A recorded launch in metadata and checkpoint mode writes
// no cache line another launching thread writes but for that add: the
// allocation lookups read a published snapshot (AllocationMap), launches
// are numbered by the writer (sequenced()). Still shared, where they are
// asked for: kernel filters (selectionMutex_), KCAP_STATS_FILE's counters,
// the eligible-launch count with a launch range, CUPTI timing or
// checkpoints every N launches, and the tensor-map lookup once the program
// encoded more distinct tensor maps than KnownTensorMaps' lock-free table
// holds. The recorder never holds one of its locks while it calls the
// driver.
//
// The Recorder is never destroyed (threads may still call in while the
// process exits); an ended or abandoned recorder just stops accepting work.
#pragma once

#include "core/allocation_map.h"
#include "core/capture_options.h"
#include "core/collective_call.h"
#include "core/param_buffer.h"
#include "core/pointer_scanner.h"
#include "core/thread_work.h"
#include "core/trace_clock.h"
#include "hooks/hook_table.h"
#include "record/checkpoint.h"
#include "record/code_registry.h"
#include "record/driver_api.h"
#include "record/freed_pool_memory.h"
#include "record/graph_reach.h"
#include "record/host_waiters.h"
#include "record/launch_outcome.h"
#include "record/memory_snapshot.h"
#include "record/captured_copies.h"
#include "record/written_readback.h"

#include "kcap.capnp.h"
#include "ring_trace_writer.h"
#include "trace_writer.h"

#include <capnp/message.h>
#include <cuda.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kcap {

class Recorder;
class HangWatchdog;

// One event being built: an Event message with time and thread set.
class EventMessage {
 public:
  // `fromProgram`: the event stands for a call of the program's (threadId
  // set); false for events the shim makes itself (threadId 0).
  explicit EventMessage(const Recorder& recorder, bool fromProgram = true);
  schema::Event::Builder event() { return event_; }
  capnp::MallocMessageBuilder& message() { return message_; }

 private:
  capnp::MallocMessageBuilder message_;
  schema::Event::Builder event_;
};

// What a launch needs to know of its handle, found once per handle and
// thread (Recorder::launchTarget).
struct LaunchTarget {
  std::string_view kernelName;  // interned by the code registry: lives as long as the process
  FunctionInfo info;
  bool waitsForHost = false;  // host_waiters.h: found by name once per handle, not per launch
  bool nccl = false;          // format::isNcclKernel, the same way
};

// ---- calls, as the observers hand them over -----------------------------------

struct ModuleLoadCall {
  schema::LoadApi api = schema::LoadApi::UNKNOWN;
  CUresult result = CUDA_SUCCESS;
  uint64_t handle = 0;  // CUmodule or CUlibrary
  bool isLibrary = false;
  const void* image = nullptr;  // loads from memory
  const char* path = nullptr;   // loads from a file
  unsigned jitOptionCount = 0;
  const CUjit_option* jitOptions = nullptr;
  void* const* jitValues = nullptr;
};

struct AllocCall {
  schema::AllocKind kind = schema::AllocKind::MEM_ALLOC;
  CUresult result = CUDA_SUCCESS;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t pitch = 0;
  uint64_t stream = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t flags = 0;
  int device = -1;  // -1: the current context's device
};

struct FreeCall {
  schema::AllocKind kind = schema::AllocKind::MEM_ALLOC;
  CUresult result = CUDA_SUCCESS;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t handle = 0;
};

struct CopyCall {
  // UNKNOWN: cuMemcpy or a 2D/3D copy with a unified side, decided here
  schema::CopyDirection direction = schema::CopyDirection::UNKNOWN;
  // A side is a CUDA array (its address 0): kept UNKNOWN, without data.
  bool array = false;
  CUresult result = CUDA_SUCCESS;
  uint64_t dst = 0;  // of the first byte copied (2D/3D: row 0 of slice 0)
  uint64_t src = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  bool isAsync = false;
  // 2D and 3D copies: bytes per row, rows, and the pitches of the two sides
  // (the host source's rows are srcPitch apart); all 0 for 1D.
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t dstPitch = 0;
  uint64_t srcPitch = 0;
  // 3D copies: slices of `height` rows, and the rows from one slice to the
  // next on each side (the host source's slices are srcPitch * srcHeight
  // apart); all 0 for 1D and 2D.
  uint64_t depth = 0;
  uint64_t dstHeight = 0;
  uint64_t srcHeight = 0;
};

// A CUDA_MEMCPY2D / CUDA_MEMCPY3D as a CopyCall (copy_calls.cpp): the shape,
// each side's first byte copied, the direction the memory types give (a
// unified side left UNKNOWN for the recorder, an array side `array`).
// `hostSource`: the source's host pointer when it is host memory, else null.
CopyCall copyCallOf(const CUDA_MEMCPY2D& copy, const void*& hostSource);
CopyCall copyCallOf(const CUDA_MEMCPY3D& copy, const void*& hostSource);
// The rows a copy reads from its source (graph_reach.h).
inline HostRows hostRowsOf(const CopyCall& call) {
  return {.size = call.size,
          .width = call.width,
          .height = call.height,
          .depth = call.depth,
          .pitch = call.srcPitch,
          .sliceHeight = call.srcHeight};
}
// A Memcpy's fields from a call whose direction is decided (record_memory.cpp).
void writeCopyShape(schema::Memcpy::Builder copy, const CopyCall& call, schema::CopyDirection direction);

struct SetCall {
  CUresult result = CUDA_SUCCESS;
  uint64_t dst = 0;
  uint32_t value = 0;
  uint8_t elementSize = 1;
  uint64_t count = 0;  // elements per row
  uint64_t height = 1;
  uint64_t pitch = 0;  // 0 for 1D
  uint64_t stream = 0;
  bool isAsync = false;
};

struct SyncCall {
  schema::SyncKind kind = schema::SyncKind::STREAM_SYNCHRONIZE;
  CUresult result = CUDA_SUCCESS;
  uint64_t stream = 0;
  uint64_t event = 0;
  uint32_t flags = 0;
  int32_t priority = 0;
};

// cuTensorMapEncode{Tiled,Im2col,Im2colWide}: the arguments as passed. The
// list pointers are read only for rank <= 5 (the driver's limit).
struct TensorMapEncodeCall {
  schema::TensorMapApi api = schema::TensorMapApi::TILED;
  CUresult result = CUDA_SUCCESS;
  const CUtensorMap* map = nullptr;
  int32_t dataType = 0;
  uint32_t rank = 0;
  uint64_t globalAddress = 0;
  const cuuint64_t* globalDim = nullptr;
  const cuuint64_t* globalStrides = nullptr;
  const cuuint32_t* boxDim = nullptr;  // tiled
  const cuuint32_t* elementStrides = nullptr;
  const int* lowerCorner = nullptr;  // im2col
  const int* upperCorner = nullptr;
  int32_t lowerCornerWidth = 0;  // im2colWide
  int32_t upperCornerWidth = 0;
  uint32_t channelsPerPixel = 0;  // im2col forms
  uint32_t pixelsPerColumn = 0;
  int32_t interleave = 0;
  int32_t swizzle = 0;
  int32_t l2Promotion = 0;
  int32_t oobFill = 0;
  int32_t im2colWideMode = 0;
};

struct LaunchCall {
  schema::LaunchApi api = schema::LaunchApi::LAUNCH_KERNEL;
  bool perThreadStream = false;
  CUfunction function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned sharedMemBytes = 0;
  CUstream stream = nullptr;
  void* const* kernelParams = nullptr;
  void* const* extra = nullptr;
  const CUlaunchAttribute* attributes = nullptr;
  unsigned attributeCount = 0;
};

// cuGraphInstantiate*, or a successful cuGraphExecUpdate (record_graph.cpp).
struct GraphDefineCall {
  schema::GraphDefineApi api = schema::GraphDefineApi::INSTANTIATE;
  CUresult result = CUDA_SUCCESS;
  CUgraphExec exec = nullptr;
  CUgraph graph = nullptr;
  uint64_t flags = 0;
};

// A cuGraphExec*SetParams-style call: `params` holds the node's new
// parameters in the generic form (its `type` set), whichever setter the
// program called; unused for kind enable.
struct GraphNodeUpdateCall {
  schema::GraphUpdateApi api = schema::GraphUpdateApi::KERNEL_PARAMS;
  CUresult result = CUDA_SUCCESS;
  CUgraphExec exec = nullptr;
  CUgraphNode node = nullptr;
  const CUgraphNodeParams* params = nullptr;
  bool enabled = true;
};

// A kernel node's parameters in the generic form (record_graph.cpp).
CUDA_KERNEL_NODE_PARAMS_v3 kernelNodeParams(const CUDA_KERNEL_NODE_PARAMS_v2& params);
// A launch's parameter bytes, layout and pointer words (launch_capture.cpp).
void writeLaunchParams(schema::Launch::Builder launch, const ParamBuffer& params,
                       std::span<const ParamPointer> pointers);

struct GraphLaunchCall {
  CUgraphExec exec = nullptr;
  CUstream stream = nullptr;
  bool perThreadStream = false;
};

// A graph launch between its start and its end (graph_launch.cpp).
struct PendingGraphLaunch {
  Recorder* recorder = nullptr;
  uint64_t index = 0;
  CUstream syncStream = nullptr;
  CUgraphExec exec = nullptr;
  CUstream stream = nullptr;  // as passed
  bool perThreadStream = false;
  // Metadata mode, or a capturing stream: only the launch's facts, handed
  // to the writer with its result after the call (`stamp`: when it began).
  bool factsOnly = false;
  bool capturing = false;  // into a capturing stream: the graph does not run
  uint64_t stamp = 0;
  // Checkpoint mode: the GraphLaunch event (with its host copies), written
  // after the call with its result. Full mode writes it before the call.
  std::unique_ptr<EventMessage> event;
  // Checkpoint mode: the slots of kcap's copy nodes in the graph (node
  // handle, slot), read back once the launch is queued.
  std::vector<std::pair<uint64_t, WrittenReadback::Region>> readBacks;
  std::unique_lock<std::mutex> slotOrder;  // CapturedCopies::beforeLaunch, until the read-backs are queued
  bool postSnapshot = false;               // full mode: the pre snapshot was taken whole
  std::vector<SnapshotRange> ranges;
};

// Conditional nodes: the driver has no query for their parameters, so the
// shim remembers them from the calls that made them, recording or not
// (record_graph.cpp).
void conditionalNodeAdded(CUgraphNode node, const CUDA_CONDITIONAL_NODE_PARAMS& params);
void conditionalHandleCreated(CUgraphConditionalHandle handle, unsigned defaultValue, unsigned flags);

// A launch between its Launch event and its LaunchEnd (launch_capture.cpp).
// The observers keep one per launch in progress on a thread, reused from
// launch to launch (observers.cpp).
struct PendingLaunch {
  Recorder* recorder = nullptr;  // nullptr: the launch is not recorded
  uint64_t launchIndex = 0;
  CUstream syncStream = nullptr;      // the launch's stream, per-thread default resolved
  bool postSnapshot = false;          // full mode, not capturing
  bool executes = false;              // not captured into a graph: its duration is wanted
  bool timed = false;                 // a CUPTI correlation id was pushed around the real call
  bool readsHostMemory = false;       // checkpoint mode: it can reach page-locked host memory
  bool waitsForHost = false;          // a kernel that waits for the host (host_waiters.h)
  std::vector<SnapshotRange> ranges;  // what `pre` covered
  // Metadata and checkpoint modes: the launch's event, handed to the
  // writer before the call, takes its outcome here after the call (set
  // once the hand-over succeeded; cleared once the outcome is stored).
  LaunchOutcome* outcome = nullptr;
  bool endsInLaunch = false;  // the outcome is the launch's only end: no LaunchEnd event

  void reset() {
    recorder = nullptr;
    launchIndex = 0;
    syncStream = nullptr;
    postSnapshot = false;
    executes = false;
    timed = false;
    readsHostMemory = false;
    waitsForHost = false;
    ranges.clear();
    outcome = nullptr;
    endsInLaunch = false;
  }
};

class Recorder {
 public:
  // The recording in progress, started on first use; nullptr when the shim
  // does not record (off, not yet possible, ended, or failed).
  static Recorder* active() noexcept;
  // The same, but never starts one.
  static Recorder* current() noexcept;

  // Ends the current recording (traceEnd + close), waiting at most `wait`
  // for other threads' recorder work to finish first. Safe to call from
  // any thread, any number of times.
  static void endCurrent(schema::EndReason reason, int signal, std::chrono::milliseconds wait) noexcept;
  // Writes out everything queued (no traceEnd).
  static void flushCurrent() noexcept;
  // Opens a new trace for `options` and writes its traceBegin; throws when
  // it cannot (process/lifecycle.cpp starts recordings, once per process).
  static Recorder* create(const CaptureOptions& options);
  // In the child of fork(), from process/lifecycle.cpp (which abandons the
  // parent's recording): forgets this thread's cached id, the parent's.
  static void afterFork() noexcept;
  // An internal failure: ends the recording as well as it can.
  static void failCurrent(const char* why) noexcept;
  // True once this process's recording has ended (work still in flight
  // then fails quietly: the writer is closed).
  static bool endedCurrent() noexcept;
  // True once this recording has begun to end (it then takes no new work).
  bool ending() const noexcept { return ending_.load(std::memory_order_relaxed); }

  // A piece of recorder work. While any is in progress, end() waits; once
  // the recording is ending, new ones are refused (test with bool).
  class Operation {
   public:
    explicit Operation(Recorder& recorder) noexcept;
    ~Operation();
    Operation(const Operation&) = delete;
    Operation& operator=(const Operation&) = delete;
    explicit operator bool() const { return admitted_; }

   private:
    Recorder& recorder_;
    ThreadWork::Slot* slot_;  // nullptr: counted in inflight_ (a thread past its thread_local destructors)
    bool admitted_;
  };

  const CaptureOptions& options() const { return options_; }
  const std::string& path() const { return path_; }
  uint64_t nowNs() const { return clock_.nowNs(); }  // since the trace started

  // ---- code (record_code.cpp)
  void moduleLoaded(const ModuleLoadCall& call);
  void moduleUnloaded(uint64_t handle, bool isLibrary, CUresult result);
  // cuModuleGetFunction, cuLibraryGetKernel, cuKernelGetFunction (owner:
  // the CUkernel it came from), cuLibraryGetModule (handle: the module).
  void functionBound(schema::BindApi api, CUresult result, uint64_t handle, bool isKernel, uint64_t owner,
                     const char* name);
  void functionAttribute(schema::AttributeApi api, CUresult result, uint64_t handle, int32_t attribute, int64_t value,
                         int32_t device);

  // ---- memory (record_memory.cpp)
  void allocated(const AllocCall& call);
  // Before a free: forgets the allocation (so that a concurrent allocation
  // reusing the address is not forgotten instead) and returns it; a free
  // captured into a graph forgets nothing (the graph's launches free).
  struct Released {
    std::vector<Allocation> allocations;
    bool captured = false;  // cuMemFreeAsync on a capturing stream
  };
  Released releasing(schema::AllocKind kind, uint64_t address, uint64_t size, CUstream stream);
  // After it: records the free; a failed free puts `released` back.
  void freed(const FreeCall& call, const Released& released);
  void copied(const CopyCall& call, const void* hostSource);
  void memset(const SetCall& call);
  void synchronized(const SyncCall& call);
  // ---- NCCL (record_collective.cpp): calls NCCL has queued, in call order
  void collectives(const std::vector<CollectiveCall>& calls);
  // ---- graphs (record_graph.cpp)
  void graphDefined(const GraphDefineCall& call);
  void graphNodeUpdated(const GraphNodeUpdateCall& call);
  // cuGraphLaunch (graph_launch.cpp), around the real call as launches are.
  // Always recorded: false only when the recorder takes no work.
  bool graphLaunchStarting(const GraphLaunchCall& call, PendingGraphLaunch& pending);
  void graphLaunchFinished(PendingGraphLaunch& pending, CUresult result);
  void tensorMapEncoded(const TensorMapEncodeCall& call);
  void apiError(HookId id, CUresult result);

  // ---- launches (launch_capture.cpp)
  // Records the launch before the real call (flushed to disk in full and
  // pre modes) and fills `pending` (reset by the caller); false, and
  // pending.recorder left nullptr, when it is not recorded (filters, range).
  bool launchStarting(const LaunchCall& call, PendingLaunch& pending);
  void launchFinished(PendingLaunch& pending, CUresult result);

  // ---- durations (cupti_timing.cpp)
  // A launch's GPU duration (kernelTiming). Called on CUPTI's thread while
  // the timing sink is attached, which ends before traceEnd.
  void kernelTimed(uint64_t launchIndex, uint64_t startNs, uint64_t endNs, const std::string& kernelName);
  // A Message event made by the shim.
  void note(schema::Message::Level level, const std::string& text);

  // ---- checkpoints (record_checkpoint.cpp)
  // Checkpoint mode: a stream the program queued work on, or destroyed.
  void streamUsed(CUstream stream) {
    if (checkpoints_ != nullptr) checkpoints_->streamUsed(stream);
  }
  void streamDestroyed(CUstream stream) {
    if (checkpoints_ != nullptr) checkpoints_->streamDestroyed(stream);
  }

  // ---- the flight recorder (flight_recorder.cpp)
  struct TriggerFacts {
    schema::TriggerKind kind = schema::TriggerKind::API;
    std::string reason;
    int32_t result = 0;
    int32_t signal = 0;
    int32_t exitStatus = 0;
    bool hasLaunch = false;
    uint64_t launchIndex = 0;
  };
  // With a ring (--trigger): writes the trigger event, ends the recording
  // (traceEnd with `endReason`, `endSignal`), which writes the ring to the
  // output, and says so on stderr. False, doing nothing, without a ring or
  // once a trigger fired or the recording is ending. Not from a signal
  // handler (process/signals.cpp hands signals to its thread).
  bool trigger(const TriggerFacts& facts, schema::EndReason endReason, int endSignal) noexcept;
  bool hasRing() const noexcept { return ring_ != nullptr; }
  // The index of the last launch recorded so far; false when none was.
  bool lastLaunch(uint64_t& launchIndex) const noexcept;
  // The signal trigger for the current recording, from the signal thread:
  // `terminal` when the signal is about to end the process. False when it
  // did not fire (no such trigger, not one of its signals).
  static bool triggerSignalCurrent(int sig, bool terminal) noexcept;
  // The exit trigger, from exit(), _exit() and _Exit() (process/exit_hooks.cpp).
  static void triggerExitCurrent(int status, const char* how) noexcept;
  // Starts the hang watchdog when the options ask for it (create()).
  void startWatchdog() noexcept;
  void stopWatchdog() noexcept;

  // For tests and the summary.
  AllocationMap& allocations() { return allocations_; }

 private:
  friend class EventMessage;

  Recorder(CaptureOptions options, std::string path, std::unique_ptr<format::TraceWriter> writer);

  uint64_t append(EventMessage& message);
  static uint32_t callerThreadId();  // the calling thread's id, cached
  void flush();
  void end(schema::EndReason reason, int signal, const std::string& message, std::chrono::milliseconds wait) noexcept;
  void writeTraceBegin();

  // Checkpoints (record_checkpoint.cpp). Due: the interval has passed
  // since the last one (or none was taken yet).
  // `stamp`: clock_.stamp() of the calling launch, taken anyway for its
  // event; comparing it in the clock's own units spares every launch a
  // conversion and a second read of the clock.
  bool checkpointDue(uint64_t stamp) noexcept {
    if (options_.checkpointEveryLaunches != 0) {
      return eligibleLaunches_.load(std::memory_order_relaxed) >= nextCheckpointLaunch_.load(std::memory_order_relaxed);
    }
    return stamp >= nextCheckpointStamp_.load(std::memory_order_relaxed);
  }
  // Takes one now if no other thread is; `gateWait`: how long to wait for
  // other threads' calls to leave the gate. A periodic one (INTERVAL) is
  // the FIRST when no launch was counted before it: decided there, once
  // the writer has numbered every launch appended.
  void checkpointNow(schema::CheckpointReason reason, std::chrono::milliseconds gateWait) noexcept;
  void scheduleCheckpoint(bool postponed) noexcept;
  // The last checkpoint, from an atexit handler registered when recording
  // starts: it runs before the runtime's own exit handlers (registered
  // earlier) release the program's contexts.
  static void lastCheckpointAtExit() noexcept;

  // Launch helpers (launch_capture.cpp).
  bool selects(std::string_view kernelName);       // with a filter set: the caller tests that
  LaunchTarget launchTarget(CUfunction function);  // cached per thread
  FunctionInfo lookupFunction(CUfunction function);
  // The layout of a function or kernel being launched that had none when
  // bound (not loaded yet); nullptr when the driver still cannot tell, `why`
  // then says what it answered. Called once a handle: the answer is kept
  // in the code registry.
  const std::vector<ParamSlot>* layoutAtLaunch(CUfunction function, FunctionInfo info, std::string& why);
  void noteOnce(std::atomic<bool>& flag, schema::Message::Level level, const std::string& text);
  // record_memory.cpp: a copy's direction, a unified side resolved (then
  // `hostSource` is set when the source is host memory).
  schema::CopyDirection copyDirection(const CopyCall& call, const void*& hostSource);
  int deviceOfAddress(uint64_t address);
  // After a graph launch: the allocation map gains the memory its
  // allocation nodes made and loses what its free nodes freed.
  void graphMemoryChanged(uint64_t exec);
  // Whether `stream` is capturing into a CUDA graph: asks the driver only
  // while some stream is.
  bool streamCapturing(CUstream stream) const {
    return activeCaptures_.load(std::memory_order_relaxed) > 0 && isCapturing(stream);
  }
  void storeCrossDeviceWrite(uint64_t stream, const WrittenReadback::Region& written, schema::Memcpy::Builder copy);
  CUresult storeWritten(uint64_t address, uint64_t size, StoredContent& out);
  std::string logCollectiveWrite(const CollectiveCall& call, uint64_t written, std::vector<uint64_t>& waited,
                                 schema::Collective::Builder event);
  // Returns whether the content is to be read back later (initialDeferred):
  // then the caller requests it once the event has its seq.
  bool logInitialContent(const AllocCall& call, uint64_t size, schema::Alloc::Builder alloc);
  bool logPoolInitialContent(const AllocCall& call, uint64_t size, schema::Alloc::Builder alloc);
  void readInitialContent(uint64_t address, uint64_t size, schema::MemoryKind kind, CUresult ready,
                          schema::Alloc::Builder alloc);
  std::string captureWrittenCopy(const CollectiveCall& call, uint64_t written, schema::Collective::Builder event);
  // Whether the `size` bytes a call on `stream` wrote can be read back
  // later (readback_), without waiting for the stream now.
  bool readsBackLater(uint64_t stream, uint64_t size);
  void writtenDataRead(const WrittenReadback::Owner& owner, const uint8_t* bytes, uint64_t size,
                       const std::string& missing);

  // Graphs (record_graph.cpp): a graph read through the driver's queries
  // into `body`; `walk` gathers each node's reach, and its completeness
  // turns false at a node that could not be read.
  void writeGraphBody(CUgraph graph, schema::GraphBody::Builder body, unsigned depth, GraphWalk& walk);
  void writeGraphNode(CUgraphNode node, const CUgraphNodeParams& params, schema::GraphNode::Builder out, unsigned depth,
                      GraphWalk& walk);
  void writeKernelNode(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v3& params, schema::Launch::Builder launch,
                       GraphNodeReach& reach);
  void apiErrorTrigger(HookId id, CUresult result) noexcept;  // flight_recorder.cpp

  const CaptureOptions options_;
  const std::string path_;
  const std::unique_ptr<format::TraceWriter> writer_;
  format::RingTraceWriter* const ring_;  // writer_, when it is the flight recorder's ring
  std::atomic<bool> triggered_{false};
  const pid_t processId_ = ::getpid();  // the process recording (not a vfork child sharing its memory)
  // The hang trigger's, with a ring and hang=SECONDS; never deleted (its
  // thread may outlive the recording, as the recorder does).
  // Shared with the ring, which tells it of launches.
  std::shared_ptr<std::atomic<HangWatchdog*>> watchdog_ = std::make_shared<std::atomic<HangWatchdog*>>(nullptr);
  HangWatchdog* stoppedWatchdog_ = nullptr;  // stopped, never deleted (like the Recorder)
  // Event times (its anchors and rate are caches: mutable). Launches take
  // stamps, converted when the writer builds their events.
  mutable TraceClock clock_;
  uint64_t startUnixNs_ = 0;

  AllocationMap allocations_;
  // Stream-ordered allocations captured into graphs (the graphs' own
  // memory, not in allocations_ until a launch makes it): the pointer words
  // of the graphs' kernel nodes find them here.
  AllocationMap graphMemory_;
  GraphReach graphReach_;          // what each executable graph's nodes touch
  CapturedCopies capturedCopies_;  // checkpoint mode: the slots of NCCL calls captured into graphs
  std::atomic<uint64_t> graphLaunches_{0};
  KnownTensorMaps tensorMaps_;  // the maps encodes made: which parameters are tensor maps
  StagingPool staging_;

  // What the program's code is (globals, owners, layouts): CodeRegistry.
  std::shared_mutex vmmMutex_;
  struct VmmHandle {
    int device = -1;
    bool imported = false;  // cuMemImportFromShareableHandle: another process's memory
  };
  std::unordered_map<uint64_t, VmmHandle> vmmHandles_;  // cuMemCreate / import handle -> what it is

  std::shared_mutex selectionMutex_;
  std::unordered_map<const char*, bool> selection_;  // interned kernel name -> passes the filters

  std::atomic<uint64_t> eligibleLaunches_{0};  // passed the filters
  // Launches are numbered as the writer orders them (LaunchEventData::
  // sequenced), not with a read-modify-write of eligibleLaunches_ first:
  // metadata mode, when nothing needs the number before the call (no
  // launch range, no CUPTI timing, no checkpoints every N launches). eligibleLaunches_ then changes only on
  // the writer's merger thread, and may lag the appends: what needs the
  // exact count (a checkpoint's launchCount, traceEnd) calls
  // writer_->waitSequenced() first (so does the flight recorder's last
  // launch: lastLaunch).
  bool numberedByWriter_ = false;
  std::atomic<uint64_t> filteredLaunches_{0};  // did not
  std::atomic<int> activeCaptures_{0};         // streams capturing into a graph, process-wide

  std::atomic<int> inflight_{0};  // Operations of threads without a ThreadWork slot
  std::atomic<bool> ending_{false};

  // Checkpoint mode only (else null).
  std::unique_ptr<CheckpointTaker> checkpoints_;
  std::unique_ptr<WrittenReadback> readback_;      // what NCCL calls and copies from other devices wrote
  std::atomic<uint64_t> nextCheckpointStamp_{0};   // by time, a clock_ stamp: the first is due at once
  std::atomic<uint64_t> nextCheckpointLaunch_{0};  // by launches
  uint64_t checkpointOrdinal_ = 0;                 // under the gate
  std::atomic<bool> checkpointsFailed_{false};     // a failure that will not go away: no more tries
  std::atomic<bool> lastCheckpointTaken_{false};
  std::atomic<bool> checkpointWritten_{false};  // a checkpoint is in the trace: later allocations log their content
  FreedPoolMemory freedSinceCheckpoint_;        // what stream-ordered allocations need not log

  std::atomic<bool> notedNoLayout_{false};
  std::atomic<bool> notedNoSync_{false};
  std::atomic<bool> notedSnapshotFailed_{false};
  std::atomic<bool> notedOtherDevices_{false};
  std::atomic<bool> notedNoCheckpointDevice_{false};  // --checkpoint-device never launched on
  std::atomic<bool> notedDeviceLaunch_{false};
  std::atomic<bool> notedWaitsForHost_{false};
  std::atomic<bool> notedInitialContentFailed_{false};
  std::atomic<bool> notedSlotOrder_{false};

  HostWaiters hostWaiters_;
};

}  // namespace kcap
