# kcap trace events.
#
# A .kcap file (see container.h for the byte layout) holds record chunks, each a
# zstd-compressed run of Cap'n Proto messages whose root is `Event`, and blob
# chunks holding memory contents addressed by their XXH3-128 hash.
#
# Evolution rule: fields and enumerants are only ever ADDED, with the next free
# ordinal; nothing is renumbered, retyped or removed. A reader built from an older
# schema ignores fields it does not know; a newer reader sees defaults (zero,
# false, empty) for fields an older writer did not set. Every field below is
# therefore designed so that its default means "unknown" or "not applicable".
#
# Handles (CUfunction, CUmodule, CUstream, ...) are recorded as the integer value
# of the pointer the program saw. They identify objects inside one trace only; a
# handle value may be reused after the object is destroyed, so consumers resolve
# a handle with the most recent event that bound it.

@0xf0ad748ff7361e6f;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kcap::schema");

# ---------------------------------------------------------------------------
# Shared building blocks

struct Hash128 {
  # XXH3-128 of a piece's uncompressed bytes; names one blob chunk in the file.
  high @0 :UInt64;
  low @1 :UInt64;
}

struct Content {
  # A run of bytes stored as content-addressed pieces. The bytes are split into
  # pieces of `pieceSize` bytes (the last one may be shorter); piece i covers
  # [i*pieceSize, min(size, (i+1)*pieceSize)). Identical pieces anywhere in the
  # file are stored once.
  # Invariant: pieces.size() == ceil(size / pieceSize); pieceSize > 0 when size > 0.
  size @0 :UInt64;
  pieceSize @1 :UInt32;
  pieces @2 :List(Hash128);
}

struct MemoryRange {
  # The content of device memory [address, address + content.size) at one moment.
  address @0 :UInt64;
  content @1 :Content;
  allocationBase @2 :UInt64;
  # Base address of the tracked allocation this range belongs to (equal to
  # `address` for whole-allocation snapshots); 0 when unknown.
  kind @3 :MemoryKind;
}

enum MemoryKind {
  unknown @0;
  allocation @1;      # ordinary device allocation (cuMemAlloc & co)
  moduleGlobal @2;    # a __device__ / __constant__ variable of a loaded module
  managed @3;         # cuMemAllocManaged
  vmm @4;             # a mapped VMM range (cuMemCreate + cuMemMap)
  hostMapped @5;      # pinned host memory mapped into the device address space
  imported @6;
  # device memory another process owns and writes, mapped here through
  # cuIpcOpenMemHandle (ipcImport). Checkpoint mode cannot recompute what that
  # process writes: like hostMapped, its content is logged in the `pre` of
  # each launch that reaches it, as the launch saw it, and checkpoints leave
  # it out.
}

struct KeyValue {
  key @0 :Text;
  value @1 :Text;
}

# ---------------------------------------------------------------------------
# The event stream

struct Event {
  seq @0 :UInt64;
  # Global event number, 0-based, strictly increasing in file order, no gaps in
  # a complete trace. Gives a total order across threads (the order in which
  # the shim observed the calls). Invariant exception: a flight recorder's
  # trace (a `trigger` event) holds only what its ring kept; the events it
  # let go leave gaps, exactly trigger.droppedEvents of them in all. The
  # events kept keep their seq, and traceEnd.eventCount is still its seq.
  timeNs @1 :UInt64;
  # Host CLOCK_MONOTONIC nanoseconds since `traceBegin.startMonotonicNs`.
  # Launch and launchEnd times come from the CPU's counter (TSC, arm64's
  # virtual count) converted against CLOCK_MONOTONIC: within a few
  # microseconds of it, so a launchEnd may read slightly before its launch.
  threadId @2 :UInt32;
  # OS thread id (gettid) of the thread that made the call; 0 for events the
  # shim made itself (traceBegin, traceEnd, timings).

  union {
    traceBegin @3 :TraceBegin;
    traceEnd @4 :TraceEnd;
    moduleLoad @5 :ModuleLoad;
    moduleUnload @6 :ModuleUnload;
    functionBind @7 :FunctionBind;
    functionAttribute @8 :FunctionAttribute;
    alloc @9 :Alloc;
    free @10 :Free;
    memcpy @11 :Memcpy;
    memset @12 :Memset;
    sync @13 :SyncOp;
    launch @14 :Launch;
    launchEnd @15 :LaunchEnd;
    kernelTiming @16 :KernelTiming;
    graphLaunch @17 :GraphLaunch;
    apiError @18 :ApiError;
    message @19 :Message;
    tensorMapEncode @20 :TensorMapEncode;
    checkpoint @21 :Checkpoint;
    trigger @22 :Trigger;
    graphDefine @23 :GraphDefine;
    graphNodeUpdate @24 :GraphNodeUpdate;
    graphLaunchEnd @25 :GraphLaunchEnd;
    collective @26 :Collective;
    writtenData @27 :WrittenData;
  }
}

struct Device {
  ordinal @0 :Int32;
  name @1 :Text;
  uuid @2 :Data;                    # 16 bytes (CUuuid)
  computeCapabilityMajor @3 :Int32;
  computeCapabilityMinor @4 :Int32;
  totalMemoryBytes @5 :UInt64;
  multiprocessorCount @6 :Int32;
  pciBusId @7 :Text;                # "0000:3b:00.0"
}

struct TraceBegin {
  # Always the first event (seq 0) of a trace.
  hostName @0 :Text;
  processId @1 :UInt32;
  argv @2 :List(Text);
  environment @3 :List(KeyValue);
  # Selected variables only (CUDA_*, NVIDIA_*, KCAP_*, PYTORCH_*, TORCH_*,
  # TRITON_*, LD_PRELOAD, LD_LIBRARY_PATH, RANK/LOCAL_RANK/WORLD_SIZE ...).
  driverVersion @4 :Int32;          # cuDriverGetVersion, e.g. 13000; 0 unknown
  runtimeVersion @5 :Int32;         # cudart version if known, else 0
  devices @6 :List(Device);         # every device visible to the process
  startUnixNs @7 :UInt64;           # wall clock at trace start
  startMonotonicNs @8 :UInt64;      # CLOCK_MONOTONIC at trace start; Event.timeNs is relative to it
  kcapVersion @9 :Text;
  captureMode @10 :CaptureMode;
  options @11 :List(KeyValue);      # the effective capture options, for the record
  libraries @12 :List(KeyValue);
  # name -> version ("major.minor.patch") of the CUDA libraries the process
  # had loaded when the trace began: nccl, cudnn, cublasLt, cudart (each
  # asked by its own version function). One loaded later is not listed;
  # traces of older recorders leave the list empty.
}

