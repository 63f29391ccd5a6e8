// content_hash.cu's fatbin, built into the shim so that it needs no file
// beside it at run time. KCAP_CONTENT_HASH_FATBIN names the file at build
// time (interpose/CMakeLists.txt); without it the image is empty.
#include "record/device_hash.h"

#if defined(KCAP_CONTENT_HASH_FATBIN)
// .incbin: the bytes as they are, aligned as cuLibraryLoadData wants a
// fatbin (8 bytes at least), hidden so the shim exports nothing new.
asm(".pushsection .rodata.kcap_content_hash_image,\"a\",@progbits\n"
    ".balign 64\n"
    ".globl kcap_content_hash_image_begin\n"
    ".hidden kcap_content_hash_image_begin\n"
    "kcap_content_hash_image_begin:\n"
    ".incbin \"" KCAP_CONTENT_HASH_FATBIN
    "\"\n"
    ".globl kcap_content_hash_image_end\n"
    ".hidden kcap_content_hash_image_end\n"
    "kcap_content_hash_image_end:\n"
    ".popsection\n");
extern "C" const uint8_t kcap_content_hash_image_begin[];
extern "C" const uint8_t kcap_content_hash_image_end[];
#endif

namespace kcap {

std::span<const uint8_t> contentHashImage() noexcept {
#if defined(KCAP_CONTENT_HASH_FATBIN)
  return {kcap_content_hash_image_begin, kcap_content_hash_image_end};
#else
  return {};
#endif
}

}  // namespace kcap
