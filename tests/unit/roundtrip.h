// The round-trip tests' trace (roundtrip_test.cpp): every event type of
// the schema union written once by RoundTrip::writeAll (roundtrip_write.cpp),
// each field set to a distinct non-default value, and the fixture that reads
// it back from the indexed file and from a copy without its index.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::test::roundtrip {

using schema::Event;

inline std::vector<uint8_t> pattern(size_t size, uint8_t salt) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>((i * 131 + salt * 7 + (i >> 8)) & 0xff);
  return bytes;
}

inline std::string str(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }
inline std::vector<uint8_t> vec(capnp::Data::Reader data) { return std::vector<uint8_t>(data.begin(), data.end()); }

inline constexpr uint32_t kPiece = 4096;

// Content stored by the writer in the trace under test.
inline const std::vector<uint8_t> kImage = pattern(3 * kPiece + 100, 1);
inline const std::vector<uint8_t> kExtraImage0 = pattern(777, 2);
inline const std::vector<uint8_t> kExtraImage1 = pattern(kPiece, 3);
inline const std::vector<uint8_t> kCopyData = pattern(kPiece + 1, 4);
inline const std::vector<uint8_t> kPre0 = pattern(2 * kPiece, 5);
inline const std::vector<uint8_t> kPre1 = pattern(9, 6);
inline const std::vector<uint8_t> kPost0 = pattern(kPiece - 1, 7);
inline const std::vector<uint8_t> kParams = pattern(44, 8);
inline const std::vector<uint8_t> kAttr0 = pattern(64, 9);
inline const std::vector<uint8_t> kAttr1 = pattern(64, 10);
inline const std::vector<uint8_t> kUuid0 = pattern(16, 11);
inline const std::vector<uint8_t> kUuid1 = pattern(16, 12);

class RoundTrip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("kcap-roundtrip");
    writeAll(dir_->file("all.kcap"));
    // The same file as a killed writer leaves it: no index, no trailer.
    auto bytes = readFileBytes(dir_->file("all.kcap"));
    RawLayout layout = walkChunks(bytes);
    // Not ASSERTs: a failure in SetUpTestSuite shows as every test skipped;
    // SetUp() fails each test with it instead.
    if (!layout.hasTrailer || layout.chunks.empty() || layout.chunks.back().kind != format::ChunkKind::kIndex) {
      setupProblem_ = "the written file does not end with an index chunk and a trailer";
      return;
    }
    bytes.resize(layout.chunks.back().offset);
    writeFileBytes(dir_->file("scanned.kcap"), bytes);
  }
  void SetUp() override { ASSERT_TRUE(setupProblem_.empty()) << setupProblem_; }
  static inline std::string setupProblem_;
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
    written_.clear();
  }

  static void writeAll(const std::string& path);

  // Runs `check` on the event of type `which` read from both files, after
  // checking the fields every event has and that the message read back is
  // byte-identical to the one written.
  void checkBoth(Event::Which which, const std::function<void(Event::Reader, format::TraceReader&)>& check) {
    for (const char* name : {"all.kcap", "scanned.kcap"}) {
      SCOPED_TRACE(name);
      auto reader = format::TraceReader::open(dir_->file(name));
      EXPECT_EQ(reader->indexed(), std::string(name) == "all.kcap");
      EXPECT_TRUE(reader->problems().empty());
      EXPECT_FALSE(reader->torn());
      int found = 0;
      uint64_t expectSeq = 0;
      reader->forEachEvent([&](const format::EventRef& ref) {
        EXPECT_EQ(ref.event.getSeq(), expectSeq++);
        if (ref.event.which() != which) return true;
        ++found;
        const auto& written = written_.at(which);
        Event::Reader original = written.message->getRoot<Event>().asReader();
        EXPECT_EQ(ref.event.getSeq(), written.seq);
        EXPECT_EQ(ref.event.getTimeNs(), original.getTimeNs());
        EXPECT_EQ(ref.event.getThreadId(), original.getThreadId());
        EXPECT_NE(ref.event.getTimeNs(), 0u);
        EXPECT_NE(ref.event.getThreadId(), 0u);
        EXPECT_EQ(eventBytes(ref.event), eventBytes(original));
        check(ref.event, *reader);
        return true;
      });
      EXPECT_EQ(found, 1);
      EXPECT_EQ(expectSeq, written_.size());
    }
  }

  struct Written {
    std::unique_ptr<capnp::MallocMessageBuilder> message;
    uint64_t seq = 0;
  };
  static inline TempDir* dir_ = nullptr;
  static inline std::map<Event::Which, Written> written_;
};

}  // namespace kcap::test::roundtrip
