#include "capture_options.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <map>
#include <string>

namespace kcap {
namespace {

std::optional<CaptureOptions> read(const std::map<std::string, std::string>& vars) {
  return readCaptureOptions([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it != vars.end() ? it->second.c_str() : nullptr;
  });
}

std::string errorOf(const std::map<std::string, std::string>& vars) {
  try {
    read(vars);
  } catch (const OptionError& e) {
    return e.what();
  }
  return "";
}

TEST(CaptureOptions, OffWithoutOutput) {
  EXPECT_FALSE(read({}).has_value());
  EXPECT_FALSE(read({{"KCAP_OUTPUT", ""}, {"KCAP_MODE", "nonsense"}}).has_value());
}

TEST(CaptureOptions, Defaults) {
  const auto options = read({{"KCAP_OUTPUT", "t.kcap"}});
  ASSERT_TRUE(options);
  EXPECT_EQ(options->mode, CaptureMode::kFull);
  EXPECT_EQ(options->skip, 0u);
  EXPECT_EQ(options->maxLaunches, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(options->zstdLevel, 1);
  EXPECT_EQ(options->pieceSize, 1u << 20);
  EXPECT_EQ(options->bufferBytes, uint64_t{256} << 20);
  EXPECT_EQ(options->flush, FlushPolicy::kLaunch);
  EXPECT_TRUE(options->selects("anything"));
}

TEST(CaptureOptions, EverySetting) {
  const auto options = read({{"KCAP_OUTPUT", "t.kcap"},
                             {"KCAP_MODE", "metadata"},
                             {"KCAP_INCLUDE", "gemm|attn"},
                             {"KCAP_EXCLUDE", "^nccl"},
                             {"KCAP_SKIP", "10"},
                             {"KCAP_MAX_LAUNCHES", "5"},
                             {"KCAP_LEVEL", "-3"},
                             {"KCAP_PIECE_SIZE", "4MiB"},
                             {"KCAP_BUFFER", "8G"},
                             {"KCAP_FLUSH", "batch"}});
  ASSERT_TRUE(options);
  EXPECT_EQ(options->mode, CaptureMode::kMetadata);
  EXPECT_EQ(options->skip, 10u);
  EXPECT_EQ(options->maxLaunches, 5u);
  EXPECT_EQ(options->zstdLevel, -3);
  EXPECT_EQ(options->pieceSize, 4u << 20);
  EXPECT_EQ(options->bufferBytes, uint64_t{8} << 30);
  EXPECT_EQ(options->flush, FlushPolicy::kBatch);
  EXPECT_TRUE(options->selects("sm90_gemm_kernel"));  // search, not full match
  EXPECT_TRUE(options->selects("flash_attn_fwd"));
  EXPECT_FALSE(options->selects("ncclKernel_gemm"));  // excluded wins
  EXPECT_FALSE(options->selects("elementwise_add"));  // not included
  EXPECT_EQ(read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "pre"}})->mode, CaptureMode::kPreOnly);
}

TEST(CaptureOptions, InvalidValuesNameTheVariableAndValue) {
  EXPECT_EQ(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "all"}}),
            "KCAP_MODE=\"all\": expected full, pre, metadata or checkpoint");
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_INCLUDE", "(unclosed"}})
                .find("KCAP_INCLUDE=\"(unclosed\": not a valid regular expression"),
            std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_EXCLUDE", "[z-a]"}}).find("KCAP_EXCLUDE"), std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_SKIP", "-1"}}).find("KCAP_SKIP=\"-1\""), std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MAX_LAUNCHES", "10x"}}).find("KCAP_MAX_LAUNCHES"), std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_LEVEL", "23"}}).find("KCAP_LEVEL=\"23\""), std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_PIECE_SIZE", "1000"}}).find("KCAP_PIECE_SIZE"), std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_PIECE_SIZE", "128M"}}).find("KCAP_PIECE_SIZE"), std::string::npos);
  EXPECT_NE(
      errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_BUFFER", "32M"}}).find("KCAP_BUFFER=\"32M\": expected a size from 64M"),
      std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_BUFFER", "2T"}}).find("KCAP_BUFFER"), std::string::npos);
  EXPECT_EQ(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_FLUSH", "never"}}),
            "KCAP_FLUSH=\"never\": expected launch (each launch's record in the file before it runs) or batch");
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t-%x"}}).find("KCAP_OUTPUT=\"t-%x\": unknown placeholder %x"), std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t%"}}).find("lone '%'"), std::string::npos);
}

