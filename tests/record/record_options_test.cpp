// Recording under options: graph capture, the modes, kernel filters, the
// compression and buffer settings, bad settings, output placeholders, and
// sixteen launching threads.
#include "record_trace.h"

#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::record;  // the recording tests' shared helpers (record_trace.h)

// ---- graph capture -------------------------------------------------------------------------

TEST(Record, LaunchesIntoACapturingStreamAreNotSynchronized) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("capture.kcap");
  // Recorded cleanly: a synchronize would have invalidated the capture.
  expectRecordedLikePlain(scenarioProgram(), {"capture"}, path);
  Trace trace(path);
  const auto launches = trace.launches();
  const auto ends = trace.launchEnds();
  ASSERT_EQ(launches.size(), 4u);
  EXPECT_FALSE(launches[0].getCapturing());
  EXPECT_GT(launches[0].getPre().size(), 0u);
  for (unsigned i : {1u, 2u}) {
    EXPECT_TRUE(launches[i].getCapturing());
    EXPECT_EQ(launches[i].getPre().size(), 0u);
    EXPECT_EQ(ends[i].getPost().size(), 0u);
    EXPECT_EQ(launches[i].getPointers().size(), 2u);  // parameters recorded all the same
  }
  EXPECT_FALSE(launches[3].getCapturing());  // another stream, during the capture
  EXPECT_EQ(launches[3].getPre().size(), 2u);
  EXPECT_EQ(ends[3].getPost().size(), 2u);
  ASSERT_EQ(trace.of(Event::GRAPH_LAUNCH).size(), 1u);
  EXPECT_EQ(trace.of(Event::GRAPH_LAUNCH)[0].getGraphLaunch().getResult(), 0);
  size_t begins = 0;
  size_t endsOfCapture = 0;
  for (const auto& e : trace.of(Event::SYNC)) {
    begins += e.getSync().getOp() == schema::SyncKind::STREAM_BEGIN_CAPTURE;
    if (e.getSync().getOp() == schema::SyncKind::STREAM_END_CAPTURE) {
      ++endsOfCapture;
      EXPECT_EQ(e.getSync().getResult(), 0);
    }
  }
  EXPECT_EQ(begins, 1u);
  EXPECT_EQ(endsOfCapture, 1u);
  EXPECT_TRUE(trace.of(Event::API_ERROR).empty());
}

// ---- modes, filters, options -----------------------------------------------------------------

TEST(Record, MetadataModeRecordsNoMemory) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("metadata.kcap");
  const Outcome shimmed =
      recorded(interposeProgram("direct_launch"), {}, {{"KCAP_OUTPUT", path}, {"KCAP_MODE", "metadata"}});
  expectClean(shimmed);
  expectChecks(path);
  Trace trace(path);
  EXPECT_EQ(trace.all().front().getTraceBegin().getCaptureMode(), schema::CaptureMode::METADATA);
  const auto launches = trace.launches();
  ASSERT_EQ(launches.size(), 6u);
  for (const auto launch : launches) {
    EXPECT_EQ(launch.getPre().size(), 0u);
    EXPECT_GT(launch.getParams().size(), 0u);
    EXPECT_GT(launch.getPointers().size(), 0u);
    EXPECT_TRUE(launch.getEnded());  // its outcome here: no launchEnd follows
    EXPECT_EQ(launch.getResult(), 0);
  }
  EXPECT_EQ(trace.launchEnds().size(), 0u);
  for (const auto& e : trace.of(Event::MEMCPY)) {
    EXPECT_EQ(e.getMemcpy().getData().getSize(), 0u);
  }
  // The only stored contents are the code images.
  std::set<std::pair<uint64_t, uint64_t>> imagePieces;
  for (const auto& e : trace.of(Event::MODULE_LOAD)) {
    for (const auto piece : e.getModuleLoad().getImage().getPieces()) {
      imagePieces.emplace(piece.getHigh(), piece.getLow());
    }
  }
  EXPECT_EQ(trace.reader().blobCount(), imagePieces.size());
}

