// TraceWriter: concurrency, ordering, the memory bound, file mode, flush, and
// how failures are reported.
#include <gtest/gtest.h>

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::test {
namespace {

using schema::Event;

void expectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << text << "' does not contain '" << part << "'";
}

uint64_t appendTiming(format::TraceWriter& writer, uint32_t thread, uint64_t index) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<Event>();
  event.setThreadId(thread);
  auto t = event.initKernelTiming();
  t.setLaunchIndex(index);
  t.setStartNs(thread);
  return writer.append(message);
}

TEST(Writer, EightThreadsAppendConcurrently) {
  constexpr uint32_t kThreads = 8;
  constexpr uint64_t kPerThread = 2000;
  TempDir dir;
  const auto path = dir.file("mt.kcap");
  format::TraceWriter::Options options;
  options.batchBytes = 8192;  // many record chunks
  options.compressionThreads = 2;
  auto writer = format::TraceWriter::create(path, options);
  std::vector<std::vector<uint64_t>> returned(kThreads);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (uint64_t i = 0; i < kPerThread; ++i) returned[t].push_back(appendTiming(*writer, t + 1, i));
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  writer->close();
  EXPECT_EQ(writer->stats().events, kThreads * kPerThread);

  // Returned seqs: each thread's strictly increasing, all together 0..N-1 once.
  std::vector<bool> seen(kThreads * kPerThread, false);
  for (uint32_t t = 0; t < kThreads; ++t) {
    for (uint64_t i = 0; i < kPerThread; ++i) {
      ASSERT_LT(returned[t][i], seen.size());
      EXPECT_FALSE(seen[returned[t][i]]);
      seen[returned[t][i]] = true;
      if (i > 0) {
        EXPECT_LT(returned[t][i - 1], returned[t][i]);
      }
    }
  }

  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->indexed());
  EXPECT_TRUE(reader->problems().empty());
  size_t records = 0;
  for (const auto& c : reader->chunks()) records += c.kind == format::ChunkKind::kRecords;
  EXPECT_GT(records, 10u);
  std::vector<uint64_t> next(kThreads, 0);
  uint64_t expectSeq = 0;
  uint64_t delivered = reader->forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(ref.event.getSeq(), expectSeq);  // strictly increasing, no gaps
    uint32_t t = ref.event.getThreadId() - 1;
    EXPECT_LT(t, kThreads);
    if (t >= kThreads) return false;
    auto timing = ref.event.getKernelTiming();
    EXPECT_EQ(timing.getStartNs(), t + 1);
    EXPECT_EQ(timing.getLaunchIndex(), next[t]) << "thread " << t << " out of order";
    if (next[t] < kPerThread) {
      EXPECT_EQ(returned[t][next[t]], ref.event.getSeq());
    }
    ++next[t];
    ++expectSeq;
    return true;
  });
  EXPECT_EQ(delivered, kThreads * kPerThread);
  for (uint32_t t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread) << t;
}

TEST(Writer, TinyPendingBoundStillCompletes) {
  TempDir dir;
  const auto path = dir.file("bounded.kcap");
  format::TraceWriter::Options options;
  options.pieceSize = 4096;
  options.maxPendingBytes = 1;  // every job waits for the one before it to be written
  options.batchBytes = 2048;
  options.compressionThreads = 1;
  auto writer = format::TraceWriter::create(path, options);
  constexpr int kThreads = 4, kEach = 20;
  auto bufferFor = [](int t, int i) {
    std::mt19937 rng(static_cast<unsigned>(t * 1000 + i));
    std::vector<uint8_t> b(3 * 4096 + 100);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto bytes = bufferFor(t, i);
        capnp::MallocMessageBuilder message;
        auto event = message.initRoot<Event>();
        event.setThreadId(static_cast<uint32_t>(t + 1));
        auto c = event.initMemcpy();
        c.setDst(static_cast<uint64_t>(i));
        writer->storeContent(bytes.data(), bytes.size(), c.initData());
        writer->append(message);
      }
    });
  }
  for (auto& t : threads) t.join();
  writer->close();
  EXPECT_EQ(writer->stats().blobChunks, uint64_t{kThreads} * kEach * 4);

  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->problems().empty());
  int count = 0;
  reader->forEachEvent([&](const format::EventRef& ref) {
    int t = static_cast<int>(ref.event.getThreadId()) - 1;
    int i = static_cast<int>(ref.event.getMemcpy().getDst());
    EXPECT_EQ(reader->readContent(ref.event.getMemcpy().getData()), bufferFor(t, i));
    ++count;
    return true;
  });
  EXPECT_EQ(count, kThreads * kEach);
}

TEST(Writer, FileModeIs0600) {
  TempDir dir;
  const auto path = dir.file("mode.kcap");
  mode_t old = ::umask(0);  // so the mode comes from the writer alone
  auto writer = format::TraceWriter::create(path);
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  writer->close();
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// open(..., O_CREAT | O_TRUNC, 0600) applies the mode only when it creates
// the file: recording over a 0644 file must not leave captured device memory
// world-readable (the writer sets the mode itself).
TEST(Writer, ExistingFileIsMade0600) {
  TempDir dir;
  const auto path = dir.file("existing.kcap");
  writeFileBytes(path, "old", 3);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  format::TraceWriter::create(path)->close();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// The scheduling policy of each of this process's threads whose name
// starts with "kcap-", by name.
std::multimap<std::string, int> kcapThreadPolicies() {
  std::multimap<std::string, int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("kcap-", 0) != 0) continue;
    out.emplace(name, sched_getscheduler(static_cast<pid_t>(std::stoi(task.path().filename().string()))));
  }
  return out;
}

