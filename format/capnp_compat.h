// Included (with -include) before any Cap'n Proto header in every C++ file
// that uses the trace library.
//
// Cap'n Proto 0.9.2 (Debian 12, and the GPU hosts' bundle) does not compile as
// C++20 with g++ >= 13 or clang >= 16: capnp/blob.h compares `const char*`
// with kj::StringPtr, and kj/string.h leaves out that operator in C++20,
// counting on reversed rewritten candidates, which P2468 no longer generates
// for a class that also declares operator!=. Declaring the operator before
// blob.h is parsed restores what 1.0.1 fixed upstream (capnproto PR #1755).
#pragma once

#ifdef __cplusplus
#include <capnp/common.h>
#include <kj/string.h>

#if __cplusplus >= 202000L && CAPNP_VERSION < 1000001
namespace kj {
inline bool operator==(const char* a, const StringPtr& b) { return b == StringPtr(a); }
inline bool operator!=(const char* a, const StringPtr& b) { return !(b == StringPtr(a)); }
}  // namespace kj
#endif
#endif
