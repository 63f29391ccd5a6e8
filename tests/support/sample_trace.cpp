#include "sample_trace.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include <capnp/message.h>

#include "kcap.capnp.h"
#include "trace_files.h"
#include "trace_writer.h"

namespace kcap::test {
namespace {

using schema::Event;

// splitmix64: small, fast, and the same everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }

 private:
  uint64_t state_;
};

// IEEE binary16 bits of `f`, round to nearest even; tiny values flush to zero.
uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent <= 0) return static_cast<uint16_t>(sign);
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(half);
}

template <typename T>
std::vector<uint8_t> bytesOf(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
void putParam(std::vector<uint8_t>& params, size_t offset, T value) {
  if (params.size() < offset + sizeof(T)) params.resize(offset + sizeof(T));
  std::memcpy(params.data() + offset, &value, sizeof(T));
}

// A synthetic image with a fatbin header (magic 0xBA55ED50, version 1, header
// size 16, payload size) and a recognisable payload.
std::vector<uint8_t> syntheticImage(const std::string& name, Rng& rng) {
  std::string text = "synthetic kcap test image for " + name + "\n";
  std::vector<uint8_t> payload(text.begin(), text.end());
  for (int i = 0; i < 96; ++i) payload.push_back(static_cast<uint8_t>(rng.next()));
  std::vector<uint8_t> image(16 + payload.size());
  uint32_t magic = 0xBA55ED50u;
  uint16_t version = 1, headerSize = 16;
  uint64_t size = payload.size();
  std::memcpy(image.data(), &magic, 4);
  std::memcpy(image.data() + 4, &version, 2);
  std::memcpy(image.data() + 6, &headerSize, 2);
  std::memcpy(image.data() + 8, &size, 8);
  std::memcpy(image.data() + 16, payload.data(), payload.size());
  return image;
}

constexpr uint32_t kMainThread = 41230;
constexpr uint32_t kWorkerThread = 41247;
constexpr uint64_t kContext = 0x55d0c8900e10ull;
constexpr uint64_t kStream = 0x55d0c8a41f20ull;
constexpr uint64_t kEvent = 0x55d0c8a52a10ull;
constexpr uint64_t kGraphExec = 0x55d0c8b01230ull;
constexpr uint64_t kAxpyModule = 0x55d0c8a10000ull;
constexpr uint64_t kAxpyFunction = 0x55d0c8a1f1a0ull;
constexpr uint64_t kLibrary = 0x55d0c8a30000ull;
constexpr uint64_t kPolyKernel = 0x55d0c8a3e2b0ull;
constexpr uint64_t kScratch = 0x7fa3c0600000ull;
constexpr uint64_t kStaging = 0x7fa3e0000000ull;
constexpr uint64_t kVmmBase = 0x7fa400000000ull;
constexpr uint64_t kVmmSize = 2ull << 20;
constexpr uint64_t kVmmHandle = 0x55d0c8a60000ull;
constexpr uint64_t kCoeffs = 0x7fa3a0000000ull;
constexpr uint64_t kCallCount = 0x7fa3a0000100ull;
constexpr int32_t kErrorNotFound = 500;
constexpr int32_t kMaxDynamicSharedAttr = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int32_t kAttrClusterDimension = 4;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
constexpr int32_t kAttrPriority = 8;          // CU_LAUNCH_ATTRIBUTE_PRIORITY

class SampleWriter {
 public:
  SampleWriter(format::TraceWriter& writer, uint64_t seed) : writer_(writer), rng_(seed) {}

  // Appends one event built by `fill` after the common fields are set.
  void emit(uint32_t thread, const std::function<void(Event::Builder)>& fill) {
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<Event>();
    time_ += 1500 + rng_.below(4000);
    event.setTimeNs(time_);
    event.setThreadId(thread);
    fill(event);
    writer_.append(message);
    ++count_;
  }

  void store(schema::Content::Builder out, const std::vector<uint8_t>& bytes) {
    writer_.storeContent(bytes.data(), bytes.size(), out);
  }

  void range(schema::MemoryRange::Builder out, uint64_t address, schema::MemoryKind kind,
             const std::vector<uint8_t>& bytes) {
    out.setAddress(address);
    out.setAllocationBase(address);
    out.setKind(kind);
    store(out.initContent(), bytes);
  }

  Rng& rng() { return rng_; }
  uint64_t time() const { return time_; }
  uint64_t count() const { return count_; }

 private:
  format::TraceWriter& writer_;
  Rng rng_;
  uint64_t time_ = 0;
  uint64_t count_ = 0;
};

void setParams(schema::Launch::Builder launch, const std::vector<uint8_t>& params,
               const std::vector<std::pair<uint32_t, uint32_t>>& layout) {
  launch.setParams(kj::arrayPtr(params.data(), params.size()));
  auto list = launch.initParamLayout(static_cast<unsigned>(layout.size()));
  for (unsigned i = 0; i < layout.size(); ++i) {
    list[i].setOffset(layout[i].first);
    list[i].setSize(layout[i].second);
  }
}

void setParamInfo(capnp::List<schema::ParamInfo>::Builder list,
                  const std::vector<std::pair<uint32_t, uint32_t>>& layout) {
  for (unsigned i = 0; i < layout.size(); ++i) {
    list[i].setOffset(layout[i].first);
    list[i].setSize(layout[i].second);
  }
}

std::vector<uint8_t> loadImage(const SampleOptions& options, const std::string& name, Rng& rng) {
  std::string dir = options.kernelsDir.empty() ? defaultKernelsDir() : options.kernelsDir;
  if (!options.realImages || dir.empty()) return syntheticImage(name, rng);
  return readFileBytes(dir + "/" + name);
}

}  // namespace

