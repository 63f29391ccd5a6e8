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

// True for the errors that leave the context unusable ("sticky": every
// later call of the process fails with it too): a kernel faulted (illegal
// address or instruction, misaligned or out-of-space address, bad PC,
// hardware stack error, device assert, launch failure or timeout) or the
// hardware reported an uncorrectable error. Ordinary failures (an invalid
// value, out of memory, not ready) are not. The flight recorder's error
// trigger fires on these.
bool isStickyError(CUresult result) noexcept;

}  // namespace kcap