// With idleThreads every thread the writer makes (merger, compression,
// writing, and the hashing pool a many-piece content starts) runs under
// SCHED_IDLE; without, none does.
TEST(Writer, IdleThreadsRunUnderSchedIdle) {
  for (const bool idle : {true, false}) {
    SCOPED_TRACE(idle ? "idle" : "normal");
    TempDir dir;
    format::TraceWriter::Options options;
    options.idleThreads = idle;
    options.pieceSize = 4096;
    options.hashingThreads = 2;
    auto writer = format::TraceWriter::create(dir.file("idle.kcap"), options);
    const std::vector<uint8_t> memory(64 * 4096, 1);
    capnp::MallocMessageBuilder m;
    writer->storeContent(memory.data(), memory.size(), m.initRoot<schema::Content>());
    const auto policies = kcapThreadPolicies();
    std::set<std::string> names;
    for (const auto& [name, policy] : policies) {
      names.insert(name);
      EXPECT_EQ(policy, idle ? SCHED_IDLE : SCHED_OTHER) << name;
    }
    EXPECT_EQ(names, (std::set<std::string>{"kcap-hash", "kcap-merge", "kcap-write", "kcap-zstd"}));
    writer->close();
  }
}

TEST(Writer, UnwritablePathThrowsNamingThePath) {
  TempDir dir;
  for (const std::string& path :
       {dir.file("no-such-dir/trace.kcap"), dir.path(), std::string("/proc/kcap-test.kcap")}) {
    SCOPED_TRACE(path);
    try {
      format::TraceWriter::create(path);
      ADD_FAILURE() << "no FormatError";
    } catch (const format::FormatError& e) {
      expectContains(e.what(), path);
      expectContains(e.what(), "cannot create");
    }
  }
}

TEST(Writer, HeaderWriteFailureThrowsNamingThePath) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  try {
    format::TraceWriter::create("/dev/full");
    ADD_FAILURE() << "no FormatError";
  } catch (const format::FormatError& e) {
    expectContains(e.what(), "/dev/full");
    expectContains(e.what(), "header");
  }
}

TEST(Writer, LaterWriteFailureIsReportedByClose) {
  TempDir dir;
  const auto path = dir.file("efbig.kcap");
  // The process may not write past 64 KiB: write() fails with EFBIG.
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldHandler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limited = old;
  limited.rlim_cur = 64 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string error;
  {
    format::TraceWriter::Options options;
    options.pieceSize = 4096;
    options.zstdLevel = 1;
    auto writer = format::TraceWriter::create(path, options);
    std::mt19937 rng(7);
    std::vector<uint8_t> noise(256 << 10);  // incompressible, 4x the limit
    for (auto& b : noise) b = static_cast<uint8_t>(rng());
    try {
      capnp::MallocMessageBuilder message;
      auto c = message.initRoot<Event>().initMemcpy();
      writer->storeContent(noise.data(), noise.size(), c.initData());
      writer->append(message);
      writer->flush();
      writer->close();
    } catch (const format::FormatError& e) {
      error = e.what();
    }
    if (error.empty()) {
      try {
        writer->close();
      } catch (const format::FormatError& e) {
        error = e.what();
      }
    }
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, oldHandler);
  ASSERT_FALSE(error.empty()) << "the failed write was not reported";
  expectContains(error, path);
  expectContains(error, "write failed");
  // What did reach the file is still a readable (torn) trace.
  auto reader = format::TraceReader::open(path);
  EXPECT_FALSE(reader->indexed());
}