enum CaptureMode {
  full @0;           # pre- and post-launch snapshots of reachable memory
  preOnly @1;        # pre-launch snapshots only
  metadata @2;       # no memory contents at all
  checkpoint @3;     # metadata per launch, plus Checkpoint events of all live device memory
                     # (docs/checkpoint.md); in Launch.pre only host-mapped and managed ranges
}

struct TraceEnd {
  # The last event of a trace that was closed in an orderly way. Absent when the
  # process was killed; the reader then reports the trace as truncated.
  reason @0 :EndReason;
  signal @1 :Int32;                 # the signal number for reason == signal
  eventCount @2 :UInt64;            # events before this one
  launchCount @3 :UInt64;
  droppedLaunches @4 :UInt64;       # launches seen but not recorded (filters excluded)
  message @5 :Text;
}

enum EndReason {
  exit @0;           # normal exit / atexit
  signal @1;         # fatal signal (SIGSEGV, SIGABRT, SIGTERM, ...)
  internalError @2;  # the shim stopped recording after an internal failure
  explicit @3;       # closed by the program or a tool (e.g. `kcap extract`)
  forkChild @4;      # the child of a fork closed the parent's inherited trace state
}

struct ModuleLoad {
  # Code the program loaded: a module (CUmodule) or library (CUlibrary).
  handle @0 :UInt64;                # CUmodule or CUlibrary value
  isLibrary @1 :Bool;               # true for CUlibrary handles
  api @2 :LoadApi;
  imageKind @3 :ImageKind;
  image @4 :Content;                # exact bytes handed to the loader (fatbin wrappers resolved to the fatbin)
  path @5 :Text;                    # file path for cuModuleLoad / cuLibraryLoadFromFile
  jitOptions @6 :List(JitOption);
  context @7 :UInt64;
  device @8 :Int32;
  result @9 :Int32;                 # CUresult of the load
  globals @10 :List(ModuleGlobal);
  extraImages @11 :List(Content);   # relocatable-device-code fatbin wrappers: the extra NULL-terminated fatbins
}

enum LoadApi {
  unknown @0;
  moduleLoad @1;
  moduleLoadData @2;
  moduleLoadDataEx @3;
  moduleLoadFatBinary @4;
  libraryLoadData @5;
  libraryLoadFromFile @6;
  cudartRegisterFatBinary @7;
}

enum ImageKind {
  unknown @0;
  fatbin @1;         # 0xBA55ED50 fatbin blob
  cubin @2;          # ELF
  ptx @3;            # NUL-terminated PTX text
  fatbinWrapper @4;  # __fatDeviceText wrapper (0x466243B1); image holds the fatbin it points to
}

struct JitOption {
  option @0 :Int32;                 # CUjit_option
  value @1 :UInt64;                 # the option value as a 64-bit word
}

struct ModuleGlobal {
  # A __device__ or __constant__ variable of a loaded module.
  name @0 :Text;
  address @1 :UInt64;
  size @2 :UInt64;
}

struct ModuleUnload {
  handle @0 :UInt64;
  isLibrary @1 :Bool;
}

struct FunctionBind {
  # Binds a launch handle to a kernel of a loaded module.
  handle @0 :UInt64;                # the value later passed to launches
  isKernel @1 :Bool;                # a CUkernel (library API) rather than a CUfunction
  moduleHandle @2 :UInt64;          # ModuleLoad.handle the kernel comes from
  name @3 :Text;                    # mangled or extern "C" name
  params @4 :List(ParamInfo);       # layout from cu{Func,Kernel}GetParamInfo or the image
  api @5 :BindApi;
  context @6 :UInt64;
  sourceHandle @7 :UInt64;          # for kernelGetFunction: the CUkernel it came from
}

enum BindApi {
  unknown @0;
  moduleGetFunction @1;
  libraryGetKernel @2;
  kernelGetFunction @3;
  libraryGetModule @4;
  moduleEnumerateFunctions @5;
  libraryEnumerateKernels @6;
}

struct ParamInfo {
  offset @0 :UInt32;                # byte offset in the parameter buffer
  size @1 :UInt32;                  # byte size
}

struct FunctionAttribute {
  # A setting that changes how a function launches (replay re-applies these).
  handle @0 :UInt64;
  api @1 :AttributeApi;
  attribute @2 :Int32;              # CUfunction_attribute / CUfunc_cache / CUsharedconfig
  value @3 :Int64;
  device @4 :Int32;                 # for cuKernelSetAttribute; -1 otherwise
  result @5 :Int32;
}

enum AttributeApi {
  funcSetAttribute @0;
  kernelSetAttribute @1;
  funcSetCacheConfig @2;
  kernelSetCacheConfig @3;
  funcSetSharedMemConfig @4;
}

