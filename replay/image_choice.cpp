#include "image_choice.h"

#include <algorithm>

namespace kcap::replay {
namespace {

constexpr uint16_t kPtxEntry = 1;
constexpr uint16_t kElfEntry = 2;
constexpr uint64_t kArchSpecific = 0x100000;  // an "a" target: sm_90a, compute_90a

std::string archName(const image::FatbinEntry& e) {
  std::string name = (e.kind == kPtxEntry ? "compute_" : "sm_") + std::to_string(e.arch);
  if ((e.flags & kArchSpecific) != 0) name += "a";
  return name;
}

bool sassRuns(const image::FatbinEntry& e, int sm) {
  const int arch = static_cast<int>(e.arch);
  if ((e.flags & kArchSpecific) != 0) return arch == sm;
  return arch / 10 == sm / 10 && arch <= sm;  // same major, not newer
}

bool ptxRuns(const image::FatbinEntry& e, int sm) {
  const int arch = static_cast<int>(e.arch);
  if ((e.flags & kArchSpecific) != 0) return arch == sm;
  return arch <= sm;
}

std::string gpuName(int sm) { return "sm_" + std::to_string(sm); }

}  // namespace

std::string imageContents(image::Bytes bytes) {
  const auto identified = image::identify(bytes);
  if (!identified) return "unrecognised image";
  switch (identified->kind) {
    case image::Kind::kCubin:
      return "cubin";
    case image::Kind::kPtx:
      return "PTX";
    case image::Kind::kUnknown:
      return "unrecognised image";
    default:
      break;
  }
  std::vector<std::string> sass, ptx;
  for (const auto& e : image::fatbinEntries(identified->bytes)) {
    (e.kind == kElfEntry ? sass : ptx).push_back(archName(e));
  }
  const auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  std::string out = sass.empty() ? "no SASS" : join(sass) + " SASS";
  out += ptx.empty() ? "; no PTX" : "; " + join(ptx) + " PTX";
  return out;
}

ImageChoice chooseCode(image::Bytes bytes, int sm, bool forcePtx) {
  ImageChoice choice;
  const auto identified = image::identify(bytes);
  if (!identified || identified->kind == image::Kind::kUnknown) {
    choice.why = "the recorded image is not a fatbin, cubin or PTX";
    return choice;
  }
  if (identified->kind == image::Kind::kCubin) {
    if (forcePtx) {
      choice.why = "the recorded image is a cubin: it has no PTX to force";
      return choice;
    }
    choice.runnable = true;  // the driver decides; a mismatch shows when it loads
    choice.description = "cubin";
    return choice;
  }
  if (identified->kind == image::Kind::kPtx) {
    choice.runnable = true;
    choice.description = "PTX (JIT)";
    return choice;
  }

  const auto entries = image::fatbinEntries(identified->bytes);
  const image::FatbinEntry* sass = nullptr;
  const image::FatbinEntry* ptx = nullptr;
  for (const auto& e : entries) {
    if (e.kind == kElfEntry && sassRuns(e, sm) && (sass == nullptr || e.arch > sass->arch)) sass = &e;
    if (e.kind == kPtxEntry && ptxRuns(e, sm) && (ptx == nullptr || e.arch > ptx->arch)) ptx = &e;
  }
  const std::string has = "image has " + imageContents(bytes) + "; this GPU is " + gpuName(sm);
  if (forcePtx) {
    if (ptx == nullptr) {
      choice.why = has + ": no PTX it can JIT";
      return choice;
    }
    auto text = image::entryContents(*ptx);
    if (!text) {
      choice.why = "the " + archName(*ptx) + " PTX of the image cannot be decompressed";
      return choice;
    }
    if (text->empty() || text->back() != 0) text->push_back(0);
    choice.ptx = std::move(*text);
    choice.runnable = true;
    choice.description = "PTX " + archName(*ptx) + " (forced JIT)";
    return choice;
  }
  if (sass != nullptr) {
    choice.runnable = true;
    choice.sass = true;
    choice.description = "SASS " + archName(*sass);
  } else if (ptx != nullptr) {
    choice.runnable = true;
    choice.description = "PTX " + archName(*ptx) + " (JIT)";
  } else {
    choice.why = has + ": no matching SASS and no PTX it can JIT";
  }
  return choice;
}

}  // namespace kcap::replay
