// The change-hash kernel's image (interpose/record/content_hash.cu, which
// holds kcap_change_hash of record/change_hash.cuh): the same fatbin the shim
// builds in, so that replay hashes what it reconstructed with the kernel the
// recording hashed with. KCAP_CONTENT_HASH_FATBIN names the file at build
// time (interpose/CMakeLists.txt); without it the image is empty.
#include <cstdint>
#include <vector>

#include "reexecute.h"

#if defined(KCAP_CONTENT_HASH_FATBIN)
asm(".pushsection .rodata.kcap_replay_hash_image,\"a\",@progbits\n"
    ".balign 64\n"
    ".globl kcap_replay_hash_image_begin\n"
    ".hidden kcap_replay_hash_image_begin\n"
    "kcap_replay_hash_image_begin:\n"
    ".incbin \"" KCAP_CONTENT_HASH_FATBIN
    "\"\n"
    ".globl kcap_replay_hash_image_end\n"
    ".hidden kcap_replay_hash_image_end\n"
    "kcap_replay_hash_image_end:\n"
    ".popsection\n");
extern "C" const uint8_t kcap_replay_hash_image_begin[];
extern "C" const uint8_t kcap_replay_hash_image_end[];
#endif

namespace kcap::replay {

// A copy: cuModuleLoadDataEx wants the image aligned, and a vector's
// storage is (operator new aligns to 16 bytes).
std::vector<uint8_t> changeHashImage() {
#if defined(KCAP_CONTENT_HASH_FATBIN)
  return {kcap_replay_hash_image_begin, kcap_replay_hash_image_end};
#else
  return {};
#endif
}

}  // namespace kcap::replay
