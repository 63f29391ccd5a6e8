// The second translation unit of runtime_rdc.cu: a __device__ function and
// variable that the kernel there reaches only through the device linker.
#include "runtime_program.h"
#include "runtime_rdc_lib.h"

__device__ float rdc_offset = 0.0f;

__device__ float shifted(float v) { return v + rdc_offset; }

void setOffset(float offset) { CUDA_CHECK(cudaMemcpyToSymbol(rdc_offset, &offset, sizeof offset)); }
