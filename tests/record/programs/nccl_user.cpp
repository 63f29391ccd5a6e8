// NCCL calls between kernel launches, against the driver double and the
// two-rank stand-in for NCCL (fake_nccl.cpp), which this library links as
// libnccl.so.2: the shim's NCCL entry points come first. Its one function,
// runNcclCollectives, is the program (nccl_collectives.cpp). The communicator is made
// first (with memory of its own), r comes from ncclMemAlloc. x = i % 13,
// y = 1. Round 1:
// axpy (y += 2 x), ncclAllReduce of y in place (y += the peer's share),
// axpy. Round 2, one group: ncclAllGather of y's first half into g,
// ncclRecv into r, ncclSend of x; then axpy reads r into y. The last line
// prints the sums of y, g and r.
//
// Built three ways: linked with NCCL; with KCAP_NCCL_LIBRARY naming it, as
// a program that opens NCCL itself and looks each function up in its
// handle; and with KCAP_NCCL_PROFILER, as a program with a profiling layer
// of its own: it defines ncclAllReduce, ncclGroupStart and ncclGroupEnd,
// which count the calls and call NCCL's profiling names (pncclAllReduce,
// ...), and it calls the group's three calls by their profiling names.
#include "driver_program.h"

#include <cstddef>
#include <string>
#include <vector>

struct UniqueId {  // ncclUniqueId
  char internal[128];
};

extern "C" {
int ncclCommInitRank(void**, int, UniqueId, int);
int ncclMemAlloc(void**, std::size_t);
int ncclCommDestroy(void*);
int ncclAllReduce(const void*, void*, std::size_t, int, int, void*, CUstream);
int ncclAllGather(const void*, void*, std::size_t, int, void*, CUstream);
int ncclRecv(void*, std::size_t, int, int, void*, CUstream);
int ncclSend(const void*, std::size_t, int, int, void*, CUstream);
int ncclGroupStart();
int ncclGroupEnd();
}

#if defined(KCAP_NCCL_PROFILER)
extern "C" {
int pncclAllReduce(const void*, void*, std::size_t, int, int, void*, CUstream);
int pncclAllGather(const void*, void*, std::size_t, int, void*, CUstream);
int pncclRecv(void*, std::size_t, int, int, void*, CUstream);
int pncclSend(const void*, std::size_t, int, int, void*, CUstream);
int pncclGroupStart();
int pncclGroupEnd();
}

namespace {
int g_profiled = 0;  // calls the profiling layer saw
}  // namespace

extern "C" [[gnu::visibility("default")]] int ncclAllReduce(const void* send, void* recv, std::size_t count, int type,
                                                            int op, void* comm, CUstream stream) {
  ++g_profiled;
  return pncclAllReduce(send, recv, count, type, op, comm, stream);
}
extern "C" [[gnu::visibility("default")]] int ncclGroupStart() {
  ++g_profiled;
  return pncclGroupStart();
}
extern "C" [[gnu::visibility("default")]] int ncclGroupEnd() {
  ++g_profiled;
  return pncclGroupEnd();
}
#define NCCL_FN(name) (&::name)
#define NCCL_DIRECT(name) (&::p##name)
#elif defined(KCAP_NCCL_LIBRARY)
#include <dlfcn.h>

#include <cstdlib>

namespace {
template <class Fn>
Fn ncclFunction(const char* name) {
  static void* const library = dlopen(KCAP_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  void* fn = library != nullptr ? dlsym(library, name) : nullptr;
  if (fn == nullptr) {
    std::fprintf(stderr, "FAILED: no %s in %s\n", name, KCAP_NCCL_LIBRARY);
    std::exit(1);
  }
  return reinterpret_cast<Fn>(fn);
}
}  // namespace
#define NCCL_FN(name) ncclFunction<decltype(&::name)>(#name)
#define NCCL_DIRECT(name) NCCL_FN(name)
#else
#define NCCL_FN(name) (&::name)
#define NCCL_DIRECT(name) NCCL_FN(name)
#endif

namespace {

constexpr int kN = 1024;
constexpr std::size_t kBytes = kN * sizeof(float);
constexpr int kFloat32 = 7;
constexpr int kSum = 0;

#define NCCL(call) CHECK((call) == 0)

CUdeviceptr upload(const std::vector<float>& values) {
  CUdeviceptr device = 0;
  DRIVER(cuMemAlloc, &device, values.size() * sizeof(float));
  DRIVER(cuMemcpyHtoD, device, values.data(), values.size() * sizeof(float));
  return device;
}

void* pointer(CUdeviceptr device) { return reinterpret_cast<void*>(device); }

}  // namespace

extern "C" [[gnu::visibility("default")]] int runNcclCollectives() {
  const CUfunction axpy = test::axpyOnDeviceZero();
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);

  std::vector<float> xs(kN);
  for (int i = 0; i < kN; ++i) xs[static_cast<std::size_t>(i)] = static_cast<float>(i % 13);
  CUdeviceptr x = upload(xs);
  CUdeviceptr y = upload(std::vector<float>(kN, 1.0f));
  CUdeviceptr g = upload(std::vector<float>(kN, 0.0f));
  void* comm = nullptr;
  NCCL(NCCL_FN(ncclCommInitRank)(&comm, 2, UniqueId{}, 0));
  void* received = nullptr;
  NCCL(NCCL_FN(ncclMemAlloc)(&received, kBytes));
  const auto r = reinterpret_cast<CUdeviceptr>(received);
  DRIVER(cuMemsetD32, r, 0, kN);
  const auto launchAxpy = [&](CUdeviceptr in) {
    float a = 2.0f;
    int n = kN;
    void* params[] = {&a, &in, &y, &n};
    test::launchesMade().add("axpy");
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr);
  };

  launchAxpy(x);
  NCCL(NCCL_FN(ncclAllReduce)(pointer(y), pointer(y), kN, kFloat32, kSum, comm, stream));
  launchAxpy(x);

  NCCL(NCCL_FN(ncclGroupStart)());
  NCCL(NCCL_DIRECT(ncclAllGather)(pointer(y), pointer(g), kN / 2, kFloat32, comm, stream));
  NCCL(NCCL_DIRECT(ncclRecv)(pointer(r), kN, kFloat32, 1, comm, stream));
  NCCL(NCCL_DIRECT(ncclSend)(pointer(x), kN, kFloat32, 1, comm, stream));
  NCCL(NCCL_FN(ncclGroupEnd)());
  launchAxpy(r);
  DRIVER(cuStreamSynchronize, stream);

  std::printf("result nccl_sums %.1f %.1f %.1f\n", test::deviceSum(y, kN), test::deviceSum(g, kN),
              test::deviceSum(r, kN));
  NCCL(NCCL_FN(ncclCommDestroy)(comm));
#ifdef KCAP_NCCL_PROFILER
  std::printf("profiled %d calls\n", g_profiled);
#endif
  return 0;
}
