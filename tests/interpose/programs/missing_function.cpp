// Run with the shim only: calls cuMemAllocManaged, which the shim exports but
// the driver double does not implement. The shim must return an error (not
// crash), and say so once on stderr however often it is called.
#include "driver_program.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

int main() {
  DRIVER(cuInit, 0);
  const auto allocManaged = reinterpret_cast<PFN_cuMemAllocManaged_v6000>(dlsym(RTLD_DEFAULT, "cuMemAllocManaged"));
  CHECK(allocManaged != nullptr);  // the shim's export
  for (int i = 0; i < 3; ++i) {
    CUdeviceptr address = 0;
    test::callsMade().add("cuMemAllocManaged");
    CHECK(allocManaged(&address, 1 << 21, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_NOT_FOUND);
  }
  test::printMade();
  return 0;
}
