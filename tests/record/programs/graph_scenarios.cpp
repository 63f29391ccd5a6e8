// Test programs for recording CUDA graphs, one per scenario (argv[1]),
// against the driver double. Each prints "result ..." lines (compared with
// and without the shim) and checks its own results.
//
//   explicit  a graph built node by node with one node of every type the
//             shim records: memset z = 0 -> copy z = 10i from page-locked host memory ->
//             axpy(1, z, y) -> a child graph with axpy(1, x, y) -> empty ->
//             event record -> event wait -> host node (counts its calls) ->
//             allocation (4 KiB) -> its free -> an `if` conditional (default 1,
//             assigned at each launch) whose body is axpy(1, x, y). x = i,
//             y = 2i. Instantiated through an entry point looked up with
//             cuGetProcAddress and launched (y = 14i); the first axpy
//             node set to a = 2 and launched; the memset node disabled (the
//             copy overwrites z all the same) and launched; the executable updated from the same graph built
//             with a = 3 (cuGraphExecUpdate) and launched.
//   captured  a stream capture of memset z = 0, copy z = 10i from the host,
//             axpy(1, z, y), instantiated with cuGraphInstantiateWithParams
//             and launched twice.
//   updated   memset z = 0 -> copy z = 10i from the host -> axpy(1, z, y),
//             instantiated and launched (y = 12i); updated from a graph built
//             the same way with a = 3 (cuGraphExecUpdate, no clone) and its
//             axpy node then set to a = 4 through the FIRST graph's node
//             handle (the driver pairs the two graphs' nodes), launched
//             (y = 52i).
//   while     a `while` conditional (default 1, assigned at each launch)
//             whose body is axpy(1, x, y) -> graph_countdown(handle,
//             counter): counter = 3 before each of two launches, so the
//             body runs 3 times a launch (y = 8i).
//   during-capture  an executable graph (axpy(1, x, y)) launched on one
//             stream while another stream captures an axpy(1, x, y) in
//             global mode: the capture must survive whatever the recorder
//             synchronizes; then the captured graph launched (y = 4i).
//   capture-modes  during-capture in each stream capture mode (global,
//             thread-local, relaxed), with a plain axpy(1, x, y) launched
//             on the other stream too while the capture is open; y reset
//             to 2i before each (y = 5i after each).
//   decode    a decode step as a graph, for bisect: a plain launch of
//             axpy(1, x, y) over the first 100 elements; a graph of that
//             same axpy launched; then a graph of it -> axpy(1, x, y) over
//             all elements, launched (y = 6i below element 100, 3i from
//             it). kernels/axpy_changed.cu changes element 100 only, so
//             with it only the last graph's second node diverges.
//   captured-copy  z = 5i; axpy(1, x, y); a capture of memset z = 0 ->
//             copy of x's first 100 elements into z -> axpy(1, z, y); a
//             plain axpy(1, x, y) between the capture and the graph's
//             launch (z still 5i: captured calls set and copy nothing);
//             the graph launched (y = 5i below element 100, 4i from it).
//   graph-memory  a capture of stream-ordered allocations (graph memory):
//             temp allocated, x copied into it, axpy(1, temp, y), temp freed;
//             kept allocated, x copied into it (not freed in the graph).
//             Three times: the graph launched, then two axpy(1, kept, y)
//             on the stream outside the graph, then kept freed on the
//             stream (so that the graph may run again) (y = 11i).
//   graph-frees  buf allocated on the stream and x copied into it;
//             axpy(1, buf, y); a capture of axpy(1, buf, y) and buf's free;
//             axpy(1, x, y); the graph launched (its free node frees buf);
//             axpy(1, x, y) (y = 6i).
#include "driver_program.h"

#include <cudaTypedefs.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kN = 1024;

CUcontext start() {
  CUdevice device = 0;
  CUcontext context = nullptr;
  DRIVER(cuInit, 0);
  DRIVER(cuDeviceGet, &device, 0);
  DRIVER(cuDevicePrimaryCtxRetain, &context, device);
  DRIVER(cuCtxSetCurrent, context);
  return context;
}

