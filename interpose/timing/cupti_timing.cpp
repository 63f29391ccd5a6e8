// Kernel durations through CUPTI's activity API: loading CUPTI, the probe for
// another client, correlation of kernel records with launch indices, and the
// flush at exit. See cupti_timing.h for the design.
#include "timing/cupti_timing.h"

#include "hooks/shim_log.h"
#include "record/device_hash.h"
#include "record/recorder.h"

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>

#ifndef KCAP_CUDA_TOOLKIT_LIBRARY_DIR
#define KCAP_CUDA_TOOLKIT_LIBRARY_DIR ""
#endif

namespace kcap::timing {
namespace {

// Kineto and Triton's profiler push CUSTOM0 and CUSTOM1 (cupti_timing.h).
constexpr CUpti_ExternalCorrelationKind kCorrelationKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

// CUPTI's recommendation is 1 to 10 MB per buffer; records are ~200 bytes.
constexpr size_t kBufferBytes = 2u << 20;
constexpr size_t kBufferAlignment = 8;  // ACTIVITY_RECORD_ALIGNMENT

// Records waiting for their partner (a kernel record delivered before the
// external-correlation record of its launch, or a correlation whose kernel
// has not completed). Kernels the shim did not record (filters, graphs)
// never find a partner: the oldest entries are dropped beyond these.
constexpr size_t kMaxWaitingKernels = 4096;
constexpr size_t kMaxWaitingCorrelations = 1u << 16;

// The CUDA 13 headers' kernel record (the latest CUpti_ActivityKernelN); the
// fields read here keep their place in later record versions.
using KernelRecord = CUpti_ActivityKernel10;

// The CUPTI functions the shim calls, resolved with dlsym; the types come
// from the toolkit's headers, nothing is linked.
struct CuptiApi {
  decltype(&cuptiGetResultString) getResultString = nullptr;
  decltype(&cuptiGetVersion) getVersion = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) subscribeV2 = nullptr;  // optional: names the other client
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) registerCallbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityEnableDriverApi) enableDriverApi = nullptr;    // optional
  decltype(&cuptiActivityEnableRuntimeApi) enableRuntimeApi = nullptr;  // optional
  decltype(&cuptiActivityGetNextRecord) nextRecord = nullptr;
  decltype(&cuptiActivityFlushAll) flushAll = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop = nullptr;
};

enum State : int {
  kUntried,     // timing was never asked for in this process image
  kCollecting,  // CUPTI delivers kernel records
  kClosed,      // flushed or failed: no more CUPTI calls
  kForkChild,   // inherited from a parent that was timing: never touch CUPTI
};

// Constant-initialized: hooks may run before the shim's constructors.
std::atomic<int> g_timingState{kUntried};
CuptiApi g_cupti;  // written once before g_timingState becomes kCollecting

// The sink and the correlation state, under g_timingMutex (CUPTI's thread and the
// thread ending the trace).
pthread_mutex_t g_timingMutex = PTHREAD_MUTEX_INITIALIZER;
Recorder* g_sink = nullptr;
std::map<uint32_t, uint64_t> g_launchOfCorrelation;  // CUPTI correlation id -> launch index
struct KernelTimes {
  uint64_t start = 0;
  uint64_t end = 0;
  std::string name;  // CUPTI's, copied: the record's buffer is freed after delivery
};
std::map<uint32_t, KernelTimes> g_waitingKernels;  // correlation id -> times, no launch index yet

