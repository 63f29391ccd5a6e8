// The flight recorder's ring's appends (ring_trace_writer_build.cpp: the
// sequencer's merger queues them, the builder thread files them): with
// deferred events, every event kept once, in seq order, each producer's in
// its own order, each built under the seq it was sequenced with, and an
// event appended after a deferred one returned is filed after it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <capnp/message.h>

#include "ring_trace_writer.h"
#include "trace_reader.h"

namespace kcap::test {
namespace {

using schema::Event;

// A deferred event of one or two parts, each a message naming its
// producer, its number and the seq sequenced() gave it.
class Numbered final : public format::DeferredEvent {
 public:
  Numbered(unsigned producer, unsigned number, unsigned parts) : producer_(producer), number_(number), parts_(parts) {}
  unsigned eventCount() const override { return parts_; }
  void build(Event::Builder event, unsigned part) const override {
    event.initMessage().setText(std::to_string(producer_) + " " + std::to_string(number_) + " " + std::to_string(part) +
                                " " + std::to_string(sequenced_ + part));
  }
  size_t sizeHint() const override { return 64; }
  void sequenced(uint64_t firstSeq) noexcept override { sequenced_ = firstSeq; }

 private:
  unsigned producer_, number_, parts_;
  uint64_t sequenced_ = 0;
};

void appendCheckpoint(format::TraceWriter& w, uint64_t ordinal) {
  capnp::MallocMessageBuilder m;
  m.initRoot<Event>().initCheckpoint().setOrdinal(ordinal);
  w.append(m);
}

TEST(RingDeferred, KeepsEveryEventInSeqOrderAfterWhatReturnedBeforeIt) {
  const std::string path = ::testing::TempDir() + "ring_deferred_" + std::to_string(::getpid()) + ".kcap";
  ::unlink(path.c_str());
  format::TraceWriter::Options options;
  options.exclusive = true;
  format::RingOptions ring;
  // Nothing dropped: more than the loop below appends (it waits a little
  // between checkpoints, so that producers a busy machine holds back do not
  // let it pass the ring's count).
  ring.checkpoints = 1u << 20;
  ring.openOutput = [path, options] { return format::TraceWriter::create(path, options); };
  format::RingTraceWriter writer(options, std::move(ring));

  constexpr unsigned kProducers = 4, kEach = 3000;
  std::atomic<unsigned> returned[kProducers] = {};
  std::atomic<bool> done{false};
  std::vector<std::thread> producers;
  for (unsigned p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (unsigned i = 0; i < kEach; ++i) {
        writer.append(format::DeferredEventPtr(new Numbered(p, i, 1 + (i % 2))));
        returned[p].store(i + 1, std::memory_order_release);
      }
    });
  }
  // Checkpoints in between, each after what the producers' appends had returned.
  std::vector<std::vector<unsigned>> seenBefore;
  while (!done.load()) {
    std::vector<unsigned> seen;
    for (auto& r : returned) seen.push_back(r.load(std::memory_order_acquire));
    appendCheckpoint(writer, seenBefore.size());
    seenBefore.push_back(seen);
    bool all = true;
    for (const unsigned s : seen) all = all && s == kEach;
    done = all;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (auto& t : producers) t.join();
  writer.fire();
  writer.close();

  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->problems().empty());
  uint64_t expectSeq = 0;
  std::vector<unsigned> nextOf(kProducers, 0);
  std::map<std::pair<unsigned, unsigned>, unsigned> partsOf;  // (producer, number) -> parts seen
  std::vector<std::vector<unsigned>> keptBefore;              // at each checkpoint: each producer's events kept
  reader->forEachEvent([&](const format::EventRef& ref) {
    const auto e = ref.event;
    bool ok = true;
    EXPECT_EQ(e.getSeq(), expectSeq) << "seq in order, none missing";
    ++expectSeq;
    if (e.isCheckpoint()) {
      keptBefore.push_back(nextOf);
      return true;
    }
    EXPECT_TRUE(e.isMessage());
    if (!e.isMessage()) return false;
    unsigned producer = 0, number = 0, part = 0;
    unsigned long long built = 0;
    ok = std::sscanf(std::string(e.getMessage().getText().cStr()).c_str(), "%u %u %u %llu", &producer, &number, &part,
                     &built) == 4;
    EXPECT_TRUE(ok) << e.getMessage().getText().cStr();
    EXPECT_EQ(built, e.getSeq()) << "built under the seq it was sequenced with";
    EXPECT_LT(producer, kProducers);
    if (!ok || producer >= kProducers) return false;
    if (part == 0) {
      EXPECT_EQ(number, nextOf[producer]) << "a producer's events in its order";
      nextOf[producer] = number + 1;
    }
    ++partsOf[{producer, number}];
    return true;
  });
  for (unsigned p = 0; p < kProducers; ++p) EXPECT_EQ(nextOf[p], kEach);
  for (const auto& [key, parts] : partsOf) EXPECT_EQ(parts, 1 + (key.second % 2));
  ASSERT_EQ(keptBefore.size(), seenBefore.size());
  for (size_t c = 0; c < seenBefore.size(); ++c) {
    for (unsigned p = 0; p < kProducers; ++p) {
      EXPECT_GE(keptBefore[c][p], seenBefore[c][p]) << "checkpoint " << c << ", producer " << p;
    }
  }
  ::unlink(path.c_str());
}

// The recorder may end from two threads (a trigger, the exit handler): a
// second close() returns once the first has written the ring, not before.
TEST(RingDeferred, ASecondCloseReturnsOnceTheRingIsWritten) {
  const std::string path = ::testing::TempDir() + "ring_two_closes_" + std::to_string(::getpid()) + ".kcap";
  ::unlink(path.c_str());
  format::TraceWriter::Options options;
  options.exclusive = true;
  format::RingOptions ring;
  ring.openOutput = [path, options] { return format::TraceWriter::create(path, options); };
  format::RingTraceWriter writer(options, std::move(ring));
  // Enough to take the first close() a while to write.
  for (unsigned i = 0; i < 100000; ++i) writer.append(format::DeferredEventPtr(new Numbered(0, i, 1)));
  writer.fire();
  std::atomic<int> writtenWhenReturned{0};
  std::vector<std::thread> closers;
  for (int t = 0; t < 2; ++t) {
    closers.emplace_back([&] {
      writer.close();
      if (!writer.path().empty()) writtenWhenReturned.fetch_add(1);
    });
  }
  for (auto& t : closers) t.join();
  EXPECT_EQ(writtenWhenReturned.load(), 2);
  EXPECT_EQ(format::TraceReader::open(path)->problems().size(), 0u);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace kcap::test
