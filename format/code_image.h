// The code images programs hand to the driver's loaders, understood well
// enough to store them and to list their __device__ / __constant__ variables.
//
// A loader (cuModuleLoadData, cuLibraryLoadData, ...) is given a pointer and
// no size. What it points to is one of:
//   - cudart's fatbin wrapper (__fatDeviceText): {u32 magic 0x466243B1,
//     u32 version, const void* fatbin, const void* extra}; version 2
//     (relocatable device code) has `extra`, a NULL-terminated array of more
//     fatbins. The image is the fatbin it points to.
//   - a fatbin: header {u32 magic 0xBA55ED50, u16 version, u16 headerSize,
//     u64 size}, then entries (PTX or ELF, possibly zstd-compressed).
//   - a cubin (64-bit ELF): its size is the end of its furthest section or
//     header table.
//   - PTX: NUL-terminated text; its size includes the NUL.
//
// Pure logic: no CUDA calls. Parsing a buffer of known size never reads
// outside it; identifying an image in memory trusts the driver's acceptance
// of it (call it only after a successful load) for the extent it computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kcap::image {

inline constexpr uint32_t kFatbinMagic = 0xBA55ED50;
inline constexpr uint32_t kFatbinWrapperMagic = 0x466243B1;

enum class Kind : uint8_t { kUnknown, kFatbin, kCubin, kPtx, kFatbinWrapper };

using Bytes = std::span<const uint8_t>;

struct Image {
  Kind kind = Kind::kUnknown;  // kFatbinWrapper when the pointer was a wrapper
  Bytes bytes;                 // what to store: the fatbin for a wrapper
  std::vector<Bytes> extra;    // version-2 wrappers: the extra fatbins
};

// Identifies the image a loader was given. nullopt when it is none of the
// above (or a wrapper points to something that is not a fatbin).
std::optional<Image> identify(const void* image);

// The same for a buffer of known size (a file's contents): every extent is
// checked against it; a trailing extent beyond the buffer is clipped.
std::optional<Image> identify(Bytes buffer);

// Extent of a 64-bit ELF image at `elf` (see above); 0 if not one.
size_t elfSize(const void* elf);

struct FatbinEntry {
  uint16_t kind = 0;  // 1 PTX, 2 ELF
  uint32_t arch = 0;  // sm number, e.g. 90
  uint64_t flags = 0;
  Bytes payload;  // as stored (compressed or not)
  uint64_t uncompressedSize = 0;

  bool compressed() const { return (flags & kCompressedZstd) != 0 || (flags & kCompressedLegacy) != 0; }
  static constexpr uint64_t kCompressedLegacy = 0x2000;  // older toolkits (LZ4): not handled
  static constexpr uint64_t kCompressedZstd = 0x8000;
};

// The entries of a fatbin (stops at the first malformed entry).
std::vector<FatbinEntry> fatbinEntries(Bytes fatbin);

// An entry's contents, decompressed. nullopt when it cannot be (legacy
// compression, damaged data, or larger than `limit`).
std::optional<std::vector<uint8_t>> entryContents(const FatbinEntry& entry, size_t limit = 256u << 20);

// Names of the module-scope variables (__device__, __constant__) an image
// defines: OBJECT symbols of .nv.global* / .nv.constant* sections of a cubin
// (local symbols included: whole-program builds make them local), or the
// .global / .const declarations of PTX. For a fatbin, the first ELF entry
// that can be read (names are the same for every architecture), else the
// first PTX entry. Sorted, unique.
std::vector<std::string> globalNames(const Image& image);
std::vector<std::string> elfGlobalNames(Bytes elf);
std::vector<std::string> ptxGlobalNames(std::string_view ptx);

}  // namespace kcap::image
