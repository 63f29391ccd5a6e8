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
#include <span>
#include <vector>

namespace kcap {

struct ParamBuffer {
  std::vector<uint8_t> bytes;
  bool fromExtra = false;  // taken from `extra`
  bool complete = false;   // false: parameters exist but could not be read (no layout)

  // The layout `bytes` follows: the kernel's (not copied: a launch would
  // pay for the copy, and the recorder's layouts are interned for the
  // life of the process), or one slot covering the whole buffer.
  std::span<const ParamSlot> layout() const {
    if (kernelLayout != nullptr) {
      return *kernelLayout;
    }
    return wholeBuffer.size != 0 ? std::span<const ParamSlot>(&wholeBuffer, 1) : std::span<const ParamSlot>();
  }

  const std::vector<ParamSlot>* kernelLayout = nullptr;  // must outlive the buffer
  ParamSlot wholeBuffer{0, 0};                           // the layout when the kernel's is unknown (size 0: none)
};

// `layout` is the kernel's layout from cu{Func,Kernel}GetParamInfo, or nullptr
// when the driver could not say; the buffer refers to it, so it must outlive
// the buffer. From `extra` with no layout, the layout is one slot covering
// the whole buffer (every aligned word is then scanned).
ParamBuffer assembleParams(const std::vector<ParamSlot>* layout, void* const* kernelParams, void* const* extra);
// The same into `out`, whose vectors keep their capacity (launch path).
void assembleParams(const std::vector<ParamSlot>* layout, void* const* kernelParams, void* const* extra,
                    ParamBuffer& out);

// Bytes a layout spans (end of its furthest parameter).
uint32_t layoutSize(std::span<const ParamSlot> layout);

}  // namespace kcap
