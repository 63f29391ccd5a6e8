// Test programs for recording, one per scenario (argv[1]), against the
// driver double. Each prints "result ..." lines (compared with and without
// the shim where the scenario ends normally) and checks its own results.
//
//   library     code through the library API and cudart's fatbin wrappers
//               (plain and relocatable-device-code forms), CUkernel launches,
//               cuLaunchKernelEx with attributes, the per-thread default
//               stream, attributes, a pointer array (indirect pointers),
//               page-locked host memory, unified copies, 16-bit memsets,
//               stream-ordered allocation, events, a failing call
//   capture     launches into a stream capturing into a graph (must not be
//               synchronized), a launch on another stream meanwhile, the graph
//   fork        the parent launches, forks, the child launches on its own
//               memory, the parent launches again
//   exit-thread another thread calls exit(7) while main keeps launching
//   abort | segv | sigterm | sigkill | sighup | sigquit | sigpipe | sigill |
//   sigalrm | sigusr1
//               three launches, then that way of dying (sigpipe: a write to
//               a pipe nobody reads; sigill: an undefined instruction)
//   sigterm-handled | sighup-handled  a handler that lets the program go on
//   exit-now    three launches, then _exit(5): no exit handlers, no destructors
//   pause FILE  two launches, "paused" on stdout, waits until FILE exists,
//               two more launches
//   fault-kill  a launch the double kills the process in (SIGKILL)
//   die-in-launch  a launch that returns at once; then, while one thread is
//               in a launch call that takes 300 ms and another in one that
//               never returns, main aborts (SIGABRT) inside a launch call
//   fault       a launch that faults (sticky CUDA_ERROR_ILLEGAL_ADDRESS)
//   vmm         memory through the VMM API (reserve, create, map), a buffer
//               that spans two mappings
//   disk-full   the trace cannot grow past 256 KiB (RLIMIT_FSIZE): recording
//               fails and stops, the program must not notice
//   large       80 MiB + 4 KiB read by two launches (three staging buffers
//               a snapshot), each 1 MiB piece p set to largeWord(p), piece 70 to
//               piece 3's, the last 4 KiB to 0xabcdef01; between the
//               launches the first 4 KiB of piece 1 are set to 0x5a5a5a5a
//   pitched     2D copies and memsets into a pitched allocation p (8 rows,
//               512 bytes apart): host to device with offsets on both sides,
//               a unified one from pageable host memory, device to device
//               per-thread and async, from a CUDA array, device to host;
//               cuMemsetD2D32, D2D8 (per-thread), D2D16Async; then axpy
//               reads p whole
//   volume      3D copies into a pitched volume v (2 slices of 4 rows, 512
//               bytes apart): host to device with offsets on both sides
//               (cuMemcpy3D), from a host volume whose rows are contiguous
//               (cuMemcpy3DAsync), a unified one of 1-row slices from pageable
//               host memory, device to device (cuMemcpy3DAsync_v2_ptsz), from
//               a CUDA array, one of depth 0, device to host
//               (cuMemcpy3D_v2_ptds); then axpy reads v whole
//   tensor-map  tensor map encodes: a tiled one that fails (misaligned
//               address) before any context exists; then, over src (a
//               cuMemAlloc'd buffer of kN floats x = i): a tiled f32 map
//               (dims [64, 16], strides [256], box [32, 8], 128B swizzle,
//               128B L2 promotion), an im2col f32 map and an im2colWide f16
//               map (rank 3: dims [4, 16, 16], strides [16, 256]), not
//               launched; tma_scale(tiled map, out, kN) (out = 2 * src)
//   flight HOW  the flight recorder's triggers: eight launches, then HOW:
//               none (return 0), api (kcap_trigger("loss is NaN") through
//               dlsym, its result printed, then two more launches), sigusr2
//               (sent to itself, then two more launches), sigterm (sent
//               to itself), segv (a real fault), abort, exit3,
//               exit0, _exit3, vfork (a vfork child that _exits 255, then
//               two more launches), fault (a launch that faults, then
//               cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS; returns 0),
//               not-found (cuModuleGetFunction of a name the module lacks,
//               an ordinary error, then two more launches), hang (3.5 s
//               without a call, then two more launches: with
//               KCAP_DOUBLE_EVENT_NOT_READY=1, the work looks unfinished),
//               spill (before the eight launches, a 40 MiB buffer; before
//               every second launch it is overwritten from the host with new
//               incompressible bytes: each checkpoint holds 40 MiB more; then
//               as api), late-alloc (a 64 KiB buffer allocated after the
//               first launch and set at once, its first content logged by
//               a checkpoint recording and in no checkpoint; then as api),
//               late-pool (the same from cuMemAllocAsync: its first content
//               read back on its stream, in a later event),
//               graph-host (a captured graph: copy x from the same host
//               bytes, then axpy; launched after each of the eight launches,
//               each launch's host bytes the same; then as api)
//   refused     axpy, a launch of it the driver refuses (kernelParams and
//               extra both given: CUDA_ERROR_INVALID_VALUE), axpy again
#include "driver_program.h"

