// The observers of CUDA graphs: executables made and updated, their nodes
// changed, and the calls that make conditional nodes (whose parameters the
// driver cannot be asked for later). Each setter's parameters are handed to
// the recorder in the generic form (CUgraphNodeParams), whichever setter the
// program called.
#include "observe/observer.h"

#include "record/recorder.h"

namespace kcap {
namespace {

void recordDefine(const GraphDefineCall& call) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->graphDefined(call);
  }
}

void recordUpdate(schema::GraphUpdateApi api, CUresult result, CUgraphExec exec, CUgraphNode node,
                  const CUgraphNodeParams* params, bool enabled = true) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->graphNodeUpdated(
        {.api = api, .result = result, .exec = exec, .node = node, .params = params, .enabled = enabled});
  }
}

CUgraphNodeParams ofType(CUgraphNodeType type) {
  CUgraphNodeParams params{};
  params.type = type;
  return params;
}

CUDA_KERNEL_NODE_PARAMS_v3 kernelParams(const CUDA_KERNEL_NODE_PARAMS_v1& p) {
  return {.func = p.func,
          .gridDimX = p.gridDimX,
          .gridDimY = p.gridDimY,
          .gridDimZ = p.gridDimZ,
          .blockDimX = p.blockDimX,
          .blockDimY = p.blockDimY,
          .blockDimZ = p.blockDimZ,
          .sharedMemBytes = p.sharedMemBytes,
          .kernelParams = p.kernelParams,
          .extra = p.extra,
          .kern = nullptr,
          .ctx = nullptr};
}

CUDA_KERNEL_NODE_PARAMS_v3 kernelParams(const CUDA_KERNEL_NODE_PARAMS_v2& p) { return kernelNodeParams(p); }

template <class KernelParams>
void recordKernelUpdate(CUresult result, CUgraphExec exec, CUgraphNode node, const KernelParams* p) {
  if (p == nullptr) {
    return;  // the call failed: apiError has it
  }
  CUgraphNodeParams params = ofType(CU_GRAPH_NODE_TYPE_KERNEL);
  params.kernel = kernelParams(*p);
  recordUpdate(schema::GraphUpdateApi::KERNEL_PARAMS, result, exec, node, &params);
}

template <class Instantiated>
uint64_t madeExec(CUresult result, Instantiated* exec) {
  return result == CUDA_SUCCESS && exec != nullptr ? reinterpret_cast<uint64_t>(*exec) : 0;
}

}  // namespace

// ---- executables made and updated ---------------------------------------------------

void Observer<HookId::cuGraphInstantiateWithFlags_hook>::after(HookId, CUresult result, CUgraphExec* exec,
                                                               CUgraph graph, unsigned long long flags) {
  recordDefine({.api = schema::GraphDefineApi::INSTANTIATE,
                .result = result,
                .exec = reinterpret_cast<CUgraphExec>(madeExec(result, exec)),
                .graph = graph,
                .flags = flags});
}

void Observer<HookId::cuGraphInstantiateWithParams_hook>::after(HookId, CUresult result, CUgraphExec* exec,
                                                                CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  recordDefine({.api = schema::GraphDefineApi::INSTANTIATE_WITH_PARAMS,
                .result = result,
                .exec = reinterpret_cast<CUgraphExec>(madeExec(result, exec)),
                .graph = graph,
                .flags = params != nullptr ? params->flags : 0});
}

// A failed update leaves the executable as it was: nothing to describe
// (apiError records the call).
void Observer<HookId::cuGraphExecUpdate_hook>::after(HookId, CUresult result, CUgraphExec exec, CUgraph graph,
                                                     CUgraphNode*, CUgraphExecUpdateResult*) {
  if (result == CUDA_SUCCESS) {
    recordDefine({.api = schema::GraphDefineApi::EXEC_UPDATE, .result = result, .exec = exec, .graph = graph});
  }
}

void Observer<HookId::cuGraphExecUpdate_hook>::after(HookId, CUresult result, CUgraphExec exec, CUgraph graph,
                                                     CUgraphExecUpdateResultInfo*) {
  if (result == CUDA_SUCCESS) {
    recordDefine({.api = schema::GraphDefineApi::EXEC_UPDATE, .result = result, .exec = exec, .graph = graph});
  }
}

// ---- one node of an executable changed ----------------------------------------------

void Observer<HookId::cuGraphExecKernelNodeSetParams_hook>::after(HookId, CUresult result, CUgraphExec exec,
                                                                  CUgraphNode node,
                                                                  const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  recordKernelUpdate(result, exec, node, params);
}

void Observer<HookId::cuGraphExecKernelNodeSetParams_hook>::after(HookId, CUresult result, CUgraphExec exec,
                                                                  CUgraphNode node,
                                                                  const CUDA_KERNEL_NODE_PARAMS* params) {
  recordKernelUpdate(result, exec, node, params);
}

