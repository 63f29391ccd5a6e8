#include "driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace kcap::replay {
namespace {

// Set as soon as the library is open, so that errors of cuInit itself have
// names (driver() is not usable until openDriver returns).
decltype(&::cuGetErrorName) g_errorName = nullptr;

// The exact symbol of a function named through cuda.h's macros
// (cuMemAlloc -> "cuMemAlloc_v2").
#define KCAP_SYMBOL_TEXT(fn) #fn
#define KCAP_SYMBOL(fn) KCAP_SYMBOL_TEXT(fn)

Driver openDriver() {
  Driver d;
  const char* override = std::getenv("KCAP_LIBCUDA");
  d.libraryPath = override != nullptr && *override != '\0' ? override : "libcuda.so.1";
  // RTLD_LOCAL: the driver's symbols must not satisfy lookups of anything else
  // this process loads.
  void* library = dlopen(d.libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    throw ReplayError("no CUDA driver: cannot open " + d.libraryPath + " (" + (why ? why : "unknown reason") +
                      "); replay needs a GPU and its driver");
  }
  std::string missing;
#define KCAP_REPLAY_REQUIRED(fn)                                            \
  d.fn = reinterpret_cast<decltype(d.fn)>(dlsym(library, KCAP_SYMBOL(fn))); \
  if (d.fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + KCAP_SYMBOL(fn);
  KCAP_REPLAY_REQUIRED_FUNCTIONS(KCAP_REPLAY_REQUIRED)
#undef KCAP_REPLAY_REQUIRED
#define KCAP_REPLAY_OPTIONAL(fn) d.fn = reinterpret_cast<decltype(d.fn)>(dlsym(library, KCAP_SYMBOL(fn)));
  KCAP_REPLAY_OPTIONAL_FUNCTIONS(KCAP_REPLAY_OPTIONAL)
#undef KCAP_REPLAY_OPTIONAL
  g_errorName = d.cuGetErrorName;
  if (!missing.empty()) {
    throw ReplayError("the CUDA driver " + d.libraryPath + " lacks " + missing + "; it is too old for kcap replay");
  }
  check(d.cuInit(0), "cuInit");
  check(d.cuDriverGetVersion(&d.version), "cuDriverGetVersion");
  return d;
}

}  // namespace

Driver& driver() {
  static std::once_flag once;
  static Driver* instance = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    try {
      instance = new Driver(openDriver());  // lives as long as the process
    } catch (const ReplayError& e) {
      failure = e.what();
    }
  });
  if (instance == nullptr) {
    throw ReplayError(failure);
  }
  return *instance;
}

std::string Driver::errorName(CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName != nullptr && cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) {
    return name;
  }
  return "CUresult " + std::to_string(static_cast<int>(result));
}

namespace {
std::string describe(CUresult result, const std::string& what) {
  const char* name = nullptr;
  if (g_errorName != nullptr && g_errorName(result, &name) == CUDA_SUCCESS && name != nullptr) {
    return what + ": " + name;
  }
  return what + ": CUresult " + std::to_string(static_cast<int>(result));
}
}  // namespace

CudaError::CudaError(CUresult result, const std::string& what) : ReplayError(describe(result, what)), result_(result) {}

bool CudaError::sticky() const {
  switch (result_) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

void check(CUresult result, const std::string& what) {
  if (result != CUDA_SUCCESS) {
    throw CudaError(result, what);
  }
}

}  // namespace kcap::replay