// Metadata and checkpoint modes write one event a launch, with the call's
// outcome; full mode a launchEnd after it. A refused launch says so either way.
TEST(Record, EachModeRecordsALaunchsOutcome) {
  kcap::test::TempDir dir("kcap-record");
  for (const std::string mode : {"metadata", "checkpoint", "full"}) {
    SCOPED_TRACE(mode);
    const std::string path = dir.file(mode + ".kcap");
    const Outcome plain = expectRecordedLikePlain(scenarioProgram(), {"refused"}, path, {{"KCAP_MODE", mode}});
    // y = 2i, x = i: the two launches that ran add 2i.
    EXPECT_NE(plain.out.find("result refused 1 y1 4.0"), std::string::npos) << plain.describe();
    Trace trace(path);
    const auto launches = trace.launches();
    ASSERT_EQ(launches.size(), 3u);
    const std::vector<int32_t> expected = {0, static_cast<int32_t>(CUDA_ERROR_INVALID_VALUE), 0};
    if (mode == "full") {
      const auto ends = trace.launchEnds();
      ASSERT_EQ(ends.size(), 3u);
      for (unsigned i = 0; i < 3; ++i) {
        EXPECT_FALSE(launches[i].getEnded());
        EXPECT_EQ(ends[i].getLaunchIndex(), launches[i].getLaunchIndex());
        EXPECT_EQ(ends[i].getResult(), expected[i]) << "launch " << i;
      }
    } else {
      EXPECT_EQ(trace.launchEnds().size(), 0u);
      for (unsigned i = 0; i < 3; ++i) {
        EXPECT_TRUE(launches[i].getEnded()) << "launch " << i;
        EXPECT_EQ(launches[i].getResult(), expected[i]) << "launch " << i;
        EXPECT_LT(launches[i].getCallNs(), uint64_t{60'000'000'000}) << "launch " << i;
      }
    }
    const Outcome info = kcap({"info", path});
    EXPECT_NE(info.out.find("1 failed"), std::string::npos) << info.describe();
    if (mode == "checkpoint") {  // re-execution passes over the refused launch, as the driver did
      const Outcome replay = kcap({"replay", path});
      EXPECT_EQ(replay.exitCode, 0) << replay.describe();
    }
  }
}

TEST(Record, PreModeRecordsNoPostState) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("pre.kcap");
  const Outcome shimmed =
      recorded(interposeProgram("direct_launch"), {}, {{"KCAP_OUTPUT", path}, {"KCAP_MODE", "pre"}});
  expectClean(shimmed);
  expectChecks(path);
  Trace trace(path);
  EXPECT_EQ(trace.all().front().getTraceBegin().getCaptureMode(), schema::CaptureMode::PRE_ONLY);
  for (const auto launch : trace.launches()) {
    EXPECT_GT(launch.getPre().size(), 0u);
  }
  for (const auto end : trace.launchEnds()) {
    EXPECT_EQ(end.getPost().size(), 0u);
  }
}

// direct_launch recorded with kernel name filters and a launch range: which
// launches the trace keeps (their names in order), numbered from 0 without
// gaps, each with its end, and how many the TRACE_END counts as dropped.
struct FilterCase {
  const char* name;  // the test's name
  std::map<std::string, std::string> env;
  std::vector<std::string> kernels;                           // the launches recorded, in order
  std::optional<uint64_t> dropped = std::nullopt;             // TRACE_END's dropped launches
  std::optional<std::vector<bool>> fromExtra = std::nullopt;  // each recorded launch's parameters came through `extra`
};

void PrintTo(const FilterCase& filterCase, std::ostream* out) { *out << filterCase.name; }

const FilterCase kFilterCases[] = {
    {"IncludeOnlyAxpy", {{"KCAP_INCLUDE", "^axpy$"}}, {"axpy", "axpy", "axpy"}, 3},
    {"ExcludeAxpyAndPoly", {{"KCAP_EXCLUDE", "axpy|poly"}}, {"reduce_sum", "scale_struct"}, 4},
    {"IncludeThenExclude", {{"KCAP_INCLUDE", "_"}, {"KCAP_EXCLUDE", "reduce"}}, {"scale_struct", "poly_eval"}},
    // The second axpy launch, the one through `extra`.
    {"IncludeSkipAndMaxLaunches",
     {{"KCAP_INCLUDE", "axpy"}, {"KCAP_SKIP", "1"}, {"KCAP_MAX_LAUNCHES", "1"}},
     {"axpy"},
     5,
     std::vector<bool>{true}},
    {"Skip", {{"KCAP_SKIP", "4"}}, {"scale_struct", "poly_eval"}},
    {"MaxLaunchesZero", {{"KCAP_MAX_LAUNCHES", "0"}}, {}},
};

class KernelFilter : public ::testing::TestWithParam<FilterCase> {};

TEST_P(KernelFilter, KeepsTheLaunchesAskedFor) {
  const FilterCase& expected = GetParam();
  kcap::test::TempDir dir("kcap-record");
  std::map<std::string, std::string> env = expected.env;
  env["KCAP_OUTPUT"] = dir.file("filtered.kcap");
  const Outcome shimmed = recorded(interposeProgram("direct_launch"), {}, env);
  expectClean(shimmed);
  expectChecks(env["KCAP_OUTPUT"]);
  Trace trace(env["KCAP_OUTPUT"]);
  std::vector<std::string> names;
  std::vector<bool> fromExtra;
  uint64_t index = 0;
  for (const auto launch : trace.launches()) {
    names.emplace_back(launch.getKernelName().cStr());
    EXPECT_EQ(launch.getLaunchIndex(), index++);
    fromExtra.push_back(launch.getParamsFromExtra());
  }
  EXPECT_EQ(trace.launchEnds().size(), names.size());
  EXPECT_EQ(trace.all().back().getTraceEnd().getLaunchCount(), names.size());
  EXPECT_EQ(names, expected.kernels);
  if (expected.dropped) {
    EXPECT_EQ(trace.all().back().getTraceEnd().getDroppedLaunches(), *expected.dropped);
  }
  if (expected.fromExtra) {
    EXPECT_EQ(fromExtra, *expected.fromExtra);
  }
}

INSTANTIATE_TEST_SUITE_P(Record, KernelFilter, ::testing::ValuesIn(kFilterCases),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(Record, CompressionLevelPieceSizeAndBuffer) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("pieces.kcap");
  const Outcome shimmed =
      recorded(interposeProgram("direct_launch"), {},
               {{"KCAP_OUTPUT", path}, {"KCAP_LEVEL", "19"}, {"KCAP_PIECE_SIZE", "4K"}, {"KCAP_BUFFER", "64M"}});
  expectClean(shimmed);
  expectChecks(path);
  Trace trace(path);
  const auto image = trace.of(Event::MODULE_LOAD)[0].getModuleLoad().getImage();
  EXPECT_EQ(image.getPieceSize(), 4096u);
  EXPECT_EQ(image.getPieces().size(), (image.getSize() + 4095) / 4096);
  std::map<std::string, std::string> options;
  for (const auto option : trace.all().front().getTraceBegin().getOptions()) {
    options[option.getKey().cStr()] = option.getValue().cStr();
  }
  EXPECT_EQ(options["level"], "19");
  EXPECT_EQ(options["pieceSize"], "4096");
  EXPECT_EQ(options["buffer"], std::to_string(64u << 20));
}

// Settings the shim cannot use: the program runs as it would without it,
// stderr says why (one line where `oneLine`), and no trace is left behind
// where `noTrace`.
struct BadSettingCase {
  std::string name;    // the test's name
  std::string output;  // KCAP_OUTPUT, a file name in the test's directory
  std::map<std::string, std::string> env;
  std::string errPrefix;    // stderr starts with it (empty: anything)
  std::string errContains;  // and holds it
  bool oneLine;
  bool noTrace;
};

void PrintTo(const BadSettingCase& badCase, std::ostream* out) { *out << badCase.name; }

BadSettingCase invalidOption(const std::string& name, const std::string& variable, const std::string& value) {
  return {name,
          "t.kcap",
          {{variable, value}},
          "kcap: " + variable + "=\"" + value + "\": ",
          "; not recording\n",
          /*oneLine=*/true,
          /*noTrace=*/true};
}

const BadSettingCase kBadSettingCases[] = {
    invalidOption("UnknownMode", "KCAP_MODE", "everything"),
    invalidOption("UnbalancedInclude", "KCAP_INCLUDE", "(axpy"),
    invalidOption("NegativeSkip", "KCAP_SKIP", "-1"),
    invalidOption("WordForMaxLaunches", "KCAP_MAX_LAUNCHES", "many"),
    invalidOption("LevelOutOfRange", "KCAP_LEVEL", "99"),
    invalidOption("PieceSizeTooSmall", "KCAP_PIECE_SIZE", "12"),
    invalidOption("BufferTooSmall", "KCAP_BUFFER", "1M"),
    {"UnknownPlaceholder", "t%q.kcap", {}, "", "unknown placeholder %q", /*oneLine=*/false, /*noTrace=*/false},
    // A file that cannot be created: said once, the program runs on.
    {"UnwritableOutput", "no-such-dir/t.kcap", {}, "kcap: cannot record: ", "", /*oneLine=*/true, /*noTrace=*/false},
};

class BadSetting : public ::testing::TestWithParam<BadSettingCase> {};

TEST_P(BadSetting, LeavesTheProgramAlone) {
  const BadSettingCase& expected = GetParam();
  const Outcome plain = plainRun(interposeProgram("direct_launch"));
  kcap::test::TempDir dir("kcap-record");
  std::map<std::string, std::string> env = expected.env;
  env["KCAP_OUTPUT"] = dir.file(expected.output);
  const Outcome shimmed = recorded(interposeProgram("direct_launch"), {}, env);
  EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out);
  if (!expected.errPrefix.empty()) {
    EXPECT_EQ(shimmed.err.rfind(expected.errPrefix, 0), 0u) << shimmed.err;
  }
  if (!expected.errContains.empty()) {
    EXPECT_NE(shimmed.err.find(expected.errContains), std::string::npos) << shimmed.err;
  }
  if (expected.oneLine) {
    EXPECT_EQ(std::count(shimmed.err.begin(), shimmed.err.end(), '\n'), 1) << shimmed.err;
  }
  if (expected.noTrace) {
    EXPECT_NE(access(env["KCAP_OUTPUT"].c_str(), F_OK), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Record, BadSetting, ::testing::ValuesIn(kBadSettingCases),
                         [](const auto& test) { return test.param.name; });

TEST(Record, OutputPlaceholders) {
  kcap::test::TempDir dir("kcap-record");
  const Outcome shimmed =
      recorded(interposeProgram("direct_launch"), {}, {{"KCAP_OUTPUT", dir.file("t-%p-%h-%r-%%.kcap")}, {"RANK", "3"}});
  expectClean(shimmed);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  bool found = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("t-", 0) != 0) {
      continue;
    }
    found = true;
    Trace trace(entry.path().string());
    const std::string pid = std::to_string(trace.all().front().getTraceBegin().getProcessId());
    EXPECT_EQ(name, "t-" + pid + "-" + host + "-3-%.kcap");
  }
  EXPECT_TRUE(found);
}