void Observer<HookId::cuGraphExecMemcpyNodeSetParams_hook>::after(HookId, CUresult result, CUgraphExec exec,
                                                                  CUgraphNode node, const CUDA_MEMCPY3D* copy,
                                                                  CUcontext context) {
  if (copy == nullptr) {
    return;
  }
  CUgraphNodeParams params = ofType(CU_GRAPH_NODE_TYPE_MEMCPY);
  params.memcpy.copyCtx = context;
  params.memcpy.copyParams = *copy;
  recordUpdate(schema::GraphUpdateApi::MEMCPY_PARAMS, result, exec, node, &params);
}

void Observer<HookId::cuGraphExecMemsetNodeSetParams_hook>::after(HookId, CUresult result, CUgraphExec exec,
                                                                  CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* set,
                                                                  CUcontext context) {
  if (set == nullptr) {
    return;
  }
  CUgraphNodeParams params = ofType(CU_GRAPH_NODE_TYPE_MEMSET);
  params.memset = {.dst = set->dst,
                   .pitch = set->pitch,
                   .value = set->value,
                   .elementSize = set->elementSize,
                   .width = set->width,
                   .height = set->height,
                   .ctx = context};
  recordUpdate(schema::GraphUpdateApi::MEMSET_PARAMS, result, exec, node, &params);
}

void Observer<HookId::cuGraphExecHostNodeSetParams_hook>::after(HookId, CUresult result, CUgraphExec exec,
                                                                CUgraphNode node, const CUDA_HOST_NODE_PARAMS* host) {
  if (host == nullptr) {
    return;
  }
  CUgraphNodeParams params = ofType(CU_GRAPH_NODE_TYPE_HOST);
  params.host.fn = host->fn;
  params.host.userData = host->userData;
  recordUpdate(schema::GraphUpdateApi::HOST_PARAMS, result, exec, node, &params);
}

void Observer<HookId::cuGraphExecChildGraphNodeSetParams_hook>::after(HookId, CUresult result, CUgraphExec exec,
                                                                      CUgraphNode node, CUgraph child) {
  CUgraphNodeParams params = ofType(CU_GRAPH_NODE_TYPE_GRAPH);
  params.graph.graph = child;
  recordUpdate(schema::GraphUpdateApi::CHILD_GRAPH, result, exec, node, &params);
}

void Observer<HookId::cuGraphExecEventRecordNodeSetEvent_hook>::after(HookId, CUresult result, CUgraphExec exec,
                                                                      CUgraphNode node, CUevent event) {
  CUgraphNodeParams params = ofType(CU_GRAPH_NODE_TYPE_EVENT_RECORD);
  params.eventRecord.event = event;
  recordUpdate(schema::GraphUpdateApi::EVENT_RECORD, result, exec, node, &params);
}

void Observer<HookId::cuGraphExecEventWaitNodeSetEvent_hook>::after(HookId, CUresult result, CUgraphExec exec,
                                                                    CUgraphNode node, CUevent event) {
  CUgraphNodeParams params = ofType(CU_GRAPH_NODE_TYPE_WAIT_EVENT);
  params.eventWait.event = event;
  recordUpdate(schema::GraphUpdateApi::EVENT_WAIT, result, exec, node, &params);
}

void Observer<HookId::cuGraphExecNodeSetParams_hook>::after(HookId, CUresult result, CUgraphExec exec, CUgraphNode node,
                                                            CUgraphNodeParams* params) {
  if (params != nullptr) {
    recordUpdate(schema::GraphUpdateApi::NODE_PARAMS, result, exec, node, params);
  }
}

void Observer<HookId::cuGraphNodeSetEnabled_hook>::after(HookId, CUresult result, CUgraphExec exec, CUgraphNode node,
                                                         unsigned enabled) {
  recordUpdate(schema::GraphUpdateApi::ENABLE, result, exec, node, nullptr, enabled != 0);
}

// ---- conditional nodes ----------------------------------------------------------------

void Observer<HookId::cuGraphAddNode_hook>::after(HookId, CUresult result, CUgraphNode* node, CUgraph,
                                                  const CUgraphNode*, size_t, CUgraphNodeParams* params) {
  if (result == CUDA_SUCCESS && node != nullptr && params != nullptr &&
      params->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    conditionalNodeAdded(*node, params->conditional);
  }
}

void Observer<HookId::cuGraphAddNode_hook>::after(HookId, CUresult result, CUgraphNode* node, CUgraph,
                                                  const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                                  CUgraphNodeParams* params) {
  if (result == CUDA_SUCCESS && node != nullptr && params != nullptr &&
      params->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    conditionalNodeAdded(*node, params->conditional);
  }
}

void Observer<HookId::cuGraphConditionalHandleCreate_hook>::after(HookId, CUresult result,
                                                                  CUgraphConditionalHandle* handle, CUgraph, CUcontext,
                                                                  unsigned defaultValue, unsigned flags) {
  if (result == CUDA_SUCCESS && handle != nullptr) {
    conditionalHandleCreated(*handle, defaultValue, flags);
  }
}

}  // namespace kcap
