// Streams and launches. Everything runs synchronously on the calling
// thread: a launch runs the kernel's host implementation before returning, so
// streams only need to be valid handles.
#include <setjmp.h>
#include "driver_exports.h"
#include "state.h"

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

namespace kcap_double {

// A host kernel that touches memory nothing maps (a VMM reservation's
// unmapped part, as replay's overrun check places guards) faults like a GPU
// kernel: the launch "succeeds" and the context gets the sticky
// CUDA_ERROR_ILLEGAL_ADDRESS, instead of the process dying of SIGSEGV.
thread_local sigjmp_buf* fault_jump = nullptr;

void on_fault(int signal) {
  if (fault_jump != nullptr) {
    siglongjmp(*fault_jump, 1);
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void run_kernel(const CapturedLaunch& launch, void** values) {
  struct sigaction action {};
  action.sa_handler = on_fault;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_NODEFER;
  struct sigaction old_segv {};
  struct sigaction old_bus {};
  sigaction(SIGSEGV, &action, &old_segv);
  sigaction(SIGBUS, &action, &old_bus);
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) == 0) {
    fault_jump = &jump;
    launch.def->run(launch.shape, values, *launch.module);
  } else {
    state().sticky.store(CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  fault_jump = nullptr;
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
}

void run_launch(const CapturedLaunch& launch) {
  std::vector<void*> values;
  for (const ParamSlot& slot : launch.def->params) {
    values.push_back(const_cast<unsigned char*>(launch.bytes.data()) + slot.offset);
  }
  run_kernel(launch, values.data());
}

namespace {

// Pointers to each parameter's value, from kernelParams or from an `extra`
// buffer laid out as cuFuncGetParamInfo describes.
CUresult gather_params(const KernelDef& def, void** params, void** extra, std::vector<void*>& out) {
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
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  const KernelDef* def = nullptr;
  const Module* module = nullptr;
  {
    State& s = state();
    Lock lock(s.mutex);
    const auto* launchable = reinterpret_cast<const Launchable*>(f);
    if (s.launchables.count(launchable) == 0 || !valid_stream(s, stream)) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    def = launchable->def;
    module = launchable->module;
  }
  for (int d = 0; d < 3; ++d) {
    if (shape.grid[d] == 0 || shape.block[d] == 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (def->name == "kcap_content_hash" && content_hash_fault() == "fail-later") {
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
  std::vector<void*> values;
  if (const CUresult r = gather_params(*def, params, extra, values); r != CUDA_SUCCESS) {
    return r;
  }
  CapturedLaunch copy{def, module, shape, {}};
  const std::size_t end = def->params.empty() ? 0 : def->params.back().offset + def->params.back().size;
  copy.bytes.assign(end, 0);
  for (std::size_t i = 0; i < def->params.size(); ++i) {
    std::memcpy(copy.bytes.data() + def->params[i].offset, values[i], def->params[i].size);
  }
  // A tensor map parameter (128 bytes) another driver made is refused.
  for (const ParamSlot& slot : def->params) {
    if (slot.size == sizeof(CUtensorMap) && !tensor_map_is_ours(copy.bytes.data() + slot.offset)) {
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
    if (word == kPoisonFault) {
      state().sticky.store(CUDA_ERROR_ILLEGAL_ADDRESS);
      return CUDA_SUCCESS;  // launched; the fault shows at the next call
    }
  }
  {
    State& s = state();
    Lock lock(s.mutex);
    if (Stream* capturing = find_stream(s, stream);
        capturing != nullptr && capturing->capture != Stream::Capture::none) {
      capturing->captured.push_back(std::move(copy));  // captured, not run
      return CUDA_SUCCESS;
    }
  }
  run_launch(copy);
  return CUDA_SUCCESS;
}

CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared, CUstream stream, void** params, void** extra) {
  return launch(f, LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream, params, extra, false);
}

CUresult launch_kernel_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
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

CUresult launch_cooperative(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shared, CUstream stream, void** params) {
  return launch(f, LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream, params, nullptr, true);
}

// Synchronizing a capturing stream is not allowed: it invalidates the
// capture, as the driver does.
CUresult synchronize_stream(CUstream stream) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!valid_stream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (Stream* found = find_stream(s, stream); found != nullptr && found->capture != Stream::Capture::none) {
    found->capture = Stream::Capture::invalidated;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace kcap_double

using namespace kcap_double;

// ---- streams and launches ------------------------------------------------------

DOUBLE_API CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (stream == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* created = new Stream;
  created->flags = flags;
  s.streams.insert(created);
  *stream = reinterpret_cast<CUstream>(created);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuStreamDestroy_v2(CUstream stream) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
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

DOUBLE_API CUresult cuStreamSynchronize(CUstream stream) { return synchronize_stream(stream); }
DOUBLE_API CUresult cuStreamSynchronize_ptsz(CUstream stream) { return synchronize_stream(stream); }

DOUBLE_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
DOUBLE_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
DOUBLE_API CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launch_kernel_ex(config, f, params, extra);
}
DOUBLE_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launch_kernel_ex(config, f, params, extra);
}
DOUBLE_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                              unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                              void** params) {
  return launch_cooperative(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}
DOUBLE_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                   unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                                   void** params) {
  return launch_cooperative(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}