// External ids are launch indices, or tokens (top bit set). A token stands
// for "the thread's next launch": CUPTI gives an API record the external id
// on top of the thread's stack when the call ENTERS, and a launch through
// cudart enters cudaLaunchKernel before the driver call the shim wraps, so
// the id that the runtime record (whose correlation id the kernel record
// carries) gets must be pushed before the launch is known. After each launch
// the shim pushes a fresh token; at the thread's next launch the token is
// bound to that launch's index. (Keeping the previous launch's index pushed
// instead gave every cudart launch its predecessor's duration.)
constexpr uint64_t kTokenBit = uint64_t{1} << 63;
std::atomic<uint64_t> g_nextToken{0};
std::map<uint64_t, uint64_t> g_launchOfToken;      // token -> the launch it stood for
std::multimap<uint64_t, uint32_t> g_tokenWaiting;  // token not bound yet -> correlation ids
uint64_t g_delivered = 0;                          // kernelTiming events written
uint64_t g_kernelRecords = 0;                      // complete kernel records CUPTI delivered, matched or not
uint64_t g_incomplete = 0;                         // kernel records without valid timestamps (forced flush)
uint64_t g_correlations = 0;                       // external-correlation records of our kind
uint64_t g_otherCorrelations = 0;                  // ... of other kinds (another client's)

std::atomic<uint64_t> g_timedLaunches{0};  // launches that ran with an id pushed
std::atomic<bool> g_saidUnavailable{false};

class Lock {
 public:
  Lock() { pthread_mutex_lock(&g_timingMutex); }
  ~Lock() { pthread_mutex_unlock(&g_timingMutex); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
};

// Blocks every signal for the scope: threads CUPTI starts meanwhile inherit
// the mask, so asynchronous signals never land on them (as the writer's).
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t old_{};
};