TEST(Writer, InvalidOptionsAreRejectedBeforeCreatingTheFile) {
  TempDir dir;
  const auto path = dir.file("opts.kcap");
  format::TraceWriter::Options small;
  small.pieceSize = 1024;
  try {
    format::TraceWriter::create(path, small);
    ADD_FAILURE() << "no FormatError";
  } catch (const format::FormatError& e) {
    expectContains(e.what(), path);
    expectContains(e.what(), "piece size 1024");
  }
  format::TraceWriter::Options level;
  level.zstdLevel = 1000;
  EXPECT_THROW(format::TraceWriter::create(path, level), format::FormatError);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(Writer, FlushMakesEverythingReadableBeforeClose) {
  TempDir dir;
  const auto path = dir.file("flush.kcap");
  format::TraceWriter::Options options;
  options.pieceSize = 4096;
  auto writer = format::TraceWriter::create(path, options);
  std::vector<uint8_t> bytes(10000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  for (int i = 0; i < 100; ++i) {
    capnp::MallocMessageBuilder message;
    auto c = message.initRoot<Event>().initMemcpy();
    c.setDst(static_cast<uint64_t>(i));
    bytes[0] = static_cast<uint8_t>(i);
    writer->storeContent(bytes.data(), bytes.size(), c.initData());
    writer->append(message);
  }
  writer->flush();
  {
    auto reader = format::TraceReader::open(path);
    EXPECT_FALSE(reader->indexed());
    EXPECT_FALSE(reader->torn());
    EXPECT_TRUE(reader->problems().empty());
    int n = 0;
    reader->forEachEvent([&](const format::EventRef& ref) {
      auto got = reader->readContent(ref.event.getMemcpy().getData());
      EXPECT_EQ(got[0], static_cast<uint8_t>(n));
      EXPECT_EQ(ref.event.getMemcpy().getDst(), static_cast<uint64_t>(n));
      ++n;
      return true;
    });
    EXPECT_EQ(n, 100);
  }
  appendTiming(*writer, 1, 0);
  writer->close();
  writer->close();  // idempotent
  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->indexed());
  EXPECT_EQ(reader->forEachEvent([](const format::EventRef&) { return true; }), 101u);
}

TEST(Writer, StatsMatchTheFile) {
  TempDir dir;
  const auto path = dir.file("stats.kcap");
  format::TraceWriter::Options options;
  options.pieceSize = 4096;
  options.batchBytes = 1024;
  auto writer = format::TraceWriter::create(path, options);
  std::vector<uint8_t> zeros(3 * 4096, 0);
  for (int i = 0; i < 50; ++i) {
    capnp::MallocMessageBuilder message;
    auto c = message.initRoot<Event>().initMemcpy();
    writer->storeContent(zeros.data(), zeros.size(), c.initData());
    writer->append(message);
  }
  writer->close();
  auto stats = writer->stats();
  EXPECT_EQ(stats.events, 50u);
  EXPECT_EQ(stats.contentBytes, 50u * zeros.size());
  EXPECT_EQ(stats.uniqueBytes, 4096u);
  EXPECT_EQ(stats.blobChunks, 1u);
  EXPECT_LT(stats.storedBlobBytes, 4096u);  // zeros compress
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(stats.fileBytes, static_cast<uint64_t>(st.st_size));
  auto reader = format::TraceReader::open(path);
  uint64_t records = 0, recordBytes = 0, recordRaw = 0, blobBytes = 0;
  for (const auto& c : reader->chunks()) {
    if (c.kind == format::ChunkKind::kRecords) {
      ++records;
      recordBytes += c.storedSize;
      recordRaw += c.rawSize;
    } else {
      blobBytes += c.storedSize;
    }
  }
  EXPECT_GT(records, 1u);
  EXPECT_EQ(stats.storedRecordBytes, recordBytes);
  EXPECT_EQ(stats.recordRawBytes, recordRaw);
  EXPECT_EQ(stats.storedBlobBytes, blobBytes);
}

// A deferred KernelTiming event: built on the writer's thread from these fields.
// With `parts`, it stands for that many events, launch indexes index,
// index + 1, ...
struct DeferredTiming final : format::DeferredEvent {
  uint32_t thread = 0;
  uint64_t index = 0;
  bool fail = false;
  unsigned parts = 1;
  int failPart = -1;
  unsigned eventCount() const override { return parts; }
  size_t sizeHint() const override { return 96; }
  void build(schema::Event::Builder event, unsigned part) const override {
    if (fail || static_cast<int>(part) == failPart) throw std::runtime_error("no such event");
    event.setThreadId(thread);
    auto t = event.initKernelTiming();
    t.setLaunchIndex(index + part);
    t.setStartNs(thread);
  }
};

uint64_t appendDeferredTiming(format::TraceWriter& writer, uint32_t thread, uint64_t index) {
  auto* event = new DeferredTiming;
  event->thread = thread;
  event->index = index;
  return writer.append(format::DeferredEventPtr(event));
}

// Deferred and immediate events from several threads keep one gapless seq
// order, each thread's in the order it appended, deferred ones built in place.
TEST(Writer, DeferredEventsKeepTheirPlaceAmongImmediateOnes) {
  constexpr uint32_t kThreads = 4;
  constexpr uint64_t kPerThread = 3000;
  TempDir dir;
  const auto path = dir.file("deferred.kcap");
  format::TraceWriter::Options options;
  options.batchBytes = 4096;  // many record chunks, deferred events in most of them
  options.compressionThreads = 2;
  auto writer = format::TraceWriter::create(path, options);
  std::vector<std::vector<uint64_t>> returned(kThreads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        // Thread t makes every (t+2)th event immediate, the rest deferred.
        const bool immediate = i % (t + 2) == 0;
        returned[t].push_back(immediate ? appendTiming(*writer, t + 1, i) : appendDeferredTiming(*writer, t + 1, i));
      }
    });
  }
  for (auto& t : threads) t.join();
  writer->close();
  EXPECT_EQ(writer->stats().events, kThreads * kPerThread);

  std::vector<uint64_t> next(kThreads, 0);
  uint64_t expectSeq = 0;
  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->problems().empty());
  const uint64_t delivered = reader->forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(ref.event.getSeq(), expectSeq++);
    const uint32_t t = ref.event.getThreadId() - 1;
    EXPECT_LT(t, kThreads);
    if (t >= kThreads) return false;
    EXPECT_TRUE(ref.event.isKernelTiming());
    EXPECT_EQ(ref.event.getKernelTiming().getLaunchIndex(), next[t]) << "thread " << t << " out of order";
    EXPECT_EQ(ref.event.getKernelTiming().getStartNs(), t + 1);
    if (next[t] < kPerThread) {
      EXPECT_EQ(returned[t][next[t]], ref.event.getSeq());
    }
    ++next[t];
    return true;
  });
  EXPECT_EQ(delivered, kThreads * kPerThread);
  for (uint32_t t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread) << t;
}

// flush() covers deferred events: they are built and on disk when it returns.
TEST(Writer, FlushWritesDeferredEvents) {
  TempDir dir;
  const auto path = dir.file("deferred-flush.kcap");
  auto writer = format::TraceWriter::create(path);
  EXPECT_EQ(appendDeferredTiming(*writer, 7, 41), 0u);
  EXPECT_EQ(appendTiming(*writer, 7, 42), 1u);
  writer->flush();
  auto events = readAllEvents(path);  // before close: the file has no index yet
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].get().getKernelTiming().getLaunchIndex(), 41u);
  EXPECT_EQ(events[1].get().getKernelTiming().getLaunchIndex(), 42u);
  writer->close();
}

