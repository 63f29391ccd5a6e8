// xxHash, with XXH3 picked for this CPU at run time.
//
// The distributions build libxxhash for baseline x86-64, so its plain XXH3
// entry points use SSE2; the *_dispatch ones it also exports choose AVX2 or
// AVX-512 where the CPU has them (CMake checks the library exports them).
// xxh_x86dispatch.h renames XXH3_64bits,
// XXH3_128bits and their seeded and streaming forms to those: several times
// faster a core on hot buffers (docs/benchmarks.md), which is what checking
// a restored trace and hashing captured memory run at.
#pragma once

#if defined(KCAP_HAVE_XXH_DISPATCH)  // found by CMakeLists.txt
#include <xxh_x86dispatch.h>
#else
#include <xxhash.h>
#endif
