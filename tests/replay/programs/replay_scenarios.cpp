// Test programs for replay, one per scenario (argv[1]), recorded against the
// driver double and then replayed by tests/replay.
//
//   sequence  five launches that depend on each other, with the program's
//             own memsets and copies between them (what `kcap replay --range`
//             must re-apply):
//               x = i, y = 2i
//               0 axpy a=1              y = 3i
//                 cuMemsetD32 x = 1.0f
//               1 axpy a=2              y = 3i + 2
//                 cuMemcpyHtoD x = i/2
//               2 axpy a=4              y = 5i + 2
//                 cuMemcpyDtoD x = y
//               3 axpy a=1              y = 10i + 4
//                 cuMemsetD8 sum = 0
//               4 reduce_sum(y) -> sum
//   checks    one launch per `kcap replay --check` checker to find
//             something (kernels/checks.cu), and correct ones (axpy):
//               0 axpy a=2 (x, y)            correct: every check clean
//               1 racy_sum(r, sum)           determinism (r: values whose
//                                            float sum depends on the order)
//               2 fill_empty(x, z)           unwritten: z = 0 in its first
//                                            half, = x in its second
//               3 pad_scale(p, w)            uninit: p holds 2n floats, the
//                                            program wrote the first n
//               4 add_first(v, v)            alias
//               5 axpy a=2 (v, v)            alias, but correct in place
//               6 sum_next(x, w)             overrun: reads x[n]
//               7 skip_rows(x, u)            unwritten: elements 6 and 7 of
//                                            every 8 never written (holes)
//               8 pad_max(p, m)              uninit through a max, which
//                                            ignores a NaN poison
//               9 scale_next(a, b), n = 1000 overrun inside the slack: reads
//                                            a[1000] (4000-byte buffers: the
//                                            guard is 96 bytes past the end)
//              10 shift_store(a, b), n = 1000 overrun inside the slack:
//                                            writes b[1000]
//             x[i] = 1 + i / 8 (never 0), n = 1024, every buffer 4096 bytes
//             except p (8192), a and b (4000)
//   sequence-middle  five launches, each reading the one before's output,
//             the only axpy in the middle (where a changed axpy build
//             diverges first):
//               0 skip_rows(x, u)   1 skip_rows(u, v)   2 axpy a=2 (v, w)
//               3 skip_rows(w, t)   4 skip_rows(t, s)
//   pdl       three launches of axpy on one stream, the second with
//             programmatic stream serialization (cuLaunchKernelEx), so it
//             may start before the first ends; the double runs them in turn:
//               0 axpy a=1              y = 3i
//               1 axpy a=2, PDL         y = 5i
//               2 axpy a=1              y = 6i
//   pitched   2D copies and memsets between launches of axpy (x = p, a
//             pitched allocation of 8 rows of 64 floats, its whole pitch read
//             as kN floats: the double pitches rows 512 bytes apart):
//                 cuMemsetD32 p = 1.0f (padding included); y = 2i
//               0 axpy a=1
//                 cuMemcpy2D host -> p, 8 rows r*100 + c (host rows 80
//                 floats apart)
//                 cuMemsetD2D32 rows 2..5, elements 16..47 = 0.5f
//               1 axpy a=2
//                 cuMemcpy2D y -> p (device to device): 8 rows of 32
//                 floats from y + r * pitch to elements 32..63 of row r
//               2 axpy a=1
//   volume    3D copies between launches of axpy (x = v, a pitched volume
//             of 2 slices of 4 rows of 64 floats, as cudaMalloc3D makes one:
//             rows 512 bytes apart, its whole pitch read as kN floats):
//                 cuMemsetD32 v = 1.0f (padding included); y = 2i
//               0 axpy a=1
//                 cuMemcpy3D host -> v: slice z, row r, element c =
//                 z*1000 + r*100 + c (a linear host volume: rows 80 floats
//                 apart, slices 5 rows apart)
//               1 axpy a=2
//                 cuMemcpy3DAsync y -> v (device to device): y read as a
//                 volume shaped like v; 2 slices of 3 rows of 32 floats
//                 from (0, 0, 0) to (32, 1, 0)
//               2 axpy a=1
//   pool      three launches of axpy into one 64 KiB allocation (a pool
//             every launch reaches), each changing one 4 KiB slice of it
//             (recorded with 4 KiB pieces: 16 pieces of the pool):
//                 x = i, pool = i / 2 (16384 floats)
//               0 axpy a=1 (x, pool)             floats 0..1023
//               1 axpy a=2 (x, pool + 32 KiB)    floats 8192..9215
//               2 axpy a=1 (x, pool)             floats 0..1023
//   hang      one ordinary launch, then one that never returns (the double's
//             kPoisonHang parameter); a watchdog thread kills the process
//             (SIGKILL) a second later, as a user would
#include "driver_program.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kN = 1024;
constexpr std::uint64_t kPoisonHang = 0xDEAD0000DEAD4A46ull;  // tests/driver_double/state.h