// An event that cannot be built keeps its seq, as an error message saying why.
TEST(Writer, DeferredEventThatFailsToBuildBecomesAnErrorMessage) {
  TempDir dir;
  const auto path = dir.file("deferred-fail.kcap");
  auto writer = format::TraceWriter::create(path);
  appendDeferredTiming(*writer, 1, 0);
  auto* bad = new DeferredTiming;
  bad->fail = true;
  EXPECT_EQ(writer->append(format::DeferredEventPtr(bad)), 1u);
  appendDeferredTiming(*writer, 1, 2);
  writer->close();
  auto events = readAllEvents(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].get().getKernelTiming().getLaunchIndex(), 0u);
  ASSERT_TRUE(events[1].get().isMessage());
  EXPECT_EQ(events[1].get().getSeq(), 1u);
  EXPECT_EQ(events[1].get().getMessage().getLevel(), schema::Message::Level::ERROR);
  expectContains(events[1].get().getMessage().getText(), "no such event");
  EXPECT_EQ(events[2].get().getKernelTiming().getLaunchIndex(), 2u);
}

// An object standing for several events takes as many consecutive seq
// numbers; a part that cannot be built becomes an error message in its
// place, the other parts stay.
TEST(Writer, DeferredObjectOfSeveralEventsTakesConsecutiveSeqs) {
  TempDir dir;
  const auto path = dir.file("deferred-parts.kcap");
  auto writer = format::TraceWriter::create(path);
  EXPECT_EQ(appendDeferredTiming(*writer, 1, 0), 0u);
  auto* pair = new DeferredTiming;
  pair->thread = 1;
  pair->index = 1;
  pair->parts = 2;
  EXPECT_EQ(writer->append(format::DeferredEventPtr(pair)), 1u);
  auto* triple = new DeferredTiming;
  triple->thread = 1;
  triple->index = 3;
  triple->parts = 3;
  triple->failPart = 1;
  EXPECT_EQ(writer->append(format::DeferredEventPtr(triple)), 3u);
  EXPECT_EQ(appendTiming(*writer, 1, 6), 6u);
  writer->close();
  EXPECT_EQ(writer->stats().events, 7u);
  auto events = readAllEvents(path);
  ASSERT_EQ(events.size(), 7u);
  for (uint64_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].get().getSeq(), i);
    if (i == 4) {
      ASSERT_TRUE(events[i].get().isMessage());
      expectContains(events[i].get().getMessage().getText(), "no such event");
    } else {
      ASSERT_TRUE(events[i].get().isKernelTiming()) << i;
      EXPECT_EQ(events[i].get().getKernelTiming().getLaunchIndex(), i);
    }
  }
  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->problems().empty());
}

// A large storeContent hashes and copies its pieces on several threads; the
// file must not depend on how many (pieces keep their order, duplicates
// inside the content are stored once) and must read back byte for byte.
TEST(Writer, ParallelStoreContentWritesTheSameFileWhateverTheThreads) {
  TempDir dir;
  constexpr uint32_t kPiece = 64u << 10;
  std::vector<uint8_t> data(40 * kPiece + 123);
  std::mt19937_64 random(7);
  for (auto& b : data) b = static_cast<uint8_t>(random());
  std::copy(data.begin(), data.begin() + kPiece, data.begin() + 5 * kPiece);  // piece 5 repeats piece 0
  std::vector<std::vector<uint8_t>> files;
  for (unsigned threads : {1u, 2u, 7u}) {
    const auto path = dir.file("parallel-" + std::to_string(threads) + ".kcap");
    format::TraceWriter::Options options;
    options.pieceSize = kPiece;
    options.hashingThreads = threads;
    options.compressionThreads = 2;
    auto writer = format::TraceWriter::create(path, options);
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<Event>();
    auto range = event.initLaunch().initPre(1)[0];
    writer->storeContent(data.data(), data.size(), range.initContent());
    writer->append(message);
    const auto stats = writer->stats();
    EXPECT_EQ(stats.contentBytes, data.size());
    EXPECT_EQ(stats.uniqueBytes, data.size() - kPiece) << "piece 5 is piece 0 again";
    writer->close();
    auto reader = format::TraceReader::open(path);
    uint64_t events = reader->forEachEvent([&](const format::EventRef& ref) {
      auto content = ref.event.getLaunch().getPre()[0].getContent();
      EXPECT_EQ(content.getPieces().size(), 41u);
      EXPECT_EQ(reader->readContent(content), data);
      return true;
    });
    EXPECT_EQ(events, 1u);
    files.push_back(readFileBytes(path));
  }
  EXPECT_EQ(files[0], files[1]);
  EXPECT_EQ(files[0], files[2]);
}

// The names of this process's threads (/proc/self/task/*/comm).
std::multiset<std::string> threadNames() {
  std::multiset<std::string> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) out.insert(name);
  }
  return out;
}

// The writer's threads are named, so that top and gdb tell them from the
// program's.
TEST(Writer, ThreadsAreNamed) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.compressionThreads = 2;
  options.hashingThreads = 2;
  options.pieceSize = 64u << 10;
  auto writer = format::TraceWriter::create(dir.file("names.kcap"), options);
  capnp::MallocMessageBuilder message;
  std::vector<uint8_t> data(4 * options.pieceSize, 1);
  writer->storeContent(data.data(), data.size(), message.initRoot<Event>().initLaunch().initPre(1)[0].initContent());
  writer->append(message);
  writer->flush();  // the hashing pool exists now (threads are named when made, run or not)
  const auto names = threadNames();
  EXPECT_EQ(names.count("kcap-zstd"), 2u);
  EXPECT_EQ(names.count("kcap-write"), 1u);
  EXPECT_EQ(names.count("kcap-merge"), 1u);
  EXPECT_EQ(names.count("kcap-hash"), 2u);
  writer->close();
}

