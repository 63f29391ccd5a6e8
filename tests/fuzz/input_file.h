// How a fuzz target hands each input to the trace reader: written to an
// in-memory file (a memfd opened again through /proc/self/fd; a /tmp file with
// the pid in its name where memfd is missing), read as it reads any file, and
// read again with its checksums recomputed.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trace_files.h"

namespace kcap::fuzz {

class InputFile {
 public:
  InputFile() {
    fd_ = static_cast<int>(::memfd_create("kcap-fuzz", MFD_CLOEXEC));
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
      int probe = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (probe >= 0) {
        ::close(probe);
        return;
      }
      ::close(fd_);
    }
    path_ = "/tmp/kcap-fuzz-" + std::to_string(::getpid()) + ".kcap";
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      std::perror(path_.c_str());
      std::abort();
    }
    unlink_ = true;
  }
  ~InputFile() {
    ::close(fd_);
    if (unlink_) ::unlink(path_.c_str());
  }
  const std::string& set(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::string path_;
  bool unlink_ = false;
};

// Runs `read` on the path of a file holding the input as given and, where
// recomputing its header, chunk and trailer checksums (fixChecksums) changes
// it, once more on that copy: checksums stop almost every mutation at the
// container layer, the copy lets mutations reach what lies behind them.
template <typename Read>
void readAsGivenAndFixed(const uint8_t* data, size_t size, Read&& read) {
  static InputFile file;
  read(file.set(data, size));
  std::vector<uint8_t> fixed(data, data + size);
  kcap::test::fixChecksums(fixed);
  if (size > 0 && std::memcmp(fixed.data(), data, size) != 0) read(file.set(fixed.data(), fixed.size()));
}

}  // namespace kcap::fuzz
