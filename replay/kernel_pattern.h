// Kernel-name patterns of kcap's own options (replay and bisect --kernel,
// --override KERNEL=IMAGE): RE2 syntax, searched anywhere in the name, byte
// by byte (Latin-1, so that any byte of a name is one character). Names come
// from traces, which are untrusted: RE2 matches in time linear in the name
// and without recursing on it, where std::regex overflowed the stack on a
// long one. (The shim's own filters use interpose/core/name_pattern.h.)
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace kcap::replay {

class KernelPattern {
 public:
  // Throws std::invalid_argument with RE2's reason, e.g. "missing ): (x".
  explicit KernelPattern(const std::string& source);
  ~KernelPattern();
  KernelPattern(KernelPattern&&) noexcept;
  KernelPattern& operator=(KernelPattern&&) noexcept;

  // True if the pattern matches somewhere in `name`.
  bool search(std::string_view name) const;

 private:
  std::unique_ptr<const re2::RE2> re_;
};

}  // namespace kcap::replay
