// A process that maps another process's physical memory (VMM: a shareable
// handle, as PyTorch shares expandable-segment tensors between processes),
// against the driver double: argv[1] names a file the program holds as the
// exporting process would (its file descriptor is the handle the double's
// cuMemImportFromShareableHandle takes), and rewrites x there between
// launches without a CUDA call. Each round axpy reads the mapped x into y
// (y += 2 x); the last line prints y's checksum.
#include "driver_program.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

constexpr int kN = 1024;
constexpr int kRounds = 6;
constexpr std::size_t kGranularity = std::size_t{2} << 20;

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc == 2);
  const int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECK(fd >= 0);
  CHECK(ftruncate(fd, kGranularity) == 0);
  void* view = mmap(nullptr, kGranularity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);  // the exporter's
  CHECK(view != MAP_FAILED);
  auto* exported = static_cast<float*>(view);

  const CUfunction axpy = test::axpyOnDeviceZero();

  CUmemGenericAllocationHandle handle = 0;
  DRIVER(cuMemImportFromShareableHandle, &handle, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CUdeviceptr x = 0;
  DRIVER(cuMemAddressReserve, &x, kGranularity, 0, 0, 0);
  DRIVER(cuMemMap, x, kGranularity, 0, handle, 0);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  DRIVER(cuMemSetAccess, x, kGranularity, &access, 1);

  CUdeviceptr y = 0;
  std::vector<float> ones(kN, 1.0f);
  DRIVER(cuMemAlloc, &y, kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, y, ones.data(), kN * sizeof(float));

  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kN; ++i) exported[i] = static_cast<float>((i * (round + 5)) % 31);
    float a = 2.0f;
    int n = kN;
    void* params[] = {&a, &x, &y, &n};
    test::launchesMade().add("axpy");
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
    DRIVER(cuCtxSynchronize);  // done reading x before the exporter rewrites it
  }
  std::vector<float> result(kN);
  DRIVER(cuMemcpyDtoH, result.data(), y, kN * sizeof(float));
  double sum = 0;
  for (const float value : result) sum += value;
  std::printf("result vmm_y_sum %.1f\n", sum);
  test::printMade();

  DRIVER(cuMemUnmap, x, kGranularity);
  DRIVER(cuMemRelease, handle);
  DRIVER(cuMemAddressFree, x, kGranularity);
  munmap(view, kGranularity);
  close(fd);
  return 0;
}