// Piece buffers come back once their piece is compressed: a second burst of
// new memory is copied into buffers the first one used (no page faults), at
// most as many as the memory bound holds.
TEST(Writer, PieceBuffersAreReused) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.pieceSize = 64u << 10;
  options.maxPendingBytes = 16 * options.pieceSize;
  options.hashingThreads = 2;
  auto writer = format::TraceWriter::create(dir.file("reuse.kcap"), options);
  std::vector<uint8_t> first(8 * options.pieceSize), second(first.size()), third(32 * options.pieceSize);
  std::mt19937_64 random(3);
  for (auto* bytes : {&first, &second, &third}) {
    for (auto& b : *bytes) b = static_cast<uint8_t>(random());
  }
  capnp::MallocMessageBuilder message;
  auto pre = message.initRoot<Event>().initLaunch().initPre(3);
  writer->storeContent(first.data(), first.size(), pre[0].initContent());
  EXPECT_EQ(writer->stats().reusedBuffers, 0u);  // nothing was used before
  writer->flush();                               // compressed and written: the buffers are back
  writer->storeContent(second.data(), second.size(), pre[1].initContent());
  EXPECT_EQ(writer->stats().reusedBuffers, 8u);
  writer->flush();
  writer->storeContent(third.data(), third.size(), pre[2].initContent());
  EXPECT_EQ(writer->stats().reusedBuffers, 16u) << "the 8 buffers there were, then new ones";
  writer->append(message);
  writer->close();
  auto reader = format::TraceReader::open(dir.file("reuse.kcap"));
  reader->forEachEvent([&](const format::EventRef& ref) {
    const auto ranges = ref.event.getLaunch().getPre();
    EXPECT_EQ(reader->readContent(ranges[0].getContent()), first);
    EXPECT_EQ(reader->readContent(ranges[1].getContent()), second);
    EXPECT_EQ(reader->readContent(ranges[2].getContent()), third);
    return true;
  });
}

// A reused buffer is written over exactly (copyPiece: sizes kept between
// uses, streaming stores): short pieces into buffers that held long ones and
// the reverse, from sources at odd addresses.
TEST(Writer, ReusedBuffersHoldExactlyTheNewPiece) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.pieceSize = 64u << 10;
  options.hashingThreads = 2;
  auto writer = format::TraceWriter::create(dir.file("exact.kcap"), options);
  std::mt19937_64 random(5);
  std::vector<std::vector<uint8_t>> contents;
  for (size_t pieces : {7u, 3u, 9u}) {
    std::vector<uint8_t> bytes(pieces * options.pieceSize / 2 + 1 + 77 * pieces);  // a short last piece each
    for (auto& b : bytes) b = static_cast<uint8_t>(random());
    contents.push_back(std::move(bytes));
  }
  capnp::MallocMessageBuilder message;
  auto pre = message.initRoot<Event>().initLaunch().initPre(3);
  for (unsigned i = 0; i < 3; ++i) {
    std::vector<uint8_t> shifted(contents[i].size() + 1);  // stored from an odd address
    std::copy(contents[i].begin(), contents[i].end(), shifted.begin() + 1);
    writer->storeContent(shifted.data() + 1, contents[i].size(), pre[i].initContent());
    writer->flush();  // the buffers come back for the next content
  }
  EXPECT_GT(writer->stats().reusedBuffers, 0u);
  writer->append(message);
  writer->close();
  auto reader = format::TraceReader::open(dir.file("exact.kcap"));
  EXPECT_EQ(reader->forEachEvent([&](const format::EventRef& ref) {
    for (unsigned i = 0; i < 3; ++i) {
      EXPECT_EQ(reader->readContent(ref.event.getLaunch().getPre()[i].getContent()), contents[i]) << i;
    }
    return true;
  }),
            1u);
  for (const auto& chunk : reader->chunks()) EXPECT_EQ(reader->verifyChunk(chunk), "");
}

// Six 64 KiB pieces and a short one, piece 4 a copy of piece 0, with each
// piece's contentHash: what a producer that hashes pieces itself (the shim,
// on the device) has in hand.
struct HashedPieces {
  static constexpr uint32_t kPieceSize = 64u << 10;
  std::vector<uint8_t> data;
  std::vector<format::Hash128> hashes;

  explicit HashedPieces(uint64_t seed) : data(6 * kPieceSize + 999) {
    std::mt19937_64 random(seed);
    for (auto& b : data) b = static_cast<uint8_t>(random());
    std::copy(data.begin(), data.begin() + kPieceSize, data.begin() + 4 * kPieceSize);  // 4 = 0
    for (size_t at = 0; at < data.size(); at += kPieceSize) {
      hashes.push_back(format::contentHash(data.data() + at, std::min<size_t>(kPieceSize, data.size() - at)));
    }
  }
};

