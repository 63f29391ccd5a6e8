// TraceWriter: concurrency, ordering, the memory bound, file mode, flush,
// deferred events, and how failures are reported (writer_pieces_test.cpp:
// storing content).
#include <gtest/gtest.h>

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <map>
#include <random>
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

// This process's threads whose name starts with "kcap-": name to thread id.
std::multimap<std::string, pid_t> kcapThreads() {
  std::multimap<std::string, pid_t> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("kcap-", 0) != 0) continue;
    out.emplace(name, static_cast<pid_t>(std::stoi(task.path().filename().string())));
  }
  return out;
}

// A writer that has made every kind of thread it makes: merger,
// compression, writing, and the hashing pool a many-piece content starts.
std::unique_ptr<format::TraceWriter> writerWithAllThreads(const std::string& path,
                                                          const format::ThreadPlacement& placement) {
  format::TraceWriter::Options options;
  options.threads = placement;
  options.pieceSize = 4096;
  options.hashingThreads = 2;
  auto writer = format::TraceWriter::create(path, options);
  const std::vector<uint8_t> memory(64 * 4096, 1);
  capnp::MallocMessageBuilder m;
  writer->storeContent(memory.data(), memory.size(), m.initRoot<schema::Content>());
  return writer;
}

const std::set<std::string> kWriterThreadNames{"kcap-hash", "kcap-merge", "kcap-write", "kcap-zstd"};

// Placed idle, every thread the writer makes runs under SCHED_IDLE; else
// none does.
TEST(Writer, IdleThreadsRunUnderSchedIdle) {
  for (const bool idle : {true, false}) {
    SCOPED_TRACE(idle ? "idle" : "normal");
    TempDir dir;
    auto writer = writerWithAllThreads(dir.file("idle.kcap"), {.idle = idle, .cpus = {}});
    std::set<std::string> names;
    for (const auto& [name, thread] : kcapThreads()) {
      names.insert(name);
      EXPECT_EQ(sched_getscheduler(thread), idle ? SCHED_IDLE : SCHED_OTHER) << name;
    }
    EXPECT_EQ(names, kWriterThreadNames);
    writer->close();
  }
}

// Placed on CPUs, every thread the writer makes may run on those only;
// else on the process's own.
TEST(Writer, ThreadsRunOnTheirCpus) {
  cpu_set_t own;
  CPU_ZERO(&own);
  ASSERT_EQ(sched_getaffinity(0, sizeof own, &own), 0);
  unsigned last = 0;
  for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &own)) last = cpu;
  }
  cpu_set_t justLast;
  CPU_ZERO(&justLast);
  CPU_SET(last, &justLast);
  for (const bool placed : {true, false}) {
    SCOPED_TRACE(placed ? "on the last CPU" : "not placed");
    TempDir dir;
    auto writer = writerWithAllThreads(
        dir.file("cpus.kcap"), {.idle = false, .cpus = placed ? std::vector<unsigned>{last} : std::vector<unsigned>{}});
    std::set<std::string> names;
    for (const auto& [name, thread] : kcapThreads()) {
      names.insert(name);
      cpu_set_t set;
      CPU_ZERO(&set);
      ASSERT_EQ(sched_getaffinity(thread, sizeof set, &set), 0) << name;
      EXPECT_TRUE(CPU_EQUAL(&set, placed ? &justLast : &own)) << name << ": on " << CPU_COUNT(&set) << " CPUs";
    }
    EXPECT_EQ(names, kWriterThreadNames);
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