std::vector<float> ramp(float scale) {
  std::vector<float> v(kN);
  for (int i = 0; i < kN; ++i) {
    v[static_cast<std::size_t>(i)] = scale * static_cast<float>(i);
  }
  return v;
}

CUdeviceptr upload(const std::vector<float>& values) {
  CUdeviceptr device = 0;
  DRIVER(cuMemAlloc, &device, values.size() * sizeof(float));
  DRIVER(cuMemcpyHtoD, device, values.data(), values.size() * sizeof(float));
  return device;
}

// "result NAME v0 v1 v(kN-1)" of a kN-float buffer, and checks y = scale * i.
void expectRamp(const char* name, CUdeviceptr device, float scale) {
  std::vector<float> values(kN);
  DRIVER(cuMemcpyDtoH, values.data(), device, kN * sizeof(float));
  for (int i = 0; i < kN; ++i) {
    CHECK(values[static_cast<std::size_t>(i)] == scale * static_cast<float>(i));
  }
  std::printf("result %s %.1f %.1f %.1f\n", name, static_cast<double>(values[0]), static_cast<double>(values[1]),
              static_cast<double>(values[kN - 1]));
}

int g_hostCalls = 0;
void countCall(void*) { ++g_hostCalls; }

struct Program {
  CUcontext context = nullptr;
  std::string image = test::kernelImage("axpy.fatbin");
  CUmodule module = nullptr;
  CUfunction axpy = nullptr;
  CUdeviceptr x = 0;
  CUdeviceptr y = 0;
  CUdeviceptr z = 0;
  // Page-locked: a capture refuses a copy from pageable memory.
  float* host = nullptr;
  // Kernel node parameters are copied when a node is made or set: these
  // only need to live through those calls.
  float a = 1.0f;
  int n = kN;

  Program() : context(start()) {
    DRIVER(cuModuleLoadData, &module, image.data());
    DRIVER(cuModuleGetFunction, &axpy, module, "axpy");
    x = upload(ramp(1.0f));
    y = upload(ramp(2.0f));
    DRIVER(cuMemAlloc, &z, kN * sizeof(float));
    void* pinned = nullptr;
    DRIVER(cuMemAllocHost, &pinned, kN * sizeof(float));
    host = static_cast<float*>(pinned);
    const std::vector<float> values = ramp(10.0f);
    std::memcpy(host, values.data(), kN * sizeof(float));
  }

  CUDA_KERNEL_NODE_PARAMS axpyParams(void** params) const {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = axpy;
    p.gridDimX = kN / 256;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = params;
    return p;
  }
  // axpy(a, from, y) launched on `stream` (counted in the "made kernel" lines).
  void launchAxpy(CUstream stream, CUdeviceptr from) {
    void* params[] = {&a, &from, &y, &n};
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr);
    test::launchesMade().add("axpy");
  }
  CUgraphNode addAxpy(CUgraph graph, std::vector<CUgraphNode> deps, float scale, CUdeviceptr from) {
    a = scale;
    void* params[] = {&a, &from, &y, &n};
    const CUDA_KERNEL_NODE_PARAMS p = axpyParams(params);
    CUgraphNode node = nullptr;
    DRIVER(cuGraphAddKernelNode, &node, graph, deps.data(), deps.size(), &p);
    return node;  // not a launch call: not in the "made kernel" lines
  }
  CUDA_MEMCPY3D hostCopy() const {
    CUDA_MEMCPY3D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = host;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = z;
    copy.WidthInBytes = kN * sizeof(float);
    copy.Height = 1;
    copy.Depth = 1;
    return copy;
  }
};

struct Built {
  CUgraph graph = nullptr;
  CUgraphNode firstAxpy = nullptr;
  CUgraphNode memset = nullptr;
};