// A producer that hashes pieces itself asks which the file lacks: pieces
// stored, queued or repeated within one content are held; a piece stays
// held once it is.
TEST(Writer, MissingPiecesAreThoseTheFileDoesNotHold) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.pieceSize = HashedPieces::kPieceSize;
  const HashedPieces pieces(17);
  const std::vector<uint8_t>& data = pieces.data;
  std::vector<format::Hash128> hashes = pieces.hashes;
  const size_t count = hashes.size();
  std::vector<uint8_t> other(options.pieceSize, 0x5a);
  hashes.push_back(format::contentHash(other.data(), other.size()));

  auto writer = format::TraceWriter::create(dir.file("missing.kcap"), options);
  EXPECT_EQ(writer->missingPieces(hashes), std::vector<uint8_t>(count + 1, 1));
  capnp::MallocMessageBuilder message;
  auto content = message.initRoot<Event>().initLaunch().initPre(1)[0].initContent();
  writer->storeContent(data.data(), 3 * options.pieceSize, content);  // pieces 0-2, so 4 too
  EXPECT_EQ(writer->missingPieces(hashes), (std::vector<uint8_t>{0, 0, 0, 1, 0, 1, 1, 1}));
  writer->storeContent(data.data(), data.size(), content);
  EXPECT_EQ(writer->missingPieces(hashes), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 1}));
  writer->flush();
  EXPECT_EQ(writer->missingPieces(hashes), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(writer->missingPieces({}), std::vector<uint8_t>{});
  writer->append(message);
  writer->close();
}

// Content the producer hashed itself (the shim, on the device) makes the
// same file as content the writer hashes, and reads back the same.
TEST(Writer, ContentHashedByTheProducerMakesTheSameFile) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.pieceSize = HashedPieces::kPieceSize;
  const HashedPieces pieces(19);
  const std::vector<uint8_t>& data = pieces.data;
  const std::vector<format::Hash128>& hashes = pieces.hashes;
  auto write = [&](const std::string& path, bool hashedByProducer) {
    auto writer = format::TraceWriter::create(path, options);
    capnp::MallocMessageBuilder message;
    auto pre = message.initRoot<Event>().initLaunch().initPre(2);
    for (unsigned r = 0; r < 2; ++r) {  // twice: the second time every piece is there
      if (hashedByProducer) {
        writer->storeHashedContent(data.data(), data.size(), hashes.data(), pre[r].initContent());
      } else {
        writer->storeContent(data.data(), data.size(), pre[r].initContent());
      }
    }
    EXPECT_EQ(writer->stats().uniqueBytes, data.size() - options.pieceSize);
    EXPECT_EQ(writer->stats().contentBytes, 2 * data.size());
    writer->append(message);
    writer->close();
  };
  write(dir.file("stored.kcap"), false);
  write(dir.file("hashed.kcap"), true);
  EXPECT_EQ(readFileBytes(dir.file("hashed.kcap")), readFileBytes(dir.file("stored.kcap")));
  auto reader = format::TraceReader::open(dir.file("hashed.kcap"));
  EXPECT_EQ(reader->forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(reader->readContent(ref.event.getLaunch().getPre()[1].getContent()), data);
    return true;
  }),
            1u);
}

// Page-locks nothing: counts what it is asked, and refuses when told to.
class CountingLocker final : public format::PageLocker {
 public:
  bool lock(void*, size_t bytes) override {
    ++attempts;
    if (refuse) return false;
    locked += bytes;
    return true;
  }
  void unlock(void*, size_t bytes) override { unlocked += bytes; }
  std::atomic<bool> refuse{false};
  std::atomic<size_t> attempts{0}, locked{0}, unlocked{0};
};