#include "record_scenarios.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace scenarios;  // this program's own helpers (record_scenarios.h)

namespace {

int library() {
  const Context c = start();

  // constant.fatbin through a version-1 wrapper, as cudart's lazy loading does.
  const std::string constant = test::kernelImage("constant.fatbin");
  const FatbinWrapper wrapper{0x466243B1, 1, constant.data(), nullptr};
  CUlibrary library = nullptr;
  DRIVER(cuLibraryLoadData, &library, &wrapper, nullptr, nullptr, 0, nullptr, nullptr, 0);
  CUkernel poly = nullptr;
  DRIVER(cuLibraryGetKernel, &poly, library, "poly_eval");
  DRIVER(cuKernelSetAttribute, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024, poly, c.device);
  CUdeviceptr coeffs = 0;
  std::size_t coeffsSize = 0;
  DRIVER(cuLibraryGetGlobal, &coeffs, &coeffsSize, library, "coeffs");
  CHECK(coeffsSize == 64);
  const float c3[16] = {3.0f, 0.5f};  // y = 3 + x / 2
  // A unified copy from pageable host memory.
  DRIVER(cuMemcpy, coeffs, reinterpret_cast<CUdeviceptr>(c3), sizeof c3);

  const CUdeviceptr x = upload(iota(1.0f));
  CUdeviceptr y = 0;
  DRIVER(cuMemAlloc, &y, kN * sizeof(float));
  DRIVER(cuMemsetD16, y, 0x3c00, 2 * kN);  // fp16 ones, overwritten by the kernel
  int n = kN;
  void* polyParams[] = {const_cast<CUdeviceptr*>(&x), &y, &n};
  // The CUkernel itself as the launch handle (cudart does this).
  DRIVER(cuLaunchKernel, reinterpret_cast<CUfunction>(poly), kN / 256, 1, 1, 256, 1, 1, 0, nullptr, polyParams,
         nullptr);
  test::launchesMade().add("poly_eval");
  const std::vector<float> out = download(y, kN);
  for (int i = 0; i < kN; ++i) {
    CHECK(out[static_cast<std::size_t>(i)] == 3.0f + 0.5f * static_cast<float>(i));
  }
  std::printf("result poly_last %.1f\n", static_cast<double>(out[kN - 1]));

  // The CUfunction of the kernel, launched with attributes on a stream.
  CUfunction polyFunction = nullptr;
  DRIVER(cuKernelGetFunction, &polyFunction, poly);
  DRIVER(cuFuncSetCacheConfig, polyFunction, CU_FUNC_CACHE_PREFER_SHARED);
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  CUlaunchAttribute attributes[2] = {};
  attributes[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attributes[0].value.clusterDim.x = 2;
  attributes[0].value.clusterDim.y = 1;
  attributes[0].value.clusterDim.z = 1;
  attributes[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attributes[1].value.priority = 7;
  CUlaunchConfig config{};
  config.gridDimX = kN / 128;
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = 256;
  config.hStream = stream;
  config.attrs = attributes;
  config.numAttrs = 2;
  DRIVER(cuLaunchKernelEx, &config, polyFunction, polyParams, nullptr);
  test::launchesMade().add("poly_eval");
  DRIVER(cuStreamSynchronize, stream);

  // reduce.fatbin through a version-2 (relocatable device code) wrapper
  // with axpy.fatbin as its extra fatbin.
  const std::string reduceImage = test::kernelImage("reduce.fatbin");
  const std::string axpyImage = test::kernelImage("axpy.fatbin");
  const void* extra[] = {axpyImage.data(), nullptr};
  const FatbinWrapper rdc{0x466243B1, 2, reduceImage.data(), extra};
  CUlibrary rdcLibrary = nullptr;
  DRIVER(cuLibraryLoadData, &rdcLibrary, &rdc, nullptr, nullptr, 0, nullptr, nullptr, 0);
  CUkernel axpyKernel = nullptr;
  DRIVER(cuLibraryGetKernel, &axpyKernel, rdcLibrary, "axpy");
  CUlibrary fileLibrary = nullptr;
  DRIVER(cuLibraryLoadFromFile, &fileLibrary, test::kernelPath("struct_param.sm_90.cubin").c_str(), nullptr, nullptr, 0,
         nullptr, nullptr, 0);
  DRIVER(cuLibraryUnload, fileLibrary);
  CUmodule rdcModule = nullptr;
  DRIVER(cuLibraryGetModule, &rdcModule, rdcLibrary);

  // A pointer array: axpy's x is a small buffer holding the address of
  // another allocation (`hidden`), which no parameter names.
  CUdeviceptr hidden = 0;
  DRIVER(cuMemAlloc, &hidden, 4096);
  DRIVER(cuMemsetD32, hidden, 0x40490fdb, 1024);  // pi
  CUdeviceptr table = 0;
  DRIVER(cuMemAlloc, &table, 256 * sizeof(float));
  std::vector<std::uint64_t> words(128, 0);
  words[5] = hidden + 64;
  DRIVER(cuMemcpyHtoD, table, words.data(), words.size() * sizeof words[0]);
  // The per-thread default stream, as a --default-stream per-thread build calls it.
  using LaunchPtsz = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void**, void**);
  const auto launchPtsz = reinterpret_cast<LaunchPtsz>(dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"));
  CHECK(launchPtsz != nullptr);
  float a = 0.0f;
  int small = 256;
  void* axpyParams[] = {&a, &table, &y, &small};
  test::checked(
      "cuLaunchKernel_ptsz",
      launchPtsz(reinterpret_cast<CUfunction>(axpyKernel), 1, 1, 1, 256, 1, 1, 0, nullptr, axpyParams, nullptr),
      __FILE__, __LINE__);
  test::launchesMade().add("axpy");

  // Page-locked host memory passed to a kernel (reachable through unified
  // addressing), and stream-ordered allocation.
  void* pinned = nullptr;
  DRIVER(cuMemHostAlloc, &pinned, kN * sizeof(float), CU_MEMHOSTALLOC_DEVICEMAP);
  std::memcpy(pinned, iota(4.0f).data(), kN * sizeof(float));
  CUdeviceptr scratch = 0;
  DRIVER(cuMemAllocAsync, &scratch, kN * sizeof(float), stream);
  DRIVER(cuMemcpyAsync, scratch, reinterpret_cast<CUdeviceptr>(pinned), kN * sizeof(float), stream);
  CUevent done = nullptr;
  DRIVER(cuEventCreate, &done, 0);
  DRIVER(cuEventRecord, done, stream);
  DRIVER(cuStreamWaitEvent, nullptr, done, 0);
  DRIVER(cuEventSynchronize, done);
  DRIVER(cuEventDestroy, done);
  void* hostParams[] = {&pinned, &y, &n};
  DRIVER(cuLaunchKernel, reinterpret_cast<CUfunction>(poly), kN / 256, 1, 1, 256, 1, 1, 0, nullptr, hostParams,
         nullptr);
  test::launchesMade().add("poly_eval");
  std::printf("result poly_pinned_last %.1f\n", static_cast<double>(download(y, kN)[kN - 1]));
  DRIVER(cuMemFreeAsync, scratch, stream);
  DRIVER(cuStreamSynchronize, stream);

  // A call that fails: the driver's error goes on record.
  CUfunction missing = nullptr;
  test::callsMade().add("cuModuleGetFunction");
  CHECK(cuModuleGetFunction(&missing, rdcModule, "no_such_kernel") == CUDA_ERROR_NOT_FOUND);

  DRIVER(cuMemFreeHost, pinned);
  DRIVER(cuStreamDestroy, stream);
  for (const CUdeviceptr p : {x, y, hidden, table}) {
    DRIVER(cuMemFree, p);
  }
  DRIVER(cuLibraryUnload, rdcLibrary);
  DRIVER(cuLibraryUnload, library);
  DRIVER(cuDevicePrimaryCtxRelease, c.device);
  test::printMade();
  return 0;
}

int capture() {
  start();
  Axpy axpy;
  CUstream stream = nullptr;
  CUstream other = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  DRIVER(cuStreamCreate, &other, CU_STREAM_NON_BLOCKING);
  CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);  // y = 3i, recorded with snapshots

  DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_RELAXED);
  CHECK(axpy.launch(1.0f, stream) == CUDA_SUCCESS);  // captured, not run
  CHECK(axpy.launch(1.0f, stream) == CUDA_SUCCESS);
  // Work on another stream meanwhile: recorded with snapshots, but
  // synchronizing the context would invalidate the capture.
  const CUdeviceptr z = upload(iota(0.0f));
  CHECK(axpy.launch(2.0f, other, z) == CUDA_SUCCESS);
  DRIVER(cuStreamSynchronize, other);
  CUgraph graph = nullptr;
  DRIVER(cuStreamEndCapture, stream, &graph);
  CHECK(download(axpy.y, kN)[1] == 3.0f);  // the captured launches did not run

  CUgraphExec exec = nullptr;
  DRIVER(cuGraphInstantiate, &exec, graph, 0);
  DRIVER(cuGraphLaunch, exec, stream);
  DRIVER(cuStreamSynchronize, stream);
  const std::vector<float> y = download(axpy.y, kN);
  for (int i = 0; i < kN; ++i) {
    CHECK(y[static_cast<std::size_t>(i)] == 5.0f * static_cast<float>(i));
  }
  std::printf("result capture_last %.1f\n", static_cast<double>(y[kN - 1]));
  DRIVER(cuGraphExecDestroy, exec);
  DRIVER(cuGraphDestroy, graph);
  test::printMade();
  return 0;
}

int forked() {
  start();
  Axpy axpy;
  CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    // The double's memory is the child's own copy: it can go on.
    const CUdeviceptr mine = upload(iota(10.0f));
    CHECK(axpy.launch(1.0f, nullptr, mine) == CUDA_SUCCESS);
    CHECK(axpy.launch(1.0f, nullptr, mine) == CUDA_SUCCESS);
    std::printf("child %d\n", static_cast<int>(getpid()));
    std::exit(0);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  std::printf("result fork_y1 %.1f\n", static_cast<double>(download(axpy.y, kN)[1]));
  return 0;
}

int exitFromThread() {
  start();
  Axpy axpy;
  std::atomic<int> launched{0};
  std::thread quitter([&] {
    while (launched.load() < 20) {
      std::this_thread::yield();
    }
    std::exit(7);
  });
  // No test::Tally here: exit() destroys static objects while this
  // thread is still launching.
  float a = 0.5f;
  int n = kN;
  void* params[] = {&a, &axpy.x, &axpy.y, &n};
  for (;;) {
    if (cuLaunchKernel(axpy.function, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr) != CUDA_SUCCESS) {
      break;
    }
    launched.fetch_add(1);
  }
  quitter.join();
  return 1;
}

// Launch calls in progress when the process dies: their events are with
// the writer before the calls, their outcomes follow (or never come).
int dieInLaunch() {
  const rlimit noCore{0, 0};
  setrlimit(RLIMIT_CORE, &noCore);
  const Context c = start();
  Axpy axpy;
  CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  std::atomic<int> entering{0};
  auto inLaunch = [&](CUdeviceptr poison) {
    return std::thread([&, poison] {
      DRIVER(cuCtxSetCurrent, c.context);
      entering.fetch_add(1);
      axpy.launch(1.0f, nullptr, poison);
    });
  };
  std::thread slow = inLaunch(kPoisonSlow);
  std::thread hung = inLaunch(kPoisonHang);
  while (entering.load() < 2) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // both inside their calls
  std::fflush(stdout);
  axpy.launch(1.0f, nullptr, kPoisonAbort);
  slow.join();  // not reached
  hung.join();
  return 1;
}

void handled(int) {}

int dies(const std::string& how) {
  const rlimit noCore{0, 0};  // sigquit and sigill dump core by default
  setrlimit(RLIMIT_CORE, &noCore);
  start();
  Axpy axpy;
  if (how == "sigterm-handled" || how == "sighup-handled") {
    struct sigaction action {};
    action.sa_handler = handled;
    sigemptyset(&action.sa_mask);
    sigaction(how == "sigterm-handled" ? SIGTERM : SIGHUP, &action, nullptr);
  }
  for (int i = 0; i < 3; ++i) {
    CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  }
  std::fflush(stdout);
  if (how == "abort") {
    std::abort();
  }
  if (how == "exit-now") {
    _exit(5);
  }
  if (how == "sigpipe") {
    int ends[2] = {-1, -1};
    CHECK(pipe(ends) == 0);
    close(ends[0]);
    [[maybe_unused]] const ssize_t n = write(ends[1], "x", 1);
  }
  if (how == "sigill") {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("ud2");  // raised by the CPU, as a real one is
#else
    kill(getpid(), SIGILL);
#endif
  }
  const std::pair<const char*, int> sent[] = {
      {"sighup", SIGHUP}, {"sighup-handled", SIGHUP}, {"sigquit", SIGQUIT}, {"sigalrm", SIGALRM}, {"sigusr1", SIGUSR1}};
  for (const auto& [name, sig] : sent) {
    if (how == name) {
      kill(getpid(), sig);
    }
  }
  if (how == "segv") {
    volatile std::uintptr_t nowhere = 8;  // an unmapped page: a real fault
    *reinterpret_cast<volatile int*>(nowhere) = 1;
  }
  if (how == "sigterm" || how == "sigterm-handled") {
    kill(getpid(), SIGTERM);
  }
  if (how == "sigkill") {
    kill(getpid(), SIGKILL);
  }
  CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);  // only the handled ones get here
  std::printf("result survived %.1f\n", static_cast<double>(download(axpy.y, kN)[1]));
  return 0;
}