TEST(CaptureOptions, TimingIsOneOrZero) {
  EXPECT_FALSE(read({{"KCAP_OUTPUT", "t"}})->timing);
  EXPECT_FALSE(read({{"KCAP_OUTPUT", "t"}, {"KCAP_TIMING", ""}})->timing);
  EXPECT_FALSE(read({{"KCAP_OUTPUT", "t"}, {"KCAP_TIMING", "0"}})->timing);
  const auto on = read({{"KCAP_OUTPUT", "t"}, {"KCAP_TIMING", "1"}});
  ASSERT_TRUE(on);
  EXPECT_TRUE(on->timing);
  const auto described = on->describe();
  EXPECT_NE(std::find(described.begin(), described.end(), std::make_pair(std::string("timing"), std::string("on"))),
            described.end());
  EXPECT_EQ(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_TIMING", "yes"}}),
            "KCAP_TIMING=\"yes\": expected 1 (record GPU durations) or 0");
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_TIMING", "2"}}).find("KCAP_TIMING"), std::string::npos);
  EXPECT_NE(std::find(captureVariables().begin(), captureVariables().end(), std::string_view("KCAP_TIMING")),
            captureVariables().end());
}

TEST(CaptureOptions, HashIsDeviceOrHost) {
  EXPECT_TRUE(read({{"KCAP_OUTPUT", "t"}})->hashOnDevice);
  EXPECT_TRUE(read({{"KCAP_OUTPUT", "t"}, {"KCAP_HASH", "device"}})->hashOnDevice);
  const auto host = read({{"KCAP_OUTPUT", "t"}, {"KCAP_HASH", "host"}});
  ASSERT_TRUE(host);
  EXPECT_FALSE(host->hashOnDevice);
  const auto described = host->describe();
  EXPECT_NE(std::find(described.begin(), described.end(), std::make_pair(std::string("hash"), std::string("host"))),
            described.end());
  EXPECT_EQ(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_HASH", "gpu"}}),
            "KCAP_HASH=\"gpu\": expected device (hash large ranges where they lie first) or host");
  EXPECT_NE(std::find(captureVariables().begin(), captureVariables().end(), std::string_view("KCAP_HASH")),
            captureVariables().end());
}

TEST(CaptureOptions, OutputPlaceholders) {
  EXPECT_EQ(expandOutputPath("run-%p-%h-%r.kcap", 42, "gpu7", "3"), "run-42-gpu7-3.kcap");
  EXPECT_EQ(expandOutputPath("100%%-%p", 7, "h", "0"), "100%-7");
  EXPECT_TRUE(outputHasPid("a/%p.kcap"));
  EXPECT_FALSE(outputHasPid("a/%%p.kcap"));
  EXPECT_FALSE(outputHasPid("a.kcap"));
  EXPECT_EQ(withPidSuffix("dir/trace.kcap", 12), "dir/trace.12.kcap");
  EXPECT_EQ(withPidSuffix("dir.d/trace", 12), "dir.d/trace.12");
  EXPECT_EQ(withPidSuffix(".hidden", 12), ".hidden.12");
}

TEST(CaptureOptions, RankFromTheFirstVariableSet) {
  const auto rank = [](std::map<std::string, std::string> vars) {
    return rankFromEnvironment([&](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it != vars.end() ? it->second.c_str() : nullptr;
    });
  };
  EXPECT_EQ(rank({}), "0");
  EXPECT_EQ(rank({{"OMPI_COMM_WORLD_RANK", "5"}}), "5");
  EXPECT_EQ(rank({{"SLURM_PROCID", "4"}, {"OMPI_COMM_WORLD_RANK", "5"}}), "4");
  EXPECT_EQ(rank({{"LOCAL_RANK", "1"}, {"SLURM_PROCID", "4"}}), "1");
  EXPECT_EQ(rank({{"RANK", "9"}, {"LOCAL_RANK", "1"}}), "9");
  EXPECT_EQ(rank({{"RANK", ""}, {"LOCAL_RANK", "1"}}), "1");
}

TEST(CaptureOptions, ByteCounts) {
  EXPECT_EQ(parseByteCount("4096"), 4096u);
  EXPECT_EQ(parseByteCount("64K"), 64u << 10);
  EXPECT_EQ(parseByteCount("2MiB"), 2u << 20);
  EXPECT_EQ(parseByteCount("1g"), 1ull << 30);
  EXPECT_EQ(parseByteCount("3MB"), 3u << 20);
  EXPECT_FALSE(parseByteCount(""));
  EXPECT_FALSE(parseByteCount("K"));
  EXPECT_FALSE(parseByteCount("12Q"));
  EXPECT_FALSE(parseByteCount("1Kb"));
  EXPECT_FALSE(parseByteCount("99999999999999999999"));
}

