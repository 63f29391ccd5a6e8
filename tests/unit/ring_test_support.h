// What the flight recorder's ring tests share (ring_writer_test.cpp,
// ring_spill_test.cpp): a fixture making a ring with its output and ring
// file in the test directory, and appends of the events the shim writes.
#pragma once

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "hash.h"
#include "ring_trace_writer.h"
#include "trace_reader.h"

namespace kcap::test {

using format::contentHash;
using format::Hash128;
using schema::Event;

inline constexpr uint32_t kPiece = 4096;

inline std::vector<uint8_t> randomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(size);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

inline bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

class Ring : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "ring_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".kcap";
    ::unlink(path_.c_str());
    spillPath_ = path_ + ".ring";
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  std::unique_ptr<format::RingTraceWriter> make(unsigned checkpoints, size_t maxBytes = size_t{1} << 30,
                                                uint64_t maxSpillBytes = 0) {
    format::TraceWriter::Options options;
    options.pieceSize = kPiece;
    options.exclusive = true;
    format::RingOptions ring;
    ring.checkpoints = checkpoints;
    ring.maxBytes = maxBytes;
    ring.maxSpillBytes = maxSpillBytes;
    ring.spillPath = spillPath_;
    ring.openOutput = [this, options] { return format::TraceWriter::create(path_, options); };
    ring.warn = [this](const std::string& text) { warnings_.push_back(text); };
    return std::make_unique<format::RingTraceWriter>(options, std::move(ring));
  }

  // Names in the test directory that start with the ring file's.
  std::vector<std::string> leftovers() const {
    const size_t slash = spillPath_.rfind('/');
    const std::string directory = spillPath_.substr(0, slash);
    const std::string prefix = spillPath_.substr(slash + 1);
    std::vector<std::string> out;
    DIR* dir = ::opendir(directory.c_str());
    if (dir == nullptr) return {"cannot list " + directory};
    while (const dirent* entry = ::readdir(dir)) {
      if (std::string(entry->d_name).rfind(prefix, 0) == 0) out.emplace_back(entry->d_name);
    }
    ::closedir(dir);
    return out;
  }

  std::string path_;
  std::string spillPath_;
  std::vector<std::string> warnings_;
};

inline void appendBegin(format::TraceWriter& w) {
  capnp::MallocMessageBuilder m;
  m.initRoot<Event>().initTraceBegin();
  w.append(m);
}

inline void appendModule(format::TraceWriter& w, const std::vector<uint8_t>& image, uint64_t handle) {
  capnp::MallocMessageBuilder m;
  auto load = m.initRoot<Event>().initModuleLoad();
  load.setHandle(handle);
  w.storeContent(image.data(), image.size(), load.initImage());
  w.append(m);
}

inline void appendCopy(format::TraceWriter& w, const std::vector<uint8_t>& bytes, uint64_t dst) {
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<Event>().initMemcpy();
  c.setDst(dst);
  c.setSize(bytes.size());
  w.storeContent(bytes.data(), bytes.size(), c.initData());
  w.append(m);
}

inline void appendAlloc(format::TraceWriter& w, uint64_t address) {
  capnp::MallocMessageBuilder m;
  auto a = m.initRoot<Event>().initAlloc();
  a.setAddress(address);
  a.setSize(4096);
  w.append(m);
}

// A checkpoint of one range holding `memory`, stored as the shim does: the
// pieces the ring lacks are stored, the others only named.
inline void appendCheckpoint(format::TraceWriter& w, uint64_t ordinal, const std::vector<uint8_t>& memory) {
  std::vector<Hash128> hashes;
  for (size_t at = 0; at < memory.size(); at += kPiece) {
    hashes.push_back(contentHash(memory.data() + at, std::min<size_t>(kPiece, memory.size() - at)));
  }
  const std::vector<uint8_t> missing = w.missingPieces(hashes);
  capnp::MallocMessageBuilder scratch;
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (missing[i]) {
      const size_t length = std::min<size_t>(kPiece, memory.size() - i * kPiece);
      w.storeHashedContent(memory.data() + i * kPiece, length, &hashes[i], scratch.initRoot<schema::Content>());
    }
  }
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<Event>().initCheckpoint();
  c.setOrdinal(ordinal);
  auto range = c.initRanges(1)[0];
  range.setAddress(0x1000);
  auto content = range.initContent();
  content.setSize(memory.size());
  content.setPieceSize(kPiece);
  auto pieces = content.initPieces(static_cast<unsigned>(hashes.size()));
  for (unsigned i = 0; i < hashes.size(); ++i) {
    pieces[i].setHigh(hashes[i].high);
    pieces[i].setLow(hashes[i].low);
  }
  w.append(m);
}

inline void appendTrigger(format::TraceWriter& w, uint64_t dropped) {
  capnp::MallocMessageBuilder m;
  auto t = m.initRoot<Event>().initTrigger();
  t.setKind(schema::TriggerKind::API);
  t.setReason("test");
  t.setDroppedEvents(dropped);
  w.append(m);
  capnp::MallocMessageBuilder end;
  end.initRoot<Event>().initTraceEnd().setEventCount(w.stats().events);
  w.append(end);
}

// The written trace at `path` holds a module load whose image reads back as `image`.
inline void expectModuleImage(const std::string& path, const std::vector<uint8_t>& image) {
  auto reader = format::TraceReader::open(path);
  bool sawModule = false;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isModuleLoad()) {
      sawModule = true;
      EXPECT_EQ(reader->readContent(ref.event.getModuleLoad().getImage()), image);
    }
    return true;
  });
  EXPECT_TRUE(sawModule);
}

}  // namespace kcap::test