// ---- threads -----------------------------------------------------------------------------

TEST(Record, SixteenThreadsFourStreamsThousandLaunchesMetadata) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("threads.kcap");
  expectRecordedLikePlain(threadsProgram(), {}, path, {{"KCAP_MODE", "metadata"}});

  // Every launch once, each stream's launches in the order made (a = 0, 1, ...).
  auto reader = kcap::format::TraceReader::open(path);
  std::map<std::pair<uint32_t, uint64_t>, std::vector<float>> byStream;
  std::set<uint64_t> indexes;
  std::set<uint64_t> ended;
  uint64_t launches = 0;
  uint64_t outOfFileOrder = 0;  // metadata mode numbers launches as the writer orders them
  uint64_t launchEnds = 0;
  reader->forEachEvent([&](const kcap::format::EventRef& ref) {
    if (ref.event.which() == Event::LAUNCH) {
      const auto launch = ref.event.getLaunch();
      outOfFileOrder += launch.getLaunchIndex() != launches ? 1 : 0;
      ++launches;
      indexes.insert(launch.getLaunchIndex());
      byStream[{ref.event.getThreadId(), launch.getStream()}].push_back(at<float>(launch.getParams(), 0));
      // Its outcome in the launch itself: no launchEnd in this mode.
      if (launch.getEnded() && launch.getResult() == 0) ended.insert(launch.getLaunchIndex());
    } else if (ref.event.which() == Event::LAUNCH_END) {
      ++launchEnds;
    }
    return true;
  });
  EXPECT_EQ(launchEnds, 0u);
  EXPECT_EQ(launches, 64000u);
  EXPECT_EQ(outOfFileOrder, 0u);
  EXPECT_EQ(indexes.size(), 64000u);
  EXPECT_EQ(ended.size(), 64000u);
  ASSERT_EQ(byStream.size(), 64u);
  std::vector<float> inOrder(1000);
  for (int i = 0; i < 1000; ++i) {
    inOrder[static_cast<size_t>(i)] = static_cast<float>(i);
  }
  for (const auto& [key, values] : byStream) {
    EXPECT_EQ(values, inOrder) << "thread " << key.first << " stream " << key.second;
  }
}

}  // namespace
}  // namespace kcap_test