int pauseUntil(const char* flag) {
  start();
  Axpy axpy;
  for (int i = 0; i < 2; ++i) {
    CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  }
  std::printf("paused\n");
  std::fflush(stdout);
  for (int waited = 0; access(flag, F_OK) != 0; waited += 10) {
    CHECK(waited < 120000);
    usleep(10000);
  }
  for (int i = 0; i < 2; ++i) {
    CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  }
  std::printf("result paused_y1 %.1f\n", static_cast<double>(download(axpy.y, kN)[1]));
  return 0;
}

int fault(bool kill) {
  start();
  Axpy axpy;
  CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  std::fflush(stdout);
  // The poison word goes in x: the double "faults" on it.
  const CUresult launched = axpy.launch(1.0f, nullptr, kill ? kPoisonKill : kPoisonFault);
  const CUresult synced = cuCtxSynchronize();
  std::printf("result launch %d sync %d\n", static_cast<int>(launched), static_cast<int>(synced));
  return synced == CUDA_ERROR_ILLEGAL_ADDRESS ? 3 : 0;
}

// A launch the driver refuses (kernelParams and extra both given), between
// two it runs: its result is recorded with it.
int refused() {
  start();
  Axpy axpy;
  CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  int n = kN;
  float a = 1.0f;
  void* params[] = {&a, &axpy.x, &axpy.y, &n};
  void* extra[] = {CU_LAUNCH_PARAM_END};
  test::launchesMade().add("axpy");
  const CUresult refusedResult = cuLaunchKernel(axpy.function, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, extra);
  CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  std::printf("result refused %d y1 %.1f\n", static_cast<int>(refusedResult),
              static_cast<double>(download(axpy.y, kN)[1]));
  return 0;
}