std::string resultText(CUptiResult result) {
  const char* text = nullptr;
  if (g_cupti.getResultString != nullptr && g_cupti.getResultString(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

// Says once (per process) what went wrong with durations: stderr and a
// Message event with the same words.
void sayOnce(Recorder& recorder, const std::string& text) {
  if (g_saidUnavailable.exchange(true)) {
    return;
  }
  logMessage("%s", text.c_str());
  try {
    recorder.note(schema::Message::Level::WARNING, text);
  } catch (...) {
    // the writer failed; the recorder reports that itself
  }
}

void unavailable(Recorder& recorder, const std::string& why) {
  sayOnce(recorder, "--timing: " + why + "; recording without durations");
}

template <class Fn>
bool resolve(void* library, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(library, name));
  return out != nullptr;
}

// Loads CUPTI and resolves its functions; an empty string on success, else why not.
std::string loadCupti() {
  const char* requested = std::getenv("KCAP_CUPTI_LIBRARY");
  void* library = nullptr;
  std::string tried;
  std::string lastError;
  for (const std::string& candidate : cuptiLibraryCandidates(requested)) {
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      break;
    }
    const char* error = dlerror();
    lastError = error != nullptr ? error : "not found";
    tried += (tried.empty() ? "" : ", ") + candidate;
  }
  if (library == nullptr) {
    if (requested != nullptr && requested[0] != '\0') {
      return "could not load CUPTI from KCAP_CUPTI_LIBRARY=" + std::string(requested) + " (" + lastError + ")";
    }
    return "could not load CUPTI (libcupti.so.13 is not on the loader's path nor in the CUDA toolkit; "
           "set KCAP_CUPTI_LIBRARY to its path)";
  }
  CuptiApi api;
  const bool complete =
      resolve(library, "cuptiGetResultString", api.getResultString) &&
      resolve(library, "cuptiGetVersion", api.getVersion) && resolve(library, "cuptiSubscribe", api.subscribe) &&
      resolve(library, "cuptiUnsubscribe", api.unsubscribe) &&
      resolve(library, "cuptiActivityRegisterCallbacks", api.registerCallbacks) &&
      resolve(library, "cuptiActivityEnable", api.enable) && resolve(library, "cuptiActivityDisable", api.disable) &&
      resolve(library, "cuptiActivityGetNextRecord", api.nextRecord) &&
      resolve(library, "cuptiActivityFlushAll", api.flushAll) &&
      resolve(library, "cuptiActivityPushExternalCorrelationId", api.push) &&
      resolve(library, "cuptiActivityPopExternalCorrelationId", api.pop);
  if (!complete) {
    return "the CUPTI library loaded lacks the activity API functions kcap needs";
  }
  resolve(library, "cuptiSubscribe_v2", api.subscribeV2);
  resolve(library, "cuptiActivityEnableDriverApi", api.enableDriverApi);
  resolve(library, "cuptiActivityEnableRuntimeApi", api.enableRuntimeApi);
  g_cupti = api;
  // The library stays loaded for the life of the process.
  return {};
}

// ---- records ------------------------------------------------------------------------

template <class Map>
void bound(Map& map, size_t limit) {
  while (map.size() > limit) {
    map.erase(map.begin());  // the oldest correlation ids
  }
}

// Launches given a duration, so that none gets two: when correlation goes
// wrong (a kernel matched to an earlier launch's id), a missing duration is
// better than a wrong one.
std::set<uint64_t> g_emitted;
uint64_t g_ambiguous = 0;

void emit(uint64_t launchIndex, const KernelTimes& times) {
  if (g_sink == nullptr) {
    return;
  }
  if (!g_emitted.insert(launchIndex).second) {
    ++g_ambiguous;
    return;
  }
  bound(g_emitted, kMaxWaitingCorrelations);
  g_sink->kernelTimed(launchIndex, times.start, times.end, times.name);
  ++g_delivered;
}

void correlate(uint32_t correlation, uint64_t launchIndex);

void onCorrelation(const CUpti_ActivityExternalCorrelation& record) {
  if (record.externalKind != kCorrelationKind) {
    ++g_otherCorrelations;
    return;  // another client's (if it shares CUPTI)
  }
  ++g_correlations;
  uint64_t launchIndex = record.externalId;
  if ((launchIndex & kTokenBit) != 0) {
    const auto known = g_launchOfToken.find(launchIndex);
    if (known == g_launchOfToken.end()) {
      // Delivered before the thread's next launch bound the token (or an
      // API call after the thread's last launch).
      g_tokenWaiting.emplace(launchIndex, record.correlationId);
      bound(g_tokenWaiting, kMaxWaitingCorrelations);
      return;
    }
    launchIndex = known->second;
  }
  correlate(record.correlationId, launchIndex);
}

void bindToken(uint64_t token, uint64_t launchIndex) {
  g_launchOfToken[token] = launchIndex;
  bound(g_launchOfToken, kMaxWaitingCorrelations);
  const auto [first, last] = g_tokenWaiting.equal_range(token);
  std::vector<uint32_t> correlations;
  for (auto it = first; it != last; ++it) {
    correlations.push_back(it->second);
  }
  g_tokenWaiting.erase(first, last);
  for (const uint32_t correlation : correlations) {
    correlate(correlation, launchIndex);
  }
}

void correlate(uint32_t correlation, uint64_t launchIndex) {
  const auto waiting = g_waitingKernels.find(correlation);
  if (waiting != g_waitingKernels.end()) {
    emit(launchIndex, waiting->second);
    g_waitingKernels.erase(waiting);
    return;
  }
  g_launchOfCorrelation[correlation] = launchIndex;
  bound(g_launchOfCorrelation, kMaxWaitingCorrelations);
}

void onKernel(const KernelRecord& record) {
  // Kernels of graph launches and device-side launches were not launched
  // through a call the shim timed; the shim's own hashing kernel is not
  // the program's (it runs inside a recorded launch's call, and carries
  // that launch's correlation).
  if (record.graphId != 0 || record.isDeviceLaunched != 0 ||
      (record.name != nullptr && std::strcmp(record.name, kContentHashKernel) == 0)) {
    return;
  }
  const KernelTimes times{record.start, record.end, record.name != nullptr ? record.name : ""};
  if (times.start == 0 || times.end < times.start) {
    ++g_incomplete;  // still running when a forced flush took the buffer
    return;
  }
  ++g_kernelRecords;
  const uint32_t correlation = record.correlationId;
  const auto launch = g_launchOfCorrelation.find(correlation);
  if (launch != g_launchOfCorrelation.end()) {
    emit(launch->second, times);
    g_launchOfCorrelation.erase(launch);
    return;
  }
  g_waitingKernels[correlation] = times;
  bound(g_waitingKernels, kMaxWaitingKernels);
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *maxRecords = 0;  // as many as fit
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validBytes) {
  if (buffer == nullptr) {
    return;
  }
  try {
    const Lock lock;
    if (g_sink != nullptr) {
      CUpti_Activity* record = nullptr;
      while (g_cupti.nextRecord(buffer, validBytes, &record) == CUPTI_SUCCESS && record != nullptr) {
        switch (record->kind) {
          case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
            onCorrelation(*reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record));
            break;
          case CUPTI_ACTIVITY_KIND_KERNEL:
          case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
            onKernel(*reinterpret_cast<const KernelRecord*>(record));
            break;
          default:
            break;  // the launch API records enabled for correlation
        }
      }
    }
  } catch (...) {
    // A failing writer ends the recording through its own path; CUPTI's
    // thread must never see an exception.
  }
  std::free(buffer);
}

