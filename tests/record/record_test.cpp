// Recording, end to end and without a GPU: test programs run under the shim
// against the driver double with KCAP_OUTPUT set, and the traces are read
// back and checked on their content: code images, parameter bytes, pointer
// words, memory before and after each launch, and the library API's wrappers.
// The other record_*_test.cpp files go on with copies, options, threads,
// process ends and `kcap record` (record_trace.h: what they share).
#include "record_trace.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::record;  // the recording tests' shared helpers (record_trace.h)

// ---- the direct_launch program, fully recorded ----------------------------------------------

class DirectLaunch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new kcap::test::TempDir("kcap-record");
    plain_ = new Outcome(plainRun(interposeProgram("direct_launch")));
    const std::string path = dir_->file("direct.kcap");
    shimmed_ = new Outcome(recorded(interposeProgram("direct_launch"), {}, {{"KCAP_OUTPUT", path}}));
    trace_ = new Trace(path);
  }
  static void TearDownTestSuite() {
    delete trace_;
    delete shimmed_;
    delete plain_;
    delete dir_;
  }
  static std::string path() { return dir_->file("direct.kcap"); }
  // Allocations in the order the program made them: x, y, sum, z, w.
  static uint64_t allocation(size_t i) { return trace_->of(Event::ALLOC).at(i).getAlloc().getAddress(); }

  static kcap::test::TempDir* dir_;
  static Outcome* plain_;
  static Outcome* shimmed_;
  static Trace* trace_;
};
kcap::test::TempDir* DirectLaunch::dir_ = nullptr;
Outcome* DirectLaunch::plain_ = nullptr;
Outcome* DirectLaunch::shimmed_ = nullptr;
Trace* DirectLaunch::trace_ = nullptr;

TEST_F(DirectLaunch, TheProgramIsUnchangedAndTheTraceChecks) {
  expectClean(*plain_);
  expectClean(*shimmed_);
  EXPECT_EQ(shimmed_->out, plain_->out);
  expectChecks(path());
}

TEST_F(DirectLaunch, TraceBeginDescribesProcessDriverAndDevice) {
  const auto events = trace_->all();
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.front().which(), Event::TRACE_BEGIN);
  const auto begin = events.front().getTraceBegin();
  EXPECT_GT(begin.getProcessId(), 0u);
  ASSERT_GE(begin.getArgv().size(), 1u);
  EXPECT_NE(std::string(begin.getArgv()[0].cStr()).find("direct_launch"), std::string::npos);
  EXPECT_EQ(begin.getDriverVersion(), 13000);
  EXPECT_EQ(begin.getCaptureMode(), schema::CaptureMode::FULL);
  ASSERT_EQ(begin.getDevices().size(), 1u);
  const auto device = begin.getDevices()[0];
  EXPECT_EQ(std::string(device.getName().cStr()), "kcap driver double");
  EXPECT_EQ(device.getComputeCapabilityMajor(), 9);
  EXPECT_EQ(device.getMultiprocessorCount(), 132);
  EXPECT_EQ(device.getTotalMemoryBytes(), 16ull << 30);
  EXPECT_EQ(std::string(device.getPciBusId().cStr()), "0000:3b:00.0");
  ASSERT_EQ(device.getUuid().size(), 16u);
  EXPECT_EQ(device.getUuid()[0], 0xD0);
  bool sawMode = false;
  for (const auto option : begin.getOptions()) {
    sawMode =
        sawMode || (std::string(option.getKey().cStr()) == "mode" && std::string(option.getValue().cStr()) == "full");
  }
  EXPECT_TRUE(sawMode);
  bool sawOutput = false;
  for (const auto variable : begin.getEnvironment()) {
    sawOutput = sawOutput || std::string(variable.getKey().cStr()) == "KCAP_OUTPUT";
  }
  EXPECT_TRUE(sawOutput);
}