void start() {
  DRIVER(cuInit, 0);
  CUdevice device = 0;
  DRIVER(cuDeviceGet, &device, 0);
  CUcontext context = nullptr;
  DRIVER(cuDevicePrimaryCtxRetain, &context, device);
  DRIVER(cuCtxSetCurrent, context);
}

std::vector<float> iota(float scale) {
  std::vector<float> v(kN);
  for (int i = 0; i < kN; ++i) {
    v[static_cast<std::size_t>(i)] = scale * static_cast<float>(i);
  }
  return v;
}

CUdeviceptr upload(const std::vector<float>& values) {
  CUdeviceptr device = 0;
  DRIVER(cuMemAlloc, &device, values.size() * sizeof(float));
  DRIVER(cuMemcpyHtoD, device, values.data(), values.size() * sizeof(float));
  return device;
}

struct Axpy {
  std::string image = test::kernelImage("axpy.fatbin");
  CUmodule module = nullptr;
  CUfunction function = nullptr;

  Axpy() {
    DRIVER(cuModuleLoadData, &module, image.data());
    DRIVER(cuModuleGetFunction, &function, module, "axpy");
  }
  CUresult launch(float a, CUdeviceptr x, CUdeviceptr y, CUstream stream = nullptr) {
    int n = kN;
    void* params[] = {&a, &x, &y, &n};
    test::launchesMade().add("axpy");
    return cuLaunchKernel(function, kN / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr);
  }
  // Launched with programmatic stream serialization: it may start before
  // the launch ahead of it on `stream` ends.
  CUresult launchDependent(float a, CUdeviceptr x, CUdeviceptr y, CUstream stream) {
    int n = kN;
    void* params[] = {&a, &x, &y, &n};
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = kN / 256, config.gridDimY = 1, config.gridDimZ = 1;
    config.blockDimX = 256, config.blockDimY = 1, config.blockDimZ = 1;
    config.hStream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    test::launchesMade().add("axpy");
    return cuLaunchKernelEx(&config, function, params, nullptr);
  }
};

