// `kcap replay` on checkpoint traces (--mode checkpoint), against the driver
// double: traces written here with TraceWriter (axpy from kernels/, two
// buffers, checkpoints whose change hashes are computed with
// format::changeHash over the bytes stored), re-executed by `kcap replay`
// with KCAP_LIBCUDA naming the double, whose kcap_change_hash is the host
// reference. Checks the interval verdicts, the damage paths, --launch N and
// the exit codes.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "change_hash.h"
#include "checkpoints.h"
#include "hash.h"
#include "kcap.capnp.h"
#include "process_runner.h"
#include "sample_trace.h"
#include "trace_files.h"
#include "trace_writer.h"

namespace kcap_test {
namespace {

using kcap::schema::Event;

constexpr int kExitOk = 0, kExitTrace = 1, kExitUsage = 2, kExitDiffers = 3;
constexpr uint64_t kX = 0x7e1000000000ull;  // two granules apart: two groups
constexpr uint64_t kY = 0x7e1000400000ull;
constexpr uint64_t kHost = 0x7f3a12340000ull;  // page-locked host memory the device reads
constexpr uint64_t kModule = 0x55d0c8a10000ull, kFunction = 0x55d0c8a1f1a0ull, kNcclKernel = 0x55d0c8a1f2b0ull;
constexpr uint64_t kChecksModule = 0x55d0c8a20000ull, kRacySum = 0x55d0c8a2f1a0ull;
constexpr uint64_t kConstantModule = 0x55d0c8a30000ull, kPolyEval = 0x55d0c8a3f1a0ull;
constexpr uint64_t kCoeffs = 0x7e2000000000ull, kCallCount = 0x7e2000000100ull;  // where the recording had them
constexpr uint32_t kElements = 4096;  // 16 KiB a buffer: 4 pieces of 4 KiB (the smallest piece)
constexpr uint32_t kPieceSize = 4096;
constexpr float kAlpha = 2.0f;  // a * x + y exact in float: no rounding to argue about

std::vector<uint8_t> bytesOf(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// What a checkpoint holds of one buffer, and how to spoil it.
struct RangeSpec {
  uint64_t address;
  std::vector<uint8_t> bytes;
  int wrongHashPiece = -1;   // this piece's recorded change hash is off by one
  bool storeBlobs = true;    // false: the pieces are named, not stored
  bool shortHashes = false;  // one change hash too few
};

class CheckpointTrace {
 public:
  explicit CheckpointTrace(const std::string& path) {
    kcap::format::TraceWriter::Options options;
    options.pieceSize = kPieceSize;
    options.batchBytes = 256;  // small record chunks: a cut file keeps the early events
    writer_ = kcap::format::TraceWriter::create(path, options);
    emit([](Event::Builder e) {
      auto b = e.initTraceBegin();
      b.setCaptureMode(kcap::schema::CaptureMode::CHECKPOINT);
      b.setKcapVersion("test");
    });
    const std::vector<uint8_t> image = kcap::test::readFileBytes(kcap::test::defaultKernelsDir() + "/axpy.fatbin");
    emit([&](Event::Builder e) {
      auto m = e.initModuleLoad();
      m.setHandle(kModule);
      m.setApi(kcap::schema::LoadApi::MODULE_LOAD_DATA);
      m.setImageKind(kcap::schema::ImageKind::FATBIN);
      writer_->storeContent(image.data(), image.size(), m.initImage());
    });
    bind(kFunction, kModule, "axpy");
    // kernels/checks.cu: racy_sum(x, y, n) adds x into y[0] in an order that changes from call to call.
    const std::vector<uint8_t> checks = kcap::test::readFileBytes(kcap::test::defaultKernelsDir() + "/checks.fatbin");
    emit([&](Event::Builder e) {
      auto m = e.initModuleLoad();
      m.setHandle(kChecksModule);
      m.setApi(kcap::schema::LoadApi::MODULE_LOAD_DATA);
      m.setImageKind(kcap::schema::ImageKind::FATBIN);
      writer_->storeContent(checks.data(), checks.size(), m.initImage());
    });
    bind(kRacySum, kChecksModule, "racy_sum");
    // kernels/constant.cu: poly_eval(x, y, n) reads the __constant__ coeffs
    // and adds its block count to the __device__ call_count.
    const std::vector<uint8_t> constant =
        kcap::test::readFileBytes(kcap::test::defaultKernelsDir() + "/constant.fatbin");
    emit([&](Event::Builder e) {
      auto m = e.initModuleLoad();
      m.setHandle(kConstantModule);
      m.setApi(kcap::schema::LoadApi::MODULE_LOAD_DATA);
      m.setImageKind(kcap::schema::ImageKind::FATBIN);
      writer_->storeContent(constant.data(), constant.size(), m.initImage());
      auto globals = m.initGlobals(2);
      globals[0].setName("coeffs");
      globals[0].setAddress(kCoeffs);
      globals[0].setSize(16 * sizeof(float));
      globals[1].setName("call_count");
      globals[1].setAddress(kCallCount);
      globals[1].setSize(sizeof(int32_t));
    });
    bind(kPolyEval, kConstantModule, "poly_eval");
    for (const uint64_t address : {kX, kY}) {
      emit([&](Event::Builder e) {
        auto a = e.initAlloc();
        a.setKind(kcap::schema::AllocKind::MEM_ALLOC);
        a.setAddress(address);
        a.setSize(kElements * sizeof(float));
      });
    }
  }

  // The device the next checkpoints say they hold.
  void checkpointDevice(int32_t device) { device_ = device; }

  // `timeNs` and `holdNs`: when the recording took it and how long it held the program.
  void checkpoint(uint64_t launchCount, const std::vector<RangeSpec>& ranges, int32_t result = 0, uint64_t timeNs = 0,
                  uint64_t holdNs = 0) {
    emit([&](Event::Builder e) {
      e.setTimeNs(timeNs);
      auto c = e.initCheckpoint();
      c.setHoldNs(holdNs);
      c.setOrdinal(checkpoints_++);
      c.setLaunchCount(launchCount);
      c.setResult(result);
      c.setDevice(device_);
      auto list = c.initRanges(static_cast<unsigned>(ranges.size()));
      for (unsigned i = 0; i < ranges.size(); ++i) {
        const RangeSpec& spec = ranges[i];
        list[i].setAddress(spec.address);
        list[i].setAllocationBase(spec.address);
        list[i].setKind(spec.address == kCoeffs || spec.address == kCallCount ? kcap::schema::MemoryKind::MODULE_GLOBAL
                                                                              : kcap::schema::MemoryKind::ALLOCATION);
        const uint64_t pieces = (spec.bytes.size() + kPieceSize - 1) / kPieceSize;
        if (spec.storeBlobs) {
          writer_->storeContent(spec.bytes.data(), spec.bytes.size(), list[i].initContent());
        } else {
          auto content = list[i].initContent();
          content.setSize(spec.bytes.size());
          content.setPieceSize(kPieceSize);
          auto names = content.initPieces(static_cast<unsigned>(pieces));
          for (unsigned p = 0; p < pieces; ++p) {
            const auto hash = kcap::format::contentHash(
                spec.bytes.data() + p * kPieceSize, std::min<size_t>(kPieceSize, spec.bytes.size() - p * kPieceSize));
            names[p].setHigh(hash.high);
            names[p].setLow(hash.low);
          }
        }
        std::vector<uint8_t> hashes(16 * pieces);
        for (uint64_t p = 0; p < pieces; ++p) {
          const uint64_t length = std::min<uint64_t>(kPieceSize, spec.bytes.size() - p * kPieceSize);
          auto hash = kcap::format::changeHash(spec.bytes.data() + p * kPieceSize, length);
          if (static_cast<int>(p) == spec.wrongHashPiece) hash.low += 1;
          std::memcpy(hashes.data() + 16 * p, &hash.high, 8);
          std::memcpy(hashes.data() + 16 * p + 8, &hash.low, 8);
        }
        if (spec.shortHashes) hashes.resize(hashes.size() - 16);
        list[i].setChangeHashes(kj::arrayPtr(hashes.data(), hashes.size()));
      }
    });
    writer_->flush();
  }

  // axpy(kAlpha, x, y, kElements), as recorded in checkpoint mode: no memory.
  void axpy(uint64_t y = kY) {
    std::vector<uint8_t> params(32, 0);
    const int32_t n = kElements;
    std::memcpy(params.data(), &kAlpha, 4);
    std::memcpy(params.data() + 8, &kX, 8);
    std::memcpy(params.data() + 16, &y, 8);
    std::memcpy(params.data() + 24, &n, 4);
    launch(kFunction, "axpy", params, {{0, 4}, {8, 8}, {16, 8}, {24, 4}}, {{8, kX}, {16, y}});
  }

  // axpy(kAlpha, kHost, y, kElements): x is page-locked host memory that
  // held `x` when the launch ran, logged with the launch as checkpoint mode
  // does (its `pre`, kind hostMapped).
  void axpyFromHost(const std::vector<uint8_t>& x) {
    if (!hostAllocated_) {
      emit([](Event::Builder e) {
        auto a = e.initAlloc();
        a.setKind(kcap::schema::AllocKind::HOST_ALLOC);
        a.setAddress(kHost);
        a.setSize(kElements * sizeof(float));
      });
      hostAllocated_ = true;
    }
    std::vector<uint8_t> params(32, 0);
    const int32_t n = kElements;
    std::memcpy(params.data(), &kAlpha, 4);
    std::memcpy(params.data() + 8, &kHost, 8);
    std::memcpy(params.data() + 16, &kY, 8);
    std::memcpy(params.data() + 24, &n, 4);
    launch(kFunction, "axpy", params, {{0, 4}, {8, 8}, {16, 8}, {24, 4}}, {{8, kHost}, {16, kY}}, &x);
  }

  // An NCCL all-reduce of y in place (the name NCCL gives such a kernel,
  // bound in axpy's module, which does not have it: it is never loaded).
  // Launched by an ncclAllReduce call the shim saw (Launch.collectiveCall)
  // when `logged` or `missing` is given: a Collective event follows, with
  // what the call wrote on this rank, or with why that is not logged.
  // As ncclAllReduce, its bytes read back later (Collective.dataDeferred):
  // returns the Collective's seq, for writtenData.
  uint64_t ncclAllReduceReadBackLater() {
    deferred_ = true;
    ncclAllReduce(nullptr, "");
    deferred_ = false;
    return lastSeq_;
  }

  // The read-back of the event numbered `of`: `logged`, or why not.
  void writtenData(uint64_t of, const std::vector<float>* logged, const char* missing = nullptr) {
    emit([&](Event::Builder e) {
      auto w = e.initWrittenData();
      w.setOf(of);
      if (logged != nullptr) writer_->storeContent(logged->data(), logged->size() * sizeof(float), w.initData());
      if (missing != nullptr) w.setMissing(missing);
    });
  }

  void ncclAllReduce(const std::vector<float>* logged = nullptr, const char* missing = nullptr) {
    if (!ncclBound_) bind(kNcclKernel, kModule, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    ncclBound_ = true;
    std::vector<uint8_t> params(8, 0);
    std::memcpy(params.data(), &kY, 8);
    const bool byCall = logged != nullptr || missing != nullptr;
    collectiveCall_ = byCall;
    launch(kNcclKernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", params, {{0, 8}}, {{0, kY}});
    collectiveCall_ = false;
    if (!byCall) return;
    lastSeq_ = emit([&](Event::Builder e) {
      auto c = e.initCollective();
      c.setOperation(kcap::schema::CollectiveOp::ALL_REDUCE);
      c.setSendBuffer(kY);
      c.setRecvBuffer(kY);
      c.setCount(kElements);
      c.setDataType(7);  // ncclFloat32
      c.setElementSize(4);
      c.setRank(0);
      c.setRanks(2);
      c.setWritten(kElements * sizeof(float));
      if (deferred_) {
        c.setDataDeferred(true);
      } else if (logged != nullptr) {
        writer_->storeContent(logged->data(), logged->size() * sizeof(float), c.initData());
      } else {
        c.setDataMissing(missing);
      }
    });
  }

  // poly_eval(x, y, kElements).
  void polyEval() {
    std::vector<uint8_t> params(24, 0);
    const int32_t n = kElements;
    std::memcpy(params.data(), &kX, 8);
    std::memcpy(params.data() + 8, &kY, 8);
    std::memcpy(params.data() + 16, &n, 4);
    launch(kPolyEval, "poly_eval", params, {{0, 8}, {8, 8}, {16, 4}}, {{0, kX}, {8, kY}});
  }

  // racy_sum(x, y, kElements).
  void racySum() {
    std::vector<uint8_t> params(24, 0);
    const int32_t n = kElements;
    std::memcpy(params.data(), &kX, 8);
    std::memcpy(params.data() + 8, &kY, 8);
    std::memcpy(params.data() + 16, &n, 4);
    launch(kRacySum, "racy_sum", params, {{0, 8}, {8, 8}, {16, 4}}, {{0, kX}, {8, kY}});
  }

  void launch(uint64_t function, const char* name, const std::vector<uint8_t>& params,
              const std::vector<std::pair<uint32_t, uint32_t>>& layout,
              const std::vector<std::pair<uint32_t, uint64_t>>& pointers,
              const std::vector<uint8_t>* hostInput = nullptr) {
    const uint64_t index = launches_++;
    emit([&](Event::Builder e) {
      auto l = e.initLaunch();
      l.setLaunchIndex(index);
      l.setCollectiveCall(collectiveCall_);
      l.setApi(kcap::schema::LaunchApi::LAUNCH_KERNEL);
      l.setFunction(function);
      l.setKernelName(name);
      l.setGridX(kElements / 256);
      l.setGridY(1);
      l.setGridZ(1);
      l.setBlockX(256);
      l.setBlockY(1);
      l.setBlockZ(1);
      l.setParams(kj::arrayPtr(params.data(), params.size()));
      auto info = l.initParamLayout(static_cast<unsigned>(layout.size()));
      for (unsigned i = 0; i < layout.size(); ++i) {
        info[i].setOffset(layout[i].first);
        info[i].setSize(layout[i].second);
      }
      auto p = l.initPointers(static_cast<unsigned>(pointers.size()));
      for (unsigned i = 0; i < pointers.size(); ++i) {
        p[i].setOffset(pointers[i].first);
        p[i].setValue(pointers[i].second);
        p[i].setAllocationBase(pointers[i].second);
      }
      if (hostInput != nullptr) {
        auto pre = l.initPre(1)[0];
        pre.setAddress(kHost);
        pre.setAllocationBase(kHost);
        pre.setKind(kcap::schema::MemoryKind::HOST_MAPPED);
        writer_->storeContent(hostInput->data(), hostInput->size(), pre.initContent());
      }
    });
    emit([&](Event::Builder e) { e.initLaunchEnd().setLaunchIndex(index); });
  }

  void copyToDevice(uint64_t address, const std::vector<uint8_t>& bytes) {
    emit([&](Event::Builder e) {
      auto c = e.initMemcpy();
      c.setDirection(kcap::schema::CopyDirection::HOST_TO_DEVICE);
      c.setDst(address);
      c.setSize(bytes.size());
      writer_->storeContent(bytes.data(), bytes.size(), c.initData());
    });
  }

  void copyDeviceToDevice(uint64_t dst, uint64_t src, uint64_t size) {
    emit([&](Event::Builder e) {
      auto c = e.initMemcpy();
      c.setDirection(kcap::schema::CopyDirection::DEVICE_TO_DEVICE);
      c.setDst(dst);
      c.setSrc(src);
      c.setSize(size);
    });
  }

  void memset32(uint64_t dst, uint32_t value, uint64_t count) {
    emit([&](Event::Builder e) {
      auto m = e.initMemset();
      m.setDst(dst);
      m.setValue(value);
      m.setElementSize(4);
      m.setCount(count);
      m.setHeight(1);
    });
  }

  void graphLaunch() {
    emit([](Event::Builder e) { e.initGraphLaunch().setGraphExec(0x55d0c8b01230ull); });
  }

  void close() { writer_->close(); }

 private:
  void bind(uint64_t handle, uint64_t module, const char* name) {
    emit([&](Event::Builder e) {
      auto f = e.initFunctionBind();
      f.setHandle(handle);
      f.setModuleHandle(module);
      f.setName(name);
      f.setApi(kcap::schema::BindApi::MODULE_GET_FUNCTION);
    });
  }

  uint64_t emit(const std::function<void(Event::Builder)>& fill) {
    capnp::MallocMessageBuilder message;
    fill(message.initRoot<Event>());
    return writer_->append(message);
  }

  std::unique_ptr<kcap::format::TraceWriter> writer_;
  uint64_t checkpoints_ = 0, launches_ = 0;
  int32_t device_ = 0;  // Checkpoint.device of the next checkpoints
  bool hostAllocated_ = false;
  bool ncclBound_ = false;
  bool collectiveCall_ = false;
  bool deferred_ = false;
  uint64_t lastSeq_ = 0;
};

// The program the traces record: x = 0, 1, 2, ...; y = 1, 1, ...; each
// launch y = 2x + y.
struct Program {
  std::vector<float> x = std::vector<float>(kElements), y = std::vector<float>(kElements, 1.0f);
  Program() {
    for (uint32_t i = 0; i < kElements; ++i) x[i] = static_cast<float>(i % 64);
  }
  void axpy() {
    for (uint32_t i = 0; i < kElements; ++i) y[i] = kAlpha * x[i] + y[i];
  }
  std::vector<RangeSpec> state() const { return {{kX, bytesOf(x)}, {kY, bytesOf(y)}}; }
};

Outcome replay(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> all = {"replay"};
  all.insert(all.end(), args.begin(), args.end());
  return kcapOnDouble(all, std::move(env));
}

class CheckpointReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kcap::test::haveKernelImages()) GTEST_SKIP() << "the build has no kernel images";
  }
  kcap::test::TempDir dir_{"kcap-checkpoint-replay"};
};

constexpr int kExitFault = 4;

// (a) four intervals, all reproduced; (c) a host-to-device copy in the
// middle of one, a device-to-device copy and a memset in another.
TEST_F(CheckpointReplay, IntervalsReproduceWithACopyInside) {
  const std::string path = dir_.file("three.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.axpy();
  p.axpy();
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = static_cast<float>(3 * (i % 7));
  t.copyToDevice(kX, bytesOf(p.x));
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(5, p.state());
  // A device-to-device copy and a memset in the last interval.
  t.copyDeviceToDevice(kY + 64, kX, 256);
  std::memcpy(p.y.data() + 16, p.x.data(), 256);
  const float half = 0.5f;
  uint32_t bits = 0;
  std::memcpy(&bits, &half, 4);
  t.memset32(kX + 4096, bits, 100);
  std::fill(p.x.begin() + 1024, p.x.begin() + 1124, half);
  t.axpy();
  p.axpy();
  t.checkpoint(6, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launches 0..1, checkpoint 0 -> 1): REPRODUCED (32.0 KiB in 8 pieces compared)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 2..3, checkpoint 1 -> 2): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 2 (launch 4, checkpoint 2 -> 3): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 3 (launch 5, checkpoint 3 -> 4): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("all 4 intervals reproduced"), std::string::npos) << run.out;

