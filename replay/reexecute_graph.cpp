// Re-execution of a graph launch in a checkpoint interval: the graph the
// launch ran (TraceModel::graphRun) made again at the recorded addresses
// (graph_rebuild.h), its host-source copies fed from the bytes logged with
// the launch, submitted on the replay stream behind the launches before it,
// and waited for (its host buffers live until it completed). NCCL's kernel
// nodes are not run: the copy node kcap added after each captured NCCL call
// writes what the call wrote at this launch, as the trace holds it.
#include "driver.h"
#include "graph_rebuild.h"
#include "reexecutor.h"

namespace kcap::replay {

void Reexecutor::runGraphLaunch(const StoredEvent& event, ReexecutionListener& listener) {
  const GraphLaunchRecord* record = nullptr;
  for (const GraphLaunchRecord& g : model_.graphLaunchRecords()) {
    if (g.launch.get() == &event) record = &g;
  }
  const std::string where = "graph launch at event #" + std::to_string(event.seq());
  if (record == nullptr) throw IntervalStop{IntervalVerdict::kNotReexecutable, where + ": not in the trace's model"};
  try {
    const GraphRun run = model_.graphRun(*record);
    const int device = run.define ? run.define->get().getGraphDefine().getDevice() : -1;
    if (const int covered = model_.checkpointDevice(); device >= 0 && covered >= 0 && device != covered) {
      if (!notedOtherDeviceGraph_) {
        listener.note("graph launches on other devices than the checkpoints' (device " + std::to_string(covered) +
                      ") are not re-run, as their launches are not");
        notedOtherDeviceGraph_ = true;
      }
      return;
    }
    std::map<const GraphNodeRun*, LoadedKernel> kernels;
    const std::function<void(const GraphBodyRun&)> load = [&](const GraphBodyRun& body) {
      for (const GraphNodeRun& node : body.nodes) {
        if (node.params.isKernel() && !isNcclKernelNode(node)) {
          kernels[&node] = r_.code_->kernelFor(model_.codeFor(graphNodeLaunch(node, record->graphLaunchIndex)));
        }
        for (const GraphBodyRun& nested : node.bodies) load(nested);
      }
    };
    load(run.root);
    GraphRebuildContext context;
    context.driver = &r_.driver_;
    context.context = r_.context_;
    context.device = r_.options_.device;
    context.reader = &reader_;
    context.translate = [this](uint64_t recorded) -> std::optional<uint64_t> {
      if (coverage(recorded, 1) != Coverage::kInside) return std::nullopt;
      return here(recorded);
    };
    context.kernel = [&](const GraphNodeRun& node) {
      const LoadedKernel& kernel = kernels.at(&node);
      return KernelNodeCode{kernel.function,
                            r_.buildParams(graphNodeLaunch(node, record->graphLaunchIndex), kernel).bytes};
    };
    RebuiltGraph graph(context, run);
    if (graph.ncclKernelsSkipped() != 0 && !notedGraphCollectives_) {
      listener.note(
          "NCCL kernel nodes of graphs are not re-run (they wait for peers that replay does not run): the "
          "bytes each graph launch's NCCL calls wrote, read back after it, are written in their place");
      notedGraphCollectives_ = true;
    }
    check(r_.driver_.cuGraphLaunch(graph.exec(), r_.stream_), "cuGraphLaunch");
    drain(listener);
    check(r_.driver_.cuStreamSynchronize(r_.stream_), "the graph launch");
  } catch (const CudaError& error) {
    throw CudaError(error.result(), where + ": " + error.what());
  } catch (const IntervalStop&) {
    throw;
  } catch (const std::exception& error) {
    throw IntervalStop{IntervalVerdict::kNotReexecutable, where + ": " + error.what()};
  }
}

}  // namespace kcap::replay