void triggerApi() {
  using Trigger = int (*)(const char*);
  const auto trigger = reinterpret_cast<Trigger>(dlsym(RTLD_DEFAULT, "kcap_trigger"));
  std::printf("result trigger %d\n", trigger != nullptr ? trigger("loss is NaN") : -1);
}

// Apart from flight(): its vfork and a vector's locals do not mix.
int flightSpill() {
  start();
  Axpy axpy;
  std::vector<uint64_t> words((size_t{40} << 20) / sizeof(uint64_t));
  CUdeviceptr big = 0;
  DRIVER(cuMemAlloc, &big, words.size() * sizeof(uint64_t));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 8; ++i) {
    if (i % 2 == 0) {
      for (auto& word : words) {  // xorshift64: incompressible
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        word = state;
      }
      DRIVER(cuMemcpyHtoD, big, words.data(), words.size() * sizeof(uint64_t));
    }
    CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  }
  std::fflush(stdout);
  triggerApi();
  for (int i = 0; i < 2; ++i) {
    CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  }
  printBits("flight y[5]", axpy.y, 5);
  return 0;
}

int flight(const std::string& how) {
  if (how == "spill") {
    return flightSpill();
  }
  start();
  Axpy axpy;
  CUgraphExec hostGraph = nullptr;
  const std::vector<float> hostX = iota(1.0f);
  if (how == "graph-host") {
    CUstream stream = nullptr;
    CUgraph graph = nullptr;
    DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    DRIVER(cuMemcpyHtoDAsync, axpy.x, hostX.data(), hostX.size() * sizeof(float), stream);
    CHECK(axpy.launch(1.0f, stream) == CUDA_SUCCESS);
    DRIVER(cuStreamEndCapture, stream, &graph);
    DRIVER(cuGraphInstantiate, &hostGraph, graph, 0);
  }
  for (int i = 0; i < 8; ++i) {
    CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
    if (hostGraph != nullptr) {
      DRIVER(cuGraphLaunch, hostGraph, nullptr);
      DRIVER(cuCtxSynchronize);
    }
    if (i == 0 && (how == "late-alloc" || how == "late-pool")) {
      CUdeviceptr late = 0;
      if (how == "late-alloc") {
        DRIVER(cuMemAlloc, &late, size_t{64} << 10);
      } else {
        DRIVER(cuMemAllocAsync, &late, size_t{64} << 10, nullptr);  // its first content read back later
      }
      DRIVER(cuMemsetD32, late, 7, (size_t{64} << 10) / 4);  // its first content is in no checkpoint
    }
  }
  std::fflush(stdout);
  if (how == "api" || how == "late-alloc" || how == "late-pool" || how == "graph-host") {
    triggerApi();
  } else if (how == "sigusr2") {
    kill(getpid(), SIGUSR2);
  } else if (how == "sigterm") {
    kill(getpid(), SIGTERM);
  } else if (how == "segv") {
    const rlimit noCore{0, 0};
    setrlimit(RLIMIT_CORE, &noCore);
    volatile std::uintptr_t nowhere = 8;  // an unmapped page: a real fault
    *reinterpret_cast<volatile int*>(nowhere) = 1;
  } else if (how == "abort") {
    const rlimit noCore{0, 0};
    setrlimit(RLIMIT_CORE, &noCore);
    std::abort();
  } else if (how == "exit3") {
    std::exit(3);
  } else if (how == "exit0") {
    std::exit(0);
  } else if (how == "vfork") {
    // A child that shares the parent's memory and fails, as Python's
    // subprocess does when exec fails: not the recording process's exit.
    const pid_t child = vfork();
    if (child == 0) {
      _exit(255);
    }
    int status = 0;
    CHECK(child > 0 && waitpid(child, &status, 0) == child);
    std::printf("result child %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  } else if (how == "_exit3") {
    _exit(3);
  } else if (how == "fault") {
    const CUresult launched = axpy.launch(1.0f, nullptr, kPoisonFault);
    const CUresult synced = cuCtxSynchronize();
    std::printf("result launch %d sync %d\n", static_cast<int>(launched), static_cast<int>(synced));
    return 0;
  } else if (how == "hang") {
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  } else if (how == "not-found") {
    CUfunction missing = nullptr;
    const CUresult found = cuModuleGetFunction(&missing, axpy.module, "no_such_kernel");
    std::printf("result lookup %d\n", static_cast<int>(found));
  } else if (how != "none") {
    test::fail("unknown flight scenario '%s'", how.c_str());
  }
  for (int i = 0; i < 2; ++i) {
    CHECK(axpy.launch(1.0f) == CUDA_SUCCESS);
  }
  printBits("flight y[5]", axpy.y, 5);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "library") {
    return library();
  }
  if (scenario == "capture") {
    return capture();
  }
  if (scenario == "fork") {
    return forked();
  }
  if (scenario == "exit-thread") {
    return exitFromThread();
  }
  if (scenario == "die-in-launch") {
    return dieInLaunch();
  }
  for (const char* how : {"abort", "segv", "sigterm", "sigkill", "sigterm-handled", "sighup", "sighup-handled",
                          "sigquit", "sigpipe", "sigill", "sigalrm", "sigusr1", "exit-now"}) {
    if (scenario == how) {
      return dies(scenario);
    }
  }
  if (scenario == "pause" && argc > 2) {
    return pauseUntil(argv[2]);
  }
  if (scenario == "tensor-map") {
    return tensorMap();
  }
  if (scenario == "vmm") {
    return vmm();
  }
  if (scenario == "disk-full") {
    return diskFull();
  }
  if (scenario == "large") {
    return large();
  }
  if (scenario == "pitched") {
    return pitched();
  }
  if (scenario == "volume") {
    return volume();
  }
  if (scenario == "flight" && argc > 2) {
    return flight(argv[2]);
  }
  if (scenario == "refused") {
    return refused();
  }
  if (scenario == "fault" || scenario == "fault-kill") {
    return fault(scenario == "fault-kill");
  }
  test::fail("unknown scenario '%s'", scenario.c_str());
}
