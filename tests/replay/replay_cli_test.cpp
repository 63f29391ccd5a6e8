// `kcap replay` end to end, without a GPU: programs are recorded with
// `kcap record` (or the shim and KCAP_OUTPUT, for programs that die) against
// the driver double, then replayed by `kcap replay` in a child process with
// KCAP_LIBCUDA naming the double. Checks verdicts, both memory paths,
// sequences, --override, faults and hangs, damaged traces, usage errors, the
// JSON report and the exit codes.
#include "process_runner.h"
#include "recorded_traces.h"
#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

constexpr int kExitOk = 0, kExitTrace = 1, kExitUsage = 2, kExitDiffers = 3, kExitFault = 4;

std::string replayProgram() { return KCAP_TEST_REPLAY_PROGRAM; }

size_t occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) {
    ++count;
  }
  return count;
}

// The shim with KCAP_OUTPUT, for programs that end badly.
Outcome recordWithShim(const std::string& path, const std::string& program, const std::vector<std::string>& args,
                       std::map<std::string, std::string> env = {}) {
  env["KCAP_OUTPUT"] = path;
  return kcap_test::run({program, args, std::move(env), true});
}

Outcome replay(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> all = {"replay"};
  all.insert(all.end(), args.begin(), args.end());
  return kcapOnDouble(all, std::move(env));
}

// The table row of launch N: the line starting with its index.
std::string row(const std::string& out, uint64_t launch) {
  const std::regex pattern("(^|\n)( *" + std::to_string(launch) + "  [^\n]*)");
  std::smatch match;
  return std::regex_search(out, match, pattern) ? match[2].str() : std::string();
}

// The JSON object of launch N in --json output (launches are objects in an
// array; buffers are nested objects without further nesting of launches).
std::string jsonLaunch(const std::string& json, uint64_t launch) {
  const std::string key = "{\"launchIndex\":" + std::to_string(launch) + ",";
  const size_t start = json.find(key);
  if (start == std::string::npos) {
    return {};
  }
  int depth = 0;
  bool inString = false;
  for (size_t i = start; i < json.size(); ++i) {
    const char c = json[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      }
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) {
        return json.substr(start, i + 1 - start);
      }
    }
  }
  return {};
}

// A structural check of a JSON document: brackets balance outside strings,
// strings close, nothing follows the top-level value but a newline.
bool balancedJson(const std::string& json) {
  std::vector<char> stack;
  bool inString = false;
  size_t end = 0;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return false;  // control characters must be escaped
      }
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      stack.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != c) {
        return false;
      }
      stack.pop_back();
      if (stack.empty()) {
        end = i + 1;
        break;
      }
    }
  }
  return !inString && stack.empty() && end != 0 && json.substr(end) == "\n" && json[0] == '{';
}

class Replay : public RecordedTraces<Replay> {
 protected:
  static std::string sequence() { return scenario("sequence"); }
  static std::string pdl() { return scenario("pdl"); }
  static std::string pitched() { return scenario("pitched"); }
  static std::string volume() { return scenario("volume"); }
  static std::string changedAxpy() { return kernelFile("axpy_changed.fatbin"); }
};

const std::vector<std::string> kDirectKernels = {"axpy", "axpy", "axpy", "reduce_sum", "scale_struct", "poly_eval"};

// The double's "device memory" is host memory of the recording process. Under
// AddressSanitizer that is ASan's heap, whose addresses the replay process's
// own ASan allocator holds: the double refuses them, so replay relocates and
// must say why. In an ordinary build they are free and kept.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRecordedAddressesFree = false;
#else
constexpr bool kRecordedAddressesFree = true;
#endif
const std::string kMemoryColumn = kRecordedAddressesFree ? "fixed-va" : "relocated";

void expectRecordedAddressPath(const std::string& launchJson) {
  if (kRecordedAddressesFree) {
    EXPECT_NE(launchJson.find("\"memory\":\"fixed-va\""), std::string::npos) << launchJson;
  } else {
    // ("fixed-va+relocated" when some regions were mmap'd by the double,
    // as VMM mappings are, and so kept.)
    EXPECT_TRUE(launchJson.find("\"memory\":\"relocated\"") != std::string::npos ||
                launchJson.find("\"memory\":\"fixed-va+relocated\"") != std::string::npos)
        << launchJson;
    EXPECT_NE(launchJson.find("\"detail\":\"recorded addresses not granted: cuMemAddressReserve("), std::string::npos)
        << launchJson;
  }
}

// ---- (a) every launch reproduced, at the recorded addresses ---------------------------------------

