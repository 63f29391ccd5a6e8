#include "param_buffer.h"

#include <cuda.h>

#include <algorithm>
#include <cstring>

namespace kcap {
namespace {

// An `extra` array longer than this is taken as malformed (the driver
// defines three keys; a well-formed array has at most a few pairs).
constexpr size_t kMaxExtraPairs = 64;

}  // namespace

uint32_t layoutSize(std::span<const ParamSlot> layout) {
  uint32_t end = 0;
  for (const ParamSlot& slot : layout) {
    end = std::max(end, slot.offset + slot.size);
  }
  return end;
}

ParamBuffer assembleParams(const std::vector<ParamSlot>* layout, void* const* kernelParams, void* const* extra) {
  ParamBuffer out;
  assembleParams(layout, kernelParams, extra, out);
  return out;
}

void assembleParams(const std::vector<ParamSlot>* layout, void* const* kernelParams, void* const* extra,
                    ParamBuffer& out) {
  out.bytes.clear();
  out.kernelLayout = nullptr;
  out.wholeBuffer = ParamSlot{0, 0};
  out.fromExtra = false;
  out.complete = false;
  if (kernelParams != nullptr) {
    if (!layout) {
      return;  // how many parameters, and where: unknown
    }
    out.kernelLayout = layout;
    if (layout->empty()) {
      out.complete = true;
      return;
    }
    out.bytes.assign(layoutSize(*layout), 0);
    for (size_t i = 0; i < layout->size(); ++i) {
      const ParamSlot& slot = (*layout)[i];
      if (slot.size != 0 && kernelParams[i] != nullptr) {
        std::memcpy(out.bytes.data() + slot.offset, kernelParams[i], slot.size);
      }
    }
    out.complete = true;
    return;
  }
  if (extra != nullptr) {
    const void* buffer = nullptr;
    const size_t* size = nullptr;
    for (size_t i = 0; i < 2 * kMaxExtraPairs && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        buffer = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size = static_cast<const size_t*>(extra[i + 1]);
      }
    }
    out.fromExtra = true;
    if (buffer == nullptr || size == nullptr || *size > (1u << 20)) {
      return;  // the driver refuses such a launch; nothing to read
    }
    const auto* bytes = static_cast<const uint8_t*>(buffer);
    out.bytes.assign(bytes, bytes + *size);
    if (layout != nullptr) {
      out.kernelLayout = layout;
    } else {
      out.wholeBuffer = ParamSlot{0, static_cast<uint32_t>(*size)};
    }
    out.complete = true;
    return;
  }
  // No parameters given: complete only if the kernel takes none.
  out.complete = layout != nullptr && layout->empty();
  out.kernelLayout = layout;
}

}  // namespace kcap
