// `kcap check` and `kcap doctor` on hostile traces: findings are counted, the
// first kMaxListed (by offset) listed; one finding per content and kind of
// trouble, however many pieces share it; a module image larger than any
// consumer loads is a finding, and doctor refuses it before allocating.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "change_hash.h"
#include "hostile_files.h"
#include "ring_trace_writer.h"
#include "trace_files.h"
#include "trace_reader.h"

extern char** environ;

namespace kcap::test {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

struct Outcome {
  int exitCode = -1;
  int signal = 0;
  std::string out, err;
  uint64_t maxRssBytes = 0;
  std::string describe() const {
    return "exit " + std::to_string(exitCode) + ", signal " + std::to_string(signal) + "\nstdout:\n" +
           out.substr(0, 4000) + "\nstderr:\n" + err.substr(0, 4000);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `kcap ARGS...` with `env` added; `addressLimit` (when not 0) caps the
// child's address space, so that a regression allocates in vain instead of
// taking the machine's memory.
Outcome runKcap(const TempDir& dir, const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                uint64_t addressLimit = 0) {
  const std::string outPath = dir.file("stdout"), errPath = dir.file("stderr");
  std::vector<std::string> argv = {KCAP_TEST_KCAP};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& add : env) replaced = replaced || entry.rfind(add.substr(0, add.find('=') + 1), 0) == 0;
    if (!replaced) envs.push_back(entry);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (addressLimit != 0) {
      struct rlimit limit = {addressLimit, addressLimit};
      ::setrlimit(RLIMIT_AS, &limit);
    }
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : envs) e.push_back(s.data());
    e.push_back(nullptr);
    ::execve(a[0], a.data(), e.data());
    ::_exit(127);
  }
  Outcome o;
  int status = 0;
  struct rusage usage {};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  if (WIFEXITED(status)) o.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  o.maxRssBytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  o.out = slurp(outPath);
  o.err = slurp(errPath);
  return o;
}

size_t countLines(const std::string& text, const std::string& containing) {
  size_t n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) n += line.find(containing) != std::string::npos;
  return n;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// A memcpy event of `pieceCount` pieces of `pieceSize` bytes, each naming `hash`.
std::vector<uint8_t> memcpyEvent(uint64_t seq, uint32_t pieceSize, unsigned pieceCount, format::Hash128 hash) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  event.setSeq(seq);
  auto copy = event.initMemcpy();
  copy.setDst(0x1000);
  copy.setSize(uint64_t{pieceSize} * pieceCount);
  auto data = copy.initData();
  data.setSize(uint64_t{pieceSize} * pieceCount);
  data.setPieceSize(pieceSize);
  auto pieces = data.initPieces(pieceCount);
  for (unsigned i = 0; i < pieceCount; ++i) {
    pieces[i].setHigh(hash.high);
    pieces[i].setLow(hash.low);
  }
  return flatBytes(message);
}

// A content of a million pieces, every one naming a blob of the wrong size:
// one finding, not a million (nor a million strings in memory).
TEST(CheckTool, WrongSizedPiecesAreOneFindingPerContent) {
  TempDir dir;
  const auto path = dir.file("pieces.kcap");
  const std::vector<uint8_t> small(100, 1);
  const format::Hash128 hash = format::contentHash(small.data(), small.size());
  const unsigned count = 1u << 20;
  TraceBuilder trace;
  trace.blob(small);
  trace.records({messageEvent(0), memcpyEvent(1, 4096, count, hash), traceEndEvent(2)}, 0);
  writeFileBytes(path, trace.finish(true));

  const Outcome o = runKcap(dir, {"check", path});
  EXPECT_EQ(o.exitCode, 1) << o.describe();
  EXPECT_EQ(countLines(o.out, "at byte"), 1u) << o.describe();
  EXPECT_NE(o.out.find("FAILED: 1 problem;"), std::string::npos) << o.describe();
  EXPECT_NE(o.out.find("(" + std::to_string(count) + ")"), std::string::npos) << o.describe();
  EXPECT_NE(o.out.find("holds 100 bytes"), std::string::npos) << o.describe();
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(o.maxRssBytes, 160 * kMiB) << o.describe();
#endif
}