TEST_F(DirectLaunch, EveryImageIsStoredAsLoaded) {
  const auto loads = trace_->of(Event::MODULE_LOAD);
  ASSERT_EQ(loads.size(), 4u);
  const auto axpy = loads[0].getModuleLoad();
  EXPECT_EQ(axpy.getApi(), schema::LoadApi::MODULE_LOAD_DATA);
  EXPECT_EQ(axpy.getImageKind(), schema::ImageKind::FATBIN);
  EXPECT_EQ(trace_->bytes(axpy.getImage()), fileBytes(kernelFile("axpy.fatbin")));

  const auto reduce = loads[1].getModuleLoad();
  EXPECT_EQ(reduce.getApi(), schema::LoadApi::MODULE_LOAD);
  EXPECT_EQ(reduce.getImageKind(), schema::ImageKind::CUBIN);
  EXPECT_EQ(std::string(reduce.getPath().cStr()), kernelFile("reduce.sm_90.cubin"));
  EXPECT_EQ(trace_->bytes(reduce.getImage()), fileBytes(kernelFile("reduce.sm_90.cubin")));

  const auto scale = loads[2].getModuleLoad();
  EXPECT_EQ(scale.getApi(), schema::LoadApi::MODULE_LOAD_DATA_EX);
  EXPECT_EQ(scale.getImageKind(), schema::ImageKind::PTX);
  std::vector<uint8_t> ptx = fileBytes(kernelFile("struct_param.ptx"));
  ptx.push_back(0);  // the text and its terminator
  EXPECT_EQ(trace_->bytes(scale.getImage()), ptx);

  const auto poly = loads[3].getModuleLoad();
  EXPECT_EQ(poly.getApi(), schema::LoadApi::MODULE_LOAD_FAT_BINARY);
  EXPECT_EQ(trace_->bytes(poly.getImage()), fileBytes(kernelFile("constant.fatbin")));
  ASSERT_EQ(poly.getGlobals().size(), 2u);
  EXPECT_EQ(std::string(poly.getGlobals()[0].getName().cStr()), "call_count");
  EXPECT_EQ(poly.getGlobals()[0].getSize(), 4u);
  EXPECT_EQ(std::string(poly.getGlobals()[1].getName().cStr()), "coeffs");
  EXPECT_EQ(poly.getGlobals()[1].getSize(), 64u);
  for (const auto& load : loads) {
    EXPECT_EQ(load.getModuleLoad().getResult(), 0);
    EXPECT_NE(load.getModuleLoad().getHandle(), 0u);
  }
}

TEST_F(DirectLaunch, FunctionsAreBoundWithTheirLayout) {
  const auto binds = trace_->of(Event::FUNCTION_BIND);
  ASSERT_EQ(binds.size(), 4u);
  const auto axpy = binds[0].getFunctionBind();
  EXPECT_EQ(std::string(axpy.getName().cStr()), "axpy");
  EXPECT_EQ(axpy.getModuleHandle(), trace_->of(Event::MODULE_LOAD)[0].getModuleLoad().getHandle());
  ASSERT_EQ(axpy.getParams().size(), 4u);
  const uint32_t offsets[] = {0, 8, 16, 24};
  const uint32_t sizes[] = {4, 8, 8, 4};
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(axpy.getParams()[i].getOffset(), offsets[i]);
    EXPECT_EQ(axpy.getParams()[i].getSize(), sizes[i]);
  }
  const auto attributes = trace_->of(Event::FUNCTION_ATTRIBUTE);
  ASSERT_EQ(attributes.size(), 1u);
  EXPECT_EQ(attributes[0].getFunctionAttribute().getHandle(), axpy.getHandle());
  EXPECT_EQ(attributes[0].getFunctionAttribute().getAttribute(),
            static_cast<int>(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES));
}

