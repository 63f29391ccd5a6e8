// Observers: the extension point through which the shim sees driver calls.
//
// Every hooked call goes through Wrapper<Id>::call (hook_wrapper.h), which
// forwards to the real driver and, around that call, invokes
//
//   Observer<family_of(Id)>::before(Id, args...)            if declared
//   Observer<family_of(Id)>::after(Id, result, args...)     if declared
//
// with the caller's exact arguments. One observer serves all rows of an API
// (cuLaunchKernel and cuLaunchKernel_ptsz); the HookId argument says which row
// was called. An observer only watches: it must not change arguments or the
// result, and must not call back into the hooked entry points (use
// real_function()). It may throw: the exception is caught in the wrapper,
// reported once, and observing stops for the rest of the process while calls
// keep passing through.
//
// To add one, declare a specialization below and define it in a .cpp file
// (observers.cpp holds the ones that name kernels). The declaration must be
// visible here, because the wrappers are instantiated where this header is
// included.
#pragma once

#include "hook_table.h"

#include <cuda.h>

#include <exception>

namespace kcap {

template <HookId Family>
struct Observer {};  // by default a hook is only counted and forwarded

// ---- observing on/off ----------------------------------------------------------

bool observing() noexcept;
void stop_observing(const char* why) noexcept;

// Runs an observer callback; an exception stops all observing (see above).
template <class Callback>
void observe(Callback&& callback) noexcept
{
    if (!observing()) {
        return;
    }
    try {
        callback();
    } catch (const std::exception& e) {
        stop_observing(e.what());
    } catch (...) {
        stop_observing("unknown exception");
    }
}

// ---- the observers of this build (observers.cpp) -------------------------------

template <>
struct Observer<HookId::cuModuleLoad_hook> {
    static void after(HookId, CUresult, CUmodule* module, const char* path);
};
template <>
struct Observer<HookId::cuModuleLoadData_hook> {
    static void after(HookId, CUresult, CUmodule* module, const void* image);
};
template <>
struct Observer<HookId::cuModuleLoadDataEx_hook> {
    static void after(HookId, CUresult, CUmodule* module, const void* image, unsigned, CUjit_option*,
                      void**);
};
template <>
struct Observer<HookId::cuModuleLoadFatBinary_hook> {
    static void after(HookId, CUresult, CUmodule* module, const void* fatbin);
};
template <>
struct Observer<HookId::cuModuleUnload_hook> {
    static void after(HookId, CUresult, CUmodule module);
};
template <>
struct Observer<HookId::cuModuleGetFunction_hook> {
    static void after(HookId, CUresult, CUfunction* function, CUmodule module, const char* name);
};
template <>
struct Observer<HookId::cuLibraryLoadData_hook> {
    static void after(HookId, CUresult, CUlibrary* library, const void* code, CUjit_option*, void**,
                      unsigned, CUlibraryOption*, void**, unsigned);
};
template <>
struct Observer<HookId::cuLibraryLoadFromFile_hook> {
    static void after(HookId, CUresult, CUlibrary* library, const char* path, CUjit_option*, void**,
                      unsigned, CUlibraryOption*, void**, unsigned);
};
template <>
struct Observer<HookId::cuLibraryUnload_hook> {
    static void after(HookId, CUresult, CUlibrary library);
};
template <>
struct Observer<HookId::cuLibraryGetKernel_hook> {
    static void after(HookId, CUresult, CUkernel* kernel, CUlibrary library, const char* name);
};
template <>
struct Observer<HookId::cuLibraryGetModule_hook> {
    static void after(HookId, CUresult, CUmodule* module, CUlibrary library);
};
template <>
struct Observer<HookId::cuKernelGetFunction_hook> {
    static void after(HookId, CUresult, CUfunction* function, CUkernel kernel);
};

// Launches are observed before the real call: a launch that faults must
// already be on record (and its inputs snapshotted) when the driver gets it.
template <>
struct Observer<HookId::cuLaunchKernel_hook> {
    static void before(HookId, CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ,
                       unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,
                       CUstream stream, void** params, void** extra);
};
template <>
struct Observer<HookId::cuLaunchKernelEx_hook> {
    static void before(HookId, const CUlaunchConfig* config, CUfunction f, void** params,
                       void** extra);
};
template <>
struct Observer<HookId::cuLaunchCooperativeKernel_hook> {
    static void before(HookId, CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ,
                       unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,
                       CUstream stream, void** params);
};

}  // namespace kcap
