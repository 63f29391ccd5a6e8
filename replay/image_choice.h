// Which code of a recorded image this GPU will run, decided before loading it,
// so that a replay can say "SASS sm_90" or "PTX compute_80 (JIT)", honour
// --force-ptx, and explain an image that cannot run here. Pure logic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "code_image.h"

namespace kcap::replay {

struct ImageChoice {
  bool runnable = false;
  std::string description;   // what runs: "SASS sm_90", "PTX compute_80 (JIT)", "cubin", "PTX (JIT)"
  std::string why;           // when not runnable: what the image has and what this GPU is
  std::vector<uint8_t> ptx;  // forcePtx: the PTX text to load instead (NUL-terminated)
  bool sass = false;         // a fatbin with SASS for this GPU (no JIT): what runs is machine code
};

// sm: this GPU's compute capability as major * 10 + minor (90 for sm_90).
ImageChoice chooseCode(image::Bytes bytes, int sm, bool forcePtx);

// "sm_80, sm_90 SASS; compute_80 PTX" for a fatbin; "cubin", "PTX" otherwise.
std::string imageContents(image::Bytes bytes);

}  // namespace kcap::replay
