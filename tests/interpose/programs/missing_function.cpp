// Run with the shim only: calls cuMemAllocFromPoolAsync, which the shim exports but
// the driver double does not implement. The shim must return an error (not
// crash), and say so once on stderr however often it is called.
#include "driver_program.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

int main() {
  DRIVER(cuInit, 0);
  const auto allocFromPool =
      reinterpret_cast<PFN_cuMemAllocFromPoolAsync_v11020>(dlsym(RTLD_DEFAULT, "cuMemAllocFromPoolAsync"));
  CHECK(allocFromPool != nullptr);  // the shim's export
  for (int i = 0; i < 3; ++i) {
    CUdeviceptr address = 0;
    test::callsMade().add("cuMemAllocFromPoolAsync");
    CHECK(allocFromPool(&address, 1 << 21, nullptr, nullptr) == CUDA_ERROR_NOT_FOUND);
  }
  test::printMade();
  return 0;
}