Built build(Program& p, CUevent event, float firstScale) {
  Built b;
  DRIVER(cuGraphCreate, &b.graph, 0);
  CUDA_MEMSET_NODE_PARAMS set{p.z, 0, 0, 4, kN, 1};
  DRIVER(cuGraphAddMemsetNode, &b.memset, b.graph, nullptr, 0, &set, p.context);
  const CUDA_MEMCPY3D copy = p.hostCopy();
  CUgraphNode memcpy = nullptr;
  DRIVER(cuGraphAddMemcpyNode, &memcpy, b.graph, &b.memset, 1, &copy, p.context);
  b.firstAxpy = p.addAxpy(b.graph, {memcpy}, firstScale, p.z);

  CUgraph child = nullptr;
  DRIVER(cuGraphCreate, &child, 0);
  p.addAxpy(child, {}, 1.0f, p.x);
  CUgraphNode childNode = nullptr;
  DRIVER(cuGraphAddChildGraphNode, &childNode, b.graph, &b.firstAxpy, 1, child);
  DRIVER(cuGraphDestroy, child);  // the node holds a copy

  CUgraphNode empty = nullptr;
  DRIVER(cuGraphAddEmptyNode, &empty, b.graph, &childNode, 1);
  CUgraphNode record = nullptr;
  DRIVER(cuGraphAddEventRecordNode, &record, b.graph, &empty, 1, event);
  CUgraphNode wait = nullptr;
  DRIVER(cuGraphAddEventWaitNode, &wait, b.graph, &record, 1, event);
  const CUDA_HOST_NODE_PARAMS hostParams{countCall, nullptr};
  CUgraphNode host = nullptr;
  DRIVER(cuGraphAddHostNode, &host, b.graph, &wait, 1, &hostParams);

  CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
  alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  alloc.poolProps.location.id = 0;
  alloc.bytesize = 4096;
  CUgraphNode allocNode = nullptr;
  DRIVER(cuGraphAddMemAllocNode, &allocNode, b.graph, &host, 1, &alloc);
  CUgraphNode freeNode = nullptr;
  DRIVER(cuGraphAddMemFreeNode, &freeNode, b.graph, &allocNode, 1, alloc.dptr);

  CUgraphConditionalHandle handle = 0;
  DRIVER(cuGraphConditionalHandleCreate, &handle, b.graph, p.context, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
  CUgraphNodeParams conditional{};
  conditional.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  conditional.conditional.handle = handle;
  conditional.conditional.type = CU_GRAPH_COND_TYPE_IF;
  conditional.conditional.size = 1;
  conditional.conditional.ctx = p.context;
  CUgraphNode conditionalNode = nullptr;
  DRIVER(cuGraphAddNode, &conditionalNode, b.graph, &freeNode, nullptr, 1, &conditional);
  p.addAxpy(conditional.conditional.phGraph_out[0], {}, 1.0f, p.x);
  return b;
}

int explicitGraph() {
  Program p;
  CUevent event = nullptr;
  DRIVER(cuEventCreate, &event, 0);
  const Built built = build(p, event, 1.0f);
  // Instantiated through an entry point looked up by name. cuda.h names
  // cuGraphInstantiateWithFlags "cuGraphInstantiate" since CUDA 12; the
  // double answers that name with the same function (and the shim must
  // then answer with its hook of it), a real driver may answer with the
  // older five-argument ABI, which is not called.
  void* renamed = nullptr;
  void* entry = nullptr;
  CUdriverProcAddressQueryResult found{};
  DRIVER(cuGetProcAddress, "cuGraphInstantiate", &renamed, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &found);
  DRIVER(cuGetProcAddress, "cuGraphInstantiateWithFlags", &entry, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &found);
  CHECK(entry != nullptr);
  CHECK_DOUBLE(renamed == entry);
  const auto instantiate = reinterpret_cast<PFN_cuGraphInstantiateWithFlags_v11040>(entry);
  CUgraphExec exec = nullptr;
  // Counted under the symbol the shim hooks it as.
  ::test::checked("cuGraphInstantiateWithFlags", instantiate(&exec, built.graph, 0), __FILE__, __LINE__);
  DRIVER(cuGraphLaunch, exec, nullptr);
  DRIVER(cuStreamSynchronize, nullptr);
  expectRamp("first", p.y, 14.0f);  // 2i + 10i + i + i

  p.a = 2.0f;
  CUdeviceptr from = p.z;
  void* params[] = {&p.a, &from, &p.y, &p.n};
  const CUDA_KERNEL_NODE_PARAMS changed = p.axpyParams(params);
  DRIVER(cuGraphExecKernelNodeSetParams, exec, built.firstAxpy, &changed);
  DRIVER(cuGraphLaunch, exec, nullptr);
  DRIVER(cuStreamSynchronize, nullptr);
  expectRamp("set_params", p.y, 36.0f);  // + 20i + i + i

  DRIVER(cuGraphNodeSetEnabled, exec, built.memset, 0);
  DRIVER(cuGraphLaunch, exec, nullptr);
  DRIVER(cuStreamSynchronize, nullptr);
  expectRamp("disabled_memset", p.y, 58.0f);
  CHECK(g_hostCalls == 3);

  // A copy of the graph with a = 3 in its first axpy node: the update the
  // driver can apply (same nodes, same conditional handle and allocation).
  // A real driver does not clone a graph with memory nodes
  // (CUDA_ERROR_NOT_SUPPORTED); the update is then left out there.
  CUgraph copy = nullptr;
  test::callsMade().add(TEST_STR(cuGraphClone));
  const CUresult cloned = cuGraphClone(&copy, built.graph);
  if (cloned == CUDA_ERROR_NOT_SUPPORTED && std::getenv("KCAP_TEST_REAL_DRIVER") != nullptr) {
    std::fprintf(stderr, "note: cuGraphClone of a graph with memory nodes: not supported, no update\n");
  } else {
    CHECK(cloned == CUDA_SUCCESS);
    CUgraphNode copiedAxpy = nullptr;
    DRIVER(cuGraphNodeFindInClone, &copiedAxpy, built.firstAxpy, copy);
    p.a = 3.0f;
    const CUDA_KERNEL_NODE_PARAMS three = p.axpyParams(params);
    DRIVER(cuGraphKernelNodeSetParams, copiedAxpy, &three);
    CUgraphExecUpdateResultInfo info{};
    DRIVER(cuGraphExecUpdate, exec, copy, &info);
    DRIVER(cuGraphLaunch, exec, nullptr);
    DRIVER(cuStreamSynchronize, nullptr);
    expectRamp("updated", p.y, 90.0f);  // + 30i + i + i
  }
  std::printf("result host_calls %d\n", g_hostCalls);

  DRIVER(cuGraphExecDestroy, exec);
  if (copy != nullptr) DRIVER(cuGraphDestroy, copy);
  DRIVER(cuGraphDestroy, built.graph);
  DRIVER(cuEventDestroy, event);
  test::printMade();
  return 0;
}

// The end of a stream capture: its graph, instantiated.
struct CapturedGraph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
};
CapturedGraph endCapture(CUstream stream) {
  CapturedGraph made;
  DRIVER(cuStreamEndCapture, stream, &made.graph);
  DRIVER(cuGraphInstantiate, &made.exec, made.graph, 0);
  return made;
}