struct Alloc {
  kind @0 :AllocKind;
  address @1 :UInt64;               # base device address (for vmmMap: where it was mapped)
  size @2 :UInt64;                  # bytes (for pitch allocations: pitch * height)
  pitch @3 :UInt64;
  device @4 :Int32;
  context @5 :UInt64;
  stream @6 :UInt64;                # for stream-ordered allocations
  handle @7 :UInt64;                # CUmemGenericAllocationHandle for vmmCreate / vmmMap
  offset @8 :UInt64;                # vmmMap: offset into the physical allocation
  flags @9 :UInt64;
  result @10 :Int32;
  byNccl @11 :Bool;
  # Made by NCCL for itself: inside one of NCCL's calls (communicator
  # set-up, collectives, ncclGroupEnd) or on one of the threads NCCL starts
  # (named "NCCL ..."): its channels' buffers, FIFOs and the mappings of its
  # peers' buffers, which only NCCL's kernels use and other ranks' kernels
  # write. Checkpoints leave such memory out (re-execution does not run
  # NCCL's kernels, so it could not match). ncclMemAlloc's memory is the
  # program's (not marked).
  initial @12 :List(MemoryRange);
  # Checkpoint mode, device memory (memAlloc, memAllocPitch, a vmmMap of
  # memory of this process's) allocated after the first checkpoint: its
  # content as the driver handed it over. The driver does not clear memory
  # it hands out again (a segment freed and allocated anew holds what an
  # earlier allocation left), and a checkpoint hashes every byte of live
  # memory, written or not: re-execution writes this content at the
  # allocation's place in the order. Pieces of zeros are named by the zero
  # piece, without a copy. A stream-ordered allocation's (async, fromPool)
  # arrives later, see initialDeferred. Invariant (checked by replay): each
  # range lies inside the allocation. A flight recorder's trace leaves it
  # empty in allocations made before its first checkpoint, which holds their
  # memory.
  initialDeferred @13 :Bool;
  # Checkpoint mode, a stream-ordered allocation (async, fromPool) made after
  # the first checkpoint: its first content is read back on its stream (the
  # memory becomes the program's only where the stream reaches the
  # allocation) and a later WrittenData naming this event holds it; readers
  # fold it into `initial` (one range, the whole allocation). Not set when
  # every byte of the allocation was freed back to its pool since the last
  # checkpoint: re-execution from that checkpoint rebuilds what those bytes
  # held, so nothing is logged. Still set after folding means the bytes
  # could not be read back, and re-execution cannot start the allocation as
  # the program's did.
  captured @14 :Bool;
  # A stream-ordered allocation (async, fromPool) on a stream capturing into
  # a graph: the call made an allocation node of that graph, not memory.
  # The address is fixed for the graph's life; each launch of the graph
  # makes the memory (until a free node of the graph, or a later free),
  # and the graph's definition names it (GraphNode.memAlloc). Nothing is
  # logged of its content. Re-execution places it at this address for the
  # whole replay and runs the graph's allocation and free nodes as empty
  # nodes.
}

enum AllocKind {
  memAlloc @0;
  memAllocPitch @1;
  managed @2;
  async @3;
  fromPool @4;
  hostAlloc @5;       # cuMemHostAlloc / cuMemAllocHost (device-mapped host memory)
  hostRegister @6;
  vmmReserve @7;      # cuMemAddressReserve: address space only
  vmmCreate @8;       # cuMemCreate: physical memory, no address
  vmmMap @9;          # cuMemMap: physical memory at `address`
  ipcImport @10;
  # cuIpcOpenMemHandle: another process's allocation mapped at `address`
  # (`size` from cuMemGetAddressRange; `flags` the open flags). Its Free
  # (cuIpcCloseMemHandle) has this kind too. Launches reaching it see memory
  # memoryKind `imported`.
  vmmImport @11;
  # cuMemImportFromShareableHandle: physical memory another process made
  # (`handle`; `flags` the handle type), no address. A vmmMap of it maps that
  # process's memory: like ipcImport, launches reaching it see memoryKind
  # `imported`, and checkpoints leave it out. Its release is a Free of kind
  # vmmCreate, as cuMemRelease does not say which it releases.
}

struct Free {
  kind @0 :AllocKind;               # the kind of the allocation being released
  address @1 :UInt64;
  size @2 :UInt64;                  # for vmmUnmap / vmmReserve release; 0 when implied
  stream @3 :UInt64;                # cuMemFreeAsync
  handle @4 :UInt64;                # cuMemRelease
  result @5 :Int32;
  captured @6 :Bool;
  # cuMemFreeAsync on a stream capturing into a graph: the call made a free
  # node of that graph and freed nothing now; the graph's launches free.
}

struct Memcpy {
  direction @0 :CopyDirection;
  dst @1 :UInt64;                   # device address for toDevice directions, 0 for host destinations
  src @2 :UInt64;                   # device address for fromDevice directions, 0 for host sources
  size @3 :UInt64;
  stream @4 :UInt64;
  isAsync @5 :Bool;
  data @6 :Content;                 # the bytes written into device memory (host->device, and device->device when captured)
                                    # (of a 2D copy only its rows, packed: row r at r * width; of a 3D
                                    # copy row y of slice z at (z * height + y) * width)
  result @7 :Int32;
  # 2D/3D copies: row width in bytes, number of rows, pitches (0 for 1D).
  # dst and src then address the first byte copied (row 0, after the X/Y
  # offsets; of a 3D copy also after the Z offset) and size is width *
  # height (* depth). A 2D or 3D copy to or from a CUDA array is recorded
  # unknown, the array's side 0, without data.
  width @8 :UInt64;
  height @9 :UInt64;
  dstPitch @10 :UInt64;
  srcPitch @11 :UInt64;
  # 3D copies (cuMemcpy3D*): slices of `height` rows; 0 for 1D and 2D copies
  # (0 or 1: one slice). Row y of slice z of a side starts at its first byte
  # + z * pitch * sliceHeight + y * pitch, sliceHeight being dstHeight or
  # srcHeight, the rows from one slice to the next (the CUDA_MEMCPY3D field;
  # 0 for 1D and 2D copies, and may be 0 with depth 1). A 3D copy of depth 0,
  # which copies nothing, is recorded with height 0.
  depth @12 :UInt64;
  dstHeight @13 :UInt64;
  srcHeight @14 :UInt64;
  crossDevice @15 :Bool;
  # A device-to-device copy whose sides lie on two devices (cuMemcpyPeer*,
  # cuMemcpy3DPeer*, or a unified 1D, 2D or 3D copy between two GPUs). The
  # source is another device's memory, which a replay of this device's work
  # does not hold: in full and checkpoint mode `data` holds what the copy
  # wrote (a 2D/3D copy's rows packed, as above), read once it completed,
  # and replay writes that instead of copying.
  dataDeferred @16 :Bool;
  # A crossDevice copy in checkpoint mode: `data` is in a later
  # `writtenData` event whose `of` is this event's seq (as
  # Collective.dataDeferred).
  captured @17 :Bool;
  # Made while its stream captured into a CUDA graph: the copy became a node
  # of that graph and copied nothing then (the graph's launches do, and
  # GraphDefine holds the node). Replay does not run it.
}