// More findings than are listed: the first kMaxListed by offset, then how
// many more, and the count of all of them.
TEST(CheckTool, ListsTheFirstFindingsByOffsetAndCountsTheRest) {
  TempDir dir;
  const auto path = dir.file("many.kcap");
  const unsigned events = 3000;
  TraceBuilder trace;
  trace.records({messageEvent(0)}, 0);
  for (unsigned first = 1; first <= events; first += 100) {
    std::vector<std::vector<uint8_t>> batch;
    for (unsigned seq = first; seq < first + 100; ++seq) batch.push_back(memcpyEvent(seq, 4096, 1, {seq, seq}));
    trace.records(batch, first);
  }
  trace.records({traceEndEvent(events + 1)}, events + 1);
  writeFileBytes(path, trace.finish(true));

  const Outcome o = runKcap(dir, {"check", path});
  EXPECT_EQ(o.exitCode, 1) << o.describe();
  const auto out = lines(o.out);
  ASSERT_EQ(out.size(), 1002u) << o.describe();
  EXPECT_NE(out[0].find("event #1 (memcpy)"), std::string::npos) << out[0];
  EXPECT_NE(out[999].find("event #1000 (memcpy)"), std::string::npos) << out[999];
  EXPECT_EQ(out[1000], "... and 2000 more");
  EXPECT_EQ(out[1001].rfind("FAILED: 3000 problems;", 0), 0u) << out[1001];
}

// A module image of 16 GiB in a file of a few kilobytes: one 64 MiB piece
// of zeros, named 256 times.
std::vector<uint8_t> hugeImageTrace() {
  const uint32_t pieceSize = format::kMaxPieceSize;
  const std::vector<uint8_t> zeros(pieceSize, 0);
  const format::Hash128 hash = format::contentHash(zeros.data(), zeros.size());
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  event.setSeq(1);
  auto load = event.initModuleLoad();
  load.setHandle(0x51);
  auto image = load.initImage();
  image.setSize(uint64_t{pieceSize} * 256);
  image.setPieceSize(pieceSize);
  auto pieces = image.initPieces(256);
  for (unsigned i = 0; i < 256; ++i) {
    pieces[i].setHigh(hash.high);
    pieces[i].setLow(hash.low);
  }
  TraceBuilder trace;
  trace.blob(zeros);
  trace.records({messageEvent(0), flatBytes(message), traceEndEvent(2)}, 0);
  return trace.finish(true);
}

TEST(CheckTool, ModuleImageLargerThanAnyConsumerLoadsIsAFinding) {
  TempDir dir;
  const auto path = dir.file("image.kcap");
  const auto bytes = hugeImageTrace();
  ASSERT_LT(bytes.size(), 64u << 10);
  writeFileBytes(path, bytes);
  const Outcome o = runKcap(dir, {"check", path});
  EXPECT_EQ(o.exitCode, 1) << o.describe();
  EXPECT_NE(o.out.find("event #1 (moduleLoad)"), std::string::npos) << o.describe();
  EXPECT_NE(o.out.find(std::to_string(uint64_t{16} << 30)), std::string::npos) << o.describe();
  EXPECT_NE(o.out.find(std::to_string(format::kMaxCodeImageSize)), std::string::npos) << o.describe();
}

TEST(CheckTool, DoctorRefusesAModuleImageLargerThanItLoads) {
  TempDir dir;
  const auto path = dir.file("image.kcap");
  writeFileBytes(path, hugeImageTrace());
#if defined(__SANITIZE_ADDRESS__)
  // An address-space limit and the sanitizer's shadow memory do not mix: the
  // sanitizer refuses the allocation itself instead.
  const Outcome o = runKcap(dir, {"doctor", path},
                            {"KCAP_LIBCUDA=/nonexistent/libcuda.so.1", "ASAN_OPTIONS=max_allocation_size_mb=8192"});
#else
  const Outcome o = runKcap(dir, {"doctor", path}, {"KCAP_LIBCUDA=/nonexistent/libcuda.so.1"}, uint64_t{8} << 30);
  EXPECT_LT(o.maxRssBytes, 1024 * kMiB) << o.describe();
#endif
  EXPECT_EQ(o.exitCode, 1) << o.describe();
  EXPECT_NE(o.err.find(path), std::string::npos) << o.describe();
  EXPECT_NE(o.err.find("module image of " + std::to_string(uint64_t{16} << 30) + " bytes"), std::string::npos)
      << o.describe();
  EXPECT_NE(o.err.find(std::to_string(format::kMaxCodeImageSize)), std::string::npos) << o.describe();
}

