// The real libcuda and the C library's dlsym, reached without going through
// the shim's own exports.
//
// The shim exports the hooked cu* symbols and dlsym itself, so neither a plain
// call nor dlsym(RTLD_NEXT, ...) is a reliable way to the driver: RTLD_NEXT
// only finds libcuda if it was loaded after the shim. Instead the driver is
// opened by name (KCAP_REAL_LIBCUDA, default libcuda.so.1; the loader returns
// the copy the program already has) and searched with glibc's dlsym, on that
// handle only.
//
// All functions are lock-free, may run before the shim's constructors, and
// never throw.
#pragma once

namespace kcap::real {

using DlsymFunction = void* (*)(void*, const char*) noexcept;  // glibc declares it __THROW

// glibc's dlsym (GLIBC_2.34, or GLIBC_2.2.5 / 2.17 on older C libraries).
// nullptr only if the C library has none, which is reported once. Defined in
// dlsym_override.cpp, which is built without sanitizers: the override calls
// it before a sanitizer runtime has initialized.
DlsymFunction libcDlsym() noexcept;

// The real driver, opened on first use. nullptr (reported once) if it cannot
// be loaded.
void* driverHandle() noexcept;

// True if `handle` is the real driver's dlopen handle. Never loads anything:
// safe to call from the dlsym override.
bool isDriverHandle(void* handle) noexcept;

// A symbol of the real driver, or nullptr.
void* driverSymbol(const char* name) noexcept;

// True if `fn` is code of the real driver. A pointer the driver hands out
// may lie elsewhere: a driver that takes its own exports' addresses through
// the global scope gets the shim's exports, or a position-dependent
// program's PLT stub (the canonical address of a function it took the
// address of), and both lead back into the shim.
bool isDriverFunction(const void* fn) noexcept;

}  // namespace kcap::real