struct WrittenData {
  # What a call another agent carried out wrote into this process's device
  # memory (an NCCL call, a copy from another device), read back without
  # holding the program: the recorder queued a device-to-host copy on the
  # call's stream right after the call's work and stored the bytes once
  # that copy completed. It comes after the event it completes (any number
  # of events later) and belongs at that event's place in the order:
  # readers fold it into that event's `data`.
  of @0 :UInt64;
  # seq of the Collective or Memcpy event (with dataDeferred set) whose
  # written bytes these are, or of the Alloc (with initialDeferred set) whose
  # first content they are; at most one WrittenData names an event.
  data @1 :Content;
  # The bytes the call wrote, as that event's `data` would hold them
  # (Collective: `written` bytes at recvBuffer; Memcpy: `size` bytes at dst,
  # a 2D/3D copy's rows packed; Alloc: `size` bytes at `address`).
  missing @2 :Text;
  # Set, and `data` empty, when the bytes could not be read back: why
  # (the copy back failed, the trace ended before it completed).
  node @3 :UInt64;
  # 0, or, when `of` names a GraphLaunch: the memcpy node of its graph
  # whose destination these bytes were read from (GraphNode.writtenReadBack,
  # by its handle). Readers fold them into that launch's `hostCopies`; one
  # WrittenData at most names a launch and node.
}

enum CopyDirection {
  hostToDevice @0;
  deviceToHost @1;
  deviceToDevice @2;
  hostToHost @3;
  unknown @4;
}

struct Memset {
  dst @0 :UInt64;
  value @1 :UInt32;
  elementSize @2 :UInt8;            # 1, 2 or 4 (cuMemsetD8/D16/D32)
  count @3 :UInt64;                 # elements per row
  height @4 :UInt64;                # rows for 2D forms (cuMemsetD2D*), 1 otherwise
  pitch @5 :UInt64;                 # bytes from one row to the next (0 for 1D)
  stream @6 :UInt64;
  isAsync @7 :Bool;
  result @8 :Int32;
  captured @9 :Bool;
  # Made while its stream captured into a CUDA graph: a node of that graph,
  # which set nothing then (as Memcpy.captured). Replay does not run it.
}

struct Collective {
  # A call of NCCL's API that moves data between the job's processes
  # (ranks), recorded when it returned; a call between ncclGroupStart and
  # ncclGroupEnd when the outermost ncclGroupEnd returned, since NCCL queues
  # the group's work there. The kernels the call launched come before it in
  # the trace (Launch.collectiveCall). Their inputs come from other GPUs, so
  # no replay of this process can recompute what they wrote: in checkpoint
  # mode `data` holds it, read once the call's stream completed, and
  # re-execution writes it in place of the kernels.
  operation @0 :CollectiveOp;
  comm @1 :UInt64;                  # ncclComm_t
  stream @2 :UInt64;                # the stream the call was made on
  sendBuffer @3 :UInt64;            # 0 for recv; the buffer of ncclBcast
  recvBuffer @4 :UInt64;            # 0 for send; the buffer of ncclBcast
  count @5 :UInt64;                 # the call's count argument, in elements
  dataType @6 :Int32;               # ncclDataType_t
  elementSize @7 :UInt32;           # bytes per element of dataType; 0 unknown
  reduceOp @8 :Int32;               # ncclRedOp_t of reductions; -1 otherwise
  root @9 :Int32;                   # root (broadcast, reduce, gather, scatter) or peer (send, recv); -1 otherwise
  rank @10 :Int32;                  # this process's rank in comm; -1 unknown
  ranks @11 :Int32;                 # comm's number of ranks; -1 unknown
  result @12 :Int32;
  # ncclResult_t of the call, or of the ncclGroupEnd that queued it (the
  # larger one when both failed). 7 (ncclInProgress): a non-blocking
  # communicator had not queued the work yet.
  grouped @13 :Bool;                # made between ncclGroupStart and ncclGroupEnd
  written @14 :UInt64;
  # Bytes the call writes at recvBuffer on this rank, by the operation:
  # count elements (allReduce, broadcast, reduceScatter, scatter, recv,
  # reduce at its root), count * ranks (allGather, allToAll, gather at its
  # root), 0 (send; reduce and gather elsewhere than the root). 0 when the
  # element size or the number of ranks is unknown, or the product
  # overflows.
  data @15 :Content;
  # Checkpoint mode: the `written` bytes at recvBuffer once the call's
  # stream completed (size == written). Empty in the other modes, when
  # written is 0, and where `dataMissing` says why.
  dataMissing @16 :Text;
  # Checkpoint mode, written > 0 and no data: why (the call failed, its
  # stream was capturing into a graph, reading the memory failed).
  dataDeferred @17 :Bool;
  # Checkpoint mode: `data` is not in this event. The bytes were copied
  # back in stream order, right after the call's work, without waiting
  # for it; a later `writtenData` event whose `of` is this event's seq
  # holds them, or says why it could not. A trace that ends before that
  # event (the program crashed first) lacks them.
  capturedCopy @18 :UInt64;
  # Checkpoint mode, a call made on a stream capturing into a CUDA graph
  # (it ran nothing then; its kernels became nodes of the graph): the
  # device memory of kcap's into which the memcpy node kcap captured right
  # after the call's nodes copies the `written` bytes each time the graph
  # runs (GraphNode.writtenReadBack). 0 when no such node was added
  # (`dataMissing` says why). The bytes of each graph launch come in
  # writtenData events naming that launch and node.
  captured @19 :Bool;
  # Made on a stream capturing into a CUDA graph: the call ran nothing (its
  # kernels became nodes of the graph, which run at each graph launch).
  # Re-execution passes it over; what its nodes write is the graph
  # launches' (capturedCopy).
}