// Pieces a producer copied into direct blocks itself (the shim, by DMA)
// make the same file as content the writer copies, and read back the same.
// Direct memory is page-locked a slab at a time, reused, held within its
// bound, and unlocked when the writer goes; where it cannot be page-locked,
// or there is no locker, the producer gets no blocks.
TEST(Writer, DirectPiecesMakeTheSameFile) {
  TempDir dir;
  const HashedPieces pieces(23);
  const std::vector<uint8_t>& data = pieces.data;
  const std::vector<format::Hash128>& hashes = pieces.hashes;
  CountingLocker locker;
  format::TraceWriter::Options options;
  options.pieceSize = HashedPieces::kPieceSize;
  options.pageLocker = &locker;
  options.maxDirectBytes = 64u << 20;  // one slab: 1024 blocks of 64 KiB
  auto write = [&](const std::string& path, bool direct) {
    auto writer = format::TraceWriter::create(path, options);
    capnp::MallocMessageBuilder message;
    auto pre = message.initRoot<Event>().initLaunch().initPre(2);
    for (unsigned r = 0; r < 2; ++r) {  // twice: the second time every piece is there
      auto content = pre[r].initContent();
      if (!direct) {
        writer->storeContent(data.data(), data.size(), content);
        continue;
      }
      content.setSize(data.size());
      content.setPieceSize(options.pieceSize);
      auto list = content.initPieces(static_cast<unsigned>(hashes.size()));
      std::vector<format::Hash128> newHashes;
      std::vector<size_t> newPieces;
      const std::vector<uint8_t> missing = writer->missingPieces(hashes);
      for (size_t i = 0; i < hashes.size(); ++i) {
        list[static_cast<unsigned>(i)].setHigh(hashes[i].high);
        list[static_cast<unsigned>(i)].setLow(hashes[i].low);
        if (missing[i] != 0) {  // pieces 0 and 4 alike: both, the second goes back
          newHashes.push_back(hashes[i]);
          newPieces.push_back(i);
        }
      }
      EXPECT_EQ(newPieces.size(), r == 0 ? hashes.size() : 0u);
      std::vector<format::PieceBlock> blocks = writer->takeDirectBlocks(newPieces.size());
      ASSERT_EQ(blocks.size(), newPieces.size());
      for (size_t j = 0; j < blocks.size(); ++j) {
        const size_t at = newPieces[j] * options.pieceSize,
                     length = std::min<size_t>(options.pieceSize, data.size() - at);
        std::memcpy(blocks[j].data(), data.data() + at, length);
        blocks[j].setSize(length);
      }
      writer->storeDirectPieces(newHashes.data(), blocks);
      EXPECT_TRUE(blocks.empty());
    }
    EXPECT_EQ(writer->stats().uniqueBytes, data.size() - options.pieceSize);
    EXPECT_EQ(writer->stats().directBytes, direct ? data.size() : 0u);
    EXPECT_EQ(writer->stats().pageLockedBytes, direct ? options.maxDirectBytes : 0u);
    writer->append(message);
    writer->close();
  };
  write(dir.file("stored.kcap"), false);
  EXPECT_EQ(locker.locked, 0u) << "no direct blocks taken: nothing page-locked";
  write(dir.file("direct.kcap"), true);
  EXPECT_EQ(readFileBytes(dir.file("direct.kcap")), readFileBytes(dir.file("stored.kcap")));
  auto reader = format::TraceReader::open(dir.file("direct.kcap"));
  EXPECT_EQ(reader->forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(reader->readContent(ref.event.getLaunch().getPre()[1].getContent()), data);
    return true;
  }),
            1u);
  EXPECT_EQ(locker.locked, options.maxDirectBytes);
  EXPECT_EQ(locker.unlocked, locker.locked) << "unlocked when the writer went";

  // The bound: all or nothing, blocks held count, blocks back are reused.
  {
    auto writer = format::TraceWriter::create(dir.file("bound.kcap"), options);
    EXPECT_TRUE(writer->takeDirectBlocks(1025).empty());
    std::vector<format::PieceBlock> all = writer->takeDirectBlocks(1024);
    EXPECT_EQ(all.size(), 1024u);
    EXPECT_TRUE(writer->takeDirectBlocks(1).empty()) << "all held: no room for another slab";
    const uint8_t* first = all[0].data();
    all.erase(all.begin());
    std::vector<format::PieceBlock> again = writer->takeDirectBlocks(1);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].data(), first);
    EXPECT_EQ(writer->stats().pageLockedBytes, options.maxDirectBytes);
  }
  EXPECT_EQ(locker.locked, 2 * options.maxDirectBytes);
  EXPECT_EQ(locker.unlocked, locker.locked);

  // Refused (then never asked again), or no locker: no blocks, nothing held.
  locker.refuse = true;
  {
    auto writer = format::TraceWriter::create(dir.file("refused.kcap"), options);
    const size_t attempts = locker.attempts;
    EXPECT_TRUE(writer->takeDirectBlocks(1).empty());
    EXPECT_EQ(writer->stats().pageLockedBytes, 0u);
    EXPECT_GT(writer->stats().pageLockNs, 0u);
    locker.refuse = false;
    EXPECT_TRUE(writer->takeDirectBlocks(1).empty()) << "refused once: not asked again";
    EXPECT_EQ(locker.attempts, attempts + 1);
  }
  options.pageLocker = nullptr;
  auto writer = format::TraceWriter::create(dir.file("none.kcap"), options);
  EXPECT_TRUE(writer->takeDirectBlocks(1).empty());
  EXPECT_EQ(locker.locked, locker.unlocked);
}

TEST(Writer, AppendOverwritesSeq) {
  TempDir dir;
  const auto path = dir.file("seq.kcap");
  auto writer = format::TraceWriter::create(path);
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<Event>();
  event.setSeq(12345);
  event.initMessage().setText("x");
  EXPECT_EQ(writer->append(message), 0u);
  EXPECT_EQ(message.getRoot<Event>().getSeq(), 0u);
  EXPECT_EQ(writer->append(message), 1u);  // the same builder again
  writer->close();
  auto events = readAllEvents(path);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].get().getSeq(), 0u);
  EXPECT_EQ(events[1].get().getSeq(), 1u);
}

// The writer lays each event out in Cap'n Proto's flat form itself: events
// of one segment and of many (an even count needs the table's padding word,
// over 62 takes capnp's own writer) read back with every field intact.
TEST(Writer, EventsOfManySegmentsReadBackExactly) {
  TempDir dir;
  const auto path = dir.file("segments.kcap");
  auto writer = format::TraceWriter::create(path);
  const std::vector<unsigned> argCounts = {0, 1, 2, 3, 4, 30, 61, 62, 63, 64, 100};
  std::vector<size_t> segmentCounts;
  for (unsigned args : argCounts) {
    // One word a segment: every object the event holds takes a segment of its own.
    capnp::MallocMessageBuilder message(1, capnp::AllocationStrategy::FIXED_SIZE);
    auto begin = message.initRoot<Event>().initTraceBegin();
    begin.setProcessId(args);
    auto argv = begin.initArgv(args);
    for (unsigned i = 0; i < args; ++i) argv.set(i, "argument " + std::to_string(i) + std::string(i % 5, 'x'));
    segmentCounts.push_back(message.getSegmentsForOutput().size());
    writer->append(message);
  }
  writer->close();
  EXPECT_EQ(segmentCounts.front(), 3u);  // root pointer, Event, TraceBegin
  EXPECT_GT(segmentCounts.back(), 64u);
  EXPECT_TRUE(std::any_of(segmentCounts.begin(), segmentCounts.end(), [](size_t n) { return n % 2 == 0; }));

  auto events = readAllEvents(path);
  ASSERT_EQ(events.size(), argCounts.size());
  for (size_t e = 0; e < argCounts.size(); ++e) {
    SCOPED_TRACE("event of " + std::to_string(segmentCounts[e]) + " segments");
    auto event = events[e].get();
    EXPECT_EQ(event.getSeq(), e);
    ASSERT_TRUE(event.isTraceBegin());
    EXPECT_EQ(event.getTraceBegin().getProcessId(), argCounts[e]);
    auto argv = event.getTraceBegin().getArgv();
    ASSERT_EQ(argv.size(), argCounts[e]);
    for (unsigned i = 0; i < argv.size(); ++i) {
      EXPECT_EQ(std::string(argv[i].cStr()), "argument " + std::to_string(i) + std::string(i % 5, 'x'));
    }
  }
}