// The end of a scenario of one captured graph: it and its stream destroyed.
int finish(const CapturedGraph& captured, CUstream stream) {
  DRIVER(cuGraphExecDestroy, captured.exec);
  DRIVER(cuGraphDestroy, captured.graph);
  DRIVER(cuStreamDestroy, stream);
  test::printMade();
  return 0;
}

int captured() {
  Program p;
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  DRIVER(cuMemsetD32Async, p.z, 0, kN, stream);
  DRIVER(cuMemcpyHtoDAsync, p.z, p.host, kN * sizeof(float), stream);
  p.launchAxpy(stream, p.z);
  CUgraph graph = nullptr;
  DRIVER(cuStreamEndCapture, stream, &graph);
  CUgraphExec exec = nullptr;
  CUDA_GRAPH_INSTANTIATE_PARAMS instantiate{};
  DRIVER(cuGraphInstantiateWithParams, &exec, graph, &instantiate);
  for (int i = 0; i < 2; ++i) {
    DRIVER(cuGraphLaunch, exec, stream);
  }
  DRIVER(cuStreamSynchronize, stream);
  expectRamp("captured", p.y, 22.0f);  // 2i + 10i + 10i
  return finish({graph, exec}, stream);
}

// memset z = 0 -> copy z = 10i from the host -> axpy(scale, z, y).
CUgraph copyThenAxpy(Program& p, float scale, CUgraphNode& axpy) {
  CUgraph graph = nullptr;
  DRIVER(cuGraphCreate, &graph, 0);
  CUDA_MEMSET_NODE_PARAMS set{p.z, 0, 0, 4, kN, 1};
  CUgraphNode memset = nullptr;
  DRIVER(cuGraphAddMemsetNode, &memset, graph, nullptr, 0, &set, p.context);
  const CUDA_MEMCPY3D copy = p.hostCopy();
  CUgraphNode memcpy = nullptr;
  DRIVER(cuGraphAddMemcpyNode, &memcpy, graph, &memset, 1, &copy, p.context);
  axpy = p.addAxpy(graph, {memcpy}, scale, p.z);
  return graph;
}