enum CollectiveOp {
  allReduce @0;
  broadcast @1;                     # ncclBroadcast and ncclBcast
  reduce @2;
  allGather @3;
  reduceScatter @4;
  allToAll @5;
  gather @6;
  scatter @7;
  send @8;
  recv @9;
}

struct SyncOp {
  # Stream and event ordering the program asked for.
  op @0 :SyncKind;
  stream @1 :UInt64;
  event @2 :UInt64;
  flags @3 :UInt32;
  priority @4 :Int32;
  result @5 :Int32;
}

enum SyncKind {
  streamCreate @0;
  streamDestroy @1;
  eventCreate @2;
  eventDestroy @3;
  eventRecord @4;
  streamWaitEvent @5;
  eventSynchronize @6;
  streamSynchronize @7;
  contextSynchronize @8;
  streamBeginCapture @9;
  streamEndCapture @10;
}

struct Launch {
  # One kernel launch. In full and pre modes it is written BEFORE the
  # launch runs (so a faulting launch leaves it on disk) and its outcome
  # follows later in a LaunchEnd with the same launchIndex. In metadata and
  # checkpoint modes it takes its place in the trace just before the launch
  # call and carries the call's outcome itself (`ended`, `result`, `callNs`),
  # stored after the call: no LaunchEnd follows, and a launch during which
  # the process died is in the trace without `ended`. (Traces of those modes
  # written before `ended` existed have a LaunchEnd at seq + 1 instead;
  # readers take either. Traces written before the hand-over moved before
  # the call lack a launch during which the process died.)
  launchIndex @0 :UInt64;           # 0-based count of recorded launches, each once. Metadata mode
                                    # without a launch range or --timing numbers launches as they are
                                    # written (launchIndex rises with seq); otherwise as they start,
                                    # so other threads' Launch events may come out of launchIndex order
  api @1 :LaunchApi;
  perThreadStream @2 :Bool;         # the _ptsz variant was called
  function @3 :UInt64;              # CUfunction or CUkernel handle as passed
  kernelName @4 :Text;              # resolved from FunctionBind, for readability
  gridX @5 :UInt32;
  gridY @6 :UInt32;
  gridZ @7 :UInt32;
  blockX @8 :UInt32;
  blockY @9 :UInt32;
  blockZ @10 :UInt32;
  sharedMemBytes @11 :UInt32;       # dynamic shared memory
  stream @12 :UInt64;
  context @13 :UInt64;
  device @14 :Int32;
  attributes @15 :List(LaunchAttribute);
  params @16 :Data;                 # the parameter buffer: every parameter at its ParamInfo offset
  paramLayout @17 :List(ParamInfo); # layout used to assemble `params`
  pointers @18 :List(PointerWord);  # words of `params` that are device pointers
  indirectPointers @19 :List(IndirectPointer);
  # pointer-like words found inside small referenced buffers (pointer arrays)
  pre @20 :List(MemoryRange);       # reachable memory before the launch
  capturing @21 :Bool;              # stream was capturing into a graph: not executed, no snapshots
  paramsFromExtra @22 :Bool;        # parameters came through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER)
  snapshotError @23 :Int32;
  # CUresult of the first device-to-host copy that failed while taking `pre`
  # (the ranges after it are missing); 0 when every snapshot was taken.
  syncResult @24 :Int32;
  # CUresult of the synchronization before the `pre` snapshot (0: success or
  # not synchronized, as in metadata mode and for capturing launches).
  noSnapshotReason @25 :Text;
  # Full and pre modes: why this launch was recorded without memory though
  # the mode takes it (`pre` empty, its LaunchEnd without `post`): it waits
  # for its peers (NCCL) or for the host, or it was queued behind a kernel
  # that waits for the host and may still be running, which synchronizing
  # would hold back. Empty when its memory was taken (or tried: syncResult,
  # snapshotError) and in the other modes. Replay cannot run such a launch.
  collectiveCall @26 :Bool;
  # An NCCL kernel launched while one of NCCL's calls that kcap sees was
  # running on this thread (ncclAllReduce, ..., ncclGroupEnd): the Collective
  # events that follow it from the same thread say what that call wrote on
  # this rank. Re-execution does not run such a kernel (it waits for peers
  # replay does not run) and writes the collectives' logged data instead.
  # False for every other launch, and for an NCCL kernel launched elsewhere
  # (a non-blocking communicator's own thread): what that one wrote is not
  # known.
  ended @27 :Bool;
  # This event carries the launch call's outcome (`result`, `callNs`) and no
  # LaunchEnd follows it: metadata and checkpoint modes, which have nothing
  # to take after the launch. False in full and pre modes (the LaunchEnd
  # holds the outcome and the memory after the launch), and in metadata and
  # checkpoint modes for a launch whose call had not returned when the
  # event was written (the process died in it, or it was blocked for
  # longer than the recorder waits): the launch may or may not have been
  # queued.
  result @28 :Int32;                # with `ended`: the CUresult the launch call returned
  callNs @29 :UInt64;
  # With `ended`: how long the launch call took on the host, in nanoseconds
  # (the call returned at Event.timeNs + callNs); from the same counter as
  # timeNs.
}

enum LaunchApi {
  launchKernel @0;
  launchKernelEx @1;
  launchCooperativeKernel @2;
  graphKernelNode @3;
}

struct LaunchAttribute {
  id @0 :Int32;                     # CUlaunchAttributeID
  value @1 :Data;                   # the raw CUlaunchAttributeValue bytes (64)
}

struct PointerWord {
  offset @0 :UInt32;                # byte offset of the 8-byte word in Launch.params
  value @1 :UInt64;                 # the address stored there
  allocationBase @2 :UInt64;        # base of the tracked allocation it falls into
  inTensorMap @3 :Bool;             # the global address field of a CUtensorMap parameter
}

struct IndirectPointer {
  bufferAddress @0 :UInt64;         # allocation holding the pointer
  offset @1 :UInt64;                # byte offset of the word inside it
  value @2 :UInt64;                 # the address stored there
  allocationBase @3 :UInt64;        # allocation it points into
}