// A flight recorder's trace: a ring keeping one checkpoint of five, so seq
// has gaps; its trigger event says how many events were let go (`claim`
// added to the true count).
void writeRingTrace(const std::string& path, int64_t claim) {
  format::TraceWriter::Options options;
  options.pieceSize = 4096;
  format::RingOptions ring;
  ring.checkpoints = 1;
  ring.openOutput = [path, options] { return format::TraceWriter::create(path, options); };
  format::RingTraceWriter writer(options, std::move(ring));
  {
    capnp::MallocMessageBuilder m;
    m.initRoot<schema::Event>().initTraceBegin();
    writer.append(m);
  }
  for (uint64_t i = 0; i < 5; ++i) {
    capnp::MallocMessageBuilder m;
    auto checkpoint = m.initRoot<schema::Event>().initCheckpoint();
    checkpoint.setOrdinal(i);
    const std::vector<uint8_t> memory(4096, static_cast<uint8_t>(i));
    auto range = checkpoint.initRanges(1)[0];
    writer.storeContent(memory.data(), memory.size(), range.initContent());
    const format::ChangeHash change = format::changeHash(memory.data(), memory.size());
    auto hashes = range.initChangeHashes(format::kChangeHashBytes);
    std::memcpy(hashes.begin(), &change.high, 8);
    std::memcpy(hashes.begin() + 8, &change.low, 8);
    writer.append(m);
    capnp::MallocMessageBuilder note;
    note.initRoot<schema::Event>().initMessage().setText("between checkpoints");
    writer.append(note);
  }
  const uint64_t dropped = writer.fire();
  {
    capnp::MallocMessageBuilder m;
    auto trigger = m.initRoot<schema::Event>().initTrigger();
    trigger.setKind(schema::TriggerKind::API);
    trigger.setReason("test");
    trigger.setDroppedEvents(static_cast<uint64_t>(static_cast<int64_t>(dropped) + claim));
    writer.append(m);
  }
  {
    capnp::MallocMessageBuilder m;
    m.initRoot<schema::Event>().initTraceEnd().setEventCount(writer.stats().events);
    writer.append(m);
  }
  writer.close();
}

TEST(CheckTool, AFlightRecordersGapsAreWhatItsTriggerCounts) {
  TempDir dir;
  const std::string path = dir.file("ring.kcap");
  writeRingTrace(path, 0);
  const Outcome check = runKcap(dir, {"check", path});
  EXPECT_EQ(check.exitCode, 0) << check.describe();
  EXPECT_NE(check.out.find("OK: "), std::string::npos) << check.describe();
  const Outcome info = runKcap(dir, {"info", path});
  EXPECT_EQ(info.exitCode, 0) << info.describe();
  EXPECT_NE(info.out.find("8 earlier events not kept"), std::string::npos) << info.describe();
  EXPECT_EQ(info.out.find("damaged"), std::string::npos) << info.describe();

  const std::string wrong = dir.file("wrong.kcap");
  writeRingTrace(wrong, -1);
  const Outcome bad = runKcap(dir, {"check", wrong});
  EXPECT_EQ(bad.exitCode, 1) << bad.describe();
  EXPECT_NE(bad.out.find("the trigger event says the ring let 7 events go, but 8 are missing"), std::string::npos)
      << bad.describe();
  EXPECT_NE(bad.out.find("are missing (seq jumps"), std::string::npos) << bad.describe();
}

// A trace of a recording whose NCCL calls were read back later: the
// writtenData events after them, then a graph launch and what one copy node
// of its graph read back, and, by `wrong`, one naming a call that was not
// waiting (`unmarked`), one completing a call twice (`twice`), one naming a
// later event (`ahead`), a graph launch's node read back twice
// (`node-twice`), or a node of an event that is no graph launch
// (`node-not-graph`).
void writeReadBackTrace(const std::string& path, const std::string& wrong) {
  auto writer = format::TraceWriter::create(path, format::TraceWriter::Options{});
  const auto append = [&](const std::function<void(schema::Event::Builder)>& fill) {
    capnp::MallocMessageBuilder m;
    fill(m.initRoot<schema::Event>());
    return writer->append(m);
  };
  append([](schema::Event::Builder e) { e.initTraceBegin(); });
  const auto call = [&](bool deferred) {
    return append([&](schema::Event::Builder e) {
      auto c = e.initCollective();
      c.setWritten(4096);
      c.setDataDeferred(deferred);
    });
  };
  const std::vector<uint8_t> bytes(4096, 7);
  const auto written = [&](uint64_t of) {
    append([&](schema::Event::Builder e) {
      auto w = e.initWrittenData();
      w.setOf(of);
      writer->storeContent(bytes.data(), bytes.size(), w.initData());
    });
  };
  const uint64_t first = call(true);
  const uint64_t second = call(wrong != "unmarked");
  written(first);
  written(second);
  if (wrong == "twice") written(first);
  if (wrong == "ahead") written(second + 100);
  const uint64_t graph = append([](schema::Event::Builder e) { e.initGraphLaunch(); });
  const auto nodeWritten = [&](uint64_t of, uint64_t node) {
    append([&](schema::Event::Builder e) {
      auto w = e.initWrittenData();
      w.setOf(of);
      w.setNode(node);
      writer->storeContent(bytes.data(), bytes.size(), w.initData());
    });
  };
  nodeWritten(graph, 0x10);
  if (wrong == "node-twice") nodeWritten(graph, 0x10);
  if (wrong == "node-not-graph") nodeWritten(first, 0x20);
  append([&](schema::Event::Builder e) { e.initTraceEnd().setEventCount(writer->stats().events); });
  writer->close();
}

