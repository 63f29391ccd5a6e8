#include "kernel_pattern.h"

#include <re2/re2.h>

namespace kcap::replay {

KernelPattern::KernelPattern(const std::string& source) {
  RE2::Options options;
  options.set_log_errors(false);  // the error is the caller's to report
  options.set_encoding(RE2::Options::EncodingLatin1);
  options.set_never_capture(true);
  re_ = std::make_unique<const RE2>(source, options);
  if (!re_->ok()) throw std::invalid_argument(re_->error());
}

KernelPattern::~KernelPattern() = default;
KernelPattern::KernelPattern(KernelPattern&&) noexcept = default;
KernelPattern& KernelPattern::operator=(KernelPattern&&) noexcept = default;

bool KernelPattern::search(std::string_view name) const {
  return RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *re_);
}

}  // namespace kcap::replay
