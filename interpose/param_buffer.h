// A launch's parameter buffer, assembled from what the program passed.
//
// cuLaunchKernel & co take parameters in one of two forms:
//   kernelParams  an array of pointers, one per parameter, each to the
//                 parameter's value; the layout (offset and size of each
//                 parameter in the kernel's parameter buffer) says how many
//                 there are and where each goes.
//   extra         {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer,
//                  CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END}:
//                 the buffer itself, exactly the kernel's parameter size.
// Either way the result is the buffer the kernel sees, with the layout used.
//
// Pure logic (reads only the program's memory it was handed); no CUDA calls.
#pragma once

#include "pointer_scanner.h"

#include <cstdint>
#include <vector>

namespace kcap {

struct ParamBuffer {
    std::vector<uint8_t> bytes;
    std::vector<ParamSlot> layout;  // the layout `bytes` follows
    bool fromExtra = false;         // taken from `extra`
    bool complete = false;          // false: parameters exist but could not be read (no layout)
};

// `layout` is the kernel's layout from cu{Func,Kernel}GetParamInfo, or nullptr
// when the driver could not say. From `extra` with no layout, the layout is
// one slot covering the whole buffer (every aligned word is then scanned).
ParamBuffer assembleParams(const std::vector<ParamSlot>* layout, void* const* kernelParams,
                           void* const* extra);
// The same into `out`, whose vectors keep their capacity (launch path).
void assembleParams(const std::vector<ParamSlot>* layout, void* const* kernelParams, void* const* extra,
                    ParamBuffer& out);

// Bytes a layout spans (end of its furthest parameter).
uint32_t layoutSize(const std::vector<ParamSlot>& layout);

}  // namespace kcap