void CUPTIAPI ignoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Subscribes and unsubscribes at once: fails when another client holds CUPTI.
std::string probeForOtherClient() {
  CUpti_SubscriberHandle subscriber = nullptr;
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUptiResult result = CUPTI_SUCCESS;
  if (g_cupti.subscribeV2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "kcap";
    params.oldSubscriberName = other;
    params.oldSubscriberSize = sizeof other - 1;
    result = g_cupti.subscribeV2(&subscriber, ignoreCallback, nullptr, &params);
  } else {
    result = g_cupti.subscribe(&subscriber, ignoreCallback, nullptr);
  }
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    std::string who = other[0] != '\0' ? " (" + std::string(other) + ")" : "";
    return "another tool already uses CUPTI" + who +
           ": a profiler such as Nsight Systems, Nsight Compute or the PyTorch profiler";
  }
  if (result != CUPTI_SUCCESS) {
    return "CUPTI cannot start (cuptiSubscribe: " + resultText(result) + ")";
  }
  g_cupti.unsubscribe(subscriber);
  return {};
}

// Driver API records of the launch calls themselves: the external
// correlation records belong to API records.
void enableLaunchApiRecords() {
  // Measured on CUDA 13.0 (H200, driver 580): with only the launch CBIDs
  // enabled through cuptiActivityEnableDriverApi, CUPTI wrote kernel records
  // but no external-correlation records. So API records are enabled as a
  // kind, then every CBID but the launches is switched off again (the
  // documented way to trace a subset). Runtime API records too: a kernel
  // launched through cudart carries the correlation id of the runtime call
  // (cudaLaunchKernel), not of the driver call cudart makes inside it.
  g_cupti.enable(CUPTI_ACTIVITY_KIND_DRIVER);
  g_cupti.enable(CUPTI_ACTIVITY_KIND_RUNTIME);
  const CUpti_CallbackId driverLaunches[] = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                                             CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                             CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
                                             CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
                                             CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
                                             CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};
  const CUpti_CallbackId runtimeLaunches[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000};
  if (g_cupti.enableDriverApi != nullptr) {
    for (CUpti_CallbackId id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
      if (std::find(std::begin(driverLaunches), std::end(driverLaunches), id) == std::end(driverLaunches)) {
        g_cupti.enableDriverApi(id, 0);
      }
    }
  }
  if (g_cupti.enableRuntimeApi != nullptr) {
    for (CUpti_CallbackId id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++id) {
      if (std::find(std::begin(runtimeLaunches), std::end(runtimeLaunches), id) == std::end(runtimeLaunches)) {
        g_cupti.enableRuntimeApi(id, 0);
      }
    }
  }
}

