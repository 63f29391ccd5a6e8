// TraceWriter's lock-free appends (trace_writer_sequencer.cpp): many threads
// append at once, with content stored, immediate and numbered events and
// flushes in between; the file holds every event once, in a gapless seq
// order that keeps each thread's program order and the order the program
// puts between threads' appends, sequenced() runs once per object in seq
// order, flush() is durable while producers go on, and appends racing
// with close() either land in the file or throw.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::test {
namespace {

using schema::Event;

// What sequenced() saw: the calls in the order they came, and how often
// each object was sequenced. The calls must come one at a time (the writer
// promises it; a thread sanitizer build sees it if they do not).
struct SequenceLog {
  std::vector<uint64_t> calls;
  std::vector<std::atomic<uint32_t>> perObject;
  explicit SequenceLog(size_t objects) : perObject(objects) {}
};

// A deferred KernelTiming event of thread `thread`, its `index`-th; object
// `id` in the log. Stands for `parts` events (index, index + 1, ...).
struct Tracked final : format::DeferredEvent {
  SequenceLog* log = nullptr;
  size_t id = 0;
  uint32_t thread = 0;
  uint64_t index = 0;
  unsigned parts = 1;
  uint64_t sequencedAt = ~0ull;
  unsigned eventCount() const override { return parts; }
  size_t sizeHint() const override { return 96; }
  void sequenced(uint64_t firstSeq) noexcept override {
    sequencedAt = firstSeq;
    log->calls.push_back(firstSeq);
    log->perObject[id].fetch_add(1, std::memory_order_relaxed);
  }
  void build(schema::Event::Builder event, unsigned part) const override {
    // sequenced() came first, with this object's seq.
    if (sequencedAt == ~0ull) throw std::runtime_error("built before sequenced");
    event.setThreadId(thread);
    auto t = event.initKernelTiming();
    t.setLaunchIndex(index + part);
    t.setStartNs(thread);
  }
};

// A deferred KernelTiming event of thread `thread`, its `index`-th, that
// logs nothing.
struct Quiet final : format::DeferredEvent {
  uint32_t thread = 0;
  uint64_t index = 0;
  Quiet(uint32_t threadId, uint64_t eventIndex) : thread(threadId), index(eventIndex) {}
  size_t sizeHint() const override { return 64; }
  void build(schema::Event::Builder e, unsigned) const override {
    e.setThreadId(thread);
    e.initKernelTiming().setLaunchIndex(index);
  }
};

uint64_t appendImmediate(format::TraceWriter& writer, uint32_t thread, uint64_t index) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<Event>();
  event.setThreadId(thread);
  auto t = event.initKernelTiming();
  t.setLaunchIndex(index);
  t.setStartNs(thread);
  return writer.append(message);
}

// An immediate Launch event whose `pre` holds content stored right before
// the append; its launchIndex is the thread's index.
uint64_t appendWithContent(format::TraceWriter& writer, uint32_t thread, uint64_t index,
                           const std::vector<uint8_t>& bytes) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<Event>();
  event.setThreadId(thread);
  auto launch = event.initLaunch();
  launch.setLaunchIndex(index);
  writer.storeContent(bytes.data(), bytes.size(), launch.initPre(1)[0].initContent());
  return writer.append(message);
}

std::vector<uint8_t> contentOf(uint32_t thread, uint64_t index, size_t size) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(thread * 131 + index * 7 + i * 13 + (i >> 9));
  return bytes;
}

// Which (thread, index) an event is, whatever its kind.
uint64_t indexOf(const Event::Reader& event) {
  return event.isLaunch() ? event.getLaunch().getLaunchIndex() : event.getKernelTiming().getLaunchIndex();
}

