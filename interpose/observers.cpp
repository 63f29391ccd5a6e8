// The observers of this build: they keep the function registry current, so
// that every launch can be named. Recording (format/'s TraceWriter) will
// extend these: image bytes at load time, parameters and memory at launch.
#include "observer.h"

#include "function_registry.h"
#include "shim_log.h"

#include <atomic>

namespace kcap {
namespace {

std::atomic<bool> g_observing{true};

FunctionRegistry& registry() { return FunctionRegistry::instance(); }

}  // namespace

bool observing() noexcept { return g_observing.load(std::memory_order_relaxed); }

void stop_observing(const char* why) noexcept
{
    if (g_observing.exchange(false, std::memory_order_relaxed)) {
        log_message("internal error (%s); recording stops, calls pass through unchanged",
                    why != nullptr ? why : "?");
    }
}

// ---- code loading ---------------------------------------------------------------

void Observer<HookId::cuModuleLoad_hook>::after(HookId id, CUresult result, CUmodule* module,
                                                const char*)
{
    if (result == CUDA_SUCCESS && module != nullptr) {
        registry().module_loaded(*module, id);
    }
}

void Observer<HookId::cuModuleLoadData_hook>::after(HookId id, CUresult result, CUmodule* module,
                                                    const void*)
{
    if (result == CUDA_SUCCESS && module != nullptr) {
        registry().module_loaded(*module, id);
    }
}

void Observer<HookId::cuModuleLoadDataEx_hook>::after(HookId id, CUresult result, CUmodule* module,
                                                      const void*, unsigned, CUjit_option*, void**)
{
    if (result == CUDA_SUCCESS && module != nullptr) {
        registry().module_loaded(*module, id);
    }
}

void Observer<HookId::cuModuleLoadFatBinary_hook>::after(HookId id, CUresult result,
                                                         CUmodule* module, const void*)
{
    if (result == CUDA_SUCCESS && module != nullptr) {
        registry().module_loaded(*module, id);
    }
}

void Observer<HookId::cuModuleUnload_hook>::after(HookId, CUresult result, CUmodule module)
{
    if (result == CUDA_SUCCESS) {
        registry().module_unloaded(module);
    }
}

void Observer<HookId::cuModuleGetFunction_hook>::after(HookId, CUresult result, CUfunction* function,
                                                       CUmodule module, const char* name)
{
    if (result == CUDA_SUCCESS && function != nullptr) {
        registry().function_found(*function, module, name);
    }
}

void Observer<HookId::cuLibraryLoadData_hook>::after(HookId id, CUresult result, CUlibrary* library,
                                                     const void*, CUjit_option*, void**, unsigned,
                                                     CUlibraryOption*, void**, unsigned)
{
    if (result == CUDA_SUCCESS && library != nullptr) {
        registry().library_loaded(*library, id);
    }
}

void Observer<HookId::cuLibraryLoadFromFile_hook>::after(HookId id, CUresult result,
                                                         CUlibrary* library, const char*,
                                                         CUjit_option*, void**, unsigned,
                                                         CUlibraryOption*, void**, unsigned)
{
    if (result == CUDA_SUCCESS && library != nullptr) {
        registry().library_loaded(*library, id);
    }
}

void Observer<HookId::cuLibraryUnload_hook>::after(HookId, CUresult result, CUlibrary library)
{
    if (result == CUDA_SUCCESS) {
        registry().library_unloaded(library);
    }
}

void Observer<HookId::cuLibraryGetKernel_hook>::after(HookId, CUresult result, CUkernel* kernel,
                                                      CUlibrary library, const char* name)
{
    if (result == CUDA_SUCCESS && kernel != nullptr) {
        registry().kernel_found(*kernel, library, name);
    }
}

void Observer<HookId::cuLibraryGetModule_hook>::after(HookId, CUresult result, CUmodule* module,
                                                      CUlibrary library)
{
    if (result == CUDA_SUCCESS && module != nullptr) {
        registry().library_module(*module, library);
    }
}

void Observer<HookId::cuKernelGetFunction_hook>::after(HookId, CUresult result, CUfunction* function,
                                                       CUkernel kernel)
{
    if (result == CUDA_SUCCESS && function != nullptr) {
        registry().kernel_function(*function, kernel);
    }
}

// ---- launches -------------------------------------------------------------------

void Observer<HookId::cuLaunchKernel_hook>::before(HookId, CUfunction f, unsigned, unsigned, unsigned,
                                                   unsigned, unsigned, unsigned, unsigned, CUstream,
                                                   void**, void**)
{
    registry().launched(f);
}

void Observer<HookId::cuLaunchKernelEx_hook>::before(HookId, const CUlaunchConfig*, CUfunction f,
                                                     void**, void**)
{
    registry().launched(f);
}

void Observer<HookId::cuLaunchCooperativeKernel_hook>::before(HookId, CUfunction f, unsigned,
                                                              unsigned, unsigned, unsigned, unsigned,
                                                              unsigned, unsigned, CUstream, void**)
{
    registry().launched(f);
}

}  // namespace kcap
