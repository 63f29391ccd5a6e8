// Streams and launches. Everything runs synchronously on the calling
// thread: a launch runs the kernel's host implementation before returning, so
// streams only need to be valid handles.
#include <setjmp.h>
#include "driver_exports.h"
#include "graph.h"
#include "state.h"

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace kcap_double {

// A host kernel that touches memory nothing maps (a VMM reservation's
// unmapped part, as replay's overrun check places guards) faults like a GPU
// kernel: the launch "succeeds" and the context gets the sticky
// CUDA_ERROR_ILLEGAL_ADDRESS, instead of the process dying of SIGSEGV.
thread_local sigjmp_buf* g_faultJump = nullptr;

void onFault(int signal) {
  if (g_faultJump != nullptr) {
    siglongjmp(*g_faultJump, 1);
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void runKernel(const CapturedLaunch& launch, void** values) {
  struct sigaction action {};
  action.sa_handler = onFault;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_NODEFER;
  struct sigaction oldSegv {};
  struct sigaction oldBus {};
  sigaction(SIGSEGV, &action, &oldSegv);
  sigaction(SIGBUS, &action, &oldBus);
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) == 0) {
    g_faultJump = &jump;
    launch.def->run(launch.shape, values, *launch.module);
  } else {
    state().sticky.store(CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  g_faultJump = nullptr;
  sigaction(SIGSEGV, &oldSegv, nullptr);
  sigaction(SIGBUS, &oldBus, nullptr);
}

void runLaunch(const CapturedLaunch& launch) {
  std::vector<void*> values;
  for (const ParamSlot& slot : launch.def->params) {
    values.push_back(const_cast<unsigned char*>(launch.bytes.data()) + slot.offset);
  }
  runKernel(launch, values.data());
}

namespace {

// Pointers to each parameter's value, from kernelParams or from an `extra`
// buffer laid out as cuFuncGetParamInfo describes.
CUresult gatherParams(const KernelDef& def, void** params, void** extra, std::vector<void*>& out) {
  if (params != nullptr && extra != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (params != nullptr) {
    out.assign(params, params + def.params.size());
    return CUDA_SUCCESS;
  }
  if (extra == nullptr) {
    return def.params.empty() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  char* buffer = nullptr;
  const std::size_t* size = nullptr;
  for (std::size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = static_cast<char*>(extra[i + 1]);
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      size = static_cast<const std::size_t*>(extra[i + 1]);
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (buffer == nullptr || size == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The buffer must be exactly the parameters' size, without a struct's
  // tail padding: an H200 (driver 580) answered 32 bytes for axpy's 28
  // with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES.
  const std::size_t end = def.params.empty() ? 0 : def.params.back().offset + def.params.back().size;
  if (*size != end) {
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  for (const ParamSlot& slot : def.params) {
    out.push_back(buffer + slot.offset);
  }
  return CUDA_SUCCESS;
}

CUresult launch(CUfunction f, const LaunchShape& shape, CUstream stream, void** params, void** extra,
                bool cooperative) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  const KernelDef* def = nullptr;
  const Module* module = nullptr;
  {
    State& s = state();
    Lock lock(s.mutex);
    auto* launchable = reinterpret_cast<Launchable*>(f);
    if (s.launchables.count(launchable) == 0 || !validStream(s, stream)) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    if (const CUresult r = legacyStreamMayRun(s, stream); r != CUDA_SUCCESS) {
      return r;
    }
    launchable->loaded = true;
    def = launchable->def;
    module = launchable->module;
  }
  for (int d = 0; d < 3; ++d) {
    if (shape.grid[d] == 0 || shape.block[d] == 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (def->name == "kcap_content_hash" && contentHashFault() == "fail-later") {
    static std::atomic<int> launches{0};
    if (launches.fetch_add(1) > 0) {
      return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    }
  }
  if (1ULL * shape.block[0] * shape.block[1] * shape.block[2] > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (cooperative && shape.blocks() > 16ULL * kMultiprocessors) {
    return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  CapturedLaunch copy{def, module, shape, {}};
  if (const CUresult r = packParams(*def, params, extra, copy.bytes); r != CUDA_SUCCESS) {
    return r;
  }
  // A tensor map parameter (128 bytes) another driver made is refused.
  for (const ParamSlot& slot : def->params) {
    if (slot.size == sizeof(CUtensorMap) && !tensorMapIsOurs(copy.bytes.data() + slot.offset)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  // Poison values (state.h): a fault, a process killed mid-launch, a hang.
  for (const ParamSlot& slot : def->params) {
    if (slot.size != 8) {
      continue;
    }
    std::uint64_t word = 0;
    std::memcpy(&word, copy.bytes.data() + slot.offset, sizeof word);
    if (word == kPoisonKill) {
      ::raise(SIGKILL);
    }
    if (word == kPoisonHang) {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
    if (word == kPoisonSlow) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return CUDA_SUCCESS;
    }
    if (word == kPoisonAbort) {
      std::abort();
    }
    if (word == kPoisonFault) {
      state().sticky.store(CUDA_ERROR_ILLEGAL_ADDRESS);
      return CUDA_SUCCESS;  // launched; the fault shows at the next call
    }
  }
  {
    State& s = state();
    Lock lock(s.mutex);
    if (GraphNode* node = captureNode(s, stream, CU_GRAPH_NODE_TYPE_KERNEL); node != nullptr) {
      node->func = f;  // captured, not run
      node->ctx = reinterpret_cast<CUcontext>(currentContext());
      node->launch = std::move(copy);
      return CUDA_SUCCESS;
    }
  }
  runLaunch(copy);
  return CUDA_SUCCESS;
}

CUresult launchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, CUstream stream, void** params, void** extra) {
  return launch(f, LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream, params, extra, false);
}

CUresult launchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  if (config == nullptr || (config->numAttrs != 0 && config->attrs == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  bool cooperative = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      cooperative = config->attrs[i].value.cooperative != 0;
    }
  }
  const LaunchShape shape{{config->gridDimX, config->gridDimY, config->gridDimZ},
                          {config->blockDimX, config->blockDimY, config->blockDimZ},
                          config->sharedMemBytes};
  return launch(f, shape, config->hStream, params, extra, cooperative);
}

CUresult launchCooperative(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned shared, CUstream stream, void** params) {
  return launch(f, LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream, params, nullptr, true);
}

// Synchronizing a capturing stream is not allowed: it invalidates the
// capture, as the driver does.
CUresult synchronizeStream(CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!validStream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (const CUresult r = legacyStreamMayRun(s, stream); r != CUDA_SUCCESS) {
    return r;
  }
  if (Stream* found = findStream(s, stream); found != nullptr && found->capture != Stream::Capture::kNone) {
    found->capture = Stream::Capture::kInvalidated;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

}  // namespace

CUresult packParams(const KernelDef& def, void** params, void** extra, std::vector<unsigned char>& bytes) {
  std::vector<void*> values;
  if (const CUresult r = gatherParams(def, params, extra, values); r != CUDA_SUCCESS) {
    return r;
  }
  const std::size_t end = def.params.empty() ? 0 : def.params.back().offset + def.params.back().size;
  bytes.assign(end, 0);
  for (std::size_t i = 0; i < def.params.size(); ++i) {
    std::memcpy(bytes.data() + def.params[i].offset, values[i], def.params[i].size);
  }
  return CUDA_SUCCESS;
}

}  // namespace kcap_double

using namespace kcap_double;

// ---- streams and launches ------------------------------------------------------

DOUBLE_API CUresult cuStreamGetCtx(CUstream stream, CUcontext* context) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (context == nullptr || !validStream(s, stream)) {
    return context == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
  }
  const Stream* found = findStream(s, stream);
  const Context* owner = found != nullptr && found->context != nullptr ? found->context : currentContext();
  *context = reinterpret_cast<CUcontext>(const_cast<Context*>(owner));
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (stream == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* created = new Stream;
  created->flags = flags;
  created->context = currentContext();
  s.streams.insert(created);
  *stream = reinterpret_cast<CUstream>(created);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuStreamDestroy_v2(CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* found = reinterpret_cast<Stream*>(stream);
  if (s.streams.erase(found) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuStreamSynchronize(CUstream stream) { return synchronizeStream(stream); }
DOUBLE_API CUresult cuStreamSynchronize_ptsz(CUstream stream) { return synchronizeStream(stream); }

DOUBLE_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return launchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
DOUBLE_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return launchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
DOUBLE_API CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launchKernelEx(config, f, params, extra);
}
DOUBLE_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launchKernelEx(config, f, params, extra);
}
DOUBLE_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                              unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                              void** params) {
  return launchCooperative(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}
DOUBLE_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                   unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                                   void** params) {
  return launchCooperative(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}