TEST(CheckTool, WrittenDataCompletesAnEarlierEventWaitingForItOnce) {
  TempDir dir;
  const std::string good = dir.file("good.kcap");
  writeReadBackTrace(good, "");
  const Outcome ok = runKcap(dir, {"check", good});
  EXPECT_EQ(ok.exitCode, 0) << ok.describe();
  const std::pair<const char*, const char*> cases[] = {
      {"unmarked", "event #4 (writtenData) names event #2, which is not waiting for its data (dataDeferred)"},
      {"twice", "event #5 (writtenData) completes event #1 a second time"},
      {"ahead", "event #5 (writtenData) names event #102, not an earlier one"},
      {"node-twice", "event #7 (writtenData) holds node 0x10 of graph launch #5 a second time"},
      {"node-not-graph", "event #7 (writtenData) names event #1 and a graph node, and that event is no graph launch"},
  };
  for (const auto& [wrong, finding] : cases) {
    const std::string path = dir.file(std::string(wrong) + ".kcap");
    writeReadBackTrace(path, wrong);
    const Outcome bad = runKcap(dir, {"check", path});
    EXPECT_EQ(bad.exitCode, 1) << wrong << ": " << bad.describe();
    EXPECT_NE(bad.out.find(finding), std::string::npos) << wrong << ": " << bad.describe();
  }
}

// Launches that carry their outcome (Launch.ended) and launches followed by
// a launchEnd are each a well-formed trace; one trace holding both is not.
TEST(CheckTool, ATraceHoldsLaunchesOfOneForm) {
  TempDir dir;
  const auto write = [&](const std::string& path, const std::vector<bool>& endedLaunches) {
    auto writer = format::TraceWriter::create(path, format::TraceWriter::Options{});
    const auto append = [&](const std::function<void(schema::Event::Builder)>& fill) {
      capnp::MallocMessageBuilder m;
      fill(m.initRoot<schema::Event>());
      writer->append(m);
    };
    append([](schema::Event::Builder e) { e.initTraceBegin(); });
    for (size_t i = 0; i < endedLaunches.size(); ++i) {
      append([&](schema::Event::Builder e) {
        auto l = e.initLaunch();
        l.setLaunchIndex(i);
        l.setEnded(endedLaunches[i]);
      });
      if (!endedLaunches[i]) append([&](schema::Event::Builder e) { e.initLaunchEnd().setLaunchIndex(i); });
    }
    writer->close();
  };
  for (const bool ended : {true, false}) {
    const std::string path = dir.file(ended ? "ended.kcap" : "ends.kcap");
    write(path, {ended, ended, ended});
    const Outcome ok = runKcap(dir, {"check", path});
    EXPECT_EQ(ok.exitCode, 0) << ok.describe();
  }
  const std::string mixed = dir.file("mixed.kcap");
  write(mixed, {true, false, true, false});
  const Outcome bad = runKcap(dir, {"check", mixed});
  EXPECT_EQ(bad.exitCode, 1) << bad.describe();
  EXPECT_NE(bad.out.find("event #1 (launch) carries its outcome (ended) and event #3 is a launchEnd: a trace holds "
                         "launches of one form"),
            std::string::npos)
      << bad.describe();
  EXPECT_NE(bad.out.find("FAILED: 1 problem;"), std::string::npos) << bad.describe();  // said once
}

}  // namespace
}  // namespace kcap::test