int updated() {
  Program p;
  CUgraphNode firstAxpy = nullptr, secondAxpy = nullptr;
  const CUgraph first = copyThenAxpy(p, 1.0f, firstAxpy);
  CUgraphExec exec = nullptr;
  DRIVER(cuGraphInstantiate, &exec, first, 0);
  DRIVER(cuGraphLaunch, exec, nullptr);
  DRIVER(cuStreamSynchronize, nullptr);
  expectRamp("first", p.y, 12.0f);  // 2i + 10i

  const CUgraph second = copyThenAxpy(p, 3.0f, secondAxpy);
  CUgraphExecUpdateResultInfo info{};
  DRIVER(cuGraphExecUpdate, exec, second, &info);
  p.a = 4.0f;
  CUdeviceptr from = p.z;
  void* params[] = {&p.a, &from, &p.y, &p.n};
  const CUDA_KERNEL_NODE_PARAMS four = p.axpyParams(params);
  DRIVER(cuGraphExecKernelNodeSetParams, exec, firstAxpy, &four);
  DRIVER(cuGraphLaunch, exec, nullptr);
  DRIVER(cuStreamSynchronize, nullptr);
  expectRamp("updated", p.y, 52.0f);  // + 40i
  DRIVER(cuGraphExecDestroy, exec);
  DRIVER(cuGraphDestroy, second);
  DRIVER(cuGraphDestroy, first);
  test::printMade();
  return 0;
}

// graph_countdown's module: driver-double material (the double runs its host
// version; tests/driver_double/host_kernels.cpp).
constexpr char kCountdownPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry graph_countdown(.param .u64 p0, .param .u64 p1)\n{\n\tret;\n}\n";

