// The checkpoint traces the replay tests (checkpoint_*_test.cpp) write with
// TraceWriter: axpy from kernels/ over two buffers, checkpoints whose change
// hashes are computed with format::changeHash over the bytes stored, and
// ways to spoil them; the program they stand for, and `kcap replay` run
// against the driver double.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
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

namespace kcap_test::checkpoint {

using kcap::schema::Event;

inline constexpr int kExitOk = 0, kExitTrace = 1, kExitUsage = 2, kExitDiffers = 3;
inline constexpr uint64_t kX = 0x7e1000000000ull;  // two granules apart: two groups
inline constexpr uint64_t kY = 0x7e1000400000ull;
inline constexpr uint64_t kHost = 0x7f3a12340000ull;  // page-locked host memory the device reads
inline constexpr uint64_t kModule = 0x55d0c8a10000ull, kFunction = 0x55d0c8a1f1a0ull, kNcclKernel = 0x55d0c8a1f2b0ull;
inline constexpr uint64_t kChecksModule = 0x55d0c8a20000ull, kRacySum = 0x55d0c8a2f1a0ull;
inline constexpr uint64_t kConstantModule = 0x55d0c8a30000ull, kPolyEval = 0x55d0c8a3f1a0ull;
inline constexpr uint64_t kCoeffs = 0x7e2000000000ull, kCallCount = 0x7e2000000100ull;  // where the recording had them
inline constexpr uint32_t kElements = 4096;  // 16 KiB a buffer: 4 pieces of 4 KiB (the smallest piece)
inline constexpr uint32_t kPieceSize = 4096;
inline constexpr float kAlpha = 2.0f;  // a * x + y exact in float: no rounding to argue about

inline std::vector<uint8_t> bytesOf(const std::vector<float>& v) {
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
      if (!launchEnds_) l.setEnded(true);  // as checkpoint mode records: the outcome in the launch
    });
    if (launchEnds_) emit([&](Event::Builder e) { e.initLaunchEnd().setLaunchIndex(index); });
  }

  // Launches written as checkpoint mode wrote them before Launch.ended: a
  // LaunchEnd after each.
  void withLaunchEnds() { launchEnds_ = true; }

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
  bool launchEnds_ = false;
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

inline Outcome replay(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
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

inline constexpr int kExitFault = 4;

// (a) four intervals, all reproduced; (c) a host-to-device copy in the

}  // namespace kcap_test::checkpoint