struct LaunchEnd {
  # The outcome of a Launch written before the call (full and pre modes);
  # absent where the Launch is `ended`.
  launchIndex @0 :UInt64;           # matches Launch.launchIndex
  result @1 :Int32;                 # CUresult returned by the launch call
  post @2 :List(MemoryRange);       # reachable memory after the launch completed (full mode)
  syncResult @3 :Int32;             # CUresult of the synchronization before the post snapshot
  snapshotError @4 :Int32;          # as Launch.snapshotError, for `post`
}

struct KernelTiming {
  # GPU duration of a launch, from CUPTI's activity API (--timing).
  launchIndex @0 :UInt64;
  startNs @1 :UInt64;               # GPU timestamps
  endNs @2 :UInt64;
  kernelName @3 :Text;              # the name CUPTI's kernel record gave (mangled), "" if none:
                                    # equal to the launch's kernelName when the match is right
}

struct TensorMapEncode {
  # One call of cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col or
  # cuTensorMapEncodeIm2colWide: the arguments the program gave (the logical
  # shape a TMA kernel sees) and the 128 bytes the driver produced. Recorded
  # in every capture mode, failed calls included. Replay re-encodes a launch's
  # tensor-map parameter from the newest such event before the launch whose
  # `map` equals the parameter's bytes. The CUDA enums are kept as their
  # numeric values (cuda.h), so that values newer than this schema survive.
  api @0 :TensorMapApi;
  dataType @1 :Int32;               # CUtensorMapDataType (9: BFLOAT16, 7: FLOAT32, ...)
  rank @2 :UInt32;                  # tensorRank as passed (the driver accepts 1..5; 3..5 for im2col)
  globalAddress @3 :UInt64;         # globalAddress as passed
  globalDim @4 :List(UInt64);       # elements per dimension, innermost first (`rank` entries)
  globalStrides @5 :List(UInt64);   # bytes from one index to the next of dimensions 1..rank-1
                                    # (rank-1 entries; dimension 0 is dense)
  boxDim @6 :List(UInt32);          # tiled: the box (tile) each copy moves, in elements (`rank` entries);
                                    # empty for im2col forms
  elementStrides @7 :List(UInt32);  # traversal strides, in elements (`rank` entries)
  pixelBoxLowerCorner @8 :List(Int32);  # im2col: lower corner of the bounding box, rank-2 entries
  pixelBoxUpperCorner @9 :List(Int32);  # im2col: upper corner, rank-2 entries
  pixelBoxLowerCornerWidth @10 :Int32;  # im2colWide: lower corner along W
  pixelBoxUpperCornerWidth @11 :Int32;  # im2colWide: upper corner along W
  channelsPerPixel @12 :UInt32;     # im2col forms; 0 for tiled
  pixelsPerColumn @13 :UInt32;      # im2col forms; 0 for tiled
  interleave @14 :Int32;            # CUtensorMapInterleave (0 none, 1 16B, 2 32B)
  swizzle @15 :Int32;               # CUtensorMapSwizzle (0 none, 1 32B, 2 64B, 3 128B, ...)
  l2Promotion @16 :Int32;           # CUtensorMapL2promotion (0 none, 1 64B, 2 128B, 3 256B)
  oobFill @17 :Int32;               # CUtensorMapFloatOOBfill (0 none, 1 NaN request zero FMA)
  im2colWideMode @18 :Int32;        # CUtensorMapIm2ColWideMode, im2colWide only; 0 otherwise
  result @19 :Int32;                # CUresult of the call
  map @20 :Data;                    # the 128 bytes of the CUtensorMap the call wrote; empty when it failed
  # A list argument the program passed as NULL, or a rank over 5, is
  # recorded as an empty list (more than 5 entries are never read).
}

enum TensorMapApi {
  unknown @0;
  tiled @1;          # cuTensorMapEncodeTiled
  im2col @2;         # cuTensorMapEncodeIm2col
  im2colWide @3;     # cuTensorMapEncodeIm2colWide
}

struct Checkpoint {
  # The content of all live device memory at one point of the event order
  # (capture mode checkpoint). Every launch, copy and memset of the recording
  # with a lower seq had completed on the device when it was taken, and none
  # with a higher seq had been submitted: replay restores a checkpoint and
  # re-executes the events after it, and compares what it reaches with the
  # next checkpoint's change hashes.
  ordinal @0 :UInt64;               # 0-based, counting the recording's checkpoints
  launchCount @1 :UInt64;           # launches recorded before it: it lies between launchIndex
                                    # launchCount - 1 and launchCount
  reason @2 :CheckpointReason;
  device @3 :Int32;
  # The device whose memory it holds: the same in every checkpoint of a
  # recording (the device current at the first). In a process driving
  # several devices, re-execution runs that device's launches only; what
  # the others wrote into its memory is logged (Memcpy.crossDevice,
  # Collective).
  ranges @4 :List(CheckpointRange); # sorted by address, disjoint
  changedPieces @5 :UInt64;         # pieces whose change hash differs from the previous
                                    # checkpoint's (every piece of the first, and of new ranges)
  changedBytes @6 :UInt64;          # their bytes: what was copied from the device
  holdNs @7 :UInt64;                # how long the program's launching thread was held for it
  result @8 :Int32;
  # CUresult of the first driver call that failed while taking it; when not
  # 0 the checkpoint is incomplete: a reader must not restore from it (its
  # ranges may lack content) and should not compare with it.
}

enum CheckpointReason {
  first @0;          # at the recording's first launch
  interval @1;       # --checkpoint-every came due
  end @2;            # when the recording ended (exit, trigger), after the last launch
}

struct CheckpointRange {
  # One live range of device memory in a checkpoint: an allocation, a mapped
  # VMM range or a module global.
  address @0 :UInt64;
  allocationBase @1 :UInt64;        # the allocation it is (== address for whole allocations)
  kind @2 :MemoryKind;
  content @3 :Content;              # every piece's content address, changed or not: a checkpoint
                                    # stands alone (the bytes of an unchanged piece are stored once,
                                    # with the checkpoint that first had them)
  changeHashes @4 :Data;
  # The change hash (format/change_hash.h) of each piece of `content`, in
  # piece order: 16 bytes per piece, two little-endian 64-bit halves.
  # Invariant: changeHashes.size() == 16 * content.pieces.size().
}