  const Outcome json = replay({path, "--json"});
  EXPECT_EQ(json.exitCode, kExitOk) << json.describe();
  EXPECT_NE(json.out.find("\"verdict\":\"REPRODUCED\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"compared\":true"), std::string::npos) << json.out;
}

// Launches that read page-locked host memory the program rewrote between
// them (no CUDA call in between): each runs on what it read when recorded,
// logged with it; the first launch of an interval, the others in flight.
TEST_F(CheckpointReplay, HostMemoryLaunchesReadIsWrittenAsEachSawIt) {
  const std::string path = dir_.file("host-input.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  for (int round = 0; round < 3; ++round) {
    std::vector<float> host(kElements);
    for (uint32_t i = 0; i < kElements; ++i) host[i] = static_cast<float>((i * (round + 3)) % 29);
    t.axpyFromHost(bytesOf(host));
    for (uint32_t i = 0; i < kElements; ++i) p.y[i] = kAlpha * host[i] + p.y[i];
  }
  t.checkpoint(3, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launches 0..2, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("all 2 intervals reproduced"), std::string::npos) << run.out;
  // One launch at a time (the extract path) writes them the same way.
  const Outcome single = replay({path, "--launch", "1"});
  EXPECT_EQ(single.exitCode, kExitOk) << single.describe();
}

// (b) a wrong recorded hash and a real divergence: DIFFERS, naming the range.
TEST_F(CheckpointReplay, DifferingPiecesAreNamed) {
  const std::string path = dir_.file("differs.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  auto spoiled = p.state();
  spoiled[1].wrongHashPiece = 2;
  t.checkpoint(1, spoiled);
  t.axpy();
  p.axpy();
  auto wrong = p.state();
  wrong[1].bytes[3 * kPieceSize + 17] ^= 0x40;  // the recording says y held this
  t.checkpoint(2, wrong);
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): DIFFERS (1 range differs"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("range 0x7e1000400000 (allocation, 16.0 KiB): 1 of 4 pieces differ; the bytes equal the "
                         "recorded piece: its recorded change hash is wrong"),
            std::string::npos)
      << run.out;
  // Checkpoint 1 did not reproduce: it is restored, and interval 1 found on its own.
  EXPECT_NE(run.out.find("interval 1 (launch 1, checkpoint 1 -> 2): DIFFERS"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1 of 4 pieces differ, first differing byte at offset 12,305 (0x3011)"), std::string::npos)
      << run.out;
}

// (d) --launch N re-executes from the last checkpoint before it.
TEST_F(CheckpointReplay, LaunchPicksTheCheckpointBeforeIt) {
  const std::string path = dir_.file("launch.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.close();

  const Outcome run = replay({path, "--launch", "3"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("launch 3 (axpy, grid (16,1,1), block (256,1,1)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("re-executed from checkpoint 1"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 2..3, checkpoint 1 -> 2): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("interval 0 "), std::string::npos) << run.out;

  const Outcome first = replay({path, "--launch", "0"});
  EXPECT_EQ(first.exitCode, kExitOk) << first.describe();
  EXPECT_NE(first.out.find("re-executed from checkpoint 0"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("interval 0 (launches 0..1, checkpoint 0 -> 1): REPRODUCED"), std::string::npos)
      << first.out;

  EXPECT_EQ(replay({path, "--launch", "9"}).exitCode, kExitTrace);
  EXPECT_EQ(replay({path, "--range", "0..1"}).exitCode, kExitUsage);
  EXPECT_EQ(replay({path, "--no-fixed-va"}).exitCode, kExitUsage);
}

// (e) a checkpoint whose blob is missing and one that is incomplete: replay
// starts from the first intact one and goes through the incomplete one.
TEST_F(CheckpointReplay, DamagedCheckpointsAreNamed) {
  const std::string path = dir_.file("damaged.kcap");
  Program p;
  CheckpointTrace t(path);
  auto unstored = p.state();
  for (float& v : p.y) v = 5.0f;  // nothing else in the file holds checkpoint 0's y
  unstored = p.state();
  unstored[1].storeBlobs = false;
  t.checkpoint(0, unstored);
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(2, {}, 2);  // CUDA_ERROR_OUT_OF_MEMORY while taking it
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("checkpoint 0 at event #[0-9]+ is damaged \\(the content of range "
                                                    "0x7e1000400000 is not in the file")))
      << run.out;
  EXPECT_NE(run.out.find("replay starts from checkpoint 1"), std::string::npos) << run.out;
  EXPECT_TRUE(std::regex_search(
      run.out,
      std::regex("checkpoint 2 at event #[0-9]+ is damaged \\(incomplete: taking it failed with CUresult 2\\)")))
      << run.out;
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): NOT VERIFIED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 3): REPRODUCED"), std::string::npos) << run.out;
}

// A checkpoint of another device than the first one's: not a state of the
// memory the others hold, so it is damage (replay compares the interval
// with the next checkpoint instead), and `kcap check` says so.
TEST_F(CheckpointReplay, ACheckpointOfAnotherDeviceIsDamage) {
  const std::string path = dir_.file("devices.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  p.axpy();
  t.checkpointDevice(1);
  t.checkpoint(2, p.state());
  t.checkpointDevice(0);
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("checkpoint 2 at event #[0-9]+ is damaged \\(it holds device 1's "
                                                    "memory; the trace's first checkpoint holds device 0's\\)")))
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 3): REPRODUCED"), std::string::npos) << run.out;
  const Outcome check = kcapOnDouble({"check", path});
  EXPECT_EQ(check.exitCode, 1) << check.describe();
  EXPECT_TRUE(std::regex_search(check.out,
                                std::regex("event #[0-9]+ \\(checkpoint 2\\) holds device 1's memory; the first holds "
                                           "device 0's")))
      << check.describe();
}

// (f) no checkpoint after the launches: nothing compared, never REPRODUCED.
TEST_F(CheckpointReplay, NothingComparedIsSaid) {
  const std::string path = dir_.file("one.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  t.axpy();
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(run.out.find("REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 0 (launches 0..1, checkpoint 0 -> end of trace): NOT VERIFIED"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("Verdict: nothing compared"), std::string::npos) << run.out;
}

// A graph launch cannot be re-executed yet: its interval says so, and replay
// goes on from the next checkpoint.
TEST_F(CheckpointReplay, GraphLaunchEndsItsInterval) {
  const std::string path = dir_.file("graph.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.graphLaunch();
  t.checkpoint(1, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_TRUE(std::regex_search(
      run.out,
      std::regex("interval 0 \\(launch 0, checkpoint 0 -> 1\\): NOT RE-EXECUTABLE \\(graph launch at event #")))
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launch 1, checkpoint 1 -> 2): REPRODUCED"), std::string::npos) << run.out;
}

// An NCCL collective waits for its peers, which re-execution does not run,
// and what it wrote is not logged: its interval says so instead of hanging,
// and replay goes on from the next checkpoint.
TEST_F(CheckpointReplay, NcclCollectiveEndsItsInterval) {
  const std::string path = dir_.file("nccl.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.ncclAllReduce();
  for (float& v : p.y) v *= 2;  // the sum over two ranks of equal y
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 2): NOT RE-EXECUTABLE (launch 1 "
                         "(ncclDevKernel_AllReduce_Sum_f32_RING_LL) is an NCCL kernel that no NCCL call kcap saw "
                         "launched: it waits for its peers"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("interval 2 (launch 3, checkpoint 2 -> 3): REPRODUCED"), std::string::npos) << run.out;
}

// The same all-reduce made through an NCCL call the shim saw, which logged
// what it wrote on this rank: the kernel is passed over, the logged bytes
// written in its place, and the interval reproduces. The peers' share
// (another rank's y) is in no checkpoint: without the log it differs.
TEST_F(CheckpointReplay, LoggedCollectiveIsWrittenInPlaceOfItsKernel) {
  const std::string path = dir_.file("nccl-logged.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  for (uint32_t i = 0; i < kElements; ++i) p.y[i] += static_cast<float>(3 * (i % 7));  // the peer's y
  t.ncclAllReduce(&p.y);
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("1 NCCL kernel launch(es) are not re-run"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 2): REPRODUCED"), std::string::npos) << run.out;
}

// A call whose writes were not logged (its stream captured, say) stops its
// interval with the reason the recorder gave.
TEST_F(CheckpointReplay, CollectiveWithoutItsDataEndsItsInterval) {
  const std::string path = dir_.file("nccl-missing.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.ncclAllReduce(nullptr, "reading it back failed (CUresult 700)");
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.out.find("NOT RE-EXECUTABLE (the NCCL allReduce at event #"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("wrote 16384 bytes the trace does not hold: reading it back failed (CUresult 700)"),
            std::string::npos)
      << run.out;
}

// The same call read back in stream order: its bytes arrive in a
// writtenData event after the next checkpoint, and re-execution writes them
// at the call's place. Without that event the interval cannot be
// re-executed, and says why.
TEST_F(CheckpointReplay, ReadBackWrittenLaterIsWrittenAtTheCallsPlace) {
  for (const char* ending : {"read back", "never read back", "read back failed"}) {
    SCOPED_TRACE(ending);
    const std::string path = dir_.file(std::string("nccl-later-") + ending + ".kcap");
    Program p;
    CheckpointTrace t(path);
    t.checkpoint(0, p.state());
    t.axpy();
    p.axpy();
    t.checkpoint(1, p.state());
    for (uint32_t i = 0; i < kElements; ++i) p.y[i] += static_cast<float>(3 * (i % 7));  // the peer's y
    const uint64_t call = t.ncclAllReduceReadBackLater();
    const std::vector<float> written = p.y;  // what the call left in y
    t.axpy();
    p.axpy();
    t.checkpoint(3, p.state());
    const std::string which = ending;
    if (which == "read back") {
      t.writtenData(call, &written);
    } else if (which == "read back failed") {
      t.writtenData(call, nullptr, "the copy back failed (CUresult 700)");
    }
    t.close();

    const Outcome run = replay({path});
    if (which == "read back") {
      EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
      EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 2): REPRODUCED"), std::string::npos)
          << run.out;
      const Outcome info = kcapOnDouble({"info", path});
      EXPECT_NE(info.out.find("1 read back after their call"), std::string::npos) << info.out;
      EXPECT_EQ(info.out.find("not logged"), std::string::npos) << info.out;
      // The launch after the call cut out as a full-mode trace: its memory
      // is rebuilt by re-execution through the call's read-back bytes.
      const std::string cut = dir_.file("nccl-later-cut.kcap");
      const Outcome extract = kcapOnDouble({"extract", path, "--launch", "2", "-o", cut});
      ASSERT_EQ(extract.exitCode, kExitOk) << extract.describe();
      const Outcome again = replay({cut});
      EXPECT_EQ(again.exitCode, kExitOk) << again.describe();
      EXPECT_NE(again.out.find("REPRODUCED"), std::string::npos) << again.describe();
      continue;
    }
    EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
    const Outcome info = kcapOnDouble({"info", path});
    EXPECT_NE(info.out.find("not logged"), std::string::npos) << info.out;
    const std::string why = which == "never read back" ? "the trace ends before the bytes it wrote were read back"
                                                       : "the copy back failed (CUresult 700)";
    EXPECT_NE(run.out.find("wrote 16384 bytes the trace does not hold: " + why), std::string::npos) << run.out;
  }
}

// (g) the recorded addresses refused: re-execution cannot relocate.
TEST_F(CheckpointReplay, RefusedAddressesAreRelocatedAndSaidSo) {
  const std::string path = dir_.file("fixed.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.close();

  // The memory goes elsewhere; parameters and checkpoints are translated,
  // and the interval still reproduces (nothing in this memory is a pointer).
  const Outcome run = replay({path}, {{"KCAP_DOUBLE_REFUSE_ADDRESS_HINTS", "1"}});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("relocated, the driver not granting their recorded addresses"), std::string::npos)
      << run.describe();
  EXPECT_NE(run.out.find("pointers stored inside device memory are not rewritten"), std::string::npos)
      << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.describe();
}

// A launch that faults ends the replay with FAULT naming it (the double
// refuses a pointer to unmapped memory with a sticky illegal address).
TEST_F(CheckpointReplay, FaultNamesTheLaunch) {
  const std::string path = dir_.file("fault.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  t.axpy(0x1000);  // nothing is mapped there
  t.checkpoint(3, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitFault) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 2): FAULT in launch 2 (axpy): "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << run.out;
}

// A trace cut short: replay runs what is intact and says the trace is damaged.
TEST_F(CheckpointReplay, TruncatedTraceRunsWhatIsIntact) {
  const std::string path = dir_.file("whole.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  for (uint64_t k = 1; k <= 3; ++k) {
    t.axpy();
    p.axpy();
    t.checkpoint(k, p.state());
  }
  t.close();
  std::vector<uint8_t> bytes = kcap::test::readFileBytes(path);
  const std::string cut = dir_.file("cut.kcap");
  size_t reproducedAfterCut = 0;
  for (size_t keep = bytes.size() / 8; keep < bytes.size(); keep += bytes.size() / 8) {
    kcap::test::writeFileBytes(cut, bytes.data(), keep);
    const Outcome run = replay({cut});
    EXPECT_TRUE(run.exitCode == kExitOk || run.exitCode == kExitTrace) << keep << ": " << run.describe();
    EXPECT_EQ(run.out.find("DIFFERS"), std::string::npos) << keep << ": " << run.out;
    if (run.exitCode == kExitOk) {
      EXPECT_NE(run.out.find("the trace is damaged or cut short"), std::string::npos) << keep << ": " << run.out;
      EXPECT_NE(run.out.find("REPRODUCED"), std::string::npos) << keep << ": " << run.out;
      ++reproducedAfterCut;
    }
  }
  EXPECT_NE(reproducedAfterCut, 0u);
}

// --check determinism runs a differing interval again: a launch whose
// outputs vary between runs is named; an interval that repeats exactly says so.
TEST_F(CheckpointReplay, DeterminismNamesTheVaryingLaunch) {
  const std::string path = dir_.file("racy.kcap");
  Program p;
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = 1.0f / static_cast<float>(i + 3);  // order-dependent sums
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  auto wrong = p.state();
  wrong[1].bytes[40] ^= 1;
  t.checkpoint(1, wrong);  // axpy is deterministic: the recording is what differs
  t.axpy();
  t.racySum();
  p.axpy();
  t.checkpoint(3, p.state());  // y[0] as racy_sum leaves it differs in any case
  t.close();

  const Outcome run = replay({path, "--check", "determinism", "--runs", "3"});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("determinism: the 3 runs from checkpoint 0 at event #"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("agree with each other: deterministic here"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("determinism: launch 2 (racy_sum) is the first whose outputs vary between 3 runs from "
                         "checkpoint 1"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(replay({path, "--check", "unwritten"}).exitCode, kExitUsage);
}

// Module globals: restored where the module's load put them, written by a
// copy to the symbol between launches, and compared at the next checkpoint.
TEST_F(CheckpointReplay, ModuleGlobalsAreRestoredWrittenAndCompared) {
  const std::string path = dir_.file("globals.kcap");
  Program p;
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = static_cast<float>(i % 8);
  std::vector<float> coeffs(16, 0.0f);
  coeffs[0] = 1.0f;
  coeffs[1] = 2.0f;
  int32_t calls = 7;
  const auto state = [&](int32_t callCount) {
    std::vector<RangeSpec> ranges = p.state();
    ranges.push_back({kCoeffs, bytesOf(coeffs)});
    std::vector<uint8_t> count(4);
    std::memcpy(count.data(), &callCount, 4);
    ranges.push_back({kCallCount, count});
    return ranges;
  };
  // poly_eval as the double runs it, with small integers: exact in float.
  const auto poly = [&] {
    for (uint32_t i = 0; i < kElements; ++i) {
      float acc = coeffs[15];
      for (int k = 14; k >= 0; --k) acc = acc * p.x[i] + coeffs[static_cast<size_t>(k)];
      p.y[i] = acc;
    }
    calls += static_cast<int32_t>(kElements / 256);
  };
  CheckpointTrace t(path);
  t.checkpoint(0, state(calls));
  t.polyEval();
  poly();
  coeffs[2] = 1.0f;
  t.copyToDevice(kCoeffs, bytesOf(coeffs));  // cudaMemcpyToSymbol
  t.polyEval();
  poly();
  t.checkpoint(2, state(calls));
  t.polyEval();
  poly();
  t.checkpoint(3, state(calls + 1));  // call_count is not what the recording says
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launches 0..1, checkpoint 0 -> 1): REPRODUCED (32.1 KiB in 10 pieces compared)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launch 2, checkpoint 1 -> 2): DIFFERS"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("range 0x7e2000000100 (moduleGlobal, 4 B): 1 of 1 piece differs, first differing byte at "
                         "offset 0"),
            std::string::npos)
      << run.out;
}

// The sizes and counts of a checkpoint, checked before anything uses them.
TEST(CheckpointProblem, NamesWhatDoesNotAddUp) {
  capnp::MallocMessageBuilder message;
  auto c = message.initRoot<kcap::schema::Checkpoint>();
  const auto problem = [&] { return kcap::replay::checkpointProblem(c.asReader()); };
  auto ranges = c.initRanges(2);
  const auto set = [&](unsigned i, uint64_t address, uint64_t size, uint32_t pieceSize, unsigned pieces,
                       size_t hashBytes) {
    ranges[i].setAddress(address);
    auto content = ranges[i].initContent();
    content.setSize(size);
    content.setPieceSize(pieceSize);
    content.initPieces(pieces);
    ranges[i].initChangeHashes(static_cast<unsigned>(hashBytes));
  };
  set(0, 0x1000, 8192, 4096, 2, 32);
  set(1, 0x4000, 100, 4096, 1, 16);
  EXPECT_EQ(problem(), "");
  c.setResult(2);
  EXPECT_EQ(problem(), "incomplete: taking it failed with CUresult 2");
  c.setResult(0);
  set(1, 0x4000, 100, 4096, 1, 15);
  EXPECT_EQ(problem(), "range 0x4000: 15 bytes of change hashes for 1 pieces (expected 16)");
  set(1, 0x4000, 8193, 4096, 2, 32);
  EXPECT_EQ(problem(), "range 0x4000: 2 pieces for 8193 bytes of 4096-byte pieces (expected 3)");
  set(1, 0x4000, 100, 0, 0, 0);
  EXPECT_EQ(problem(), "range 0x4000: piece size 0 for 100 bytes");
  set(1, 0xfffffffffffff000ull, 0x2000, 4096, 2, 32);
  EXPECT_EQ(problem(), "range 0xfffffffffffff000: its 8192 bytes wrap past the end of the address space");
  set(1, 0x2000, 100, 4096, 1, 16);
  EXPECT_EQ(problem(), "range 0x2000: overlaps or precedes the range before it");
}

// A checkpoint whose change hashes do not match its pieces is damaged:
// not compared, re-execution goes on to the next.
TEST_F(CheckpointReplay, MiscountedHashesAreDamage) {
  const std::string path = dir_.file("miscounted.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  auto bad = p.state();
  bad[0].shortHashes = true;
  t.checkpoint(1, bad);
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("checkpoint 1 at event #[0-9]+ is damaged \\(range 0x7e1000000000: "
                                                    "48 bytes of change hashes for 4 pieces \\(expected 64\\)\\)")))
      << run.out;
  EXPECT_NE(run.out.find("interval 0 (launches 0..1, checkpoint 0 -> 2): REPRODUCED"), std::string::npos) << run.out;
}

// kcap bisect on checkpoint traces: the intervals re-executed from their
// checkpoints; between two sides, the first interval whose end states
// differ, then in it the first launch whose outputs differ.
Outcome bisect(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"bisect"};
  all.insert(all.end(), args.begin(), args.end());
  return kcapOnDouble(all);
}

// Interval 0: poly_eval; interval 1: poly_eval, axpy (launches 1..2);
// the states as the double computes them (poly_eval as in the test above).
std::string polyThenAxpyTrace(const std::string& path) {
  Program p;
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = static_cast<float>(i % 8);
  std::vector<float> coeffs(16, 0.0f);
  coeffs[0] = 1.0f;
  coeffs[1] = 2.0f;
  int32_t calls = 0;
  const auto state = [&] {
    std::vector<RangeSpec> ranges = p.state();
    ranges.push_back({kCoeffs, bytesOf(coeffs)});
    std::vector<uint8_t> count(4);
    std::memcpy(count.data(), &calls, 4);
    ranges.push_back({kCallCount, count});
    return ranges;
  };
  const auto poly = [&] {
    for (uint32_t i = 0; i < kElements; ++i) {
      float acc = coeffs[15];
      for (int k = 14; k >= 0; --k) acc = acc * p.x[i] + coeffs[static_cast<size_t>(k)];
      p.y[i] = acc;
    }
    calls += static_cast<int32_t>(kElements / 256);
  };
  CheckpointTrace t(path);
  t.checkpoint(0, state());
  t.polyEval();
  poly();
  t.checkpoint(1, state());
  t.polyEval();
  poly();
  t.axpy();
  p.axpy();
  t.checkpoint(3, state());
  t.close();
  return path;
}

TEST_F(CheckpointReplay, BisectNamesTheFirstDivergentLaunchBetweenTwoSides) {
  const std::string path = polyThenAxpyTrace(dir_.file("bisect.kcap"));
  const std::string changed = kernelFile("axpy_changed.fatbin");
  const Outcome run = bisect({path, "--against", "override:axpy=" + changed});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  // Not interval 1's first launch (poly_eval, the same on both sides): its first axpy.
  EXPECT_NE(run.out.find("First divergent launch: 2 (axpy), in interval 1 (launches 1..2, checkpoint 1 -> 2)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("range 0x7e1000400000 (allocation, 16384 bytes): 1 of 4 pieces differ, the first at "
                         "bytes 0..4095"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("reproduce it: kcap replay " + path + " --launch 2 --override 'axpy=" + changed + "'"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("2 of 2 intervals compared before it was found; then each launch of interval 1"),
            std::string::npos)
      << run.out;

  const Outcome json = bisect({path, "--against", "override:axpy=" + changed, "--json"});
  EXPECT_EQ(json.exitCode, kExitDiffers) << json.describe();
  EXPECT_NE(json.out.find("\"launchIndex\":2"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"kernel\":\"axpy\""), std::string::npos) << json.out;
}

TEST_F(CheckpointReplay, BisectWithNoDivergenceSaysSo) {
  const std::string path = polyThenAxpyTrace(dir_.file("same.kcap"));
  const Outcome same = bisect({path, "--against", "override:axpy=" + kernelFile("axpy.fatbin")});
  EXPECT_EQ(same.exitCode, kExitOk) << same.describe();
  EXPECT_NE(same.out.find("No launch diverges: all 2 compared intervals agree between the sides."), std::string::npos)
      << same.out;
  const Outcome recorded = bisect({path});
  EXPECT_EQ(recorded.exitCode, kExitOk) << recorded.describe();
  EXPECT_NE(recorded.out.find("No launch diverges: all 2 compared intervals agree with the recording."),
            std::string::npos)
      << recorded.out;
}

TEST_F(CheckpointReplay, BisectAgainstTheRecordingNamesTheInterval) {
  const std::string path = dir_.file("wrong-hash.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  auto spoiled = p.state();
  spoiled[1].wrongHashPiece = 1;
  t.checkpoint(3, spoiled);
  t.close();

  const Outcome run = bisect({path});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("First divergent interval: interval 1 (launches 1..2, checkpoint 1 -> 2)"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("needs a second side"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("range 0x7e1000400000 (allocation, 16384 bytes): 1 of 4 pieces differ; the bytes equal "
                         "the recorded piece"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("reproduce it: kcap replay " + path + " --launch 1"), std::string::npos) << run.out;
}

TEST_F(CheckpointReplay, BisectThatComparesNothingSaysSo) {
  const std::string path = dir_.file("one-checkpoint.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  t.close();
  for (const std::string& against : {std::string("recorded"), "override:axpy=" + kernelFile("axpy_changed.fatbin")}) {
    const Outcome run = bisect({path, "--against", against});
    EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
    EXPECT_NE(run.out.find("Nothing compared: no interval ran up to an intact checkpoint"), std::string::npos)
        << run.out;
  }
  const Outcome perf = bisect({path, "--perf"});
  EXPECT_EQ(perf.exitCode, kExitUsage) << perf.describe();
  EXPECT_NE(perf.err.find("--perf on a checkpoint trace: not built"), std::string::npos) << perf.err;
  EXPECT_EQ(bisect({path, "--sequence"}).exitCode, kExitUsage);
}

TEST_F(CheckpointReplay, BisectNamesAFaultingLaunch) {
  const std::string path = dir_.file("bisect-fault.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  t.axpy(0x1000);  // nothing is mapped there
  t.checkpoint(3, p.state());
  t.close();

  const Outcome recorded = bisect({path});
  EXPECT_EQ(recorded.exitCode, kExitFault) << recorded.describe();
  EXPECT_NE(recorded.out.find("First divergent launch: 2 (axpy), in interval 1 (launches 1..2, checkpoint 1 -> 2)"),
            std::string::npos)
      << recorded.out;
  EXPECT_NE(recorded.out.find("FAULT: it faults when re-executed: "), std::string::npos) << recorded.out;
  const Outcome sides = bisect({path, "--against", "override:axpy=" + kernelFile("axpy.fatbin")});
  EXPECT_EQ(sides.exitCode, kExitFault) << sides.describe();
  EXPECT_NE(sides.out.find("First divergent launch: 2 (axpy)"), std::string::npos) << sides.out;
  EXPECT_NE(sides.out.find("FAULT: it fails on both sides: "), std::string::npos) << sides.out;
}

// Launches go out without a wait between them: a fault in the middle of an
// interval shows at a later launch's submission, and the interval is run
// again with a wait after every launch to name it.
TEST_F(CheckpointReplay, FaultAmongLaunchesInFlightIsNamedByASynchronizedRerun) {
  const std::string path = dir_.file("fault-in-flight.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  t.axpy();
  t.axpy(0x1000);  // nothing is mapped there: the double's fault shows at the next call
  t.axpy();
  t.axpy();
  t.checkpoint(6, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitFault) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 failed with launches in flight: running it again with a wait after every launch"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..5, checkpoint 1 -> 2): FAULT in launch 3 (axpy): "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("(the launch found by a synchronized re-run of the interval; its first run, with launches "
                         "in flight, ended: "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("the failing launch is one of launches 1..4"), std::string::npos) << run.out;

  const Outcome json = replay({path, "--json"});
  EXPECT_EQ(json.exitCode, kExitFault) << json.describe();
  EXPECT_NE(json.out.find("\"faultFoundByRerun\":true"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"faultLaunch\":3"), std::string::npos) << json.out;

  // In this process there is no second context to run it again in: the
  // launches it can be are said.
  const Outcome here = replay({path, "--no-isolate"});
  EXPECT_EQ(here.exitCode, kExitFault) << here.describe();
  EXPECT_NE(here.out.find("interval 1 (launches 1..5, checkpoint 1 -> 2): FAULT: "), std::string::npos) << here.out;
  EXPECT_NE(here.out.find("the failing launch is one of launches 1..4"), std::string::npos) << here.out;
}

// A launch that never finishes, among launches in flight: HANG, named by the
// synchronized re-run (each run waits --timeout).
TEST_F(CheckpointReplay, HangAmongLaunchesInFlightIsNamedByASynchronizedRerun) {
  const std::string path = dir_.file("hang-in-flight.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  t.axpy();
  t.axpy(0xDEAD0000DEAD4A46ull);  // the double's kPoisonHang: the launch never returns
  t.axpy();
  t.checkpoint(4, p.state());
  t.close();

  const Outcome run = replay({path, "--timeout", "1"});
  EXPECT_EQ(run.exitCode, kExitFault) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launches 0..3, checkpoint 0 -> 1): HANG in launch 2 (axpy): did not finish "
                         "within 1 s (--timeout) (the launch found by a synchronized re-run"),
            std::string::npos)
      << run.out;
}

// Copies and memsets between launches go on the stream behind them: each
// launch sees the ones before it and none after. With KCAP_DOUBLE_DEFER_COPIES
// a host-to-device copy reads its source only at the next driver call, so a
// source rewritten before the stream is waited for would show.
TEST_F(CheckpointReplay, CopiesAndMemsetsStayInOrderWithLaunches) {
  const std::string path = dir_.file("ordered.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  const float one = 1.0f;
  uint32_t bits = 0;
  std::memcpy(&bits, &one, 4);
  t.memset32(kY, bits, kElements);
  std::fill(p.y.begin(), p.y.end(), one);
  t.axpy();
  p.axpy();
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = static_cast<float>(i % 5);
  t.copyToDevice(kX, bytesOf(p.x));
  for (uint32_t i = 0; i < kElements; ++i) p.y[i] = static_cast<float>(i % 11);
  t.copyToDevice(kY, bytesOf(p.y));  // right behind the other: two sources pending at once
  t.axpy();
  p.axpy();
  t.copyDeviceToDevice(kY + 64, kX, 256);
  std::memcpy(p.y.data() + 16, p.x.data(), 256);
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.close();

  for (const char* defer : {"0", "1"}) {
    const Outcome run = replay({path}, {{"KCAP_DOUBLE_DEFER_COPIES", defer}});
    EXPECT_EQ(run.exitCode, kExitOk) << defer << ": " << run.describe();
    EXPECT_NE(run.out.find("interval 0 (launches 0..3, checkpoint 0 -> 1): REPRODUCED"), std::string::npos)
        << defer << ": " << run.out;
  }
}

// Each interval says how many launches it re-executed in how long, beside
// the program's time for them (between the checkpoints' holds); a line at
// the end gives the pace over all of them.
TEST_F(CheckpointReplay, IntervalsSayTheirPace) {
  const std::string path = dir_.file("pace.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state(), 0, 1'000'000, 500'000);
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state(), 0, 6'000'000, 1'000'000);  // launches from 1 ms to 5 ms
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());  // no times: the program's is not known
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("interval 0 \\(launches 0\\.\\.1, checkpoint 0 -> 1\\): REPRODUCED "
                                                    "\\([^)]*\\); re-executed 2 launches in [0-9.]+ (us|ms) \\(the "
                                                    "program: 4\\.0 ms\\)\n")))
      << run.out;
  EXPECT_TRUE(std::regex_search(
      run.out, std::regex("interval 1 \\(launch 2, checkpoint 1 -> 2\\): REPRODUCED \\([^)]*\\); re-executed 1 "
                          "launch in [0-9.]+ (us|ms)\n")))
      << run.out;
  EXPECT_TRUE(std::regex_search(run.out, std::regex("Re-executed 3 launches in [0-9.]+ (us|ms): [0-9,]+ launches/s; "
                                                    "the program ran those it timed at 500 launches/s "
                                                    "\\(re-execution at [0-9.]+x the program's pace\\)\\.")))
      << run.out;

  const Outcome json = replay({path, "--json"});
  EXPECT_NE(json.out.find("\"programNs\":4000000"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"timedLaunches\":2"), std::string::npos) << json.out;
}

}  // namespace
}  // namespace kcap_test
