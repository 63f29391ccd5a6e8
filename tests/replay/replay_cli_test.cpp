// `kcap replay` end to end, without a GPU: programs are recorded with
// `kcap record` (or the shim and KCAP_OUTPUT, for programs that die) against
// the driver double, then replayed by `kcap replay` in a child process with
// KCAP_LIBCUDA naming the double. Checks verdicts, both memory paths,
// --override, faults and hangs, damaged traces, usage errors, the JSON
// report and the exit codes; replay_sequence_test.cpp goes on with
// sequences, replay_checks_test.cpp with --check.
#include "replay_cli.h"
#include "trace_files.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::replay_cli;  // the replay tests' shared helpers (replay_cli.h)

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
