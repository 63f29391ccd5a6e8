// A process that reads another process's device memory (CUDA IPC), against
// the driver double: argv[1] names a file the double's cuIpcOpenMemHandle
// maps (tests/driver_double/api_ipc.cpp). The program plays both sides: it
// maps the same file itself, as the exporting process would hold its
// allocation, and rewrites x there between launches without a CUDA call,
// as that process would. Each round axpy reads the imported x into y
// (y += 2 x); the last line prints y's checksum. argv[2], when given, is
// the mapping's size in bytes (at least x's): the rest of it stays zeros.
#include "driver_program.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kN = 1024;
constexpr int kRounds = 6;

CUdeviceptr upload(const std::vector<float>& values) {
  CUdeviceptr device = 0;
  DRIVER(cuMemAlloc, &device, values.size() * sizeof(float));
  DRIVER(cuMemcpyHtoD, device, values.data(), values.size() * sizeof(float));
  return device;
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc == 2 || argc == 3);
  const std::string path = argv[1];
  CHECK(path.size() < sizeof(CUipcMemHandle::reserved));
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECK(fd >= 0);
  constexpr std::size_t kBytes = kN * sizeof(float);
  const std::size_t mapped = argc == 3 ? std::stoul(argv[2]) : kBytes;
  CHECK(mapped >= kBytes);
  CHECK(ftruncate(fd, static_cast<off_t>(mapped)) == 0);
  void* view = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);  // the exporter's view
  CHECK(view != MAP_FAILED);
  close(fd);
  auto* exported = static_cast<float*>(view);

  const CUfunction axpy = test::axpyOnDeviceZero();

  CUipcMemHandle handle{};
  std::memcpy(handle.reserved, path.c_str(), path.size());
  CUdeviceptr x = 0;
  DRIVER(cuIpcOpenMemHandle, &x, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  CUdeviceptr y = upload(std::vector<float>(kN, 1.0f));

  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kN; ++i) exported[i] = static_cast<float>((i * (round + 3)) % 29);
    float a = 2.0f;
    int n = kN;
    void* params[] = {&a, &x, &y, &n};
    test::launchesMade().add("axpy");
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
    DRIVER(cuCtxSynchronize);  // done reading x before the exporter rewrites it
  }
  std::vector<float> result(kN);
  DRIVER(cuMemcpyDtoH, result.data(), y, kBytes);
  double sum = 0;
  for (const float value : result) sum += value;
  std::printf("result ipc_y_sum %.1f\n", sum);

  DRIVER(cuIpcCloseMemHandle, x);
  // y stays allocated: the checkpoint taken at exit holds it.
  munmap(view, mapped);
  test::printMade();
  return 0;
}