TEST_F(DirectLaunch, AxpyLaunchesHaveParametersPointersAndMemory) {
  const auto launches = trace_->launches();
  const auto ends = trace_->launchEnds();
  ASSERT_EQ(launches.size(), 6u);
  ASSERT_EQ(ends.size(), 6u);
  const uint64_t x = allocation(0);
  const uint64_t y = allocation(1);
  for (unsigned i = 0; i < 3; ++i) {
    const auto launch = launches[i];
    SCOPED_TRACE("axpy launch " + std::to_string(i));
    EXPECT_EQ(launch.getLaunchIndex(), i);
    EXPECT_EQ(std::string(launch.getKernelName().cStr()), "axpy");
    EXPECT_EQ(launch.getGridX(), 4u);
    EXPECT_EQ(launch.getBlockX(), 256u);
    EXPECT_EQ(launch.getParamsFromExtra(), i == 1);
    const auto params = launch.getParams();
    ASSERT_EQ(params.size(), 28u);
    EXPECT_EQ(at<float>(params, 0), 2.0f);
    EXPECT_EQ(at<uint64_t>(params, 8), x);
    EXPECT_EQ(at<uint64_t>(params, 16), y);
    EXPECT_EQ(at<int>(params, 24), kN);
    ASSERT_EQ(launch.getPointers().size(), 2u);
    EXPECT_EQ(launch.getPointers()[0].getOffset(), 8u);
    EXPECT_EQ(launch.getPointers()[0].getAllocationBase(), x);
    EXPECT_EQ(launch.getPointers()[1].getOffset(), 16u);
    EXPECT_EQ(launch.getPointers()[1].getAllocationBase(), y);
    // y = 2i uploaded, then each launch adds 2x: 2i, 4i, 6i, 8i.
    EXPECT_EQ(floatsAt(*trace_, launch.getPre(), x), ramp(1.0f));
    EXPECT_EQ(floatsAt(*trace_, launch.getPre(), y), ramp(2.0f * static_cast<float>(i + 1)));
    EXPECT_EQ(ends[i].getLaunchIndex(), i);
    EXPECT_EQ(ends[i].getResult(), 0);
    EXPECT_EQ(floatsAt(*trace_, ends[i].getPost(), y), ramp(2.0f * static_cast<float>(i + 2)));
    EXPECT_EQ(floatsAt(*trace_, ends[i].getPost(), x), ramp(1.0f));
  }
}

