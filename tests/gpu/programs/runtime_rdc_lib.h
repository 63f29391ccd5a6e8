// The other translation unit of runtime_rdc.cu (relocatable device code).
#pragma once

__device__ float shifted(float v);  // v + rdc_offset
void setOffset(float offset);       // rdc_offset = offset (cudaMemcpyToSymbol)