std::string startCollecting() {
  if (std::string why = loadCupti(); !why.empty()) {
    return why;
  }
  uint32_t version = 0;
  if (g_cupti.getVersion(&version) == CUPTI_SUCCESS && version < CUPTI_API_VERSION / 10000 * 10000) {
    return "the CUPTI library loaded has API version " + std::to_string(version) + ", older than CUDA " +
           std::to_string(CUPTI_API_VERSION / 10000) + "'s that kcap was built with";
  }
  if (std::string why = probeForOtherClient(); !why.empty()) {
    return why;
  }
  if (const CUptiResult r = g_cupti.registerCallbacks(bufferRequested, bufferCompleted); r != CUPTI_SUCCESS) {
    return "CUPTI refused the activity buffers (" + resultText(r) + ")";
  }
  if (const CUptiResult r = g_cupti.enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION); r != CUPTI_SUCCESS) {
    return "CUPTI cannot record external correlations (" + resultText(r) + ")";
  }
  if (const CUptiResult r = g_cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS) {
    g_cupti.disable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    return "CUPTI cannot record kernel activity (" + resultText(r) + ")";
  }
  enableLaunchApiRecords();
  return {};
}

// The flush at exit: runs before the loader unloads CUPTI and the driver.
void flushAtExit() {
  g_sinkCollecting.store(false, std::memory_order_relaxed);
  int expected = kCollecting;
  if (g_timingState.compare_exchange_strong(expected, kClosed)) {
    g_cupti.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
}

}  // namespace

std::vector<std::string> cuptiLibraryCandidates(const char* requested) {
  if (requested != nullptr && requested[0] != '\0') {
    return {requested};  // what the user asked for, and nothing else
  }
  std::vector<std::string> out = {"libcupti.so.13", "libcupti.so"};
  const std::string buildToolkit = KCAP_CUDA_TOOLKIT_LIBRARY_DIR;
  std::vector<std::string> directories = {"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64",
                                          "/usr/local/cuda/targets/x86_64-linux/lib"};
  if (!buildToolkit.empty()) {
    directories.push_back(buildToolkit);
    directories.push_back(buildToolkit + "/../extras/CUPTI/lib64");
  }
  for (const std::string& directory : directories) {
    out.push_back(directory + "/libcupti.so.13");
    out.push_back(directory + "/libcupti.so");
  }
  return out;
}

void start(Recorder& recorder) noexcept {
  try {
    int expected = kUntried;
    if (g_timingState.load() == kForkChild) {
      unavailable(recorder, "not available in a process forked from one that was timing kernels");
      return;
    }
    if (!g_timingState.compare_exchange_strong(expected, kClosed)) {
      return;  // tried before in this process image (one recording per process)
    }
    std::string why;
    {
      const SignalsBlocked blocked;
      why = startCollecting();
    }
    if (!why.empty()) {
      unavailable(recorder, why);
      return;
    }
    {
      const Lock lock;
      g_sink = &recorder;
    }
    g_timingState.store(kCollecting);
    g_sinkCollecting.store(true, std::memory_order_relaxed);
    firstTokenOfThread();
    std::atexit(flushAtExit);
  } catch (...) {
    unavailable(recorder, "internal error while starting CUPTI");
  }
}

// Between launches a thread has a token pushed (see kTokenBit): the
// runtime record of its next cudart launch gets it.
thread_local bool t_pushed = false;

std::atomic<bool> g_sinkCollecting{false};

namespace {
void pushToken() noexcept {
  const uint64_t token = kTokenBit | g_nextToken.fetch_add(1, std::memory_order_relaxed);
  t_pushed = g_cupti.push(kCorrelationKind, token) == CUPTI_SUCCESS;
}
}  // namespace

void firstTokenOfThread() noexcept {
  if (!t_pushed && g_timingState.load(std::memory_order_acquire) == kCollecting) {
    pushToken();
  }
}