TEST(WriterSequencer, ManyThreadsKeepOneGaplessOrderWithEveryEventOnce) {
  constexpr uint32_t kThreads = 8;
  constexpr uint64_t kPerThread = 20000;
  constexpr uint64_t kContentEvery = 997;
  constexpr uint64_t kFlushEvery = 6000;
  TempDir dir;
  const auto path = dir.file("hammer.kcap");
  format::TraceWriter::Options options;
  options.batchBytes = 16384;  // many record chunks
  options.compressionThreads = 2;
  options.pieceSize = 4096;
  auto writer = format::TraceWriter::create(path, options);
  SequenceLog log(kThreads * kPerThread);
  std::vector<std::vector<uint64_t>> returned(kThreads, std::vector<uint64_t>(kPerThread));
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPerThread;) {
        if (i % kContentEvery == 5) {
          returned[t][i] = appendWithContent(*writer, t + 1, i, contentOf(t, i, 6000));
          ++i;
        } else if (i % 7 == 3) {
          returned[t][i] = appendImmediate(*writer, t + 1, i);
          ++i;
        } else if (i % 11 == 0 && i + 1 < kPerThread) {
          auto* pair = new Tracked;  // two events: index i and i + 1
          pair->log = &log;
          pair->id = t * kPerThread + i;
          pair->thread = t + 1;
          pair->index = i;
          pair->parts = 2;
          const uint64_t seq = writer->append(format::DeferredEventPtr(pair));
          returned[t][i] = seq;
          returned[t][i + 1] = seq + 1;
          i += 2;
        } else {
          auto* one = new Tracked;
          one->log = &log;
          one->id = t * kPerThread + i;
          one->thread = t + 1;
          one->index = i;
          returned[t][i] = writer->append(format::DeferredEventPtr(one));
          ++i;
        }
        // Durability: after flush, this thread's events so far are in the
        // file while the others go on appending.
        if (t == 0 && i % kFlushEvery == 0) {
          writer->flush();
          std::vector<bool> seen(i, false);
          for (const auto& owned : readAllEvents(path)) {
            const auto event = owned.get();
            if (event.getThreadId() == 1 && indexOf(event) < i) seen[indexOf(event)] = true;
          }
          for (uint64_t k = 0; k < i; ++k) {
            if (!seen[k]) {
              failures[t] = "event " + std::to_string(k) + " of thread 0 not in the file after flush";
              break;
            }
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  writer->waitSequenced();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");

  // sequenced(): once per object, in seq order.
  for (size_t k = 1; k < log.calls.size(); ++k) {
    ASSERT_LT(log.calls[k - 1], log.calls[k]) << "call " << k;
  }
  size_t objects = 0;
  for (uint32_t t = 0; t < kThreads; ++t) {
    for (uint64_t i = 0; i < kPerThread; ++i) {
      const uint32_t calls = log.perObject[t * kPerThread + i].load();
      ASSERT_LE(calls, 1u) << t << " " << i;
      objects += calls;
    }
  }
  EXPECT_EQ(objects, log.calls.size());
  writer->close();
  EXPECT_EQ(writer->stats().events, kThreads * kPerThread);

  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->problems().empty());
  std::vector<uint64_t> next(kThreads, 0);
  uint64_t expectSeq = 0;
  uint64_t contents = 0;
  const uint64_t delivered = reader->forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(ref.event.getSeq(), expectSeq++);
    const uint32_t t = ref.event.getThreadId() - 1;
    if (t >= kThreads) {
      ADD_FAILURE() << "thread id " << ref.event.getThreadId();
      return false;
    }
    const uint64_t index = indexOf(ref.event);
    if (index != next[t]) {
      ADD_FAILURE() << "thread " << t << ": event " << index << " where " << next[t] << " was due";
      return false;
    }
    EXPECT_EQ(returned[t][index], ref.event.getSeq());
    if (ref.event.isLaunch()) {
      ++contents;
      EXPECT_EQ(reader->readContent(ref.event.getLaunch().getPre()[0].getContent()), contentOf(t, index, 6000));
    }
    ++next[t];
    return true;
  });
  EXPECT_EQ(delivered, kThreads * kPerThread);
  EXPECT_GT(contents, kThreads * 10);
  for (uint32_t t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread) << t;
}

