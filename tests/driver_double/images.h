// Recognizing the code images the driver is handed: a fatbin, cudart's
// fatbin wrapper, a cubin (ELF) or PTX text, as the real driver accepts them.
// The double does not run the code; it only needs to know an image is
// well-formed and which of the host kernels and globals it defines.
#pragma once

#include "host_kernels.h"

#include <vector>

namespace kcap_double {

struct ImageContents {
  std::vector<const KernelDef*> kernels;
  std::vector<const GlobalDef*> globals;
};

// false: not an image the driver would take (CUDA_ERROR_INVALID_IMAGE).
bool inspectImage(const void* image, ImageContents& contents);

}  // namespace kcap_double
