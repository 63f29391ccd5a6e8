// Run with the shim only: calls cuMemCreate, which the shim exports but the
// driver double does not implement. The shim must return an error (not
// crash), and say so once on stderr however often it is called.
#include "driver_program.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

int main()
{
    DRIVER(cuInit, 0);
    const auto mem_create = reinterpret_cast<PFN_cuMemCreate_v10020>(dlsym(RTLD_DEFAULT, "cuMemCreate"));
    CHECK(mem_create != nullptr);  // the shim's export
    for (int i = 0; i < 3; ++i) {
        CUmemGenericAllocationHandle handle = 0;
        CUmemAllocationProp prop{};
        test::calls_made().add("cuMemCreate");
        CHECK(mem_create(&handle, 1 << 21, &prop, 0) == CUDA_ERROR_NOT_FOUND);
    }
    test::print_made();
    return 0;
}