struct Trigger {
  # The flight recorder fired (--trigger): the trace holds what the ring kept
  # up to this moment, and this event says why.
  kind @0 :TriggerKind;
  reason @1 :Text;                  # readable: the call and error, the signal, the program's text
  result @2 :Int32;                 # kind error: the CUresult
  signal @3 :Int32;                 # kind signal: the signal number
  exitStatus @4 :Int32;             # kind exit: the status passed to exit
  launchIndex @5 :UInt64;           # kind error, hang: the launch concerned, when hasLaunch
  hasLaunch @6 :Bool;
  droppedEvents @7 :UInt64;         # events the ring let go before the oldest one kept
}

enum TriggerKind {
  api @0;            # the program called kcap_trigger(reason)
  error @1;          # a CUDA call returned a sticky error
  signal @2;         # a fatal or user signal
  exit @3;           # the process exited with a non-zero status
  hang @4;           # a launch had not finished after the hang limit
}

struct GraphLaunch {
  # cuGraphLaunch: runs what the newest graphDefine for `graphExec` before
  # this event describes, as changed by the graphNodeUpdates since.
  # In full mode it is written BEFORE the graph runs, with `pre`, and a
  # graphLaunchEnd with the same graphLaunchIndex follows with the result
  # and `post` (a graph that faults leaves its pre-state on disk). In the
  # other modes it is written once the call returned, with `result`, and no
  # graphLaunchEnd follows.
  graphExec @0 :UInt64;
  stream @1 :UInt64;
  result @2 :Int32;                 # the call's CUresult (full mode: 0; see graphLaunchEnd)
  graphLaunchIndex @3 :UInt64;      # 0-based count of the recording's graph launches
  pre @4 :List(MemoryRange);
  # Full mode: the memory the graph's nodes can reach (the allocations their
  # pointer words, copies and memsets hit, and the globals of their kernels'
  # modules) before it ran. Graph-owned memory (memAlloc nodes) is not
  # there: it exists only while the graph runs.
  syncResult @5 :Int32;             # CUresult of the synchronization before `pre`
  snapshotError @6 :Int32;          # as Launch.snapshotError, for `pre`
  perThreadStream @7 :Bool;         # the _ptsz variant was called
  hostCopies @8 :List(GraphHostCopy);
  # Full and checkpoint modes: what each memcpy node with a host source read
  # at this launch (a host source is read each time the graph runs; the
  # graph's definition holds only its address). A reader folds in the
  # writtenData of the launch's writtenReadBack nodes here.
  noSnapshotReason @9 :Text;
  # Full and pre modes: why this graph launch was recorded without memory
  # (as Launch.noSnapshotReason); no graphLaunchEnd `post` follows then.
}

struct GraphHostCopy {
  node @0 :UInt64;                  # the memcpy node (GraphNode.handle, at any depth of the definition)
  data @1 :Content;                 # the bytes copied, packed as Memcpy.data packs a 2D/3D copy's rows
  missing @2 :Text;
  # Only in a reader's folded view of a writtenReadBack node's bytes (never
  # in a file): why they are not there, `data` empty.
}

struct GraphLaunchEnd {
  # Full mode: the end of the graph launch with the same graphLaunchIndex.
  graphLaunchIndex @0 :UInt64;
  result @1 :Int32;                 # CUresult returned by cuGraphLaunch
  post @2 :List(MemoryRange);       # the ranges of `pre`, once the graph completed
  syncResult @3 :Int32;             # CUresult of the synchronization before `post`
  snapshotError @4 :Int32;
}

# ---------------------------------------------------------------------------
# CUDA graphs. An executable graph (CUgraphExec) runs a copy of the graph it
# was made from, taken when it was made: later changes to that graph do not
# reach it, only the cuGraphExec* calls do. So the trace describes each
# executable once, when it becomes executable (graphDefine), and then each
# change made to it (graphNodeUpdate, or a new graphDefine after
# cuGraphExecUpdate). Recorded in every capture mode.

struct GraphDefine {
  # An executable graph's structure: every node with its parameters as the
  # executable holds them, and every dependency.
  graphExec @0 :UInt64;             # the CUgraphExec made (or updated); GraphLaunch.graphExec names it
  graph @1 :UInt64;                 # the CUgraph it was made from
  api @2 :GraphDefineApi;
  flags @3 :UInt64;                 # the instantiate flags (CUgraphInstantiate_flags)
  context @4 :UInt64;
  device @5 :Int32;
  body @6 :GraphBody;               # empty when the call failed
  result @7 :Int32;                 # CUresult of the call
  complete @8 :Bool;
  # Every node's parameters were read. False: at least one node is
  # `unreadable` (its type is known, what it does is not) and replay cannot
  # rebuild the graph.
}

enum GraphDefineApi {
  instantiate @0;                   # cuGraphInstantiate / cuGraphInstantiateWithFlags
  instantiateWithParams @1;         # cuGraphInstantiateWithParams (flags from its parameters)
  execUpdate @2;
  # cuGraphExecUpdate succeeded: the executable now runs `graph`'s
  # parameters. Its nodes pair with the executable's by position (both
  # listed in creation order, the order the driver pairs them in): a later
  # graphNodeUpdate may name a node by either graph's handle.
}

struct GraphBody {
  # One graph: the executable's, a child graph's, or a conditional's body.
  nodes @0 :List(GraphNode);        # in the order cuGraphGetNodes lists them (creation order)
  edges @1 :List(GraphEdge);        # every dependency, in the order cuGraphGetEdges lists them
}

struct GraphEdge {
  # `to` runs after `from`. Indices into the body's nodes; a reader checks
  # both against the list's size.
  from @0 :UInt32;
  to @1 :UInt32;
  fromPort @2 :UInt8;               # CUgraphEdgeData: 0 for a full dependency
  toPort @3 :UInt8;
  type @4 :UInt8;                   # CUgraphDependencyType: 0 default, 1 programmatic
}