TEST(CaptureOptions, CheckpointIntervalIsADurationOrALaunchCount) {
  const auto defaults = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->mode, CaptureMode::kCheckpoint);
  EXPECT_EQ(defaults->checkpointEveryNs, 1'000'000'000u);
  EXPECT_EQ(defaults->checkpointEveryLaunches, 0u);
  const auto ms = read({{"KCAP_OUTPUT", "t"}, {"KCAP_CHECKPOINT_EVERY", "250ms"}});
  EXPECT_EQ(ms->checkpointEveryNs, 250'000'000u);
  EXPECT_EQ(read({{"KCAP_OUTPUT", "t"}, {"KCAP_CHECKPOINT_EVERY", "2m"}})->checkpointEveryNs, 120'000'000'000u);
  const auto launches = read({{"KCAP_OUTPUT", "t"}, {"KCAP_CHECKPOINT_EVERY", "1000launches"}});
  EXPECT_EQ(launches->checkpointEveryLaunches, 1000u);
  EXPECT_EQ(launches->checkpointEveryNs, 0u);
  for (const char* bad : {"0s", "10", "1h", "s", "-1s", "99999999999999999999s", "30000000000m"}) {
    EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_CHECKPOINT_EVERY", bad}})
                  .find(std::string("KCAP_CHECKPOINT_EVERY=\"") + bad + "\": expected a nonzero duration"),
              std::string::npos)
        << bad;
  }
}

TEST(CaptureOptions, TriggersAndRing) {
  const auto none = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}});
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->triggers.any());
  EXPECT_EQ(none->ringCheckpoints, 2u);
  const auto all = read({{"KCAP_OUTPUT", "t"},
                         {"KCAP_MODE", "checkpoint"},
                         {"KCAP_TRIGGER", "error,signal,exit,hang=30,api"},
                         {"KCAP_RING", "4"}});
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->triggers.error);
  EXPECT_TRUE(all->triggers.signal);
  EXPECT_TRUE(all->triggers.exit);
  EXPECT_TRUE(all->triggers.api);
  EXPECT_EQ(all->triggers.hangSeconds, 30u);
  EXPECT_EQ(all->triggers.text(), "error,signal,exit,hang=30,api");
  EXPECT_EQ(all->ringCheckpoints, 4u);
  const auto api = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_TRIGGER", "api"}});
  EXPECT_TRUE(api->triggers.api);
  EXPECT_FALSE(api->triggers.error);
  EXPECT_EQ(api->triggers.hangSeconds, 0u);

  // The bad item is named.
  for (const char* bad : {"oom", "hang", "hang=0", "hang=x", "hang=-1", "error,", "error,,api"}) {
    const std::string error = errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_TRIGGER", bad}});
    EXPECT_NE(error.find("is not a trigger"), std::string::npos) << bad << ": " << error;
  }
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_TRIGGER", "error,oom"}})
                .find("'oom' is not a trigger"),
            std::string::npos);
  // The ring is cut at checkpoints.
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "metadata"}, {"KCAP_TRIGGER", "api"}})
                .find("triggers need KCAP_MODE=checkpoint"),
            std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_TRIGGER", "api"}}).find("triggers need KCAP_MODE=checkpoint"),
            std::string::npos);
  for (const char* bad : {"0", "x", "-2", "1001"}) {
    EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_RING", bad}})
                  .find(std::string("KCAP_RING=\"") + bad + "\": expected a number of checkpoints"),
              std::string::npos)
        << bad;
  }
  // The ring file: 8G unless set, 0 for none.
  EXPECT_EQ(none->ringDiskBytes, uint64_t{8} << 30);
  const auto disk = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_RING_DISK", "32G"}});
  ASSERT_TRUE(disk);
  EXPECT_EQ(disk->ringDiskBytes, uint64_t{32} << 30);
  const auto noDisk = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_RING_DISK", "0"}});
  ASSERT_TRUE(noDisk);
  EXPECT_EQ(noDisk->ringDiskBytes, 0u);
  for (const char* bad : {"x", "512K", "-1", "65537G", "1T"}) {
    EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_RING_DISK", bad}})
                  .find(std::string("KCAP_RING_DISK=\"") + bad + "\": expected 0 (no ring file) or a size"),
              std::string::npos)
        << bad;
  }
}