int sequence() {
  start();
  Axpy axpy;
  const CUdeviceptr x = upload(iota(1.0f));
  const CUdeviceptr y = upload(iota(2.0f));
  DRIVER(axpy.launch, 1.0f, x, y);
  float one = 1.0f;
  unsigned oneBits = 0;
  std::memcpy(&oneBits, &one, sizeof oneBits);
  DRIVER(cuMemsetD32, x, oneBits, kN);
  DRIVER(axpy.launch, 2.0f, x, y);
  const std::vector<float> half = iota(0.5f);
  DRIVER(cuMemcpyHtoD, x, half.data(), kN * sizeof(float));
  DRIVER(axpy.launch, 4.0f, x, y);
  DRIVER(cuMemcpyDtoD, x, y, kN * sizeof(float));
  DRIVER(axpy.launch, 1.0f, x, y);

  CUmodule reduceModule = nullptr;
  DRIVER(cuModuleLoad, &reduceModule, test::kernelPath("reduce.sm_90.cubin").c_str());
  CUfunction reduce = nullptr;
  DRIVER(cuModuleGetFunction, &reduce, reduceModule, "reduce_sum");
  CUdeviceptr sum = 0;
  DRIVER(cuMemAlloc, &sum, sizeof(float));
  DRIVER(cuMemsetD8, sum, 0, sizeof(float));
  CUdeviceptr in = y;
  unsigned count = kN;
  void* reduceParams[] = {&in, &sum, &count};
  DRIVER(cuLaunchKernel, reduce, 4, 1, 1, 256, 1, 1, 0, nullptr, reduceParams, nullptr);
  test::launchesMade().add("reduce_sum");

  std::vector<float> out(kN);
  DRIVER(cuMemcpyDtoH, out.data(), y, kN * sizeof(float));
  for (int i = 0; i < kN; ++i) {
    CHECK(out[static_cast<std::size_t>(i)] == static_cast<float>(10 * i + 4));
  }
  float total = 0;
  DRIVER(cuMemcpyDtoH, &total, sum, sizeof total);
  const int expectedTotal = 10 * (kN * (kN - 1) / 2) + 4 * kN;  // exact in float
  CHECK(total == static_cast<float>(expectedTotal));
  std::printf("result sequence_sum %.1f\n", static_cast<double>(total));
  return 0;
}

unsigned floatBits(float value) {
  unsigned bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

int pitched() {
  constexpr std::size_t kRows = 8, kColumns = 64, kHostPitch = 80;  // floats
  start();
  Axpy axpy;
  CUdeviceptr p = 0;
  std::size_t pitch = 0;
  DRIVER(cuMemAllocPitch, &p, &pitch, kColumns * sizeof(float), kRows, 4);
  CHECK(pitch * kRows == kN * sizeof(float));
  const std::size_t rowFloats = pitch / sizeof(float);
  // What the program expects p and y to hold, computed alongside.
  std::vector<float> x(kN, 1.0f);
  std::vector<float> y = iota(2.0f);
  const auto axpyOnHost = [&](float a) {
    for (int i = 0; i < kN; ++i) {
      y[static_cast<std::size_t>(i)] += a * x[static_cast<std::size_t>(i)];
    }
  };
  DRIVER(cuMemsetD32, p, floatBits(1.0f), kN);
  const CUdeviceptr yd = upload(y);
  DRIVER(axpy.launch, 1.0f, p, yd);
  axpyOnHost(1.0f);

  std::vector<float> host(kRows * kHostPitch, -1.0f);
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t c = 0; c < kColumns; ++c) {
      host[r * kHostPitch + c] = static_cast<float>(r * 100 + c);
      x[r * rowFloats + c] = host[r * kHostPitch + c];
    }
  }
  CUDA_MEMCPY2D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.srcPitch = kHostPitch * sizeof(float);
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = p;
  up.dstPitch = pitch;
  up.WidthInBytes = kColumns * sizeof(float);
  up.Height = kRows;
  DRIVER(cuMemcpy2D, &up);
  DRIVER(cuMemsetD2D32, p + 2 * pitch + 16 * sizeof(float), pitch, floatBits(0.5f), 32, 4);
  for (std::size_t r = 2; r < 6; ++r) {
    std::fill_n(x.begin() + static_cast<std::ptrdiff_t>(r * rowFloats + 16), 32, 0.5f);
  }
  DRIVER(axpy.launch, 2.0f, p, yd);
  axpyOnHost(2.0f);

  CUDA_MEMCPY2D across{};
  across.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  across.srcDevice = yd;
  across.srcPitch = pitch;
  across.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  across.dstDevice = p;
  across.dstXInBytes = 32 * sizeof(float);
  across.dstPitch = pitch;
  across.WidthInBytes = 32 * sizeof(float);
  across.Height = kRows;
  DRIVER(cuMemcpy2D, &across);
  for (std::size_t r = 0; r < kRows; ++r) {
    std::copy_n(y.begin() + static_cast<std::ptrdiff_t>(r * rowFloats), 32,
                x.begin() + static_cast<std::ptrdiff_t>(r * rowFloats + 32));
  }
  DRIVER(axpy.launch, 1.0f, p, yd);
  axpyOnHost(1.0f);

  std::vector<float> out(kN);
  DRIVER(cuMemcpyDtoH, out.data(), yd, kN * sizeof(float));
  CHECK(out == y);
  std::printf("result pitched y[%zu] %.1f\n", rowFloats + 40, static_cast<double>(out[rowFloats + 40]));
  return 0;
}

