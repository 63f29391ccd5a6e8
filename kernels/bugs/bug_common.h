// Shared by the bug-class programs of kernels/bugs/: each is an ordinary CUDA
// runtime program with one real bug that shows only for some inputs or on
// some hardware. A program prints what it computed, one "result ..." line at a
// time (tests/gpu/bugs/bug_classes.py compares a plain run with a recorded
// one), and exits 0: the bug is silent, or a hang that gives up by itself.
// A CUDA call that fails is not the bug: the program says which and exits 1.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define BUG_CHECK(call)                                                                                       \
  do {                                                                                                        \
    const cudaError_t bug_check_error_ = (call);                                                              \
    if (bug_check_error_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(bug_check_error_)); \
      std::exit(1);                                                                                           \
    }                                                                                                         \
  } while (0)

// After a <<<>>> launch: the launch itself was accepted and the kernel ran.
#define BUG_LAUNCHED()                  \
  do {                                  \
    BUG_CHECK(cudaGetLastError());      \
    BUG_CHECK(cudaDeviceSynchronize()); \
  } while (0)