TEST_F(DirectLaunch, ReduceScaleStructAndGlobals) {
  const auto launches = trace_->launches();
  const auto ends = trace_->launchEnds();
  ASSERT_EQ(launches.size(), 6u);
  const uint64_t x = allocation(0);
  const uint64_t sum = allocation(2);
  const uint64_t z = allocation(3);
  const uint64_t w = allocation(4);

  const auto reduce = launches[3];
  EXPECT_EQ(std::string(reduce.getKernelName().cStr()), "reduce_sum");
  ASSERT_EQ(reduce.getPointers().size(), 2u);
  EXPECT_EQ(reduce.getPointers()[1].getOffset(), 8u);
  EXPECT_EQ(floatsAt(*trace_, reduce.getPre(), sum), std::vector<float>{0.0f});
  EXPECT_EQ(floatsAt(*trace_, ends[3].getPost(), sum), std::vector<float>{499500.0f});

  // One 32-byte struct parameter: the pointer words are found inside it.
  const auto scale = launches[4];
  EXPECT_EQ(std::string(scale.getKernelName().cStr()), "scale_struct");
  ASSERT_EQ(scale.getParams().size(), 32u);
  ASSERT_EQ(scale.getParamLayout().size(), 1u);
  ASSERT_EQ(scale.getPointers().size(), 2u);
  EXPECT_EQ(scale.getPointers()[0].getOffset(), 0u);
  EXPECT_EQ(scale.getPointers()[0].getValue(), x);
  EXPECT_EQ(scale.getPointers()[1].getOffset(), 8u);
  EXPECT_EQ(scale.getPointers()[1].getValue(), z);
  EXPECT_EQ(at<float>(scale.getParams(), 16), 0.5f);
  EXPECT_EQ(at<long long>(scale.getParams(), 24), 2);
  EXPECT_NE(scale.getStream(), 0u);
  EXPECT_EQ(floatsAt(*trace_, scale.getPre(), z), std::vector<float>(kN, 0.0f));
  std::vector<float> scaled(kN, 0.0f);
  for (int i = 0; i < kN; i += 2) {
    scaled[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i);
  }
  EXPECT_EQ(floatsAt(*trace_, ends[4].getPost(), z), scaled);

  // poly_eval reads __constant__ coeffs and counts blocks in __device__ call_count.
  const auto poly = launches[5];
  const auto globals = trace_->of(Event::MODULE_LOAD)[3].getModuleLoad().getGlobals();
  const uint64_t callCount = globals[0].getAddress();
  const uint64_t coeffs = globals[1].getAddress();
  const auto coeffsRange = rangeAt(poly.getPre(), coeffs);
  ASSERT_TRUE(coeffsRange.has_value());
  EXPECT_EQ(coeffsRange->getKind(), schema::MemoryKind::MODULE_GLOBAL);
  std::vector<float> expected(16, 0.0f);
  expected[0] = 1.0f;
  expected[1] = 2.0f;
  EXPECT_EQ(floatsOf(trace_->bytes(coeffsRange->getContent())), expected);
  const auto before = rangeAt(poly.getPre(), callCount);
  const auto after = rangeAt(ends[5].getPost(), callCount);
  ASSERT_TRUE(before && after);
  EXPECT_EQ(trace_->bytes(before->getContent()), asBytes(std::vector<int>{0}));
  EXPECT_EQ(trace_->bytes(after->getContent()), asBytes(std::vector<int>{4}));
  std::vector<float> line(kN);
  for (int i = 0; i < kN; ++i) {
    line[static_cast<size_t>(i)] = 1.0f + 2.0f * static_cast<float>(i);
  }
  EXPECT_EQ(floatsAt(*trace_, ends[5].getPost(), w), line);
}

TEST_F(DirectLaunch, CopiesMemsetsAllocationsAndFrees) {
  std::vector<schema::Memcpy::Reader> toDevice;
  std::vector<schema::Memcpy::Reader> deviceToDevice;
  size_t toHost = 0;
  for (const auto& e : trace_->of(Event::MEMCPY)) {
    const auto copy = e.getMemcpy();
    if (copy.getDirection() == schema::CopyDirection::HOST_TO_DEVICE) {
      toDevice.push_back(copy);
    } else if (copy.getDirection() == schema::CopyDirection::DEVICE_TO_DEVICE) {
      deviceToDevice.push_back(copy);
    } else if (copy.getDirection() == schema::CopyDirection::DEVICE_TO_HOST) {
      ++toHost;
      EXPECT_EQ(copy.getData().getSize(), 0u);
    }
  }
  ASSERT_EQ(toDevice.size(), 3u);
  EXPECT_EQ(toDevice[0].getDst(), allocation(0));
  EXPECT_EQ(floatsOf(trace_->bytes(toDevice[0].getData())), ramp(1.0f));
  EXPECT_EQ(floatsOf(trace_->bytes(toDevice[1].getData())), ramp(2.0f));
  EXPECT_TRUE(toDevice[2].getIsAsync());
  EXPECT_EQ(toDevice[2].getSize(), 64u);
  EXPECT_EQ(floatsOf(trace_->bytes(toDevice[2].getData()))[1], 2.0f);
  ASSERT_EQ(deviceToDevice.size(), 1u);
  EXPECT_EQ(deviceToDevice[0].getDst(), allocation(3));
  EXPECT_EQ(deviceToDevice[0].getSrc(), allocation(4));
  EXPECT_EQ(deviceToDevice[0].getData().getSize(), 0u);
  EXPECT_EQ(toHost, 6u);

  const auto memsets = trace_->of(Event::MEMSET);
  ASSERT_EQ(memsets.size(), 2u);
  EXPECT_EQ(memsets[0].getMemset().getElementSize(), 4u);
  EXPECT_EQ(memsets[0].getMemset().getDst(), allocation(2));
  EXPECT_EQ(memsets[1].getMemset().getElementSize(), 1u);
  EXPECT_EQ(memsets[1].getMemset().getCount(), static_cast<uint64_t>(kN * 4));

  EXPECT_EQ(trace_->of(Event::ALLOC).size(), 5u);
  EXPECT_EQ(trace_->of(Event::FREE).size(), 5u);
  EXPECT_EQ(trace_->of(Event::MODULE_UNLOAD).size(), 4u);
}