int volume() {
  constexpr std::size_t kSlices = 2, kSliceRows = 4, kColumns = 64;  // floats
  constexpr std::size_t kHostPitch = 80, kHostSliceRows = 5;         // floats, rows
  start();
  Axpy axpy;
  CUdeviceptr v = 0;
  std::size_t pitch = 0;
  DRIVER(cuMemAllocPitch, &v, &pitch, kColumns * sizeof(float), kSlices * kSliceRows, 4);
  CHECK(pitch * kSlices * kSliceRows == kN * sizeof(float));
  const std::size_t rowFloats = pitch / sizeof(float);
  const auto element = [&](std::size_t c, std::size_t r, std::size_t z) {
    return (z * kSliceRows + r) * rowFloats + c;
  };
  // What the program expects v and y to hold, computed alongside.
  std::vector<float> x(kN, 1.0f);
  std::vector<float> y = iota(2.0f);
  const auto axpyOnHost = [&](float a) {
    for (int i = 0; i < kN; ++i) {
      y[static_cast<std::size_t>(i)] += a * x[static_cast<std::size_t>(i)];
    }
  };
  DRIVER(cuMemsetD32, v, floatBits(1.0f), kN);
  const CUdeviceptr yd = upload(y);
  DRIVER(axpy.launch, 1.0f, v, yd);
  axpyOnHost(1.0f);

  std::vector<float> host(kSlices * kHostSliceRows * kHostPitch, -1.0f);
  for (std::size_t z = 0; z < kSlices; ++z) {
    for (std::size_t r = 0; r < kSliceRows; ++r) {
      for (std::size_t c = 0; c < kColumns; ++c) {
        const float value = static_cast<float>(z * 1000 + r * 100 + c);
        host[(z * kHostSliceRows + r) * kHostPitch + c] = value;
        x[element(c, r, z)] = value;
      }
    }
  }
  CUDA_MEMCPY3D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.srcPitch = kHostPitch * sizeof(float);
  up.srcHeight = kHostSliceRows;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = v;
  up.dstPitch = pitch;
  up.dstHeight = kSliceRows;
  up.WidthInBytes = kColumns * sizeof(float);
  up.Height = kSliceRows;
  up.Depth = kSlices;
  DRIVER(cuMemcpy3D, &up);
  DRIVER(axpy.launch, 2.0f, v, yd);
  axpyOnHost(2.0f);

  CUDA_MEMCPY3D across{};
  across.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  across.srcDevice = yd;
  across.srcPitch = pitch;
  across.srcHeight = kSliceRows;
  across.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  across.dstDevice = v;
  across.dstXInBytes = 32 * sizeof(float);
  across.dstY = 1;
  across.dstPitch = pitch;
  across.dstHeight = kSliceRows;
  across.WidthInBytes = 32 * sizeof(float);
  across.Height = 3;
  across.Depth = kSlices;
  DRIVER(cuMemcpy3DAsync, &across, nullptr);
  DRIVER(cuStreamSynchronize, nullptr);
  for (std::size_t z = 0; z < kSlices; ++z) {
    for (std::size_t r = 0; r < 3; ++r) {
      std::copy_n(y.begin() + static_cast<std::ptrdiff_t>(element(0, r, z)), 32,
                  x.begin() + static_cast<std::ptrdiff_t>(element(32, r + 1, z)));
    }
  }
  DRIVER(axpy.launch, 1.0f, v, yd);
  axpyOnHost(1.0f);

  std::vector<float> out(kN);
  DRIVER(cuMemcpyDtoH, out.data(), yd, kN * sizeof(float));
  CHECK(out == y);
  const std::size_t shown = element(40, 2, 1);
  std::printf("result volume y[%zu] %.1f\n", shown, static_cast<double>(out[shown]));
  return 0;
}

