// What record_scenarios' two files share (record_scenarios.cpp: the
// scenarios' table): the context, buffers up and down, axpy from a module,
// and the scenarios of record_scenarios_memory.cpp.
#pragma once

#include "driver_program.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace scenarios {

inline constexpr int kN = 1024;
inline constexpr std::uint64_t kPoisonFault = 0xDEAD0000DEAD0000ull;  // tests/driver_double/state.h
inline constexpr std::uint64_t kPoisonKill = 0xDEAD0000DEADDEADull;
inline constexpr std::uint64_t kPoisonHang = 0xDEAD0000DEAD4A46ull;
inline constexpr std::uint64_t kPoisonSlow = 0xDEAD0000DEAD5105ull;
inline constexpr std::uint64_t kPoisonAbort = 0xDEAD0000DEADAB07ull;

struct Context {
  CUdevice device = 0;
  CUcontext context = nullptr;
};

inline Context start() {
  Context c;
  DRIVER(cuInit, 0);
  DRIVER(cuDeviceGet, &c.device, 0);
  DRIVER(cuDevicePrimaryCtxRetain, &c.context, c.device);
  DRIVER(cuCtxSetCurrent, c.context);
  return c;
}

inline CUdeviceptr upload(const std::vector<float>& values) {
  CUdeviceptr device = 0;
  DRIVER(cuMemAlloc, &device, values.size() * sizeof(float));
  DRIVER(cuMemcpyHtoD, device, values.data(), values.size() * sizeof(float));
  return device;
}

inline std::vector<float> download(CUdeviceptr device, std::size_t count) {
  std::vector<float> values(count);
  DRIVER(cuMemcpyDtoH, values.data(), device, count * sizeof(float));
  return values;
}

// "result NAME xxxxxxxx": the bits of element `index` of a kN-float buffer.
inline void printBits(const char* name, CUdeviceptr device, std::size_t index) {
  const std::vector<float> values = download(device, kN);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &values[index], sizeof bits);
  std::printf("result %s %08x\n", name, bits);
}

inline std::vector<float> iota(float scale) {
  std::vector<float> v(kN);
  for (int i = 0; i < kN; ++i) {
    v[static_cast<std::size_t>(i)] = scale * static_cast<float>(i);
  }
  return v;
}

// axpy from a module, with x = i and y = 2i uploaded.
struct Axpy {
  std::string image = test::kernelImage("axpy.fatbin");
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUdeviceptr x = 0;
  CUdeviceptr y = 0;

  Axpy() {
    DRIVER(cuModuleLoadData, &module, image.data());
    DRIVER(cuModuleGetFunction, &function, module, "axpy");
    x = upload(iota(1.0f));
    y = upload(iota(2.0f));
  }
  CUresult launch(float a, CUstream stream = nullptr, CUdeviceptr xs = 0) {
    int n = kN;
    CUdeviceptr xp = xs != 0 ? xs : x;
    void* params[] = {&a, &xp, &y, &n};
    test::launchesMade().add("axpy");
    return cuLaunchKernel(function, kN / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr);
  }
};

// cudart's __fatDeviceText: {magic, version, fatbin, extra}.
struct FatbinWrapper {
  int magic;
  int version;
  const void* fatbin;
  const void* extra;
};

// record_scenarios_memory.cpp: memory that is more than a pointer and a size.
int tensorMap();
int vmm();
int large();
int diskFull();
int pitched();
int volume();

}  // namespace scenarios