struct GraphNode {
  handle @0 :UInt64;                # the CUgraphNode (of the graph instantiated), which updates name
  enabled @1 :Bool = true;          # cuGraphNodeSetEnabled on the executable; a disabled node does nothing
  union {
    kernel @2 :Launch;
    # The kernel, its shape and parameter bytes with the pointer words found
    # in them, as in a launch. Only these fields of Launch apply: api
    # (graphKernelNode), function, kernelName, grid*, block*,
    # sharedMemBytes, context, device, attributes (the node's kernel node
    # attributes that are set), params, paramLayout, pointers,
    # paramsFromExtra; launchIndex, stream and the snapshot fields are 0 or
    # empty.
    memcpy @3 :Memcpy;
    # The copy's shape and addresses (direction from the memory types);
    # never data: a host source is read each time the graph runs. stream,
    # isAsync and result are 0.
    memset @4 :Memset;              # stream, isAsync and result are 0
    host @5 :GraphHostNode;         # a host function: replay does not call it
    childGraph @6 :GraphBody;       # runs this graph (the executable's copy of it)
    empty @7 :Void;
    eventRecord @8 :UInt64;         # the CUevent recorded
    eventWait @9 :UInt64;           # the CUevent waited for
    memAlloc @10 :GraphMemAlloc;
    memFree @11 :UInt64;            # the address a graph allocation node made
    conditional @12 :GraphConditional;
    unreadable @13 :GraphUnreadableNode;
  }
  writtenReadBack @14 :Bool;
  # A memcpy node kcap added, in checkpoint mode, to a graph captured from
  # a stream, right after the nodes of an NCCL call (Collective.capturedCopy):
  # it copies what the call wrote on this rank (its `src`: the call's
  # recvBuffer) into memory of kcap's (its `dst`), which is read back after
  # each launch of the graph (writtenData with `node`). Those bytes came
  # from other GPUs: replay writes each launch's bytes at `src` in this
  # node's place, and does not run the NCCL kernels before it.
}

struct GraphHostNode {
  function @0 :UInt64;              # CUhostFn
  userData @1 :UInt64;
}

struct GraphMemAlloc {
  # Graph-owned memory: [address, address + size) exists while the graph
  # runs, from this node until the memFree node naming `address` (or the
  # program's cuMemFreeAsync) frees it.
  address @0 :UInt64;
  size @1 :UInt64;
  device @2 :Int32;                 # the pool's location
}

struct GraphConditional {
  # Runs bodies by the value of a condition the graph's kernels set
  # (cudaGraphSetConditional) and that starts at `defaultValue` at each launch
  # when `setDefault` (else it keeps its value from the previous launch).
  handle @0 :UInt64;                # CUgraphConditionalHandle
  type @1 :UInt8;                   # CUgraphConditionalNodeType: 0 if, 1 while, 2 switch
  bodies @2 :List(GraphBody);       # if: [true] or [true, false]; while: [body]; switch: one per value
  defaultValue @3 :UInt32;
  setDefault @4 :Bool;              # CU_GRAPH_COND_ASSIGN_DEFAULT
}

struct GraphUnreadableNode {
  # A node whose parameters the shim could not read: a type it does not
  # record (batch memory operations, external semaphores), or one whose
  # query failed.
  type @0 :Int32;                   # CUgraphNodeType
  why @1 :Text;
}

struct GraphNodeUpdate {
  # One node of an executable changed (cuGraphExec*NodeSetParams,
  # cuGraphExecNodeSetParams, the event setters, cuGraphNodeSetEnabled):
  # launches after it run the node this way.
  graphExec @0 :UInt64;
  node @1 :UInt64;                  # the node handle as passed (see GraphDefineApi.execUpdate)
  api @2 :GraphUpdateApi;
  params @3 :GraphNode;             # the node's new parameters (kind enable: only `enabled` applies)
  result @4 :Int32;                 # CUresult of the call; a failed update changed nothing
}

enum GraphUpdateApi {
  kernelParams @0;                  # cuGraphExecKernelNodeSetParams
  memcpyParams @1;                  # cuGraphExecMemcpyNodeSetParams
  memsetParams @2;                  # cuGraphExecMemsetNodeSetParams
  hostParams @3;                    # cuGraphExecHostNodeSetParams
  childGraph @4;                    # cuGraphExecChildGraphNodeSetParams
  eventRecord @5;                   # cuGraphExecEventRecordNodeSetEvent
  eventWait @6;                     # cuGraphExecEventWaitNodeSetEvent
  nodeParams @7;                    # cuGraphExecNodeSetParams
  enable @8;                        # cuGraphNodeSetEnabled
}

struct ApiError {
  # A driver call that returned an error to the program.
  function @0 :Text;
  result @1 :Int32;
  resultName @2 :Text;              # e.g. CUDA_ERROR_ILLEGAL_ADDRESS
}

struct Message {
  # Something the shim wants a reader to know (recording stopped, a filter, ...).
  level @0 :Level;
  text @1 :Text;
  enum Level {
    info @0;
    warning @1;
    error @2;
  }
}

# ---------------------------------------------------------------------------
# The footer index (payload of the index chunk)

struct TraceIndex {
  chunks @0 :List(ChunkRef);        # every record chunk, in file order
  blobs @1 :List(BlobRef);          # every blob chunk
  eventCount @2 :UInt64;
}

struct ChunkRef {
  offset @0 :UInt64;                # file offset of the chunk header
  firstSeq @1 :UInt64;              # seq of the chunk's first event
  eventCount @2 :UInt32;
  storedSize @3 :UInt64;            # payload bytes in the file
  rawSize @4 :UInt64;               # payload bytes uncompressed
}

struct BlobRef {
  hash @0 :Hash128;
  offset @1 :UInt64;                # file offset of the chunk header
  storedSize @2 :UInt64;            # payload bytes in the file (hash prefix included)
  rawSize @3 :UInt64;               # piece size, uncompressed
}