TEST(Writer, EncodedPiecesAreCopiedFromAnotherTraceByteForByte) {
  // What kcap extract does: pieces read as stored from one trace, written as
  // is into another (no recompression), the events referencing them copied.
  TempDir dir;
  const auto from = dir.file("from.kcap"), to = dir.file("to.kcap");
  std::vector<uint8_t> bytes(3 * 4096 + 100, 0);  // random, zeros, a pattern, a short tail
  std::mt19937 random(7);
  for (size_t i = 0; i < 4096; ++i) bytes[i] = static_cast<uint8_t>(random());
  for (size_t i = 2 * 4096; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i % 7);
  {
    format::TraceWriter::Options options;
    options.pieceSize = 4096;
    auto writer = format::TraceWriter::create(from, options);
    capnp::MallocMessageBuilder message;
    writer->storeContent(bytes.data(), bytes.size(), message.initRoot<Event>().initMemcpy().initData());
    writer->append(message);
    writer->close();
  }
  auto source = format::TraceReader::open(from);
  auto events = readAllEvents(from);
  ASSERT_EQ(events.size(), 1u);
  const auto content = events[0].get().getMemcpy().getData();
  ASSERT_EQ(content.getPieces().size(), 4u);

  format::TraceWriter::Options options;
  options.pieceSize = 1u << 20;  // the copy keeps the recorded pieces whatever its own size
  options.zstdLevel = 19;
  auto writer = format::TraceWriter::create(to, options);
  std::unordered_map<format::Hash128, std::vector<uint8_t>, format::Hash128Hasher> stored;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass is deduplicated
    for (const auto piece : content.getPieces()) {
      const format::Hash128 hash{piece.getHigh(), piece.getLow()};
      const format::ChunkInfo* chunk = source->findBlob(hash);
      ASSERT_NE(chunk, nullptr);
      auto chunkBytes = source->readStoredChunk(*chunk);
      stored[hash] = chunkBytes;
      writer->storeEncodedPiece(hash, chunk->rawSize, std::move(chunkBytes));
    }
  }
  capnp::MallocMessageBuilder message;
  message.setRoot(events[0].get());
  writer->append(message);
  writer->close();
  EXPECT_EQ(writer->stats().blobChunks, 4u);
  EXPECT_EQ(writer->stats().uniqueBytes, bytes.size());
  EXPECT_EQ(writer->stats().contentBytes, 2 * bytes.size());

  auto copy = format::TraceReader::open(to);
  ASSERT_TRUE(copy->indexed());
  EXPECT_TRUE(copy->problems().empty());
  const auto copied = readAllEvents(to);
  ASSERT_EQ(copied.size(), 1u);
  EXPECT_EQ(copy->readContent(copied[0].get().getMemcpy().getData()), bytes);
  for (const auto& chunk : copy->chunks()) {
    if (chunk.kind != format::ChunkKind::kBlob) continue;
    EXPECT_EQ(copy->verifyChunk(chunk), "");
    EXPECT_EQ(copy->readStoredChunk(chunk), stored.at(chunk.hash));  // the very bytes of the source
  }

  // a closed writer takes nothing more; no writer takes what is no blob chunk
  EXPECT_THROW(writer->storeEncodedPiece(format::Hash128{1, 2}, 10, std::vector<uint8_t>(64)), format::FormatError);
  auto fresh = format::TraceWriter::create(dir.file("short.kcap"));
  EXPECT_THROW(fresh->storeEncodedPiece(format::Hash128{1, 2}, 10, std::vector<uint8_t>(20)), format::FormatError);
}

TEST(Reader, ReadStoredChunkRefusesADamagedChunk) {
  TempDir dir;
  const auto path = dir.file("damaged.kcap");
  std::vector<uint8_t> bytes(4096, 0);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31);
  {
    format::TraceWriter::Options options;
    options.pieceSize = 4096;
    auto writer = format::TraceWriter::create(path, options);
    capnp::MallocMessageBuilder message;
    writer->storeContent(bytes.data(), bytes.size(), message.initRoot<Event>().initMemcpy().initData());
    writer->append(message);
    writer->close();
  }
  std::vector<uint8_t> file = readFileBytes(path);
  const auto layout = walkChunks(file);
  ASSERT_EQ(layout.chunks.front().kind, format::ChunkKind::kBlob);
  file[layout.chunks.front().offset + format::kChunkHeaderSize + format::kBlobHashSize + 3] ^= 0x40;
  writeFileBytes(path, file);
  auto reader = format::TraceReader::open(path);
  ASSERT_EQ(reader->blobCount(), 1u);
  const format::ChunkInfo* blob = nullptr;
  for (const auto& chunk : reader->chunks()) {
    if (chunk.kind == format::ChunkKind::kBlob) blob = &chunk;
  }
  ASSERT_NE(blob, nullptr);
  try {
    reader->readStoredChunk(*blob);
    FAIL() << "a damaged chunk was read";
  } catch (const format::FormatError& e) {
    expectContains(e.what(), "checksum mismatch");
    expectContains(e.what(), "at byte " + std::to_string(layout.chunks.front().offset));
  }
}

}  // namespace
}  // namespace kcap::test