int whileLoop() {
  Program p;
  CUmodule conditions = nullptr;
  CUfunction countdown = nullptr;
  DRIVER(cuModuleLoadData, &conditions, kCountdownPtx);
  DRIVER(cuModuleGetFunction, &countdown, conditions, "graph_countdown");
  CUdeviceptr counter = 0;
  DRIVER(cuMemAlloc, &counter, sizeof(int));

  CUgraph graph = nullptr;
  DRIVER(cuGraphCreate, &graph, 0);
  CUgraphConditionalHandle handle = 0;
  DRIVER(cuGraphConditionalHandleCreate, &handle, graph, p.context, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
  CUgraphNodeParams loop{};
  loop.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  loop.conditional.handle = handle;
  loop.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  loop.conditional.size = 1;
  loop.conditional.ctx = p.context;
  CUgraphNode loopNode = nullptr;
  DRIVER(cuGraphAddNode, &loopNode, graph, nullptr, nullptr, 0, &loop);
  const CUgraph body = loop.conditional.phGraph_out[0];
  const CUgraphNode axpy = p.addAxpy(body, {}, 1.0f, p.x);
  void* countdownParams[] = {&handle, &counter};
  CUDA_KERNEL_NODE_PARAMS k{};
  k.func = countdown;
  k.gridDimX = k.gridDimY = k.gridDimZ = 1;
  k.blockDimX = k.blockDimY = k.blockDimZ = 1;
  k.kernelParams = countdownParams;
  CUgraphNode countdownNode = nullptr;
  DRIVER(cuGraphAddKernelNode, &countdownNode, body, &axpy, 1, &k);
  test::launchesMade().add("graph_countdown");

  CUgraphExec exec = nullptr;
  DRIVER(cuGraphInstantiate, &exec, graph, 0);
  for (int i = 0; i < 2; ++i) {
    const int three = 3;
    DRIVER(cuMemcpyHtoD, counter, &three, sizeof three);
    DRIVER(cuGraphLaunch, exec, nullptr);
    DRIVER(cuStreamSynchronize, nullptr);
  }
  expectRamp("while", p.y, 8.0f);  // 2i + 2 * 3i
  DRIVER(cuGraphExecDestroy, exec);
  DRIVER(cuGraphDestroy, graph);
  test::printMade();
  return 0;
}

int duringCapture() {
  Program p;
  CUgraph graph = nullptr;
  DRIVER(cuGraphCreate, &graph, 0);
  p.addAxpy(graph, {}, 1.0f, p.x);
  CUgraphExec exec = nullptr;
  DRIVER(cuGraphInstantiate, &exec, graph, 0);
  CUstream capturing = nullptr;
  CUstream other = nullptr;
  DRIVER(cuStreamCreate, &capturing, CU_STREAM_NON_BLOCKING);
  DRIVER(cuStreamCreate, &other, CU_STREAM_NON_BLOCKING);
  DRIVER(cuStreamBeginCapture, capturing, CU_STREAM_CAPTURE_MODE_GLOBAL);
  void* params[] = {&p.a, &p.x, &p.y, &p.n};
  DRIVER(cuLaunchKernel, p.axpy, kN / 256, 1, 1, 256, 1, 1, 0, capturing, params, nullptr);
  test::launchesMade().add("axpy");
  DRIVER(cuGraphLaunch, exec, other);  // runs: y = 3i
  CUgraph captured = nullptr;
  DRIVER(cuStreamEndCapture, capturing, &captured);  // fails if the capture was invalidated
  DRIVER(cuStreamSynchronize, other);
  CUgraphExec capturedExec = nullptr;
  DRIVER(cuGraphInstantiate, &capturedExec, captured, 0);
  DRIVER(cuGraphLaunch, capturedExec, capturing);
  DRIVER(cuStreamSynchronize, capturing);
  expectRamp("during_capture", p.y, 4.0f);
  DRIVER(cuGraphExecDestroy, capturedExec);
  DRIVER(cuGraphExecDestroy, exec);
  DRIVER(cuGraphDestroy, captured);
  DRIVER(cuGraphDestroy, graph);
  test::printMade();
  return 0;
}

int captureModes() {
  Program p;
  CUgraph graph = nullptr;
  DRIVER(cuGraphCreate, &graph, 0);
  p.addAxpy(graph, {}, 1.0f, p.x);
  CUgraphExec exec = nullptr;
  DRIVER(cuGraphInstantiate, &exec, graph, 0);
  CUstream capturing = nullptr;
  CUstream other = nullptr;
  DRIVER(cuStreamCreate, &capturing, CU_STREAM_NON_BLOCKING);
  DRIVER(cuStreamCreate, &other, CU_STREAM_NON_BLOCKING);
  const std::vector<float> start = ramp(2.0f);
  const std::pair<CUstreamCaptureMode, const char*> modes[] = {{CU_STREAM_CAPTURE_MODE_GLOBAL, "global"},
                                                               {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, "thread_local"},
                                                               {CU_STREAM_CAPTURE_MODE_RELAXED, "relaxed"}};
  for (const auto& [mode, name] : modes) {
    DRIVER(cuMemcpyHtoD, p.y, start.data(), kN * sizeof(float));
    DRIVER(cuStreamBeginCapture, capturing, mode);
    void* params[] = {&p.a, &p.x, &p.y, &p.n};
    DRIVER(cuLaunchKernel, p.axpy, kN / 256, 1, 1, 256, 1, 1, 0, capturing, params, nullptr);
    DRIVER(cuGraphLaunch, exec, other);                                                    // y = 3i
    DRIVER(cuLaunchKernel, p.axpy, kN / 256, 1, 1, 256, 1, 1, 0, other, params, nullptr);  // y = 4i
    test::launchesMade().add("axpy", 2);
    CUgraph captured = nullptr;
    DRIVER(cuStreamEndCapture, capturing, &captured);  // fails if the capture was invalidated
    DRIVER(cuStreamSynchronize, other);
    CUgraphExec capturedExec = nullptr;
    DRIVER(cuGraphInstantiate, &capturedExec, captured, 0);
    DRIVER(cuGraphLaunch, capturedExec, capturing);
    DRIVER(cuStreamSynchronize, capturing);
    expectRamp((std::string("capture_modes_") + name).c_str(), p.y, 5.0f);
    DRIVER(cuGraphExecDestroy, capturedExec);
    DRIVER(cuGraphDestroy, captured);
  }
  DRIVER(cuGraphExecDestroy, exec);
  DRIVER(cuGraphDestroy, graph);
  test::printMade();
  return 0;
}

// y[i] = (i < 100 ? below : from) * i.
void expectSplit(const char* name, CUdeviceptr device, float below, float from) {
  std::vector<float> values(kN);
  DRIVER(cuMemcpyDtoH, values.data(), device, kN * sizeof(float));
  for (int i = 0; i < kN; ++i) {
    CHECK(values[static_cast<std::size_t>(i)] == (i < 100 ? below : from) * static_cast<float>(i));
  }
  std::printf("result %s %.1f %.1f %.1f\n", name, static_cast<double>(values[1]), static_cast<double>(values[100]),
              static_cast<double>(values[kN - 1]));
}

int decode() {
  Program p;
  int head = 100;
  void* headParams[] = {&p.a, &p.x, &p.y, &head};
  DRIVER(cuLaunchKernel, p.axpy, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, headParams, nullptr);
  test::launchesMade().add("axpy");
  const auto addHead = [&](CUgraph graph, std::vector<CUgraphNode> deps) {
    const CUDA_KERNEL_NODE_PARAMS k = p.axpyParams(headParams);
    CUgraphNode node = nullptr;
    DRIVER(cuGraphAddKernelNode, &node, graph, deps.data(), deps.size(), &k);
    return node;
  };
  CUgraph warm = nullptr;
  DRIVER(cuGraphCreate, &warm, 0);
  addHead(warm, {});
  CUgraph step = nullptr;
  DRIVER(cuGraphCreate, &step, 0);
  p.addAxpy(step, {addHead(step, {})}, 1.0f, p.x);
  CUgraphExec warmExec = nullptr, stepExec = nullptr;
  // The warm-up graph may also be launched from a kernel (never here).
  DRIVER(cuGraphInstantiate, &warmExec, warm, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
  DRIVER(cuGraphInstantiate, &stepExec, step, 0);
  DRIVER(cuGraphLaunch, warmExec, nullptr);
  DRIVER(cuGraphLaunch, stepExec, nullptr);
  DRIVER(cuStreamSynchronize, nullptr);
  expectSplit("decode", p.y, 6.0f, 3.0f);
  DRIVER(cuGraphExecDestroy, stepExec);
  DRIVER(cuGraphExecDestroy, warmExec);
  DRIVER(cuGraphDestroy, step);
  DRIVER(cuGraphDestroy, warm);
  test::printMade();
  return 0;
}

int capturedCopy() {
  Program p;
  const std::vector<float> five = ramp(5.0f);
  DRIVER(cuMemcpyHtoD, p.z, five.data(), kN * sizeof(float));
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  p.launchAxpy(stream, p.x);
  DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  DRIVER(cuMemsetD32Async, p.z, 0, kN, stream);
  DRIVER(cuMemcpyDtoDAsync, p.z, p.x, 100 * sizeof(float), stream);
  p.launchAxpy(stream, p.z);
  const CapturedGraph graph = endCapture(stream);
  p.launchAxpy(stream, p.x);
  DRIVER(cuStreamSynchronize, stream);
  expectRamp("captured-copy-z", p.z, 5.0f);  // the captured calls set and copied nothing
  DRIVER(cuGraphLaunch, graph.exec, stream);
  DRIVER(cuStreamSynchronize, stream);
  expectSplit("captured-copy-y", p.y, 5.0f, 4.0f);
  return finish(graph, stream);
}

// The graph's own memory: made and freed by its launches, and one buffer
// that outlives each launch until the stream frees it.
int graphMemory() {
  Program p;
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  CUdeviceptr temp = 0;
  DRIVER(cuMemAllocAsync, &temp, kN * sizeof(float), stream);
  DRIVER(cuMemcpyDtoDAsync, temp, p.x, kN * sizeof(float), stream);
  p.launchAxpy(stream, temp);
  DRIVER(cuMemFreeAsync, temp, stream);
  CUdeviceptr kept = 0;
  DRIVER(cuMemAllocAsync, &kept, kN * sizeof(float), stream);
  DRIVER(cuMemcpyDtoDAsync, kept, p.x, kN * sizeof(float), stream);
  const CapturedGraph graph = endCapture(stream);
  for (int i = 0; i < 3; ++i) {
    DRIVER(cuGraphLaunch, graph.exec, stream);
    p.launchAxpy(stream, kept);
    p.launchAxpy(stream, kept);  // (a checkpoint between the two holds kept)
    DRIVER(cuMemFreeAsync, kept, stream);
  }
  DRIVER(cuStreamSynchronize, stream);
  expectRamp("graph-memory", p.y, 11.0f);  // 2i + 3 (i + i + i)
  return finish(graph, stream);
}

// A graph that frees memory allocated outside it: the memory is the
// program's until the graph runs.
int graphFrees() {
  Program p;
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  CUdeviceptr buf = 0;
  DRIVER(cuMemAllocAsync, &buf, kN * sizeof(float), stream);
  DRIVER(cuMemcpyDtoDAsync, buf, p.x, kN * sizeof(float), stream);
  p.launchAxpy(stream, buf);
  DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  p.launchAxpy(stream, buf);
  DRIVER(cuMemFreeAsync, buf, stream);
  const CapturedGraph graph = endCapture(stream);
  p.launchAxpy(stream, p.x);
  DRIVER(cuGraphLaunch, graph.exec, stream);
  p.launchAxpy(stream, p.x);
  DRIVER(cuStreamSynchronize, stream);
  expectRamp("graph-frees", p.y, 6.0f);  // 2i + i + i + i + i
  return finish(graph, stream);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "explicit") return explicitGraph();
  if (scenario == "captured") return captured();
  if (scenario == "updated") return updated();
  if (scenario == "while") return whileLoop();
  if (scenario == "during-capture") return duringCapture();
  if (scenario == "decode") return decode();
  if (scenario == "capture-modes") return captureModes();
  if (scenario == "captured-copy") return capturedCopy();
  if (scenario == "graph-memory") return graphMemory();
  if (scenario == "graph-frees") return graphFrees();
  std::fprintf(stderr,
               "usage: graph_scenarios explicit|captured|updated|while|during-capture|capture-modes|decode|"
               "captured-copy|graph-memory|graph-frees\n");
  return 2;
}