// Appends ordered by the program across threads: a token passes from
// thread to thread, and each appends (deferred and immediate events in
// turn) while it holds the token. The file must hold them in the token's
// order: an append that returned before another began comes first,
// whichever threads made them.
TEST(WriterSequencer, AppendsOrderedAcrossThreadsKeepThatOrder) {
  TempDir dir;
  const auto path = dir.file("causal.kcap");
  auto writer = format::TraceWriter::create(path);
  constexpr uint32_t kThreads = 4;
  constexpr uint64_t kTurns = 2000;
  std::atomic<uint64_t> token{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t turn = t; turn < kTurns; turn += kThreads) {
        while (token.load(std::memory_order_acquire) != turn) std::this_thread::yield();
        if (turn % 2 == 0) {
          writer->append(format::DeferredEventPtr(new Quiet(t + 1, turn)));
        } else {
          appendImmediate(*writer, t + 1, turn);
        }
        token.store(turn + 1, std::memory_order_release);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  writer->close();
  uint64_t expected = 0;
  for (const auto& owned : readAllEvents(path)) {
    const auto event = owned.get();
    ASSERT_EQ(event.getKernelTiming().getLaunchIndex(), expected) << "seq " << event.getSeq();
    ASSERT_EQ(event.getThreadId(), expected % kThreads + 1);
    ++expected;
  }
  EXPECT_EQ(expected, kTurns);
}

// waitSequenced(): what sequenced() numbers is final once it returns.
TEST(WriterSequencer, WaitSequencedSeesEveryAppendBeforeIt) {
  TempDir dir;
  auto writer = format::TraceWriter::create(dir.file("sequenced.kcap"));
  SequenceLog log(5000);
  for (size_t i = 0; i < 5000; ++i) {
    auto* event = new Tracked;
    event->log = &log;
    event->id = i;
    event->index = i;
    writer->append(format::DeferredEventPtr(event));
    if (i % 1000 == 999) {
      writer->waitSequenced();
      ASSERT_EQ(log.calls.size(), i + 1);
    }
  }
  writer->close();
}

// Numbered events (a ring's copies) from one thread among other threads'
// appends: one increasing order, the gaps where the numbers say.
TEST(WriterSequencer, NumberedAppendsInterleaveWithOtherThreads) {
  TempDir dir;
  const auto path = dir.file("numbered.kcap");
  auto writer = format::TraceWriter::create(path);
  std::atomic<bool> stop{false};
  std::thread other([&] {
    for (uint64_t i = 0; !stop.load(); ++i) appendImmediate(*writer, 2, i);
  });
  std::vector<uint64_t> numbered;
  for (uint64_t k = 0; k < 500; ++k) {
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<Event>();
    event.setThreadId(1);
    event.initKernelTiming().setLaunchIndex(k);
    // Well past whatever the other thread took so far.
    event.setSeq(appendImmediate(*writer, 1, k) + (1u << 20));
    try {
      numbered.push_back(writer->appendNumbered(message));
    } catch (const format::FormatError& e) {
      ADD_FAILURE() << e.what();
      break;
    }
  }
  stop = true;
  other.join();
  writer->close();
  uint64_t last = 0;
  bool first = true;
  size_t found = 0;
  for (const auto& owned : readAllEvents(path)) {
    const auto event = owned.get();
    if (!first) {
      EXPECT_GT(event.getSeq(), last);
    }
    first = false;
    last = event.getSeq();
    if (found < numbered.size() && event.getSeq() == numbered[found]) ++found;
  }
  EXPECT_EQ(found, numbered.size());
  EXPECT_TRUE(format::TraceReader::open(path)->problems().empty());
}

// Appends racing with close(): each returns a seq that is in the file, or
// throws; none hangs, and the file is whole.
TEST(WriterSequencer, AppendsRacingWithCloseLandOrThrow) {
  for (int round = 0; round < 5; ++round) {
    TempDir dir;
    const auto path = dir.file("race.kcap");
    auto writer = format::TraceWriter::create(path);
    constexpr uint32_t kThreads = 4;
    std::vector<std::vector<uint64_t>> landed(kThreads);
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (uint64_t i = 0;; ++i) {
          try {
            if (i % 2 == 0) {
              landed[t].push_back(appendImmediate(*writer, t + 1, i));
            } else {
              landed[t].push_back(writer->append(format::DeferredEventPtr(new Quiet(t + 1, i))));
            }
          } catch (const format::FormatError&) {
            return;
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + round * 5));
    writer->close();
    for (auto& thread : threads) thread.join();
    std::vector<uint64_t> seqs;
    for (const auto& owned : readAllEvents(path)) seqs.push_back(owned.get().getSeq());
    for (size_t k = 0; k < seqs.size(); ++k) ASSERT_EQ(seqs[k], k);
    for (uint32_t t = 0; t < kThreads; ++t) {
      for (uint64_t seq : landed[t]) EXPECT_LT(seq, seqs.size()) << "a returned append is not in the file";
    }
    EXPECT_TRUE(format::TraceReader::open(path)->problems().empty());
  }
}

}  // namespace
}  // namespace kcap::test
