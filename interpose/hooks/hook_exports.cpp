// Exports every hooked symbol (cuLaunchKernel, cuMemAlloc_v2, ...) so that a
// program linked against libcuda, or one that looks a name up, reaches the
// shim first.
//
// A C++ definition needs a parameter list, and the rows only give a type
// (PFN_*). So each export is a three-instruction trampoline that jumps, with
// every argument register and the stack untouched, to the row's
// Wrapper<Id>::call, whose signature the compiler derived from the PFN type:
//
//   cuLaunchKernel:                 exported, what the program binds to
//   kcap_entry_cuLaunchKernel:      hidden alias, what the shim hands out
//       jmp *kcap_target_cuLaunchKernel    -> Wrapper<cuLaunchKernel_hook>::call
//
// kcap_target_* are constant-initialized pointers: they hold the wrapper's
// address as soon as the loader has relocated the shim, before any
// constructor runs. (GNU indirect functions would need no assembly, but the
// loader warns on stderr when a library relocated before the shim, such as
// libcuda itself, refers to one.)
//
// Every address the shim gives out for a hook (cuGetProcAddress, dlsym) is
// the kcap_entry_* alias, so the program sees one address per hook, the same
// the loader bound its references to.
#include "hooks/hook_table.h"
#include "hooks/hook_wrapper.h"

#include <type_traits>

// Register-preserving tail jump through kcap_target_<symbol>; x16 is the
// AArch64 register reserved for exactly such veneers.
#if defined(__x86_64__)
#if defined(__CET__)
#define KCAP_BRANCH_TARGET "endbr64\n"
#else
#define KCAP_BRANCH_TARGET ""
#endif
#define KCAP_JUMP_THROUGH(target) "jmp *" target "(%rip)\n"
#elif defined(__aarch64__)
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define KCAP_BRANCH_TARGET "bti c\n"
#else
#define KCAP_BRANCH_TARGET ""
#endif
#define KCAP_JUMP_THROUGH(target) "adrp x16, " target "\nldr x16, [x16, #:lo12:" target "]\nbr x16\n"
#else
#error "kcap: no trampoline for this architecture (see KCAP_JUMP_THROUGH)"
#endif

#define KCAP_HOOK(api, symbol, version, per_thread, pfn)                                                   \
  extern "C" [[gnu::visibility("hidden"), gnu::used]] constinit const pfn kcap_target_##symbol =           \
      &kcap::Wrapper<kcap::HookId::symbol##_hook>::call;                                                   \
  extern "C" [[gnu::visibility("hidden")]] std::remove_pointer_t<pfn> kcap_entry_##symbol;                 \
  __asm__(                                                                                                 \
      ".pushsection .text\n"                                                                               \
      ".p2align 4\n"                                                                                       \
      ".globl " #symbol                                                                                    \
      "\n"                                                                                                 \
      ".type " #symbol                                                                                     \
      ", %function\n"                                                                                      \
      ".globl kcap_entry_" #symbol                                                                         \
      "\n"                                                                                                 \
      ".hidden kcap_entry_" #symbol                                                                        \
      "\n"                                                                                                 \
      ".type kcap_entry_" #symbol ", %function\n" #symbol                                                  \
      ":\n"                                                                                                \
      "kcap_entry_" #symbol                                                                                \
      ":\n" KCAP_BRANCH_TARGET KCAP_JUMP_THROUGH("kcap_target_" #symbol) ".size " #symbol ", . - " #symbol \
                                                                         "\n"                              \
                                                                         ".size kcap_entry_" #symbol       \
                                                                         ", . - kcap_entry_" #symbol       \
                                                                         "\n"                              \
                                                                         ".popsection\n");
#include "driver_hooks.def"
#undef KCAP_HOOK

namespace kcap {

void* wrapperAddress(HookId id) noexcept {
  // A switch rather than a table: converting a function pointer to void*
  // is not a constant expression, and a table filled at run time could be
  // read (from dlsym) before it is filled.
  switch (id) {
#define KCAP_HOOK(api, symbol, version, per_thread, pfn) \
  case HookId::symbol##_hook:                            \
    return reinterpret_cast<void*>(&kcap_entry_##symbol);
#include "driver_hooks.def"
#undef KCAP_HOOK
  }
  return nullptr;
}

}  // namespace kcap