TEST_F(Replay, EveryLaunchOfDirectLaunchReproducesAtTheRecordedAddresses) {
  const Outcome run = replay({directLaunch()});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  for (uint64_t i = 0; i < kDirectKernels.size(); ++i) {
    const std::string line = row(run.out, i);
    EXPECT_NE(line.find("  " + kDirectKernels[i] + " "), std::string::npos) << i << ": " << run.out;
    EXPECT_NE(line.find(kMemoryColumn), std::string::npos) << line;
    EXPECT_NE(line.find("REPRODUCED"), std::string::npos) << line;
  }
  // the code column says what ran: SASS of the fatbins, the cubin, the PTX
  EXPECT_NE(row(run.out, 0).find("SASS sm_90"), std::string::npos) << run.out;
  EXPECT_NE(row(run.out, 3).find("cubin"), std::string::npos) << run.out;
  EXPECT_NE(row(run.out, 4).find("PTX (JIT)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("6 launches: 6 REPRODUCED"), std::string::npos) << run.out;
  EXPECT_EQ(run.err, "");
}

TEST_F(Replay, JsonSaysFixedVaForEveryLaunchAndParses) {
  const Outcome run = replay({directLaunch(), "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  for (uint64_t i = 0; i < kDirectKernels.size(); ++i) {
    const std::string launch = jsonLaunch(run.out, i);
    ASSERT_FALSE(launch.empty()) << i << ": " << run.out;
    EXPECT_NE(launch.find("\"kernel\":\"" + kDirectKernels[i] + "\""), std::string::npos) << launch;
    EXPECT_NE(launch.find("\"verdict\":\"REPRODUCED\""), std::string::npos) << launch;
    expectRecordedAddressPath(launch);
    EXPECT_NE(launch.find("\"differingBytes\":0"), std::string::npos) << launch;
    EXPECT_EQ(launch.find("\"differingBytes\":1"), std::string::npos) << launch;
  }
  EXPECT_NE(jsonLaunch(run.out, 0).find("\"grid\":[4,1,1],\"block\":[256,1,1]"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"exitCode\":0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"summary\":\"6 launches: 6 REPRODUCED\""), std::string::npos) << run.out;
  EXPECT_TRUE(jsonLaunch(run.out, 6).empty());
}

TEST_F(Replay, RecordScenariosVmmReproduces) {
  // axpy's x straddles two VMM mappings of one reservation
  const std::string path = file("vmm.kcap");
  recordWithKcap(path, scenarioProgram(), {"vmm"});
  const Outcome run = replay({path, "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  const std::string launch = jsonLaunch(run.out, 0);
  EXPECT_NE(launch.find("\"verdict\":\"REPRODUCED\""), std::string::npos) << run.out;
  expectRecordedAddressPath(launch);
  EXPECT_TRUE(jsonLaunch(run.out, 1).empty()) << run.out;
}

TEST_F(Replay, ALaunchRecordedWithoutItsParametersIsAnErrorNotAFault) {
  // A driver that could not say what the kernels take: launches passing
  // kernelParams are recorded without parameters. Launching them with none
  // would read garbage (on a GPU: fault, and end every later launch); each
  // is an ERROR that says why, and the others still replay. Launch 1 passed
  // its parameters as one buffer (`extra`), recorded whole and replayed as
  // one buffer.
  const std::string path = file("no-layout.kcap");
  recordWithKcap(path, interposeProgram("direct_launch"), {}, {{"KCAP_DOUBLE_NO_PARAM_INFO", "1"}});
  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(run.out.find("FAULT"), std::string::npos) << run.out;
  for (uint64_t i = 0; i < kDirectKernels.size(); ++i) {
    EXPECT_NE(row(run.out, i).find(i == 1 ? "REPRODUCED" : "ERROR"), std::string::npos) << i << ": " << run.out;
  }
  EXPECT_NE(run.out.find("launch 5 (poly_eval): ERROR: recorded without its parameters"), std::string::npos) << run.out;
}

// A launch the recording took no memory for (it waited for the host or
// its peers, or ran behind such a kernel) is not run: ERROR with the
// recorded reason, never a REPRODUCED that compared nothing; the others
// still reproduce.
TEST_F(Replay, ALaunchRecordedWithoutItsMemorySaysWhyAndIsNotRun) {
  const std::string path = file("no-memory.kcap");
  ASSERT_NE(kcap::test::rewriteEvents(directLaunch(), path,
                                      [](kcap::schema::Event::Builder e) {
                                        if (!e.isLaunch() || e.getLaunch().getLaunchIndex() != 3) return false;
                                        e.getLaunch().setNoSnapshotReason("it waits for the host");
                                        e.getLaunch().initPre(0);
                                        return true;
                                      }),
            0u);
  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.out.find("launch 3 (reduce_sum): ERROR: NOT REPLAYABLE: recorded without its memory: it waits for "
                         "the host"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("6 launches: 1 ERROR, 5 REPRODUCED"), std::string::npos) << run.out;
  const Outcome dump = kcapOnDouble({"dump", path, "--type", "launch"});
  EXPECT_NE(dump.out.find("noSnapshot=\"it waits for the host\""), std::string::npos) << dump.out;
}

TEST_F(Replay, LazilyLoadedFunctionsAreRecordedWithTheirParameters) {
  // Under lazy loading the driver cannot tell a function's parameters until
  // its code is loaded: not when it is bound. axpy is loaded by an attribute
  // change before its first launch, the others by nothing before theirs;
  // either way each launch is recorded with its parameters and replays.
  const std::string path = file("lazy.kcap");
  recordWithKcap(path, interposeProgram("direct_launch"), {}, {{"KCAP_DOUBLE_LAZY_LOADING", "1"}});
  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  for (uint64_t i = 0; i < kDirectKernels.size(); ++i) {
    EXPECT_NE(row(run.out, i).find("REPRODUCED"), std::string::npos) << i << ": " << run.out;
  }

  // CUkernel launches where the driver tells only a loaded function's
  // parameters, not the kernel's: asked through the kernel's function.
  const std::string kernels = file("lazy-kernels.kcap");
  recordWithKcap(kernels, scenarioProgram(), {"library"},
                 {{"KCAP_DOUBLE_LAZY_LOADING", "1"}, {"KCAP_DOUBLE_NO_KERNEL_PARAM_INFO", "1"}});
  const Outcome library = replay({kernels});
  for (const uint64_t i : {0u, 1u, 3u}) {
    EXPECT_NE(row(library.out, i).find("REPRODUCED"), std::string::npos) << i << ": " << library.out;
  }
  EXPECT_EQ(library.out.find("recorded without its parameters"), std::string::npos) << library.out;
}

TEST_F(Replay, RecordScenariosLibraryReproducesAndLinksRelocatableDeviceCode) {
  // CUkernel launches, cuLaunchKernelEx with attributes, a pointer array,
  // cudart's fatbin wrappers; launch 2 comes from a relocatable-device-code
  // wrapper whose own fatbin (reduce) does not hold the kernel: only its
  // extra fatbin (axpy) does. Replay runs the wrapper's own SASS when it
  // fits, as cudart does (nvcc's device-link output always holds every
  // kernel), so the kernel is missing there; with --force-ptx it links the
  // extra fatbins' PTX itself (the double's linker lists what they define).
  const std::string path = file("library.kcap");
  recordWithKcap(path, scenarioProgram(), {"library"});
  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  for (const uint64_t i : {0u, 1u, 3u}) {
    EXPECT_NE(row(run.out, i).find("REPRODUCED"), std::string::npos) << i << ": " << run.out;
  }
  EXPECT_NE(row(run.out, 2).find("ERROR"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("launch 2 (axpy): ERROR: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("kernel axpy not found in the recorded image"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("4 launches: 1 ERROR, 3 REPRODUCED"), std::string::npos) << run.out;

  const Outcome linked = replay({path, "--launch", "2", "--force-ptx", "--json"});
  EXPECT_EQ(linked.exitCode, kExitOk) << linked.describe();
  EXPECT_NE(linked.out.find("\"verdict\":\"REPRODUCED\""), std::string::npos) << linked.out;
  EXPECT_NE(
      linked.out.find("\"code\":\"relocatable device code linked here from 1 fatbins (PTX compute_80 (forced JIT))\""),
      std::string::npos)
      << linked.out;
}

// ---- (b), (c) relocated memory ----------------------------------------------------------

TEST_F(Replay, NoFixedVaRelocatesAndStillReproduces) {
  const Outcome run = replay({directLaunch(), "--no-fixed-va"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  for (uint64_t i = 0; i < kDirectKernels.size(); ++i) {
    const std::string line = row(run.out, i);
    EXPECT_NE(line.find("relocated"), std::string::npos) << line;
    EXPECT_EQ(line.find("fixed-va"), std::string::npos) << line;
    EXPECT_NE(line.find("REPRODUCED"), std::string::npos) << line;
  }
  const Outcome json = replay({directLaunch(), "--no-fixed-va", "--json", "--launch", "0"});
  EXPECT_NE(jsonLaunch(json.out, 0).find("\"memory\":\"relocated\""), std::string::npos) << json.out;
}

TEST_F(Replay, ADriverThatRefusesAddressHintsGetsARelocatedReplay) {
  const Outcome run = replay({directLaunch(), "--json"}, {{"KCAP_DOUBLE_REFUSE_ADDRESS_HINTS", "1"}});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"memory\":\"relocated\""), kDirectKernels.size()) << run.out;
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), kDirectKernels.size()) << run.out;
  EXPECT_EQ(run.out.find("fixed-va"), std::string::npos) << run.out;
}

// ---- tensor maps ----------------------------------------------------------------------

// record_scenarios tensor-map: tma_scale takes a tiled tensor map (128 bytes)
// whose encode is on record. The replaying double is made "another driver"
// (KCAP_DOUBLE_TENSOR_MAP_SALT): its launches refuse the maps the recording
// driver made, so only a map re-encoded here passes, and tma_scale reads
// through the map's address, so only a map of the replay's own memory
// reproduces relocated.
class ReplayTensorMaps : public RecordedTraces<ReplayTensorMaps> {
 protected:
  static std::string trace() { return recorded("tensor-map.kcap", scenarioProgram(), {"tensor-map"}); }
  // The seq of the encode that made the launch's map: the first that succeeded.
  static uint64_t encodeSeq(const std::string& path) {
    for (const auto& e : kcap::test::readAllEvents(path)) {
      if (e.get().isTensorMapEncode() && e.get().getTensorMapEncode().getResult() == 0) {
        return e.get().getSeq();
      }
    }
    return 0;
  }
};

TEST_F(ReplayTensorMaps, AreReEncodedFromTheRecordedEncodeAtFixedAndRelocatedAddresses) {
  const std::string path = trace();
  const uint64_t seq = encodeSeq(path);
  ASSERT_NE(seq, 0u);
  const std::string note = "1 tensor map re-encoded here (tensorMapEncode #" + std::to_string(seq) + ")";
  for (const bool relocate : {false, true}) {
    std::vector<std::string> args = {path, "--json"};
    if (relocate) {
      args.push_back("--no-fixed-va");
    }
    const Outcome run = replay(args, {{"KCAP_DOUBLE_TENSOR_MAP_SALT", "7"}});
    EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
    EXPECT_TRUE(balancedJson(run.out)) << run.out;
    const std::string launch = jsonLaunch(run.out, 0);
    EXPECT_NE(launch.find("\"verdict\":\"REPRODUCED\""), std::string::npos) << run.out;
    EXPECT_NE(launch.find(note), std::string::npos) << launch;
    if (relocate) {
      EXPECT_NE(launch.find("\"memory\":\"relocated\""), std::string::npos) << launch;
    } else {
      expectRecordedAddressPath(launch);
    }
  }
  // The driver that recorded it: reproduces as well.
  const Outcome same = replay({path, "--no-fixed-va"});
  EXPECT_EQ(same.exitCode, kExitOk) << same.describe();
  EXPECT_NE(row(same.out, 0).find("REPRODUCED"), std::string::npos) << same.out;
}

TEST_F(ReplayTensorMaps, AnEncodeTheReplayDriverRefusesIsAnErrorNamingTheEncode) {
  const std::string path = trace();
  const uint64_t seq = encodeSeq(path);
  const Outcome run = replay({path, "--json"}, {{"KCAP_DOUBLE_TENSOR_MAP_REFUSE", "1"}});
  EXPECT_NE(run.exitCode, kExitOk) << run.describe();
  const std::string launch = jsonLaunch(run.out, 0);
  EXPECT_NE(launch.find("\"verdict\":\"ERROR\""), std::string::npos) << run.out;
  EXPECT_NE(launch.find("re-encoding the tensor map of tensorMapEncode #" + std::to_string(seq) +
                        ": CUDA_ERROR_NOT_SUPPORTED"),
            std::string::npos)
      << launch;
}

// ---- (d) sequences ----------------------------------------------------------------------

TEST_F(Replay, ASequenceReappliesTheRecordedCopiesAndMemsets) {
  // Launches 1..4 read what the program's memset, copies and earlier
  // launches left; replayed in order from launch 0's pre-state, they
  // reproduce only if replay re-applies those between them.
  const Outcome run = replay({sequence(), "--range", "0..4", "-v"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_NE(row(run.out, i).find("REPRODUCED"), std::string::npos) << i << ": " << run.out;
  }
  EXPECT_NE(row(run.out, 4).find("reduce_sum"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("5 launches: 5 REPRODUCED"), std::string::npos) << run.out;
  // -v lists every compared buffer
  EXPECT_EQ(occurrences(run.out, ": identical"), 10u) << run.out;

  const Outcome middle = replay({sequence(), "--range", "1..3", "--no-fixed-va"});
  EXPECT_EQ(middle.exitCode, kExitOk) << middle.describe();
  EXPECT_NE(middle.out.find("3 launches: 3 REPRODUCED"), std::string::npos) << middle.out;
  EXPECT_TRUE(row(middle.out, 0).empty()) << middle.out;
  EXPECT_TRUE(row(middle.out, 4).empty()) << middle.out;

  // each launch alone, from its own pre-state, too
  const Outcome alone = replay({sequence(), "--all"});
  EXPECT_EQ(alone.exitCode, kExitOk) << alone.describe();
  EXPECT_NE(alone.out.find("5 launches: 5 REPRODUCED"), std::string::npos) << alone.out;
}

TEST_F(Replay, ALaunchWithProgrammaticStreamSerializationRunsBehindThePreviousOneInASequence) {
  // pdl: axpy (x, y); axpy with programmatic stream serialization on the
  // same stream; axpy. In a sequence the second is submitted right behind
  // the first, so the two are compared after both ran: the first without
  // y, which the second changes (y is compared with the second).
  const Outcome run = replay({pdl(), "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("3 launches: 3 REPRODUCED"), std::string::npos) << run.out;
  const std::string first = jsonLaunch(run.out, 0), second = jsonLaunch(run.out, 1), third = jsonLaunch(run.out, 2);
  EXPECT_NE(first.find("launch 1 ran overlapped with it (programmatic dependent launch); compared after both, but "
                       "for the ranges that launch changes"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("\"label\":\"param 1\""), std::string::npos) << first;
  EXPECT_EQ(first.find("\"label\":\"param 2\""), std::string::npos) << first;
  EXPECT_NE(second.find("ran overlapped with the launch before it (programmatic dependent launch)"), std::string::npos)
      << second;
  EXPECT_NE(second.find("\"label\":\"param 2\""), std::string::npos) << second;
  EXPECT_EQ(third.find("overlapped"), std::string::npos) << third;

  // Each alone, from its own pre-state: nothing runs together.
  const Outcome alone = replay({pdl(), "--all", "--json"});
  EXPECT_EQ(alone.exitCode, kExitOk) << alone.describe();
  EXPECT_EQ(alone.out.find("overlapped"), std::string::npos) << alone.out;
}

// The pitched or volume scenario's events (programs/replay_scenarios.cpp),
// read back: its 2D and 3D copies (width != 0), 2D memsets and launches.
struct PitchedTrace {
  std::vector<kcap::test::OwnedEvent> events;
  std::vector<kcap::schema::Event::Reader> pitchedCopies, memsets2D, launches;
  explicit PitchedTrace(const std::string& path) : events(kcap::test::readAllEvents(path)) {
    for (const auto& owned : events) {
      const auto e = owned.get();
      if (e.isMemcpy() && e.getMemcpy().getWidth() != 0) {
        pitchedCopies.push_back(e);
      } else if (e.isMemset() && e.getMemset().getHeight() > 1) {
        memsets2D.push_back(e);
      } else if (e.isLaunch()) {
        launches.push_back(e);
      }
    }
  }
};

// The bytes a launch's pre-state holds for the range at `address`.
std::vector<uint8_t> preBytes(kcap::format::TraceReader& reader, kcap::schema::Event::Reader launch, uint64_t address) {
  for (const auto range : launch.getLaunch().getPre()) {
    if (range.getAddress() == address) {
      return reader.readContent(range.getContent());
    }
  }
  return {};
}

TEST_F(Replay, ASequenceReappliesThe2DCopiesAndMemsetsRowByRow) {
  namespace schema = kcap::schema;
  const PitchedTrace trace(pitched());
  auto reader = kcap::format::TraceReader::open(pitched());
  ASSERT_EQ(trace.pitchedCopies.size(), 2u);
  ASSERT_EQ(trace.memsets2D.size(), 1u);
  ASSERT_EQ(trace.launches.size(), 3u);
  constexpr uint64_t kPitch = 512;
  uint64_t p = 0;
  for (const auto& owned : trace.events) {
    const auto e = owned.get();
    if (e.isAlloc() && e.getAlloc().getKind() == schema::AllocKind::MEM_ALLOC_PITCH) {
      p = e.getAlloc().getAddress();
      EXPECT_EQ(e.getAlloc().getPitch(), kPitch);
      EXPECT_EQ(e.getAlloc().getSize(), 8 * kPitch);
    }
  }
  ASSERT_NE(p, 0u);

  // Host to device: 8 rows of 64 floats, from host rows 80 floats apart,
  // stored packed.
  const auto up = trace.pitchedCopies[0].getMemcpy();
  EXPECT_EQ(up.getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(up.getDst(), p);
  EXPECT_EQ(up.getWidth(), 256u);
  EXPECT_EQ(up.getHeight(), 8u);
  EXPECT_EQ(up.getDstPitch(), kPitch);
  EXPECT_EQ(up.getSrcPitch(), 320u);
  EXPECT_EQ(up.getSize(), 2048u);
  const std::vector<uint8_t> packed = reader->readContent(up.getData());
  ASSERT_EQ(packed.size(), 2048u);
  std::vector<float> rows(512);
  std::memcpy(rows.data(), packed.data(), packed.size());
  for (size_t r = 0; r < 8; ++r) {
    for (size_t c = 0; c < 64; ++c) {
      ASSERT_EQ(rows[r * 64 + c], static_cast<float>(r * 100 + c)) << r << "," << c;
    }
  }
  // The memset: rows 2..5 from element 16, 32 elements each.
  const auto set = trace.memsets2D[0].getMemset();
  EXPECT_EQ(set.getDst(), p + 2 * kPitch + 64);
  EXPECT_EQ(set.getElementSize(), 4u);
  EXPECT_EQ(set.getCount(), 32u);
  EXPECT_EQ(set.getHeight(), 4u);
  EXPECT_EQ(set.getPitch(), kPitch);
  // Device to device, from y into elements 32..63 of each row: no data.
  const auto across = trace.pitchedCopies[1].getMemcpy();
  EXPECT_EQ(across.getDirection(), schema::CopyDirection::DEVICE_TO_DEVICE);
  EXPECT_EQ(across.getDst(), p + 128);
  EXPECT_NE(across.getSrc(), 0u);
  EXPECT_EQ(across.getWidth(), 128u);
  EXPECT_EQ(across.getHeight(), 8u);
  EXPECT_EQ(across.getDstPitch(), kPitch);
  EXPECT_EQ(across.getSrcPitch(), kPitch);
  EXPECT_EQ(across.getData().getSize(), 0u);
  EXPECT_TRUE(trace.pitchedCopies[0].getSeq() < trace.launches[1].getSeq() &&
              trace.pitchedCopies[1].getSeq() < trace.launches[2].getSeq());

  // A sequence restores p once, from launch 0's pre-state: launches 1 and
  // 2 read a p that only the 2D copies and the memset made.
  const auto p0 = preBytes(*reader, trace.launches[0], p);
  const auto p1 = preBytes(*reader, trace.launches[1], p);
  const auto p2 = preBytes(*reader, trace.launches[2], p);
  ASSERT_EQ(p0.size(), 4096u);
  EXPECT_NE(p1, p0);
  EXPECT_NE(p2, p1);

  const Outcome run = replay({pitched(), "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), 3u) << run.out;
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  const Outcome relocated = replay({pitched(), "--range", "0..2", "--no-fixed-va"});
  EXPECT_EQ(relocated.exitCode, kExitOk) << relocated.describe();
  EXPECT_NE(relocated.out.find("3 launches: 3 REPRODUCED"), std::string::npos) << relocated.out;
  const Outcome later = replay({pitched(), "--range", "1..2", "--no-fixed-va"});
  EXPECT_EQ(later.exitCode, kExitOk) << later.describe();
  EXPECT_NE(later.out.find("2 launches: 2 REPRODUCED"), std::string::npos) << later.out;
}

// `source` written to `path` (uncompressed), each of its events passed to
// `change` as a copy it may edit; returns the seq of the last one it edited.
uint64_t rewritten(const std::string& source, const std::string& path,
                   const std::function<bool(kcap::schema::Event::Builder)>& change) {
  return kcap::test::rewriteEvents(source, path, change);
}

// `source` with its device-to-device 2D or 3D copy turned into one from a
// CUDA array, as the recorder writes those: unknown, no source. Returns its
// seq.
uint64_t withCopyFromAnArray(const std::string& source, const std::string& path) {
  return rewritten(source, path, [](kcap::schema::Event::Builder e) {
    if (!e.isMemcpy() || e.getMemcpy().getWidth() == 0 ||
        e.getMemcpy().getDirection() != kcap::schema::CopyDirection::DEVICE_TO_DEVICE) {
      return false;
    }
    auto copy = e.getMemcpy();
    copy.setDirection(kcap::schema::CopyDirection::UNKNOWN);
    copy.setSrc(0);
    copy.setSrcPitch(0);
    copy.setSrcHeight(0);
    return true;
  });
}

TEST_F(Replay, A2DCopyFromAnArrayCannotBeReappliedAndSaysWhich) {
  const std::string path = file("pitched-array.kcap");
  const uint64_t arraySeq = withCopyFromAnArray(pitched(), path);
  ASSERT_NE(arraySeq, 0u);

  const Outcome run = replay({path, "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), 2u) << run.out;
  const std::string third = jsonLaunch(run.out, 2);
  EXPECT_NE(third.find("\"verdict\":\"ERROR\""), std::string::npos) << third;
  EXPECT_NE(third.find("the 2D copy at event #" + std::to_string(arraySeq) +
                       " is to or from a CUDA array, recorded without its data: replay cannot re-apply it"),
            std::string::npos)
      << third;
  // Alone, from its own pre-state, it needs no copy.
  const Outcome alone = replay({path, "--launch", "2"});
  EXPECT_EQ(alone.exitCode, kExitOk) << alone.describe();
  EXPECT_NE(alone.out.find("1 launch: 1 REPRODUCED"), std::string::npos) << alone.out;
}

TEST_F(Replay, ASequenceReappliesThe3DCopiesSliceBySlice) {
  namespace schema = kcap::schema;
  const PitchedTrace trace(volume());
  auto reader = kcap::format::TraceReader::open(volume());
  ASSERT_EQ(trace.pitchedCopies.size(), 2u);
  ASSERT_EQ(trace.launches.size(), 3u);
  constexpr uint64_t kPitch = 512, kSliceRows = 4;
  uint64_t v = 0;
  for (const auto& owned : trace.events) {
    const auto e = owned.get();
    if (e.isAlloc() && e.getAlloc().getKind() == schema::AllocKind::MEM_ALLOC_PITCH) {
      v = e.getAlloc().getAddress();
      EXPECT_EQ(e.getAlloc().getPitch(), kPitch);
      EXPECT_EQ(e.getAlloc().getSize(), 2 * kSliceRows * kPitch);
    }
  }
  ASSERT_NE(v, 0u);

  // Host to device: 2 slices of 4 rows of 64 floats, from a host volume
  // of rows 80 floats apart and slices 5 rows apart, stored packed.
  const auto up = trace.pitchedCopies[0].getMemcpy();
  EXPECT_EQ(up.getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(up.getDst(), v);
  EXPECT_EQ(up.getWidth(), 256u);
  EXPECT_EQ(up.getHeight(), 4u);
  EXPECT_EQ(up.getDepth(), 2u);
  EXPECT_EQ(up.getDstPitch(), kPitch);
  EXPECT_EQ(up.getDstHeight(), kSliceRows);
  EXPECT_EQ(up.getSrcPitch(), 320u);
  EXPECT_EQ(up.getSrcHeight(), 5u);
  EXPECT_EQ(up.getSize(), 2048u);
  const std::vector<uint8_t> packed = reader->readContent(up.getData());
  ASSERT_EQ(packed.size(), 2048u);
  std::vector<float> rows(512);
  std::memcpy(rows.data(), packed.data(), packed.size());
  for (size_t z = 0; z < 2; ++z) {
    for (size_t r = 0; r < 4; ++r) {
      for (size_t c = 0; c < 64; ++c) {
        ASSERT_EQ(rows[(z * 4 + r) * 64 + c], static_cast<float>(z * 1000 + r * 100 + c)) << z << "," << r;
      }
    }
  }
  // Device to device, from y into elements 32..63 of rows 1..3 of both
  // slices: no data.
  const auto across = trace.pitchedCopies[1].getMemcpy();
  EXPECT_EQ(across.getDirection(), schema::CopyDirection::DEVICE_TO_DEVICE);
  EXPECT_EQ(across.getDst(), v + kPitch + 128);
  EXPECT_NE(across.getSrc(), 0u);
  EXPECT_EQ(across.getWidth(), 128u);
  EXPECT_EQ(across.getHeight(), 3u);
  EXPECT_EQ(across.getDepth(), 2u);
  EXPECT_EQ(across.getDstPitch(), kPitch);
  EXPECT_EQ(across.getSrcPitch(), kPitch);
  EXPECT_EQ(across.getDstHeight(), kSliceRows);
  EXPECT_EQ(across.getSrcHeight(), kSliceRows);
  EXPECT_TRUE(across.getIsAsync());
  EXPECT_EQ(across.getData().getSize(), 0u);
  EXPECT_TRUE(trace.launches[0].getSeq() < trace.pitchedCopies[0].getSeq() &&
              trace.pitchedCopies[0].getSeq() < trace.launches[1].getSeq() &&
              trace.pitchedCopies[1].getSeq() < trace.launches[2].getSeq());

  // A sequence restores v once, from launch 0's pre-state: launches 1 and
  // 2 read a v that only the 3D copies made.
  const auto v0 = preBytes(*reader, trace.launches[0], v);
  const auto v1 = preBytes(*reader, trace.launches[1], v);
  const auto v2 = preBytes(*reader, trace.launches[2], v);
  ASSERT_EQ(v0.size(), 4096u);
  EXPECT_NE(v1, v0);
  EXPECT_NE(v2, v1);

  const Outcome run = replay({volume(), "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), 3u) << run.out;
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  const Outcome relocated = replay({volume(), "--range", "0..2", "--no-fixed-va", "--json"});
  EXPECT_EQ(relocated.exitCode, kExitOk) << relocated.describe();
  EXPECT_EQ(occurrences(relocated.out, "\"verdict\":\"REPRODUCED\""), 3u) << relocated.out;
  EXPECT_EQ(occurrences(relocated.out, "\"memory\":\"relocated\""), 3u) << relocated.out;
  const Outcome later = replay({volume(), "--range", "1..2", "--no-fixed-va"});
  EXPECT_EQ(later.exitCode, kExitOk) << later.describe();
  EXPECT_NE(later.out.find("2 launches: 2 REPRODUCED"), std::string::npos) << later.out;
}

TEST_F(Replay, A3DCopyFromAnArrayCannotBeReappliedAndSaysWhich) {
  const std::string path = file("volume-array.kcap");
  const uint64_t arraySeq = withCopyFromAnArray(volume(), path);
  ASSERT_NE(arraySeq, 0u);

  const Outcome run = replay({path, "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), 2u) << run.out;
  const std::string third = jsonLaunch(run.out, 2);
  EXPECT_NE(third.find("\"verdict\":\"ERROR\""), std::string::npos) << third;
  EXPECT_NE(third.find("the 3D copy at event #" + std::to_string(arraySeq) +
                       " is to or from a CUDA array, recorded without its data: replay cannot re-apply it"),
            std::string::npos)
      << third;
}

TEST_F(Replay, ADamaged3DCopyIsAnErrorAndNeverReadsPastItsRows) {
  // Depth 2 + 2^54: width * height * depth wraps around to the 2048 bytes
  // the copy holds (a multiplied check would pass and read past them).
  // The slice heights 0, so that only the size can be wrong.
  const std::string wrapped = file("volume-wrapped.kcap");
  const uint64_t wrappedSeq = rewritten(volume(), wrapped, [](kcap::schema::Event::Builder e) {
    if (!e.isMemcpy() || e.getMemcpy().getDepth() == 0 || e.getMemcpy().getData().getSize() == 0) return false;
    e.getMemcpy().setDepth(2 + (uint64_t{1} << 54));
    e.getMemcpy().setDstHeight(0);
    e.getMemcpy().setSrcHeight(0);
    return true;
  });
  ASSERT_NE(wrappedSeq, 0u);
  const Outcome run = replay({wrapped, "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  const std::string second = jsonLaunch(run.out, 1);
  EXPECT_NE(second.find("\"verdict\":\"ERROR\""), std::string::npos) << second;
  EXPECT_NE(second.find("the 3D copy at event #" + std::to_string(wrappedSeq) + " holds 2048 bytes for " +
                        std::to_string(2 + (uint64_t{1} << 54)) + " slices of 4 rows of 256"),
            std::string::npos)
      << second;

  // A slice height whose slices lie past the end of the address space.
  const std::string far = file("volume-far.kcap");
  const uint64_t farSeq = rewritten(volume(), far, [](kcap::schema::Event::Builder e) {
    if (!e.isMemcpy() || e.getMemcpy().getDepth() == 0 || e.getMemcpy().getData().getSize() == 0) return false;
    e.getMemcpy().setDstHeight(uint64_t{1} << 62);
    return true;
  });
  ASSERT_NE(farSeq, 0u);
  const Outcome farRun = replay({far, "--range", "0..2", "--json"});
  EXPECT_EQ(farRun.exitCode, kExitTrace) << farRun.describe();
  EXPECT_NE(
      jsonLaunch(farRun.out, 1)
          .find("the 3D copy at event #" + std::to_string(farSeq) + " has rows past the end of the address space"),
      std::string::npos)
      << farRun.out;
}

// ---- (e), (j) --override with a changed build ----------------------------------------------

TEST_F(Replay, OverrideWithAChangedBuildDiffersAtTheChangedElement) {
  const Outcome run = replay({directLaunch(), "--launch", "0", "--override", "axpy=" + changedAxpy()});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  const std::string line = row(run.out, 0);
  EXPECT_NE(line.find("DIFFERS"), std::string::npos) << run.out;
  EXPECT_NE(line.find("override " + changedAxpy()), std::string::npos) << run.out;
  // y is parameter 2; element 100 is the changed one: byte 400
  EXPECT_NE(run.out.find("param 2 ("), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1 of 4,000 bytes differ, first at offset 400 (0x190)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("alone: kcap replay " + directLaunch() + " --launch 0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1 launch: 1 DIFFERS"), std::string::npos) << run.out;
}

TEST_F(Replay, OverrideJsonNamesTheBufferAndTheFirstDifferingOffset) {
  const Outcome run = replay({directLaunch(), "--launch", "0", "--override", "axpy=" + changedAxpy(), "--json"});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  const std::string launch = jsonLaunch(run.out, 0);
  EXPECT_NE(launch.find("\"verdict\":\"DIFFERS\""), std::string::npos) << launch;
  EXPECT_NE(launch.find("{\"label\":\"param 1\""), std::string::npos) << launch;
  EXPECT_NE(launch.find("\"size\":4000,\"differingBytes\":0,\"firstDifferingOffset\":null"), std::string::npos)
      << launch;
  EXPECT_NE(launch.find("{\"label\":\"param 2\""), std::string::npos) << launch;
  EXPECT_NE(launch.find("\"size\":4000,\"differingBytes\":1,\"firstDifferingOffset\":400"), std::string::npos)
      << launch;
  EXPECT_EQ(launch.find("\"stats\""), std::string::npos) << launch;  // no --dtype, no statistics
  EXPECT_NE(run.out.find("\"exitCode\":3"), std::string::npos) << run.out;
  // the other launches of the kernel differ the same way; reduce_sum is untouched
  const Outcome all = replay({directLaunch(), "--override", "axpy=" + changedAxpy(), "--json"});
  EXPECT_EQ(all.exitCode, kExitDiffers) << all.describe();
  EXPECT_EQ(occurrences(all.out, "\"verdict\":\"DIFFERS\""), 3u) << all.out;
  EXPECT_EQ(occurrences(all.out, "\"verdict\":\"REPRODUCED\""), 3u) << all.out;
}

TEST_F(Replay, DtypeGivesElementStatisticsOfTheDifference) {
  const Outcome run =
      replay({directLaunch(), "--launch", "0", "--override", "axpy=" + changedAxpy(), "--dtype", "f32", "--json"});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  const std::string launch = jsonLaunch(run.out, 0);
  EXPECT_NE(launch.find("\"stats\":{\"dtype\":\"f32\",\"elements\":1000,\"mismatches\":1,"), std::string::npos)
      << launch;
  EXPECT_NE(launch.find("\"maxUlp\":1,"), std::string::npos) << launch;
  EXPECT_NE(launch.find("\"withinTolerance\":false"), std::string::npos) << launch;
  const Outcome text =
      replay({directLaunch(), "--launch", "0", "--override", "axpy=" + changedAxpy(), "--dtype", "2=f32"});
  EXPECT_NE(text.out.find("as f32: 1 of 1000 elements differ"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("max ulp 1, worst at element 100"), std::string::npos) << text.out;
  // a tolerance of one ULP accepts it
  const Outcome tolerated = replay({directLaunch(), "--launch", "0", "--override", "axpy=" + changedAxpy(), "--dtype",
                                    "f32", "--tolerance", "ulp=1", "-v"});
  EXPECT_EQ(tolerated.exitCode, kExitOk) << tolerated.describe();
  EXPECT_NE(tolerated.out.find("(within --tolerance)"), std::string::npos) << tolerated.out;
  const Outcome strict = replay({directLaunch(), "--launch", "0", "--override", "axpy=" + changedAxpy(), "--dtype",
                                 "f32", "--tolerance", "ulp=0.5"});
  EXPECT_EQ(strict.exitCode, kExitDiffers) << strict.describe();
}

TEST_F(Replay, OverrideOfAnotherKernelChangesNothing) {
  const Outcome run = replay({directLaunch(), "--launch", "3", "--override", "axpy=" + changedAxpy()});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(row(run.out, 3).find("REPRODUCED"), std::string::npos) << run.out;
}

// ---- (f) faults and hangs, contained -----------------------------------------------------------

TEST_F(Replay, AFaultingLaunchIsAFaultAndTheOthersStillReproduce) {
  const std::string path = file("fault.kcap");
  const Outcome recorded = recordWithShim(path, scenarioProgram(), {"fault"});
  ASSERT_EQ(recorded.exitCode, 3) << recorded.describe();  // the program saw its own fault
  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitFault) << run.describe();
  EXPECT_NE(row(run.out, 0).find("REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(row(run.out, 1).find("FAULT"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("launch 1 (axpy): FAULT: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << run.out;
  // the fault first: the launch after it runs in a new process and reproduces
  const Outcome after = replay({path, "--launch", "1", "--launch", "0", "--json"});
  EXPECT_EQ(after.exitCode, kExitFault) << after.describe();
  EXPECT_NE(jsonLaunch(after.out, 1).find("\"verdict\":\"FAULT\""), std::string::npos) << after.out;
  EXPECT_NE(jsonLaunch(after.out, 1).find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << after.out;
  EXPECT_NE(jsonLaunch(after.out, 0).find("\"verdict\":\"REPRODUCED\""), std::string::npos) << after.out;
  EXPECT_LT(after.out.find("\"launchIndex\":1,"), after.out.find("\"launchIndex\":0,")) << after.out;
  EXPECT_NE(after.out.find("\"exitCode\":4"), std::string::npos) << after.out;
}

TEST_F(Replay, AHangingLaunchIsAHangAfterTheTimeout) {
  const std::string path = file("hang.kcap");
  const Outcome recorded = recordWithShim(path, replayProgram(), {"hang"});
  ASSERT_EQ(recorded.signal, SIGKILL) << recorded.describe();  // its watchdog ended it
  ASSERT_NE(recorded.out.find("result before_hang"), std::string::npos) << recorded.describe();
  const auto started = std::chrono::steady_clock::now();
  const Outcome run = replay({path, "--timeout", "1", "--launch", "1", "--launch", "0"});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(run.exitCode, kExitFault) << run.describe();
  EXPECT_FALSE(run.timedOut);
  EXPECT_NE(row(run.out, 1).find("HANG"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("launch 1 (axpy): HANG: did not finish within 1 s (--timeout)"), std::string::npos) << run.out;
  EXPECT_NE(row(run.out, 0).find("REPRODUCED"), std::string::npos) << run.out;  // after the killed process
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(60));
}

// ---- (g) files that are not intact traces --------------------------------------------------------

TEST_F(Replay, ANonTraceFileIsATraceProblemNamingTheFile) {
  const std::string path = file("not-a-trace.kcap");
  kcap::test::writeFileBytes(path, std::vector<uint8_t>(4096, 'x'));
  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.err.find(path), std::string::npos) << run.describe();
  EXPECT_EQ(run.out.find("REPRODUCED"), std::string::npos) << run.out;
  const Outcome missing = replay({file("no-such.kcap")});
  EXPECT_EQ(missing.exitCode, kExitTrace) << missing.describe();
  EXPECT_NE(missing.err.find(file("no-such.kcap")), std::string::npos) << missing.describe();
}

TEST_F(Replay, ATruncatedTraceReplaysItsIntactLaunches) {
  const std::vector<uint8_t> whole = kcap::test::readFileBytes(sequence());
  ASSERT_GT(whole.size(), 1000u);
  // Cut inside the chunk that holds the last launch's end: what comes
  // before it is intact.
  const auto layout = kcap::test::walkChunks(whole);
  ASSERT_GE(layout.chunks.size(), 2u);
  const std::string path = file("truncated.kcap");
  size_t intact = 0;
  size_t cut = whole.size() * 2 / 3;
  for (; cut > 0; cut -= whole.size() / 20) {
    kcap::test::writeFileBytes(path, whole.data(), cut);
    const Outcome run = replay({path, "--json"});
    intact = occurrences(run.out, "\"verdict\":\"REPRODUCED\"");
    if (intact > 0) {
      EXPECT_NE(run.err.find("kcap: " + path + ": at byte "), std::string::npos) << run.describe();
      EXPECT_NE(run.err.find("(replaying the intact events)"), std::string::npos) << run.describe();
      EXPECT_TRUE(run.exitCode == kExitOk || run.exitCode == kExitTrace) << run.describe();
      EXPECT_EQ(run.out.find("\"verdict\":\"DIFFERS\""), std::string::npos) << run.out;
      EXPECT_TRUE(balancedJson(run.out)) << run.out;
      break;
    }
    if (cut < whole.size() / 20) {
      break;
    }
  }
  EXPECT_GT(intact, 0u) << "no cut of the trace left a launch to replay";
  EXPECT_LT(intact, 5u) << "the cut should have lost the last launches";
}

// ---- (h) usage errors --------------------------------------------------------------------

TEST_F(Replay, UsageErrorsExitTwoAndSayWhat) {
  const std::string trace = directLaunch();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{trace, "--launch", "6"}, "launch 6 is not in " + trace + " (it has 6 launches"},
      {{trace, "--launch", "99"}, "launch 99 is not in"},
      {{trace, "--dtype", "f33"}, "--dtype f33: unknown type f33"},
      {{trace, "--dtype", "x=f32"}, "expected TYPE or PARAM=TYPE"},
      {{trace, "--range", "5..2"}, "--range 5..2: expected A..B with A <= B"},
      {{trace, "--range", "2"}, "--range 2: expected A..B"},
      {{trace, "--tolerance", "1e-3"}, "--tolerance needs --dtype"},
      {{trace, "--dtype", "f32", "--tolerance", "rel=x"}, "--tolerance rel=x: expected"},
      {{trace, "--override", "axpy"}, "--override axpy: expected KERNEL=IMAGE"},
      {{trace, "--override", "(=x.cubin"}, "is not a valid regular expression"},
      {{trace, "--kernel", "no_such_kernel"}, "no launch of a kernel matching no_such_kernel"},
      {{trace, "--launch", "0", "--all"}, "choose one of --launch, --graph-launch, --kernel, --range, --all"},
      {{trace, "--timeout", "0"}, "--timeout must be positive"},
  };
  for (const auto& [args, message] : cases) {
    const Outcome run = replay(args);
    std::string joined;
    for (const auto& a : args) {
      joined += a + " ";
    }
    EXPECT_EQ(run.exitCode, kExitUsage) << joined << "\n" << run.describe();
    EXPECT_NE(run.err.find(message), std::string::npos) << joined << "\n" << run.describe();
    EXPECT_EQ(run.out.find("REPRODUCED"), std::string::npos) << joined << "\n" << run.out;
  }
  const Outcome noFile = replay({});
  EXPECT_EQ(noFile.exitCode, kExitUsage) << noFile.describe();
  const Outcome badFlag = replay({trace, "--no-such-flag"});
  EXPECT_EQ(badFlag.exitCode, kExitUsage) << badFlag.describe();
}

// ---- (k) timing --------------------------------------------------------------------------

TEST_F(Replay, RepeatTimesEachLaunch) {
  const Outcome run = replay({directLaunch(), "--launch", "0", "--launch", "3", "--repeat", "3", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  for (const uint64_t i : {0u, 3u}) {
    const std::string launch = jsonLaunch(run.out, i);
    EXPECT_NE(launch.find("\"verdict\":\"REPRODUCED\""), std::string::npos) << launch;
    const std::regex timing("\"timeNs\":\\{\"median\":([0-9]+),\"min\":([0-9]+),\"max\":([0-9]+),\"repeats\":3\\}");
    std::smatch match;
    ASSERT_TRUE(std::regex_search(launch, match, timing)) << launch;
    const auto median = std::stoull(match[1]), min = std::stoull(match[2]), max = std::stoull(match[3]);
    EXPECT_LE(min, median);
    EXPECT_LE(median, max);
  }
  const Outcome text = replay({directLaunch(), "--launch", "0", "--repeat", "3"});
  EXPECT_NE(row(text.out, 0).find(" median of 3 (min "), std::string::npos) << text.out;
  const Outcome none = replay({directLaunch(), "--launch", "0", "--json"});
  EXPECT_EQ(none.out.find("\"timeNs\""), std::string::npos) << none.out;
}

// ---- (l) a trace without memory ----------------------------------------------------------------

TEST_F(Replay, AMetadataTraceCannotBeReplayedAndSaysWhy) {
  const std::string path = file("metadata.kcap");
  recordWithKcap(path, interposeProgram("direct_launch"), {}, {{"KCAP_MODE", "metadata"}});
  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(
      occurrences(run.out, ": ERROR: the trace was recorded with --mode metadata: it holds no memory to replay from"),
      kDirectKernels.size())
      << run.out;
  EXPECT_EQ(run.out.find("REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("6 launches: 6 ERROR"), std::string::npos) << run.out;
}

// ---- what replay runs: --force-ptx, and no driver --------------------------------------------

TEST_F(Replay, ForcePtxRunsThePtxOfFatbinsAndCannotForceACubin) {
  const Outcome run = replay({directLaunch(), "--force-ptx", "--json"});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();  // the cubin launch cannot be forced
  EXPECT_NE(jsonLaunch(run.out, 0).find("\"code\":\"PTX compute_80 (forced JIT)\""), std::string::npos) << run.out;
  EXPECT_NE(jsonLaunch(run.out, 0).find("\"verdict\":\"REPRODUCED\""), std::string::npos) << run.out;
  const std::string cubin = jsonLaunch(run.out, 3);
  EXPECT_NE(cubin.find("\"verdict\":\"ERROR\""), std::string::npos) << cubin;
  EXPECT_NE(cubin.find("cubin"), std::string::npos) << cubin;
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"ERROR\""), 1u) << run.out;
}

TEST_F(Replay, WithoutADriverReplaySaysSo) {
  const Outcome run = replay({directLaunch()}, {{"KCAP_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.err.find("no CUDA driver: cannot open /nonexistent/libcuda.so.1"), std::string::npos) << run.describe();
}

}  // namespace
}  // namespace kcap_test

// ---- --check: replay-time checkers (replay_scenarios checks) --------------------------------------

namespace kcap_test {
namespace {

class Checks : public RecordedTraces<Checks> {
 protected:
  static std::string trace() { return scenario("checks"); }
  // `kcap replay --launch N --check NAME --json`: the check's JSON object.
  static std::string check(uint64_t launch, const std::string& name, int expectedExit,
                           std::vector<std::string> extra = {}, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {trace(), "--launch", std::to_string(launch), "--check", name, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Outcome run = replay(args, std::move(env));
    EXPECT_EQ(run.exitCode, expectedExit) << run.describe();
    EXPECT_TRUE(balancedJson(run.out)) << run.out;
    const std::string object = jsonLaunch(run.out, launch);
    const size_t at = object.find("{\"name\":\"" + name + "\"");
    EXPECT_NE(at, std::string::npos) << run.out;
    return at == std::string::npos ? std::string() : object.substr(at);
  }
};

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST_F(Checks, DeterminismFlagsTheRacySumAndNotAxpy) {
  const std::string racy = check(1, "determinism", kExitDiffers, {"--runs", "4"});
  EXPECT_TRUE(has(racy, "\"status\":\"finding\"")) << racy;
  EXPECT_TRUE(has(racy, "over 4 runs")) << racy;
  // sum is param 1, 4 bytes; the float's low byte varies, first at offset 0
  EXPECT_TRUE(std::regex_search(racy, std::regex("param 1 \\(0x[0-9a-f]+, 4 bytes\\): [1-4] bytes vary between runs, "
                                                 "first at offset [0-3]")))
      << racy;
  const std::string clean = check(0, "determinism", kExitOk);
  EXPECT_TRUE(has(clean, "\"status\":\"clean\"")) << clean;
  EXPECT_TRUE(has(clean, "5 runs from the same pre-state gave identical outputs")) << clean;
}

TEST_F(Checks, UnwrittenFindsTheOutputsFillEmptyLeavesAtThePoison) {
  // z's first half (512 floats) changed from 0 to x[i] = 1 + i/8: the bytes of
  // those floats that are not zero.
  uint64_t changed = 0;
  for (int i = 0; i < 512; ++i) {
    const float v = 1.0f + static_cast<float>(i) / 8.0f;
    unsigned char bytes[4];
    std::memcpy(bytes, &v, 4);
    for (const unsigned char b : bytes) {
      changed += b != 0;
    }
  }
  const std::string found = check(2, "unwritten", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "param 1 (0x")) << found;
  EXPECT_TRUE(has(found, ", 4096 bytes): " + std::to_string(changed) +
                             " bytes the recorded launch changed were left unwritten, first at offset 2"))
      << found;
  EXPECT_TRUE(has(found, "; 0 bytes written that the recording left unchanged")) << found;
  const std::string clean = check(0, "unwritten", kExitOk);
  EXPECT_TRUE(has(clean, "\"status\":\"clean\"")) << clean;
  EXPECT_TRUE(has(clean, "\"summary\":\"0 bytes the recorded launch changed were not written")) << clean;
}

TEST_F(Checks, UnwrittenFindsTheHolesSkipRowsLeaves) {
  // 1024 floats in rows of 8, elements 6 and 7 of each never written: 127
  // holes of 8 bytes before the last written element (the last row's tail
  // is past it, as a slice's would be).
  const std::string found = check(7, "unwritten", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found,
                  ", 4096 bytes): 1016 bytes never written by the launch, between bytes it writes (holes in "
                  "its output), first at offset 24"))
      << found;
  EXPECT_TRUE(has(found, "; 1016 bytes never written between bytes it writes; ")) << found;
}

TEST_F(Checks, UninitPoisonsThePaddingNobodyWrote) {
  const std::string found = check(3, "uninit", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "when 4096 never-written bytes were poisoned")) << found;
  EXPECT_TRUE(has(found, "poisoned param 0 (0x")) << found;
  EXPECT_TRUE(has(found, ", 8192 bytes): 4096 never-written bytes, first at offset 4096")) << found;
  EXPECT_TRUE(std::regex_search(found, std::regex("param 1 \\(0x[0-9a-f]+, 4096 bytes\\): [0-9]+ bytes of output "
                                                  "changed with 0xFF \\(NaN\\), first at offset 0")))
      << found;
  // 0 * NaN is NaN, 0 * a large finite value is 0: NaN changes it, the
  // large values do not (random bytes may, when they make a NaN or an infinity).
  EXPECT_TRUE(has(found, "(changed with 0xFF (NaN)")) << found;
  EXPECT_FALSE(has(found, "0x7B (large positive)")) << found;
  // axpy's x and y were copied in whole: nothing to poison
  const std::string clean = check(0, "uninit", kExitOk);
  EXPECT_TRUE(has(clean, "every byte of the pre-state was written before the launch")) << clean;
}

// A max ignores a NaN: the padding it reads shows with large finite values.
TEST_F(Checks, UninitFindsThePaddingAMaxReadsWhereNaNAloneWouldNot) {
  const std::string found = check(8, "uninit", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "when 4096 never-written bytes were poisoned")) << found;
  EXPECT_FALSE(has(found, "changed with 0xFF (NaN)")) << found;
  EXPECT_TRUE(has(found, "0x7B (large positive)")) << found;
  EXPECT_TRUE(std::regex_search(found, std::regex("param 1 \\(0x[0-9a-f]+, 4096 bytes\\): [0-9]+ bytes of output "
                                                  "changed with 0x7B \\(large positive\\), first at offset 0")))
      << found;
}

TEST_F(Checks, AliasFindsAddFirstInPlaceButNotAxpyInPlace) {
  const std::string found = check(4, "alias", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "params 0 (+0) 1 (+0) point into one written range")) << found;
  EXPECT_TRUE(has(found, "with param 0 given a separate copy: param 0 (0x")) << found;
  EXPECT_TRUE(has(found, "of output differ, first at offset")) << found;
  const std::string safe = check(5, "alias", kExitOk);
  EXPECT_TRUE(has(safe, "\"status\":\"clean\"")) << safe;
  EXPECT_TRUE(has(safe, "1 aliased range(s); the outputs do not change when the parameters are separated")) << safe;
  const std::string none = check(0, "alias", kExitOk);
  EXPECT_TRUE(has(none, "no two pointer parameters point into one range the launch writes")) << none;
}

TEST_F(Checks, OverrunFaultsAgainstTheGuardForSumNextOnly) {
  const std::string found = check(6, "overrun", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "access past the end of an allocation")) << found;
  EXPECT_TRUE(has(found, "CUDA_ERROR_ILLEGAL_ADDRESS")) << found;
  EXPECT_TRUE(has(found, "candidate: param 0 -> 0x")) << found;
  EXPECT_TRUE(has(found, ", 4096 bytes (+0), 0 bytes of slack before the guard")) << found;
  const std::string clean = check(0, "overrun", kExitOk);
  EXPECT_TRUE(has(clean, "\"status\":\"clean\"")) << clean;
  EXPECT_TRUE(has(clean, "no fault with 2 range(s) ending against unmapped memory")) << clean;
}

// Overruns too small for the guard (a 4000-byte buffer ends 96 bytes before
// it): the slack filled with two patterns tells a read, a changed slack a write.
TEST_F(Checks, OverrunFindsAReadAndAWriteInsideTheSlack) {
  const std::string read = check(9, "overrun", kExitDiffers);
  EXPECT_TRUE(has(read, "\"status\":\"finding\"")) << read;
  EXPECT_TRUE(has(read, "inside the 96 bytes of slack before the guard at most")) << read;
  EXPECT_TRUE(has(read, "the outputs differ when the slack holds 0xFF or 0x7B (a read past the end)")) << read;
  EXPECT_TRUE(std::regex_search(read, std::regex("param 1 \\(0x[0-9a-f]+, 4000 bytes\\): [1-4] bytes of output differ "
                                                 "between the two fills, first at offset 399[6-9]")))
      << read;
  EXPECT_FALSE(has(read, "written past the end")) << read;
  const std::string written = check(10, "overrun", kExitDiffers);
  EXPECT_TRUE(has(written, "\"status\":\"finding\"")) << written;
  EXPECT_TRUE(has(written, "the slack was written (a write past the end)")) << written;
  EXPECT_TRUE(has(written, "4 bytes written past the end of 0x")) << written;
  EXPECT_TRUE(has(written, " (4000 bytes), the first 0 bytes past it")) << written;
  EXPECT_FALSE(has(written, "a read past the end")) << written;
  // axpy's 4096-byte ranges leave no slack; pad_scale's 8192-byte x neither.
  const std::string clean = check(3, "overrun", kExitOk);
  EXPECT_TRUE(has(clean, "\"status\":\"clean\"")) << clean;
}

TEST_F(Checks, SanitizerNotFoundIsNotRunAndItsSummaryIsRead) {
  const std::string missing = check(0, "sanitizer", kExitOk, {}, {{"KCAP_COMPUTE_SANITIZER", "/nonexistent"}});
  EXPECT_TRUE(has(missing, "\"status\":\"not-run\"")) << missing;
  EXPECT_TRUE(has(missing, "compute-sanitizer not found")) << missing;
  const std::string fake = file("compute-sanitizer");
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\n"
              "case \"$2\" in memcheck) echo '========= Invalid __global__ read of size 4 bytes';"
              " echo '========= ERROR SUMMARY: 2 errors'; exit 9;;\n"
              "*) echo '========= ERROR SUMMARY: 0 errors'; exit 0;; esac\n";
  }
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  const std::string found = check(0, "sanitizer", kExitDiffers, {}, {{"KCAP_COMPUTE_SANITIZER", fake}});
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "memcheck: 2 error(s); racecheck: 0 error(s); initcheck: 0 error(s)")) << found;
  EXPECT_TRUE(has(found, "memcheck: Invalid __global__ read of size 4 bytes")) << found;
}

TEST_F(Checks, UsageErrors) {
  const Outcome unknown = replay({trace(), "--check", "everything"});
  EXPECT_EQ(unknown.exitCode, kExitUsage) << unknown.describe();
  EXPECT_TRUE(has(unknown.err, "--check everything: unknown checker")) << unknown.err;
  const Outcome range = replay({trace(), "--range", "0..2", "--check", "unwritten"});
  EXPECT_EQ(range.exitCode, kExitUsage) << range.describe();
  EXPECT_TRUE(has(range.err, "--check unwritten replays each launch again from its own pre-state")) << range.err;
  EXPECT_TRUE(has(range.err, "with --range only --check determinism")) << range.err;
}

TEST_F(Checks, DeterminismOverARangeReplaysTheWholeSequenceAndFlagsTheRacyLaunch) {
  // Launches 0..2 of the checks scenario: axpy, racy_sum, fill_empty, as a
  // sequence replayed 4 times.
  const Outcome run = replay({trace(), "--range", "0..2", "--check", "determinism", "--runs", "4", "--json"});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  const std::string racy = jsonLaunch(run.out, 1);
  EXPECT_TRUE(has(racy, "\"name\":\"determinism\",\"status\":\"finding\"")) << racy;
  EXPECT_TRUE(has(racy, "vary over 4 runs of the 3-launch sequence")) << racy;
  EXPECT_TRUE(std::regex_search(racy, std::regex("param 1 \\(0x[0-9a-f]+, 4 bytes\\): [1-4] bytes vary between runs, "
                                                 "first at offset [0-3]")))
      << racy;
  for (const uint64_t clean : {0u, 2u}) {
    const std::string launch = jsonLaunch(run.out, clean);
    EXPECT_TRUE(has(launch, "\"name\":\"determinism\",\"status\":\"clean\"")) << launch;
    EXPECT_TRUE(has(launch, "4 runs of the 3-launch sequence gave identical outputs")) << launch;
  }
}

}  // namespace
}  // namespace kcap_test