TEST_F(DirectLaunch, EventsCarryThreadAndTimeAndTheTraceEndsInOrder) {
  const auto events = trace_->all();
  const uint32_t pid = events.front().getTraceBegin().getProcessId();
  uint64_t lastTime = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].getSeq(), i);
    EXPECT_GE(events[i].getTimeNs(), lastTime);
    lastTime = events[i].getTimeNs();
    if (events[i].which() == Event::LAUNCH) {
      EXPECT_EQ(events[i].getThreadId(), pid);  // the main thread's id is the pid
    }
  }
  const auto end = events.back();
  ASSERT_EQ(end.which(), Event::TRACE_END);
  EXPECT_EQ(end.getTraceEnd().getReason(), schema::EndReason::EXIT);
  EXPECT_EQ(end.getTraceEnd().getEventCount(), end.getSeq());
  EXPECT_EQ(end.getTraceEnd().getLaunchCount(), 6u);
  EXPECT_TRUE(trace_->reader().closed());
}

// ---- library API, wrappers, kernels, attributes, host memory ----------------------------

TEST(Record, LibrariesWrappersKernelsAndHostMemory) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("library.kcap");
  expectRecordedLikePlain(scenarioProgram(), {"library"}, path);
  Trace trace(path);

  const auto loads = trace.of(Event::MODULE_LOAD);
  ASSERT_EQ(loads.size(), 3u);
  const auto fromFile = loads[2].getModuleLoad();
  EXPECT_EQ(fromFile.getApi(), schema::LoadApi::LIBRARY_LOAD_FROM_FILE);
  EXPECT_TRUE(fromFile.getIsLibrary());
  EXPECT_EQ(std::string(fromFile.getPath().cStr()), kernelFile("struct_param.sm_90.cubin"));
  EXPECT_EQ(trace.bytes(fromFile.getImage()), fileBytes(kernelFile("struct_param.sm_90.cubin")));
  const auto constant = loads[0].getModuleLoad();
  EXPECT_TRUE(constant.getIsLibrary());
  EXPECT_EQ(constant.getApi(), schema::LoadApi::LIBRARY_LOAD_DATA);
  EXPECT_EQ(constant.getImageKind(), schema::ImageKind::FATBIN_WRAPPER);
  EXPECT_EQ(trace.bytes(constant.getImage()), fileBytes(kernelFile("constant.fatbin")));
  ASSERT_EQ(constant.getGlobals().size(), 2u);
  const uint64_t coeffs = constant.getGlobals()[1].getAddress();
  const auto rdc = loads[1].getModuleLoad();
  EXPECT_EQ(rdc.getImageKind(), schema::ImageKind::FATBIN_WRAPPER);
  EXPECT_EQ(trace.bytes(rdc.getImage()), fileBytes(kernelFile("reduce.fatbin")));
  ASSERT_EQ(rdc.getExtraImages().size(), 1u);
  EXPECT_EQ(trace.bytes(rdc.getExtraImages()[0]), fileBytes(kernelFile("axpy.fatbin")));

  const auto binds = trace.of(Event::FUNCTION_BIND);
  ASSERT_EQ(binds.size(), 4u);
  const auto poly = binds[0].getFunctionBind();
  EXPECT_EQ(poly.getApi(), schema::BindApi::LIBRARY_GET_KERNEL);
  EXPECT_TRUE(poly.getIsKernel());
  EXPECT_EQ(std::string(poly.getName().cStr()), "poly_eval");
  EXPECT_EQ(poly.getModuleHandle(), constant.getHandle());
  EXPECT_EQ(poly.getParams().size(), 3u);  // from cuKernelGetParamInfo
  const auto function = binds[1].getFunctionBind();
  EXPECT_EQ(function.getApi(), schema::BindApi::KERNEL_GET_FUNCTION);
  EXPECT_EQ(function.getSourceHandle(), poly.getHandle());
  EXPECT_EQ(function.getModuleHandle(), constant.getHandle());
  EXPECT_EQ(std::string(function.getName().cStr()), "poly_eval");
  EXPECT_EQ(function.getParams().size(), 3u);
  EXPECT_EQ(binds[2].getFunctionBind().getApi(), schema::BindApi::LIBRARY_GET_KERNEL);
  const auto module = binds[3].getFunctionBind();
  EXPECT_EQ(module.getApi(), schema::BindApi::LIBRARY_GET_MODULE);
  EXPECT_EQ(module.getModuleHandle(), rdc.getHandle());

  const auto attributes = trace.of(Event::FUNCTION_ATTRIBUTE);
  ASSERT_EQ(attributes.size(), 2u);
  EXPECT_EQ(attributes[0].getFunctionAttribute().getApi(), schema::AttributeApi::KERNEL_SET_ATTRIBUTE);
  EXPECT_EQ(attributes[0].getFunctionAttribute().getValue(), 1024);
  EXPECT_EQ(attributes[0].getFunctionAttribute().getDevice(), 0);
  EXPECT_EQ(attributes[1].getFunctionAttribute().getApi(), schema::AttributeApi::FUNC_SET_CACHE_CONFIG);
  EXPECT_EQ(attributes[1].getFunctionAttribute().getHandle(), function.getHandle());

  const auto launches = trace.launches();
  ASSERT_EQ(launches.size(), 4u);
  // The CUkernel as launch handle; the library's __constant__ as uploaded by cuMemcpy.
  EXPECT_EQ(launches[0].getFunction(), poly.getHandle());
  EXPECT_EQ(std::string(launches[0].getKernelName().cStr()), "poly_eval");
  const auto coeffsRange = rangeAt(launches[0].getPre(), coeffs);
  ASSERT_TRUE(coeffsRange.has_value());
  EXPECT_EQ(floatsOf(trace.bytes(coeffsRange->getContent()))[1], 0.5f);
  // cuLaunchKernelEx: every attribute, raw.
  const auto ex = launches[1];
  EXPECT_EQ(ex.getApi(), schema::LaunchApi::LAUNCH_KERNEL_EX);
  EXPECT_EQ(ex.getFunction(), function.getHandle());
  EXPECT_EQ(ex.getSharedMemBytes(), 256u);
  EXPECT_EQ(ex.getBlockX(), 128u);
  EXPECT_NE(ex.getStream(), 0u);
  ASSERT_EQ(ex.getAttributes().size(), 2u);
  EXPECT_EQ(ex.getAttributes()[0].getId(), static_cast<int>(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION));
  ASSERT_EQ(ex.getAttributes()[0].getValue().size(), sizeof(CUlaunchAttributeValue));
  EXPECT_EQ(at<unsigned>(ex.getAttributes()[0].getValue(), 0), 2u);
  EXPECT_EQ(ex.getAttributes()[1].getId(), static_cast<int>(CU_LAUNCH_ATTRIBUTE_PRIORITY));
  EXPECT_EQ(at<int>(ex.getAttributes()[1].getValue(), 0), 7);
  // The per-thread default stream, and a pointer array: the allocation the
  // table points into is snapshotted too.
  const auto indirect = launches[2];
  EXPECT_TRUE(indirect.getPerThreadStream());
  EXPECT_EQ(std::string(indirect.getKernelName().cStr()), "axpy");
  ASSERT_EQ(indirect.getIndirectPointers().size(), 1u);
  const auto word = indirect.getIndirectPointers()[0];
  EXPECT_EQ(word.getBufferAddress(), at<uint64_t>(indirect.getParams(), 8));
  EXPECT_EQ(word.getOffset(), 40u);
  EXPECT_EQ(word.getValue(), word.getAllocationBase() + 64);
  const auto hidden = rangeAt(indirect.getPre(), word.getAllocationBase());
  ASSERT_TRUE(hidden.has_value());
  EXPECT_EQ(floatsOf(trace.bytes(hidden->getContent())), std::vector<float>(1024, 3.14159274f));
  // Page-locked host memory as a kernel argument.
  const auto pinned = launches[3];
  const uint64_t pinnedAddress = at<uint64_t>(pinned.getParams(), 0);
  const auto pinnedRange = rangeAt(pinned.getPre(), pinnedAddress);
  ASSERT_TRUE(pinnedRange.has_value());
  EXPECT_EQ(pinnedRange->getKind(), schema::MemoryKind::HOST_MAPPED);
  EXPECT_EQ(floatsOf(trace.bytes(pinnedRange->getContent())), ramp(4.0f, 1024));

  // Unified copies: direction found, host bytes kept.
  std::vector<schema::Memcpy::Reader> unified;
  for (const auto& e : trace.of(Event::MEMCPY)) {
    if (e.getMemcpy().getDst() == coeffs || e.getMemcpy().getIsAsync()) {
      unified.push_back(e.getMemcpy());
    }
  }
  ASSERT_EQ(unified.size(), 2u);
  EXPECT_EQ(unified[0].getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(floatsOf(trace.bytes(unified[0].getData()))[0], 3.0f);
  EXPECT_EQ(unified[1].getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(floatsOf(trace.bytes(unified[1].getData())), ramp(4.0f, 1024));

  bool sawD16 = false;
  for (const auto& e : trace.of(Event::MEMSET)) {
    sawD16 = sawD16 || (e.getMemset().getElementSize() == 2 && e.getMemset().getValue() == 0x3c00);
  }
  EXPECT_TRUE(sawD16);
  std::multiset<schema::AllocKind> allocKinds;
  for (const auto& e : trace.of(Event::ALLOC)) {
    allocKinds.insert(e.getAlloc().getKind());
  }
  EXPECT_EQ(allocKinds.count(schema::AllocKind::HOST_ALLOC), 1u);
  EXPECT_EQ(allocKinds.count(schema::AllocKind::ASYNC), 1u);
  std::multiset<schema::SyncKind> syncs;
  for (const auto& e : trace.of(Event::SYNC)) {
    syncs.insert(e.getSync().getOp());
  }
  for (const auto kind :
       {schema::SyncKind::STREAM_CREATE, schema::SyncKind::EVENT_CREATE, schema::SyncKind::EVENT_RECORD,
        schema::SyncKind::STREAM_WAIT_EVENT, schema::SyncKind::EVENT_SYNCHRONIZE, schema::SyncKind::EVENT_DESTROY,
        schema::SyncKind::STREAM_DESTROY}) {
    EXPECT_EQ(syncs.count(kind), 1u) << static_cast<int>(kind);
  }
  EXPECT_EQ(syncs.count(schema::SyncKind::STREAM_SYNCHRONIZE), 2u);

  const auto errors = trace.of(Event::API_ERROR);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(std::string(errors[0].getApiError().getFunction().cStr()), "cuModuleGetFunction");
  EXPECT_EQ(errors[0].getApiError().getResult(), static_cast<int>(CUDA_ERROR_NOT_FOUND));
  EXPECT_EQ(std::string(errors[0].getApiError().getResultName().cStr()), "CUDA_ERROR_NOT_FOUND");
  EXPECT_EQ(trace.of(Event::MODULE_UNLOAD).size(), 3u);
}

}  // namespace
}  // namespace kcap_test