int checks() {
  start();
  Axpy axpy;
  std::string image = test::kernelImage("checks.fatbin");
  CUmodule module = nullptr;
  DRIVER(cuModuleLoadData, &module, image.data());
  const auto kernel = [&](const char* name, CUdeviceptr x, CUdeviceptr y, int n = kN) {
    CUfunction f = nullptr;
    DRIVER(cuModuleGetFunction, &f, module, name);
    void* params[] = {&x, &y, &n};
    DRIVER(cuLaunchKernel, f, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
    test::launchesMade().add(name);
  };
  std::vector<float> xs(kN);
  for (int i = 0; i < kN; ++i) {
    xs[static_cast<std::size_t>(i)] = 1.0f + static_cast<float>(i) / 8.0f;
  }
  const CUdeviceptr x = upload(xs);
  const CUdeviceptr y = upload(iota(2.0f));
  DRIVER(axpy.launch, 2.0f, x, y);  // 0

  std::vector<float> rs(kN);  // sums that round differently in every order
  for (int i = 0; i < kN; ++i) {
    rs[static_cast<std::size_t>(i)] = (i % 2 != 0 ? 1.0e7f : 1.0f) + 0.1f * static_cast<float>(i);
  }
  const CUdeviceptr r = upload(rs);
  CUdeviceptr sum = 0;
  DRIVER(cuMemAlloc, &sum, sizeof(float));
  DRIVER(cuMemsetD8, sum, 0, sizeof(float));
  kernel("racy_sum", r, sum);  // 1

  std::vector<float> zs = xs;
  std::fill(zs.begin(), zs.begin() + kN / 2, 0.0f);
  const CUdeviceptr z = upload(zs);
  kernel("fill_empty", x, z);  // 2

  CUdeviceptr p = 0;
  DRIVER(cuMemAlloc, &p, 2 * kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, p, xs.data(), kN * sizeof(float));  // the second half never written
  CUdeviceptr w = 0;
  DRIVER(cuMemAlloc, &w, kN * sizeof(float));
  DRIVER(cuMemsetD32, w, 0, kN);
  kernel("pad_scale", p, w);  // 3

  const CUdeviceptr v = upload(xs);
  kernel("add_first", v, v);        // 4
  DRIVER(axpy.launch, 2.0f, v, v);  // 5

  kernel("sum_next", x, w);  // 6
  CUdeviceptr u = 0;
  DRIVER(cuMemAlloc, &u, kN * sizeof(float));
  DRIVER(cuMemsetD32, u, 0, kN);
  kernel("skip_rows", x, u);  // 7
  CUdeviceptr m = 0;
  DRIVER(cuMemAlloc, &m, kN * sizeof(float));
  DRIVER(cuMemsetD32, m, 0, kN);
  kernel("pad_max", p, m);  // 8
  const std::vector<float> as(xs.begin(), xs.begin() + 1000);
  const CUdeviceptr a = upload(as);
  const CUdeviceptr b = upload(as);
  kernel("scale_next", a, b, 1000);   // 9
  kernel("shift_store", a, b, 1000);  // 10
  std::printf("result checks\n");
  return 0;
}

int sequenceMiddle() {
  start();
  Axpy axpy;
  std::string image = test::kernelImage("checks.fatbin");
  CUmodule module = nullptr;
  DRIVER(cuModuleLoadData, &module, image.data());
  CUfunction skipRows = nullptr;
  DRIVER(cuModuleGetFunction, &skipRows, module, "skip_rows");
  const auto skip = [&](CUdeviceptr from, CUdeviceptr to) {
    int n = kN;
    void* params[] = {&from, &to, &n};
    DRIVER(cuLaunchKernel, skipRows, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
    test::launchesMade().add("skip_rows");
  };
  const CUdeviceptr x = upload(iota(1.0f));
  std::vector<CUdeviceptr> buffers;
  for (int i = 0; i < 4; ++i) buffers.push_back(upload(std::vector<float>(kN, 0.0f)));
  const CUdeviceptr u = buffers[0], v = buffers[1], t = buffers[2], s = buffers[3];
  const CUdeviceptr w = upload(iota(2.0f));
  skip(x, u);                       // 0
  skip(u, v);                       // 1
  DRIVER(axpy.launch, 2.0f, v, w);  // 2
  skip(w, t);                       // 3
  skip(t, s);                       // 4
  std::vector<float> out(kN);
  DRIVER(cuMemcpyDtoH, out.data(), s, kN * sizeof(float));
  std::printf("result sequence_middle %.1f\n", static_cast<double>(out[100]));
  return 0;
}

int hang() {
  start();
  Axpy axpy;
  const CUdeviceptr x = upload(iota(1.0f));
  const CUdeviceptr y = upload(iota(2.0f));
  DRIVER(axpy.launch, 1.0f, x, y);
  std::printf("result before_hang\n");
  std::fflush(stdout);
  static std::atomic<bool> launching{false};
  std::thread([] {
    while (!launching.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    ::raise(SIGKILL);
  }).detach();
  launching.store(true);
  axpy.launch(1.0f, static_cast<CUdeviceptr>(kPoisonHang), y);  // never returns
  test::fail("the hanging launch returned");
}

int pdl() {
  start();
  Axpy axpy;
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  const CUdeviceptr x = upload(iota(1.0f));
  const CUdeviceptr y = upload(iota(2.0f));
  DRIVER(axpy.launch, 1.0f, x, y, stream);
  DRIVER(axpy.launchDependent, 2.0f, x, y, stream);
  DRIVER(axpy.launch, 1.0f, x, y, stream);
  DRIVER(cuStreamSynchronize, stream);
  std::vector<float> out(kN);
  DRIVER(cuMemcpyDtoH, out.data(), y, kN * sizeof(float));
  for (int i = 0; i < kN; ++i) {
    CHECK(out[static_cast<std::size_t>(i)] == static_cast<float>(6 * i));
  }
  std::printf("result pdl y[1] %.1f\n", static_cast<double>(out[1]));
  return 0;
}

int pool() {
  start();
  Axpy axpy;
  const CUdeviceptr x = upload(iota(1.0f));
  std::vector<float> halves(16 * kN);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = 0.5f * static_cast<float>(i);
  const CUdeviceptr pool = upload(halves);
  const CUdeviceptr middle = pool + 8 * kN * sizeof(float);
  DRIVER(axpy.launch, 1.0f, x, pool);
  DRIVER(axpy.launch, 2.0f, x, middle);
  DRIVER(axpy.launch, 1.0f, x, pool);
  std::vector<float> out(halves.size());
  DRIVER(cuMemcpyDtoH, out.data(), pool, out.size() * sizeof(float));
  CHECK(out[100] == 50.0f + 200.0f && out[8192 + 100] == 4146.0f + 200.0f);
  std::printf("result pool %.1f %.1f\n", static_cast<double>(out[100]), static_cast<double>(out[8192 + 100]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "sequence") {
    return sequence();
  }
  if (scenario == "checks") {
    return checks();
  }
  if (scenario == "sequence-middle") {
    return sequenceMiddle();
  }
  if (scenario == "hang") {
    return hang();
  }
  if (scenario == "pdl") {
    return pdl();
  }
  if (scenario == "pitched") {
    return pitched();
  }
  if (scenario == "volume") {
    return volume();
  }
  if (scenario == "pool") {
    return pool();
  }
  test::fail("unknown scenario '%s'", scenario.c_str());
}
