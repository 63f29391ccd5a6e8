// RingSpill: the flight recorder's ring file (docs/checkpoint.md, "The
// ring"). The ring holds its pieces in memory up to --buffer; past it, it
// moves encoded piece chunks here, and reads them back only when a trigger
// fired and the ring is written out.
//
// The file is the ring's own and nobody else's: made unnamed (O_TMPFILE) in
// the directory of the path given, so that nothing is left behind even when
// the process is killed; where the file system cannot, created at the path
// (exclusively, mode 0600, never through a link) and unlinked at once. It
// goes when the RingSpill does.
//
// Space: chunks are placed in extents of whole grains; a released extent
// joins its free neighbours, and one that reaches the end of what is used
// shortens it. A chunk takes the smallest free extent it fits in, else
// extends the end. The file never grows past maxBytes (nor past the
// process's RLIMIT_FSIZE, whose signal would end the program): past it,
// put() finds no room and the ring drops instead. Disk is reserved ahead
// (fallocate) in steps, so that a full disk is met there rather than by a
// write.
//
// Not thread-safe: the ring calls it under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kcap::format {

class RingSpill {
 public:
  struct Extent {
    uint64_t offset = 0;
    uint64_t size = 0;  // the chunk's bytes; 0: none
  };

  // Makes the file in `path`'s directory (see above). Throws FormatError
  // naming the path and the system's error.
  RingSpill(const std::string& path, uint64_t maxBytes);
  ~RingSpill();
  RingSpill(const RingSpill&) = delete;
  RingSpill& operator=(const RingSpill&) = delete;

  // Writes `bytes` (not empty) and returns where; nullopt when they do not
  // fit within maxBytes. Throws FormatError when the file cannot be written
  // (a full disk, an I/O error): nothing is then held for them.
  std::optional<Extent> put(const std::vector<uint8_t>& bytes);
  // Throws FormatError when the extent cannot be read back whole.
  std::vector<uint8_t> read(const Extent& extent) const;
  void release(const Extent& extent);

  uint64_t usedBytes() const { return used_; }  // chunks held, in whole grains
  uint64_t endBytes() const { return end_; }    // the end of the last extent in use
  uint64_t maxBytes() const { return maxBytes_; }
  // The file's size as the system reports it (reserved ahead of endBytes).
  uint64_t fileBytes() const;

 private:
  std::optional<uint64_t> allocate(uint64_t size);
  void free(uint64_t offset, uint64_t size);
  void reserve(uint64_t end);

  std::string path_;  // for messages
  uint64_t maxBytes_ = 0;
  int fd_ = -1;
  uint64_t end_ = 0;
  uint64_t reserved_ = 0;  // fallocate'd up to here
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> freeByOffset_;           // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> freeBySize_;  // (size, offset)
};

}  // namespace kcap::format
