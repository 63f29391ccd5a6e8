#include "code_image.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

namespace kcap::image {
namespace {

template <class T>
T load(const void* base, size_t offset) {
  T value;
  std::memcpy(&value, static_cast<const uint8_t*>(base) + offset, sizeof value);
  return value;
}

// Bounds-checked read from a buffer; false when [offset, offset + sizeof T) is outside.
template <class T>
bool read(Bytes bytes, size_t offset, T& out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) {
    return false;
  }
  std::memcpy(&out, bytes.data() + offset, sizeof(T));
  return true;
}

// Compares byte by byte, so that a short NUL-terminated text is never read
// past its terminator (the first differing byte stops the comparison).
bool startsWith(const uint8_t* p, std::initializer_list<uint8_t> magic) {
  for (const uint8_t b : magic) {
    if (*p++ != b) {
      return false;
    }
  }
  return true;
}

bool isElf(const uint8_t* p) { return startsWith(p, {0x7f, 'E', 'L', 'F'}); }
bool isFatbin(const uint8_t* p) { return startsWith(p, {0x50, 0xED, 0x55, 0xBA}); }
bool isWrapper(const uint8_t* p) { return startsWith(p, {0xB1, 0x43, 0x62, 0x46}); }

bool looksLikeText(uint8_t c) { return c == '\n' || c == '\r' || c == '\t' || (c >= 0x20 && c < 0x7f); }

size_t fatbinSize(const void* fatbin) { return size_t{load<uint16_t>(fatbin, 6)} + load<uint64_t>(fatbin, 8); }

// A fatbin (or, defensively, a wrapper) referenced from a wrapper.
std::optional<Bytes> resolveFatbin(const void* pointer) {
  if (pointer == nullptr) {
    return std::nullopt;
  }
  const auto* p = static_cast<const uint8_t*>(pointer);
  if (isFatbin(p)) {
    return Bytes(p, fatbinSize(p));
  }
  if (isWrapper(p)) {
    return resolveFatbin(load<const void*>(p, 8));
  }
  return std::nullopt;
}

// Section header fields of a 64-bit ELF.
struct Section {
  uint32_t name = 0;
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint64_t entsize = 0;
};

bool readSection(Bytes elf, uint64_t shoff, uint16_t shentsize, size_t index, Section& s) {
  const uint64_t at = shoff + index * uint64_t{shentsize};
  return read(elf, at + 0x00, s.name) && read(elf, at + 0x04, s.type) && read(elf, at + 0x18, s.offset) &&
         read(elf, at + 0x20, s.size) && read(elf, at + 0x28, s.link) && read(elf, at + 0x38, s.entsize);
}

// The NUL-terminated string at `offset` of a string table section.
std::string_view stringAt(Bytes elf, const Section& table, uint32_t offset) {
  if (table.offset > elf.size() || offset >= table.size || table.size > elf.size() - table.offset) {
    return {};
  }
  const auto* begin = reinterpret_cast<const char*>(elf.data() + table.offset + offset);
  const size_t room = table.size - offset;
  return {begin, strnlen(begin, room)};
}

bool isIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

}  // namespace

size_t elfSize(const void* elf) {
  const auto* p = static_cast<const uint8_t*>(elf);
  if (!isElf(p) || p[4] != 2) {  // ELFCLASS64
    return 0;
  }
  const auto phoff = load<uint64_t>(elf, 0x20);
  const auto shoff = load<uint64_t>(elf, 0x28);
  const auto phentsize = load<uint16_t>(elf, 0x36);
  const auto phnum = load<uint16_t>(elf, 0x38);
  const auto shentsize = load<uint16_t>(elf, 0x3A);
  const auto shnum = load<uint16_t>(elf, 0x3C);
  size_t end = std::max<size_t>(64, phoff + size_t{phentsize} * phnum);
  end = std::max<size_t>(end, shoff + size_t{shentsize} * shnum);
  constexpr uint32_t kNoBits = 8;
  for (size_t i = 0; i < shnum; ++i) {
    const size_t header = shoff + i * shentsize;
    if (load<uint32_t>(elf, header + 4) != kNoBits) {
      end = std::max<size_t>(end, load<uint64_t>(elf, header + 0x18) + load<uint64_t>(elf, header + 0x20));
    }
  }
  return end;
}