bool haveKernelImages() { return !defaultKernelsDir().empty(); }

std::string defaultKernelsDir() {
#ifdef KCAP_KERNELS_DIR
  return KCAP_KERNELS_DIR;
#else
  return {};
#endif
}

uint64_t sampleEventCount(const SampleOptions& options) {
  return 44 + 3ull * options.axpyLaunches + (options.orderly ? 1 : 0);
}

void writeSampleTrace(const std::string& path, const SampleOptions& options) {
  format::TraceWriter::Options wo;
  wo.pieceSize = options.pieceSize;
  wo.batchBytes = options.batchBytes;
  wo.zstdLevel = options.zstdLevel;
  wo.writerVersion = options.writerVersion;
  auto writer = format::TraceWriter::create(path, wo);
  SampleWriter s(*writer, options.seed);
  Rng& rng = s.rng();

  const uint32_t n = options.elements;
  const uint32_t grid = (n + kSampleBlock - 1) / kSampleBlock;
  const uint64_t bufferBytes = uint64_t{n} * sizeof(float);

  // Memory the program works on.
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(static_cast<int>(rng.below(2049)) - 1024) / 256.0f;  // fp16-exact
  std::vector<float> coeffs(16);
  for (size_t k = 0; k < coeffs.size(); ++k) {
    coeffs[k] = static_cast<float>(static_cast<int>(k % 3) - 1) * 0.125f / static_cast<float>(k + 1);
  }
  std::vector<uint16_t> weights(options.weightElements);
  for (auto& w : weights) {
    w = floatToHalf(static_cast<float>(static_cast<int>(rng.below(4097)) - 2048) / 4096.0f);
  }
  const std::vector<uint8_t> xBytes = bytesOf(x);
  const std::vector<uint8_t> zeros(bufferBytes, 0);
  const std::vector<uint8_t> coeffBytes = bytesOf(coeffs);
  const std::vector<uint8_t> weightBytes = bytesOf(weights);

  std::vector<uint8_t> axpyImage = loadImage(options, "axpy.fatbin", rng);
  std::vector<uint8_t> constImage = loadImage(options, "constant.fatbin", rng);

  s.emit(0, [&](Event::Builder e) {
    auto b = e.initTraceBegin();
    b.setHostName(kSampleHostName);
    b.setProcessId(kSampleProcessId);
    const char* argv[] = {"python3", "train.py", "--batch-size", "8", "--steps=3"};
    auto a = b.initArgv(5);
    for (unsigned i = 0; i < 5; ++i) a.set(i, argv[i]);
    const char* env[][2] = {{"CUDA_VISIBLE_DEVICES", "0,1"},
                            {"KCAP_OUTPUT", "/var/tmp/train.kcap"},
                            {"LD_PRELOAD", "/opt/kcap/lib/libkcap_interpose.so"},
                            {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}};
    auto en = b.initEnvironment(4);
    for (unsigned i = 0; i < 4; ++i) {
      en[i].setKey(env[i][0]);
      en[i].setValue(env[i][1]);
    }
    b.setDriverVersion(13000);
    b.setRuntimeVersion(12080);
    auto devices = b.initDevices(2);
    struct Dev {
      const char* name;
      int major, minor, sms;
      uint64_t memory;
      const char* bus;
    } devs[2] = {{kSampleDevice0, 9, 0, 132, 150754820096ull, "0000:3b:00.0"},
                 {kSampleDevice1, 8, 0, 108, 85174583296ull, "0000:86:00.0"}};
    for (unsigned i = 0; i < 2; ++i) {
      devices[i].setOrdinal(static_cast<int32_t>(i));
      devices[i].setName(devs[i].name);
      uint8_t uuid[16];
      for (auto& u : uuid) u = static_cast<uint8_t>(rng.next());
      devices[i].setUuid(kj::arrayPtr(uuid, 16));
      devices[i].setComputeCapabilityMajor(devs[i].major);
      devices[i].setComputeCapabilityMinor(devs[i].minor);
      devices[i].setTotalMemoryBytes(devs[i].memory);
      devices[i].setMultiprocessorCount(devs[i].sms);
      devices[i].setPciBusId(devs[i].bus);
    }
    b.setStartUnixNs(1764480000123456789ull);
    b.setStartMonotonicNs(98765432100000ull);
    b.setKcapVersion("0.1.0");
    b.setCaptureMode(schema::CaptureMode::FULL);
    auto opts = b.initOptions(2);
    opts[0].setKey("mode");
    opts[0].setValue("full");
    opts[1].setKey("piece-size");
    opts[1].setValue(std::to_string(options.pieceSize));
    auto libs = b.initLibraries(2);
    libs[0].setKey("torch");
    libs[0].setValue("2.9.0+cu130");
    libs[1].setKey("triton");
    libs[1].setValue("3.5.0");
  });
  s.emit(0, [&](Event::Builder e) {
    auto m = e.initMessage();
    m.setLevel(schema::Message::Level::INFO);
    m.setText("kcap 0.1.0 recording to /var/tmp/train.kcap (mode full)");
  });

  // Code.
  s.emit(kMainThread, [&](Event::Builder e) {
    auto m = e.initModuleLoad();
    m.setHandle(kAxpyModule);
    m.setApi(schema::LoadApi::MODULE_LOAD_DATA);
    m.setImageKind(schema::ImageKind::FATBIN);
    s.store(m.initImage(), axpyImage);
    m.setContext(kContext);
    m.setDevice(0);
    m.setResult(0);
  });
  s.emit(kMainThread, [&](Event::Builder e) {
    auto f = e.initFunctionBind();
    f.setHandle(kAxpyFunction);
    f.setModuleHandle(kAxpyModule);
    f.setName(options.axpyName);
    setParamInfo(f.initParams(4), {{0, 4}, {8, 8}, {16, 8}, {24, 4}});
    f.setApi(schema::BindApi::MODULE_GET_FUNCTION);
    f.setContext(kContext);
  });
  s.emit(kMainThread, [&](Event::Builder e) {
    auto m = e.initModuleLoad();
    m.setHandle(kLibrary);
    m.setIsLibrary(true);
    m.setApi(schema::LoadApi::LIBRARY_LOAD_DATA);
    m.setImageKind(schema::ImageKind::FATBIN);
    s.store(m.initImage(), constImage);
    auto jit = m.initJitOptions(2);
    jit[0].setOption(0);  // CU_JIT_MAX_REGISTERS
    jit[0].setValue(64);
    jit[1].setOption(7);  // CU_JIT_OPTIMIZATION_LEVEL
    jit[1].setValue(4);
    m.setContext(kContext);
    m.setDevice(0);
    m.setResult(0);
    auto g = m.initGlobals(2);
    g[0].setName("coeffs");
    g[0].setAddress(kCoeffs);
    g[0].setSize(coeffBytes.size());
    g[1].setName("call_count");
    g[1].setAddress(kCallCount);
    g[1].setSize(4);
  });
  s.emit(kMainThread, [&](Event::Builder e) {
    auto f = e.initFunctionBind();
    f.setHandle(kPolyKernel);
    f.setIsKernel(true);
    f.setModuleHandle(kLibrary);
    f.setName("poly_eval");
    setParamInfo(f.initParams(3), {{0, 8}, {8, 8}, {16, 4}});
    f.setApi(schema::BindApi::LIBRARY_GET_KERNEL);
    f.setContext(kContext);
  });
  s.emit(kMainThread, [&](Event::Builder e) {
    auto a = e.initFunctionAttribute();
    a.setHandle(kPolyKernel);
    a.setApi(schema::AttributeApi::KERNEL_SET_ATTRIBUTE);
    a.setAttribute(kMaxDynamicSharedAttr);
    a.setValue(65536);
    a.setDevice(0);
    a.setResult(0);
  });
  s.emit(kMainThread, [&](Event::Builder e) {
    auto o = e.initSync();
    o.setOp(schema::SyncKind::STREAM_CREATE);
    o.setStream(kStream);
    o.setFlags(1);  // CU_STREAM_NON_BLOCKING
    o.setPriority(-1);
  });

  // Memory.
  auto alloc = [&](schema::AllocKind kind, uint64_t address, uint64_t size, uint64_t stream, uint64_t handle,
                   uint64_t flags) {
    s.emit(kMainThread, [&](Event::Builder e) {
      auto a = e.initAlloc();
      a.setKind(kind);
      a.setAddress(address);
      a.setSize(size);
      a.setDevice(0);
      a.setContext(kContext);
      a.setStream(stream);
      a.setHandle(handle);
      a.setFlags(flags);
    });
  };
  alloc(schema::AllocKind::MEM_ALLOC, kSampleX, bufferBytes, 0, 0, 0);
  alloc(schema::AllocKind::MEM_ALLOC, kSampleY, bufferBytes, 0, 0, 0);
  alloc(schema::AllocKind::MANAGED, kSampleZ, bufferBytes, 0, 0, 1 /* CU_MEM_ATTACH_GLOBAL */);
  alloc(schema::AllocKind::ASYNC, kScratch, 1u << 16, kStream, 0, 0);
  alloc(schema::AllocKind::HOST_ALLOC, kStaging, bufferBytes, 0, 0, 2 /* CU_MEMHOSTALLOC_DEVICEMAP */);
  alloc(schema::AllocKind::VMM_RESERVE, kVmmBase, kVmmSize, 0, 0, 0);
  alloc(schema::AllocKind::VMM_CREATE, 0, kVmmSize, 0, kVmmHandle, 0);
  alloc(schema::AllocKind::VMM_MAP, kVmmBase, kVmmSize, 0, kVmmHandle, 0);

  auto copyIn = [&](uint64_t dst, const std::vector<uint8_t>& bytes, uint64_t stream, bool async) {
    s.emit(kMainThread, [&](Event::Builder e) {
      auto c = e.initMemcpy();
      c.setDirection(schema::CopyDirection::HOST_TO_DEVICE);
      c.setDst(dst);
      c.setSize(bytes.size());
      c.setStream(stream);
      c.setIsAsync(async);
      s.store(c.initData(), bytes);
    });
  };
  copyIn(kSampleX, xBytes, 0, false);
  s.emit(kMainThread, [&](Event::Builder e) {
    auto m = e.initMemset();
    m.setDst(kSampleY);
    m.setValue(0);
    m.setElementSize(4);
    m.setCount(n);
    m.setHeight(1);
    m.setStream(kStream);
    m.setIsAsync(true);
  });
  copyIn(kCoeffs, coeffBytes, 0, false);
  copyIn(kVmmBase, weightBytes, kStream, true);

  // Launches.
  uint64_t launchIndex = 0;
  std::vector<float> y(n, 0.0f);
  auto axpyParams = [&]() {
    std::vector<uint8_t> params;
    putParam(params, 0, kSampleAlpha);
    putParam(params, 8, kSampleX);
    putParam(params, 16, kSampleY);
    putParam(params, 24, static_cast<int32_t>(n));
    return params;
  };
  auto timing = [&](uint64_t index) {
    s.emit(0, [&](Event::Builder e) {
      auto t = e.initKernelTiming();
      t.setLaunchIndex(index);
      uint64_t start = 5000000000ull + s.time() * 3;
      t.setStartNs(start);
      t.setEndNs(start + 2000 + uint64_t{n} / 4);
    });
  };
  for (unsigned k = 0; k < options.axpyLaunches; ++k) {
    const std::vector<uint8_t> yBefore = bytesOf(y);
    for (uint32_t i = 0; i < n; ++i) y[i] = kSampleAlpha * x[i] + y[i];
    const std::vector<uint8_t> yAfter = bytesOf(y);
    const uint64_t index = launchIndex++;
    s.emit(kMainThread, [&](Event::Builder e) {
      auto l = e.initLaunch();
      l.setLaunchIndex(index);
      l.setApi(schema::LaunchApi::LAUNCH_KERNEL);
      l.setFunction(kAxpyFunction);
      l.setKernelName(options.axpyName);
      l.setGridX(grid);
      l.setGridY(1);
      l.setGridZ(1);
      l.setBlockX(kSampleBlock);
      l.setBlockY(1);
      l.setBlockZ(1);
      l.setStream(kStream);
      l.setContext(kContext);
      l.setDevice(0);
      setParams(l, axpyParams(), {{0, 4}, {8, 8}, {16, 8}, {24, 4}});
      auto p = l.initPointers(2);
      p[0].setOffset(8);
      p[0].setValue(kSampleX);
      p[0].setAllocationBase(kSampleX);
      p[1].setOffset(16);
      p[1].setValue(kSampleY);
      p[1].setAllocationBase(kSampleY);
      auto pre = l.initPre(2);
      s.range(pre[0], kSampleX, schema::MemoryKind::ALLOCATION, xBytes);
      s.range(pre[1], kSampleY, schema::MemoryKind::ALLOCATION, yBefore);
    });
    s.emit(kMainThread, [&](Event::Builder e) {
      auto end = e.initLaunchEnd();
      end.setLaunchIndex(index);
      auto post = end.initPost(1);
      s.range(post[0], kSampleY, schema::MemoryKind::ALLOCATION, yAfter);
    });
    timing(index);
  }

  {
    // poly_eval from a second thread, through cuLaunchKernelEx.
    std::vector<float> z(n);
    for (uint32_t i = 0; i < n; ++i) {
      float acc = coeffs[15];
      for (int k = 14; k >= 0; --k) acc = acc * x[i] + coeffs[static_cast<size_t>(k)];
      z[i] = acc;
    }
    const uint32_t polyBlock = 128;
    const uint32_t polyGrid = (n + polyBlock - 1) / polyBlock;
    const std::vector<uint8_t> countBefore(4, 0);
    std::vector<uint8_t> countAfter(4, 0);
    std::memcpy(countAfter.data(), &polyGrid, 4);
    const uint64_t index = launchIndex++;
    s.emit(kWorkerThread, [&](Event::Builder e) {
      auto l = e.initLaunch();
      l.setLaunchIndex(index);
      l.setApi(schema::LaunchApi::LAUNCH_KERNEL_EX);
      l.setPerThreadStream(true);
      l.setFunction(kPolyKernel);
      l.setKernelName("poly_eval");
      l.setGridX(polyGrid);
      l.setGridY(1);
      l.setGridZ(1);
      l.setBlockX(polyBlock);
      l.setBlockY(1);
      l.setBlockZ(1);
      l.setSharedMemBytes(1024);
      l.setStream(kStream);
      l.setContext(kContext);
      l.setDevice(0);
      auto attrs = l.initAttributes(2);
      uint8_t value[64] = {};
      uint32_t cluster[3] = {1, 1, 1};
      std::memcpy(value, cluster, sizeof cluster);
      attrs[0].setId(kAttrClusterDimension);
      attrs[0].setValue(kj::arrayPtr(value, 64));
      std::memset(value, 0, sizeof value);
      int32_t priority = -1;
      std::memcpy(value, &priority, 4);
      attrs[1].setId(kAttrPriority);
      attrs[1].setValue(kj::arrayPtr(value, 64));
      std::vector<uint8_t> params;
      putParam(params, 0, kSampleX);
      putParam(params, 8, kSampleZ);
      putParam(params, 16, static_cast<int32_t>(n));
      setParams(l, params, {{0, 8}, {8, 8}, {16, 4}});
      auto p = l.initPointers(2);
      p[0].setOffset(0);
      p[0].setValue(kSampleX);
      p[0].setAllocationBase(kSampleX);
      p[1].setOffset(8);
      p[1].setValue(kSampleZ);
      p[1].setAllocationBase(kSampleZ);
      auto pre = l.initPre(4);
      s.range(pre[0], kSampleX, schema::MemoryKind::ALLOCATION, xBytes);
      s.range(pre[1], kSampleZ, schema::MemoryKind::MANAGED, zeros);
      s.range(pre[2], kCoeffs, schema::MemoryKind::MODULE_GLOBAL, coeffBytes);
      s.range(pre[3], kCallCount, schema::MemoryKind::MODULE_GLOBAL, countBefore);
    });
    s.emit(kWorkerThread, [&](Event::Builder e) {
      auto end = e.initLaunchEnd();
      end.setLaunchIndex(index);
      auto post = end.initPost(2);
      s.range(post[0], kSampleZ, schema::MemoryKind::MANAGED, bytesOf(z));
      s.range(post[1], kCallCount, schema::MemoryKind::MODULE_GLOBAL, countAfter);
    });
    timing(index);
  }

  s.emit(kWorkerThread, [&](Event::Builder e) {
    auto a = e.initApiError();
    a.setFunction("cuModuleGetFunction");
    a.setResult(kErrorNotFound);
    a.setResultName("CUDA_ERROR_NOT_FOUND");
  });

  // A launch captured into a graph, and the graph's launch.
  auto syncOp = [&](schema::SyncKind op, uint64_t stream, uint64_t event, uint32_t flags) {
    s.emit(kMainThread, [&](Event::Builder e) {
      auto o = e.initSync();
      o.setOp(op);
      o.setStream(stream);
      o.setEvent(event);
      o.setFlags(flags);
    });
  };
  syncOp(schema::SyncKind::STREAM_BEGIN_CAPTURE, kStream, 0, 0);
  {
    const uint64_t index = launchIndex++;
    s.emit(kMainThread, [&](Event::Builder e) {
      auto l = e.initLaunch();
      l.setLaunchIndex(index);
      l.setApi(schema::LaunchApi::LAUNCH_KERNEL);
      l.setFunction(kAxpyFunction);
      l.setKernelName(options.axpyName);
      l.setGridX(grid);
      l.setGridY(1);
      l.setGridZ(1);
      l.setBlockX(kSampleBlock);
      l.setBlockY(1);
      l.setBlockZ(1);
      l.setStream(kStream);
      l.setContext(kContext);
      l.setDevice(0);
      setParams(l, axpyParams(), {{0, 4}, {8, 8}, {16, 8}, {24, 4}});
      l.setCapturing(true);
    });
    s.emit(kMainThread, [&](Event::Builder e) { e.initLaunchEnd().setLaunchIndex(index); });
  }
  syncOp(schema::SyncKind::STREAM_END_CAPTURE, kStream, 0, 0);
  s.emit(kMainThread, [&](Event::Builder e) {
    auto g = e.initGraphLaunch();
    g.setGraphExec(kGraphExec);
    g.setStream(kStream);
  });
  syncOp(schema::SyncKind::EVENT_CREATE, 0, kEvent, 2 /* CU_EVENT_DISABLE_TIMING */);
  syncOp(schema::SyncKind::EVENT_RECORD, kStream, kEvent, 0);
  syncOp(schema::SyncKind::STREAM_SYNCHRONIZE, kStream, 0, 0);

  s.emit(kMainThread, [&](Event::Builder e) {
    auto c = e.initMemcpy();
    c.setDirection(schema::CopyDirection::DEVICE_TO_HOST);
    c.setSrc(kSampleY);
    c.setSize(bufferBytes);
  });

  auto release = [&](schema::AllocKind kind, uint64_t address, uint64_t size, uint64_t stream, uint64_t handle) {
    s.emit(kMainThread, [&](Event::Builder e) {
      auto f = e.initFree();
      f.setKind(kind);
      f.setAddress(address);
      f.setSize(size);
      f.setStream(stream);
      f.setHandle(handle);
    });
  };
  release(schema::AllocKind::ASYNC, kScratch, 0, kStream, 0);
  release(schema::AllocKind::MEM_ALLOC, kSampleX, 0, 0, 0);
  release(schema::AllocKind::MEM_ALLOC, kSampleY, 0, 0, 0);
  release(schema::AllocKind::MANAGED, kSampleZ, 0, 0, 0);
  release(schema::AllocKind::HOST_ALLOC, kStaging, 0, 0, 0);
  release(schema::AllocKind::VMM_MAP, kVmmBase, kVmmSize, 0, 0);
  release(schema::AllocKind::VMM_CREATE, 0, 0, 0, kVmmHandle);
  release(schema::AllocKind::VMM_RESERVE, kVmmBase, kVmmSize, 0, 0);
  s.emit(kMainThread, [&](Event::Builder e) {
    auto u = e.initModuleUnload();
    u.setHandle(kLibrary);
    u.setIsLibrary(true);
  });
  syncOp(schema::SyncKind::STREAM_DESTROY, kStream, 0, 0);
  s.emit(0, [&](Event::Builder e) {
    auto m = e.initMessage();
    m.setLevel(schema::Message::Level::WARNING);
    m.setText("1 allocation was freed while a recorded launch could still reach it");
  });

  if (options.orderly) {
    const uint64_t before = s.count();
    s.emit(0, [&](Event::Builder e) {
      auto t = e.initTraceEnd();
      t.setReason(schema::EndReason::EXIT);
      t.setEventCount(before);
      t.setLaunchCount(launchIndex);
      t.setMessage("normal exit");
    });
    writer->close();
  } else {
    writer->flush();
    const uint64_t cut = writer->stats().fileBytes;
    writer->close();
    if (::truncate(path.c_str(), static_cast<off_t>(cut)) != 0) {
      throw std::runtime_error(path + ": truncate: " + std::strerror(errno));
    }
  }
  if (s.count() != sampleEventCount(options)) {
    throw std::logic_error("writeSampleTrace wrote " + std::to_string(s.count()) + " events, sampleEventCount says " +
                           std::to_string(sampleEventCount(options)));
  }
}

}  // namespace kcap::test