bool enterLaunch(uint64_t launchIndex) noexcept {
  if (g_timingState.load(std::memory_order_acquire) != kCollecting) {
    return false;
  }
  if (t_pushed) {
    uint64_t token = 0;
    t_pushed = false;
    if (g_cupti.pop(kCorrelationKind, &token) == CUPTI_SUCCESS && (token & kTokenBit) != 0) {
      try {
        const Lock lock;
        bindToken(token, launchIndex);
      } catch (...) {
        // no memory: this launch may go without its duration
      }
    }
  }
  t_pushed = g_cupti.push(kCorrelationKind, launchIndex) == CUPTI_SUCCESS;
  return t_pushed;
}

void leaveLaunch(CUresult result) noexcept {
  if (g_timingState.load(std::memory_order_acquire) == kForkChild) {
    return;
  }
  if (result == CUDA_SUCCESS) {
    g_timedLaunches.fetch_add(1, std::memory_order_relaxed);
  }
  if (t_pushed && g_timingState.load(std::memory_order_acquire) == kCollecting) {
    uint64_t launchIndex = 0;
    g_cupti.pop(kCorrelationKind, &launchIndex);
    pushToken();
  }
}

void finish(Recorder& recorder, bool flush) noexcept {
  if (flush) {
    flushAtExit();  // unless the atexit handler did already
  } else {
    int expected = kCollecting;
    g_timingState.compare_exchange_strong(expected, kClosed);
  }
  uint64_t delivered = 0;
  uint64_t incomplete = 0;
  uint64_t kernelRecords = 0;
  uint64_t correlations = 0;
  uint64_t otherCorrelations = 0;
  {
    const Lock lock;
    if (g_sink != &recorder) {
      return;  // timing never started for this recording
    }
    g_sink = nullptr;
    delivered = g_delivered;
    incomplete = g_incomplete;
    kernelRecords = g_kernelRecords;
    correlations = g_correlations;
    otherCorrelations = g_otherCorrelations;
    g_launchOfCorrelation.clear();
    g_emitted.clear();
    g_waitingKernels.clear();
    g_launchOfToken.clear();
    g_tokenWaiting.clear();
  }
  const uint64_t timed = g_timedLaunches.load();
  if (!flush || timed == 0 || delivered >= timed) {
    return;
  }
  // Said at the end, once, like a failure to start: a run where durations
  // went missing must never look like one where none were asked for.
  try {
    const std::string launches = std::to_string(timed) + " launches timed";
    if (kernelRecords == 0 && incomplete == 0) {
      unavailable(recorder, "CUPTI delivered no kernel records for the " + launches +
                                " (another CUPTI client, such as a profiler started after recording "
                                "began, may have taken CUPTI's activity buffers over)");
    } else if (delivered == 0) {
      unavailable(recorder, "none of the " + std::to_string(kernelRecords) +
                                " kernel records CUPTI delivered could be matched to the " + launches + " (" +
                                std::to_string(incomplete) + " were incomplete; " + std::to_string(correlations) +
                                " external-correlation records of kcap's kind, " + std::to_string(otherCorrelations) +
                                " of other kinds)");
    } else {
      sayOnce(recorder, "--timing: " + std::to_string(timed - delivered) + " of the " + launches +
                            " got no duration (" + std::to_string(incomplete) +
                            " kernels were still running when the trace ended)");
    }
  } catch (...) {}
}

void abandonAfterFork() noexcept {
  // Only this thread exists now; a lock held by a parent thread at the fork
  // would never be released.
  pthread_mutex_init(&g_timingMutex, nullptr);
  g_sink = nullptr;
  g_sinkCollecting.store(false);
  g_saidUnavailable.store(false);
  g_timedLaunches.store(0);
  if (g_timingState.load() != kUntried) {
    g_timingState.store(kForkChild);
  }
}

}  // namespace kcap::timing