std::optional<Image> identify(const void* pointer) {
  if (pointer == nullptr) {
    return std::nullopt;
  }
  const auto* p = static_cast<const uint8_t*>(pointer);
  Image image;
  if (isElf(p)) {
    const size_t size = elfSize(p);
    if (size == 0) {
      return std::nullopt;
    }
    image.kind = Kind::kCubin;
    image.bytes = Bytes(p, size);
    return image;
  }
  if (isFatbin(p)) {
    image.kind = Kind::kFatbin;
    image.bytes = Bytes(p, fatbinSize(p));
    return image;
  }
  if (isWrapper(p)) {
    const auto version = load<uint32_t>(p, 4);
    const auto fatbin = resolveFatbin(load<const void*>(p, 8));
    if (!fatbin) {
      return std::nullopt;
    }
    image.kind = Kind::kFatbinWrapper;
    image.bytes = *fatbin;
    if (version == 2) {
      if (const auto* extra = load<const void* const*>(p, 16)) {
        for (; *extra != nullptr; ++extra) {
          if (const auto more = resolveFatbin(*extra)) {
            image.extra.push_back(*more);
          }
        }
      }
    }
    return image;
  }
  if (looksLikeText(p[0])) {
    image.kind = Kind::kPtx;
    image.bytes = Bytes(p, std::strlen(reinterpret_cast<const char*>(p)) + 1);
    return image;
  }
  return std::nullopt;
}

std::optional<Image> identify(Bytes buffer) {
  if (buffer.size() < 4) {
    if (!buffer.empty() && looksLikeText(buffer[0])) {
      return Image{Kind::kPtx, buffer, {}};
    }
    return std::nullopt;
  }
  const uint8_t* p = buffer.data();
  Image image;
  image.bytes = buffer;
  if (isElf(p)) {
    image.kind = Kind::kCubin;
    return image;
  }
  if (isFatbin(p)) {
    image.kind = Kind::kFatbin;
    uint16_t headerSize = 0;
    uint64_t size = 0;
    if (read(buffer, 6, headerSize) && read(buffer, 8, size) && size <= buffer.size() &&
        headerSize <= buffer.size() - size) {
      image.bytes = buffer.first(headerSize + size);
    }
    return image;
  }
  if (looksLikeText(p[0])) {
    image.kind = Kind::kPtx;
    return image;
  }
  return std::nullopt;
}

std::vector<FatbinEntry> fatbinEntries(Bytes fatbin) {
  std::vector<FatbinEntry> entries;
  uint32_t magic = 0;
  uint16_t headerSize = 0;
  uint64_t size = 0;
  if (!read(fatbin, 0, magic) || magic != kFatbinMagic || !read(fatbin, 6, headerSize) || !read(fatbin, 8, size)) {
    return entries;
  }
  const uint64_t end = std::min<uint64_t>(fatbin.size(), uint64_t{headerSize} + size);
  uint64_t at = headerSize;
  while (at < end) {
    FatbinEntry entry;
    uint32_t entryHeader = 0;
    uint64_t payloadSize = 0;
    uint32_t compressedSize = 0;
    if (!read(fatbin, at, entry.kind) || !read(fatbin, at + 4, entryHeader) || !read(fatbin, at + 8, payloadSize) ||
        !read(fatbin, at + 16, compressedSize) || !read(fatbin, at + 28, entry.arch) ||
        !read(fatbin, at + 40, entry.flags)) {
      break;
    }
    if (entryHeader < 48 || entryHeader > end - at || payloadSize > end - at - entryHeader) {
      break;
    }
    if (entryHeader >= 64) {
      read(fatbin, at + 56, entry.uncompressedSize);
    }
    uint64_t length = payloadSize;
    if (entry.compressed() && compressedSize != 0 && compressedSize <= payloadSize) {
      length = compressedSize;
    }
    entry.payload = fatbin.subspan(at + entryHeader, length);
    entries.push_back(entry);
    at += entryHeader + payloadSize;
  }
  return entries;
}

std::optional<std::vector<uint8_t>> entryContents(const FatbinEntry& entry, size_t limit) {
  if ((entry.flags & FatbinEntry::kCompressedZstd) == 0) {
    if ((entry.flags & FatbinEntry::kCompressedLegacy) != 0) {
      return std::nullopt;
    }
    return std::vector<uint8_t>(entry.payload.begin(), entry.payload.end());
  }
  uint64_t size = entry.uncompressedSize;
  if (size == 0) {
    const unsigned long long frame = ZSTD_getFrameContentSize(entry.payload.data(), entry.payload.size());
    if (frame == ZSTD_CONTENTSIZE_UNKNOWN || frame == ZSTD_CONTENTSIZE_ERROR) {
      return std::nullopt;
    }
    size = frame;
  }
  if (size > limit) {
    return std::nullopt;
  }
  std::vector<uint8_t> out(size);
  const size_t n = ZSTD_decompress(out.data(), out.size(), entry.payload.data(), entry.payload.size());
  if (ZSTD_isError(n)) {
    return std::nullopt;
  }
  out.resize(n);
  return out;
}