// The read-back memory of checkpoint mode: 256M unless set, 0 for none
// (every NCCL call and copy from another device waited for).
TEST(CaptureOptions, ReadbackMemory) {
  const auto plain = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->readbackBytes, uint64_t{256} << 20);
  const auto more = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_READBACK", "2G"}});
  ASSERT_TRUE(more);
  EXPECT_EQ(more->readbackBytes, uint64_t{2} << 30);
  const auto none = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_READBACK", "0"}});
  ASSERT_TRUE(none);
  EXPECT_EQ(none->readbackBytes, 0u);
  for (const char* bad : {"x", "-1", "65G", "1T"}) {
    EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_READBACK", bad}})
                  .find(std::string("KCAP_READBACK=\"") + bad + "\": expected a size up to 64G"),
              std::string::npos)
        << bad;
  }
}

// The device the checkpoints hold: checkpoint mode only, an ordinal.
TEST(CaptureOptions, CheckpointDevice) {
  const auto plain = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->checkpointDevice, -1);
  const auto chosen = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_CHECKPOINT_DEVICE", "3"}});
  ASSERT_TRUE(chosen);
  EXPECT_EQ(chosen->checkpointDevice, 3);
  for (const char* bad : {"x", "-1", "1024", "1.5"}) {
    EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}, {"KCAP_CHECKPOINT_DEVICE", bad}})
                  .find(std::string("KCAP_CHECKPOINT_DEVICE=\"") + bad + "\": expected a device ordinal"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "metadata"}, {"KCAP_CHECKPOINT_DEVICE", "1"}})
                .find("applies to KCAP_MODE=checkpoint (the mode is metadata)"),
            std::string::npos);
}

// The writer's threads at idle priority: metadata and checkpoint modes only.
TEST(CaptureOptions, WriterPriority) {
  const auto plain = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "checkpoint"}});
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->idleWriter);
  for (const char* mode : {"metadata", "checkpoint"}) {
    const auto idle = read({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", mode}, {"KCAP_WRITER_PRIORITY", "idle"}});
    ASSERT_TRUE(idle) << mode;
    EXPECT_TRUE(idle->idleWriter) << mode;
  }
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_MODE", "full"}, {"KCAP_WRITER_PRIORITY", "idle"}})
                .find("KCAP_WRITER_PRIORITY=\"idle\": cannot be used with KCAP_MODE=full"),
            std::string::npos);
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_WRITER_PRIORITY", "low"}}).find("expected normal or idle"),
            std::string::npos);
}

// The writer's CPUs: a taskset-style list of CPUs the process may run on.
TEST(CaptureOptions, WriterCpus) {
  cpu_set_t own;
  CPU_ZERO(&own);
  ASSERT_EQ(sched_getaffinity(0, sizeof own, &own), 0);
  std::vector<unsigned> allowed;
  for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &own)) allowed.push_back(cpu);
  }
  ASSERT_FALSE(allowed.empty());
  const std::string first = std::to_string(allowed.front());
  const std::string last = std::to_string(allowed.back());

  const auto plain = read({{"KCAP_OUTPUT", "t"}});
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->writerCpus.empty());
  for (const char* mode : {"metadata", "checkpoint", "full"}) {
    // Repeated and overlapping items count once, in order.
    const auto placed = read({{"KCAP_OUTPUT", "t"},
                              {"KCAP_MODE", mode},
                              {"KCAP_WRITER_CPUS", last + "," + first + "-" + first + "," + last}});
    ASSERT_TRUE(placed) << mode;
    std::vector<unsigned> expected{allowed.front()};
    if (allowed.back() != allowed.front()) expected.push_back(allowed.back());
    EXPECT_EQ(placed->writerCpus, expected) << mode;
  }
  const auto range = read({{"KCAP_OUTPUT", "t"}, {"KCAP_WRITER_CPUS", first + "-" + first}});
  ASSERT_TRUE(range);
  EXPECT_EQ(range->writerCpus, std::vector<unsigned>{allowed.front()});

  for (const std::string bad : {"x", "1,", ",1", "3-1", "-1", "1-", "0x1", "1 2"}) {
    EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_WRITER_CPUS", bad}}).find("is not a CPU or a range of CPUs"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_WRITER_CPUS", "99999"}}).find("past the last one Linux numbers"),
            std::string::npos);
  // A CPU outside the process's affinity is refused, naming the ones it has.
  unsigned outside = 0;
  while (outside < CPU_SETSIZE && CPU_ISSET(outside, &own)) ++outside;
  if (outside < CPU_SETSIZE) {
    const std::string error = errorOf({{"KCAP_OUTPUT", "t"}, {"KCAP_WRITER_CPUS", std::to_string(outside)}});
    EXPECT_NE(error.find("CPU " + std::to_string(outside) + " is not one this process may run on"), std::string::npos)
        << error;
    EXPECT_NE(error.find("the process's CPUs: " + first), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace kcap
