#include "images.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kcap_double {
namespace {

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;         // fatbin blob
constexpr std::uint32_t kFatbinWrapperMagic = 0x466243B1;  // cudart's __fatDeviceText

template <class T>
T read(const void* base, std::size_t offset) {
  T value;
  std::memcpy(&value, static_cast<const char*>(base) + offset, sizeof value);
  return value;
}

// The size of a 64-bit ELF image: the end of its furthest section or header
// table (cuModuleLoadData is not told the size).
std::size_t elfSize(const void* elf) {
  const auto phoff = read<std::uint64_t>(elf, 0x20);
  const auto shoff = read<std::uint64_t>(elf, 0x28);
  const auto phentsize = read<std::uint16_t>(elf, 0x36);
  const auto phnum = read<std::uint16_t>(elf, 0x38);
  const auto shentsize = read<std::uint16_t>(elf, 0x3A);
  const auto shnum = read<std::uint16_t>(elf, 0x3C);
  std::size_t end = std::max<std::size_t>(64, phoff + std::size_t{phentsize} * phnum);
  end = std::max<std::size_t>(end, shoff + std::size_t{shentsize} * shnum);
  constexpr std::uint32_t kNoBits = 8;
  for (std::size_t i = 0; i < shnum; ++i) {
    const std::size_t header = shoff + i * shentsize;
    if (read<std::uint32_t>(elf, header + 4) != kNoBits) {
      end =
          std::max<std::size_t>(end, read<std::uint64_t>(elf, header + 0x18) + read<std::uint64_t>(elf, header + 0x20));
    }
  }
  return end;
}

bool isPtx(const char* text) {
  // nvcc's PTX starts with a comment block or a directive.
  return text[0] == '/' || text[0] == '.' || text[0] == '\n' || text[0] == ' ' || text[0] == '\t';
}

// Names appear NUL-delimited in an ELF string table (also inside a fatbin,
// whose SASS entries are not compressed), or as a whole word in PTX.
bool defines(std::string_view bytes, std::string_view name, bool text) {
  if (!text) {
    const std::string needle = '\0' + std::string(name) + '\0';
    return bytes.find(needle) != std::string_view::npos;
  }
  const auto isWord = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
  };
  for (std::size_t at = bytes.find(name); at != std::string_view::npos; at = bytes.find(name, at + 1)) {
    const bool starts = at == 0 || !isWord(bytes[at - 1]);
    const std::size_t end = at + name.size();
    const bool ends = end == bytes.size() || !isWord(bytes[end]);
    if (starts && ends) {
      return true;
    }
  }
  return false;
}

void collect(std::string_view bytes, bool text, ImageContents& contents) {
  for (const KernelDef& kernel : hostKernels()) {
    if (defines(bytes, kernel.name, text) &&
        std::find(contents.kernels.begin(), contents.kernels.end(), &kernel) == contents.kernels.end()) {
      contents.kernels.push_back(&kernel);
    }
  }
  // A deliberately changed build (host_kernels.h): its kernel replaces the
  // ordinary one of the same name.
  for (const KernelVariant& variant : kernelVariants()) {
    if (!defines(bytes, variant.marker, text)) {
      continue;
    }
    std::replace_if(
        contents.kernels.begin(), contents.kernels.end(),
        [&](const KernelDef* kernel) { return kernel->name == variant.def.name; }, &variant.def);
  }
  for (const GlobalDef& global : hostGlobals()) {
    if (defines(bytes, global.name, text) &&
        std::find(contents.globals.begin(), contents.globals.end(), &global) == contents.globals.end()) {
      contents.globals.push_back(&global);
    }
  }
}

bool inspectFatbin(const void* fatbin, ImageContents& contents) {
  if (read<std::uint32_t>(fatbin, 0) != kFatbinMagic) {
    return false;
  }
  const std::size_t headerSize = read<std::uint16_t>(fatbin, 6);
  const std::size_t size = headerSize + read<std::uint64_t>(fatbin, 8);
  collect({static_cast<const char*>(fatbin), size}, false, contents);
  return true;
}

}  // namespace

bool inspectImage(const void* image, ImageContents& contents) {
  if (image == nullptr) {
    return false;
  }
  // Text first: reading a binary magic could run past the end of a short
  // string. No binary format starts with a character PTX may start with.
  const auto* bytes = static_cast<const char*>(image);
  if (isPtx(bytes)) {
    collect({bytes, std::strlen(bytes)}, true, contents);
    return true;
  }
  if (bytes[0] == '\x7f' && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F') {
    constexpr char kElf64 = 2;
    if (bytes[4] != kElf64) {
      return false;
    }
    collect({bytes, elfSize(image)}, false, contents);
    return true;
  }
  const auto magic = read<std::uint32_t>(image, 0);
  if (magic == kFatbinMagic) {
    return inspectFatbin(image, contents);
  }
  if (magic == kFatbinWrapperMagic) {
    // {int magic; int version; const void* fatbin; const void* extra},
    // version 2 (relocatable device code): extra is a NULL-terminated
    // array of prelinked fatbins.
    const auto version = read<std::int32_t>(image, 4);
    if (!inspectFatbin(read<const void*>(image, 8), contents)) {
      return false;
    }
    if (version == 2) {
      if (const auto* extra = read<const void* const*>(image, 16)) {
        for (; *extra != nullptr; ++extra) {
          if (!inspectFatbin(*extra, contents)) {
            return false;
          }
        }
      }
    }
    return true;
  }
  return false;
}

}  // namespace kcap_double