std::vector<std::string> elfGlobalNames(Bytes elf) {
  std::set<std::string> names;
  if (elf.size() < 64 || !isElf(elf.data()) || elf[4] != 2) {
    return {};
  }
  uint64_t shoff = 0;
  uint16_t shentsize = 0;
  uint16_t shnum = 0;
  uint16_t shstrndx = 0;
  if (!read(elf, 0x28, shoff) || !read(elf, 0x3A, shentsize) || !read(elf, 0x3C, shnum) || !read(elf, 0x3E, shstrndx) ||
      shentsize < 0x40 || shstrndx >= shnum) {
    return {};
  }
  std::vector<Section> sections(shnum);
  for (size_t i = 0; i < shnum; ++i) {
    if (!readSection(elf, shoff, shentsize, i, sections[i])) {
      return {};
    }
  }
  const Section& sectionNames = sections[shstrndx];
  constexpr uint32_t kSymtab = 2;
  for (const Section& symtab : sections) {
    if (symtab.type != kSymtab || symtab.entsize < 24 || symtab.link >= shnum) {
      continue;
    }
    const Section& strings = sections[symtab.link];
    const uint64_t count = symtab.size / symtab.entsize;
    for (uint64_t i = 1; i < count; ++i) {
      const uint64_t at = symtab.offset + i * symtab.entsize;
      uint32_t nameOffset = 0;
      uint8_t info = 0;
      uint16_t shndx = 0;
      if (!read(elf, at, nameOffset) || !read(elf, at + 4, info) || !read(elf, at + 6, shndx)) {
        break;
      }
      constexpr uint8_t kObject = 1;
      if ((info & 0xf) != kObject || shndx == 0 || shndx >= shnum) {
        continue;
      }
      const std::string_view section = stringAt(elf, sectionNames, sections[shndx].name);
      if (!section.starts_with(".nv.global") && !section.starts_with(".nv.constant")) {
        continue;
      }
      const std::string_view name = stringAt(elf, strings, nameOffset);
      if (!name.empty() && name.front() != '.') {
        names.emplace(name);
      }
    }
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> ptxGlobalNames(std::string_view ptx) {
  std::set<std::string> names;
  size_t start = 0;
  while (start < ptx.size()) {
    size_t end = ptx.find('\n', start);
    if (end == std::string_view::npos) {
      end = ptx.size();
    }
    std::string_view line = ptx.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      line.remove_prefix(1);
    }
    for (std::string_view linkage : {".visible ", ".weak ", ".common "}) {
      if (line.starts_with(linkage)) {
        line.remove_prefix(linkage.size());
      }
    }
    if (!line.starts_with(".global ") && !line.starts_with(".const ")) {
      continue;
    }
    // The declarator is the last identifier before an initializer,
    // an array size or the ';'.
    const size_t stop = line.find_first_of("=;");
    std::string_view declaration = line.substr(0, stop == std::string_view::npos ? line.size() : stop);
    if (const size_t bracket = declaration.find('['); bracket != std::string_view::npos) {
      declaration = declaration.substr(0, bracket);
    }
    while (!declaration.empty() && !isIdentifierChar(declaration.back())) {
      declaration.remove_suffix(1);
    }
    size_t first = declaration.size();
    while (first > 0 && isIdentifierChar(declaration[first - 1])) {
      --first;
    }
    const std::string_view name = declaration.substr(first);
    if (!name.empty() && first > 0 && declaration[first - 1] != '.') {
      names.emplace(name);
    }
  }
  return {names.begin(), names.end()};
}

namespace {

std::vector<std::string> fatbinGlobalNames(Bytes fatbin) {
  const auto entries = fatbinEntries(fatbin);
  for (const FatbinEntry& entry : entries) {
    if (entry.kind == 2) {
      if (const auto elf = entryContents(entry)) {
        return elfGlobalNames(*elf);
      }
    }
  }
  for (const FatbinEntry& entry : entries) {
    if (entry.kind == 1) {
      if (const auto ptx = entryContents(entry)) {
        return ptxGlobalNames(std::string_view(reinterpret_cast<const char*>(ptx->data()),
                                               strnlen(reinterpret_cast<const char*>(ptx->data()), ptx->size())));
      }
    }
  }
  return {};
}

}  // namespace

std::vector<std::string> globalNames(const Image& image) {
  switch (image.kind) {
    case Kind::kCubin:
      return elfGlobalNames(image.bytes);
    case Kind::kPtx:
      return ptxGlobalNames(
          std::string_view(reinterpret_cast<const char*>(image.bytes.data()),
                           strnlen(reinterpret_cast<const char*>(image.bytes.data()), image.bytes.size())));
    case Kind::kFatbin:
    case Kind::kFatbinWrapper: {
      std::set<std::string> names;
      for (const std::string& name : fatbinGlobalNames(image.bytes)) {
        names.insert(name);
      }
      for (const Bytes& extra : image.extra) {
        for (const std::string& name : fatbinGlobalNames(extra)) {
          names.insert(name);
        }
      }
      return {names.begin(), names.end()};
    }
    case Kind::kUnknown:
      break;
  }
  return {};
}

}  // namespace kcap::image
