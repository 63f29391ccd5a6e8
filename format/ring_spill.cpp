#include "ring_spill.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "errors.h"

namespace kcap::format {
namespace {

// Extents are whole grains: a freed extent fits most later chunks of the
// same piece size, and small leftovers stay few.
constexpr uint64_t kGrain = 512;
// Disk is reserved this much at a time.
constexpr uint64_t kReserveStep = uint64_t{64} << 20;

uint64_t grains(uint64_t size) { return (size + kGrain - 1) / kGrain * kGrain; }

std::string directoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string errorText(int error) { return std::strerror(error); }

// Unnamed where the file system can; else created exclusively at `path`
// (or, when that is taken, at `path`.PID) and unlinked at once, after
// checking that the name is still the file made.
int makeFile(const std::string& path) {
  const std::string directory = directoryOf(path);
  int fd = ::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  const int unnamed = errno;
  if (unnamed != EOPNOTSUPP && unnamed != EISDIR && unnamed != EINVAL) {
    throw FormatError("cannot make the ring file in " + directory + ": " + errorText(unnamed));
  }
  for (const std::string& candidate : {path, path + "." + std::to_string(::getpid())}) {
    fd = ::open(candidate.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) throw FormatError("cannot make the ring file " + candidate + ": " + errorText(errno));
    struct stat made {};
    struct stat named {};
    if (::fstat(fd, &made) == 0 && ::lstat(candidate.c_str(), &named) == 0 && made.st_dev == named.st_dev &&
        made.st_ino == named.st_ino) {
      ::unlink(candidate.c_str());
    }
    return fd;
  }
  throw FormatError("cannot make the ring file: " + path + " and " + path + "." + std::to_string(::getpid()) +
                    " exist");
}

}  // namespace

RingSpill::RingSpill(const std::string& path, uint64_t maxBytes) : path_(path), maxBytes_(maxBytes) {
  // Writing past the file size limit raises SIGXFSZ, which ends the
  // program: the limit bounds the file too.
  rlimit limit{};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    maxBytes_ = std::min<uint64_t>(maxBytes_, limit.rlim_cur);
  }
  maxBytes_ = maxBytes_ / kGrain * kGrain;
  fd_ = makeFile(path);
}

RingSpill::~RingSpill() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t RingSpill::fileBytes() const {
  struct stat st {};
  return ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::optional<uint64_t> RingSpill::allocate(uint64_t size) {
  auto best = freeBySize_.lower_bound({size, 0});
  if (best != freeBySize_.end()) {
    const auto [extentSize, offset] = *best;
    freeBySize_.erase(best);
    freeByOffset_.erase(offset);
    if (extentSize > size) {
      freeByOffset_.emplace(offset + size, extentSize - size);
      freeBySize_.emplace(extentSize - size, offset + size);
    }
    return offset;
  }
  if (size > maxBytes_ || end_ > maxBytes_ - size) return std::nullopt;
  const uint64_t offset = end_;
  end_ += size;
  return offset;
}

void RingSpill::free(uint64_t offset, uint64_t size) {
  auto next = freeByOffset_.lower_bound(offset);
  if (next != freeByOffset_.end() && next->first == offset + size) {
    size += next->second;
    freeBySize_.erase({next->second, next->first});
    next = freeByOffset_.erase(next);
  }
  if (next != freeByOffset_.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == offset) {
      offset = before->first;
      size += before->second;
      freeBySize_.erase({before->second, before->first});
      freeByOffset_.erase(before);
    }
  }
  // Free space at the end is no extent: the end moves back.
  if (offset + size == end_) {
    end_ = offset;
    return;
  }
  freeByOffset_.emplace(offset, size);
  freeBySize_.emplace(size, offset);
}

void RingSpill::reserve(uint64_t end) {
  if (end <= reserved_) return;
  const uint64_t target = std::min(maxBytes_, std::max(end, reserved_ + kReserveStep));
  int error = 0;
  for (const uint64_t upTo : {target, end}) {
    if (::fallocate(fd_, 0, static_cast<off_t>(reserved_), static_cast<off_t>(upTo - reserved_)) == 0) {
      reserved_ = upTo;
      return;
    }
    error = errno;
    if (error == EOPNOTSUPP || error == ENOSYS) {
      reserved_ = maxBytes_;  // the writes allocate
      return;
    }
    if (error != ENOSPC) break;  // a step too far for the disk: try only what is needed
  }
  throw FormatError("cannot extend the ring file " + path_ + " to " + std::to_string(end) +
                    " bytes: " + errorText(error));
}

std::optional<RingSpill::Extent> RingSpill::put(const std::vector<uint8_t>& bytes) {
  if (bytes.empty()) throw FormatError("the ring file holds no empty chunk");
  const uint64_t size = grains(bytes.size());
  const std::optional<uint64_t> offset = allocate(size);
  if (!offset) return std::nullopt;
  try {
    reserve(*offset + size);
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(*offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw FormatError("cannot write the ring file " + path_ + ": " + errorText(n < 0 ? errno : EIO));
      }
      done += static_cast<size_t>(n);
    }
  } catch (const FormatError&) {
    free(*offset, size);
    throw;
  }
  used_ += size;
  return Extent{*offset, bytes.size()};
}

std::vector<uint8_t> RingSpill::read(const Extent& extent) const {
  if (extent.size == 0 || extent.offset > end_ || extent.size > end_ - extent.offset) {
    throw FormatError("no such extent in the ring file " + path_);
  }
  std::vector<uint8_t> bytes(extent.size);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(extent.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw FormatError("cannot read the ring file " + path_ + ": " + errorText(errno));
    if (n == 0) throw FormatError("the ring file " + path_ + " is shorter than what was written to it");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

void RingSpill::release(const Extent& extent) {
  if (extent.size == 0) return;
  const uint64_t size = grains(extent.size);
  used_ -= size;
  free(extent.offset, size);
}

}  // namespace kcap::format
