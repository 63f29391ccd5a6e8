// CUresult names without the driver: "CUDA_ERROR_DEINITIALIZED" for 4.
//
// The driver's cuGetErrorName cannot be called once the driver is torn down
// (the apiError events of calls failing at process exit, when the shim
// closes its trace, are exactly those), and it is one more driver call for
// something the header already says. This table is cuda.h's CUresult enum.
#pragma once

#include <cuda.h>

namespace kcap {

// The enumerator's name, or nullptr for a value this cuda.h does not know
// (a newer driver's code).
const char* cudaResultName(CUresult result) noexcept;

}  // namespace kcap
