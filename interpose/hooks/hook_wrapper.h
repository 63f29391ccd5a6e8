// The wrapper behind every hooked entry point, generated from each row's PFN
// type: Wrapper<Id>::call has exactly the driver function's signature, counts
// the call, lets the observer see it (and a failure, observeFailure),
// forwards to the real function and returns its result unchanged. hook_exports.cpp exports it under the row's
// symbol; cuGetProcAddress and dlsym hand out its address. A call that can
// change device memory passes through the checkpoint gate while checkpoint
// mode records (core/checkpoint_gate.h): from before its observer sees it
// to after its event is handed over.
#pragma once

#include "core/checkpoint_gate.h"
#include "hooks/hook_table.h"
#include "hooks/stats.h"
#include "observe/observer.h"
#include "timing/cupti_timing.h"

#include <cuda.h>

#include <type_traits>

namespace kcap {

// What a wrapper returns when the driver has no function for its row (it was
// reached through the shim's export, but libcuda is missing or too old).
CUresult missingFunction(HookId id) noexcept;

template <HookId Id, class Fn = std::remove_pointer_t<typename HookPfn<Id>::type>>
struct GenericWrapper;

template <HookId Id, class... Args>
struct GenericWrapper<Id, CUresult(Args...)> {
  static CUresult call(Args... args) noexcept {
    timing::beforeAnyCall();
    countCall(Id);
    if constexpr (makesMemory(Id)) {
      hookCaller() = __builtin_return_address(0);  // the trampoline jumped: our caller's
    }
    using Pfn = typename HookPfn<Id>::type;
    const auto real = reinterpret_cast<Pfn>(realFunction(Id));
    if (real == nullptr) {
      return missingFunction(Id);
    }
    [[maybe_unused]] ThreadWork::Slot* gate = nullptr;
    if constexpr (changesDeviceMemory(Id)) {
      if (CheckpointGate::armed()) [[unlikely]] {
        gate = ThreadWork::mine();
        if (gate != nullptr) {
          CheckpointGate::enter(*gate);
        }
      }
    }
    using Obs = Observer<familyOf(Id)>;
    constexpr bool hasBefore = requires { Obs::before(Id, args...); };
    [[maybe_unused]] bool beforeRan = false;
    if constexpr (hasBefore) {
      beforeRan = observe([&] { Obs::before(Id, args...); });
    }
    const CUresult result = real(args...);
    if constexpr (requires { Obs::returned(result); }) {
      if (beforeRan) {
        Obs::returned(result);
      }
    }
    if (result != CUDA_SUCCESS) [[unlikely]] {
      observe([&] { observeFailure(Id, result); });
    }
    if constexpr (requires { Obs::after(Id, result, args...); }) {
      if constexpr (hasBefore) {
        if (beforeRan) {
          observe([&] { Obs::after(Id, result, args...); }, true);  // take down what before() set up
        }
      } else {
        observe([&] { Obs::after(Id, result, args...); });
      }
    }
    if constexpr (changesDeviceMemory(Id)) {
      if (gate != nullptr) {
        CheckpointGate::leave(*gate);
      }
    }
    if constexpr (makesMemory(Id)) {
      hookCaller() = nullptr;
    }
    return result;
  }
};

template <HookId Id>
struct Wrapper : GenericWrapper<Id> {};

// The two entry-point lookups are written by hand (proc_address.cpp): they
// rewrite the pointer the driver returns instead of observing it.
template <>
struct Wrapper<HookId::cuGetProcAddress_hook> {
  static CUresult call(const char* symbol, void** pfn, int version, cuuint64_t flags) noexcept;
};
template <>
struct Wrapper<HookId::cuGetProcAddress_v2_hook> {
  static CUresult call(const char* symbol, void** pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult* status) noexcept;
};

}  // namespace kcap
