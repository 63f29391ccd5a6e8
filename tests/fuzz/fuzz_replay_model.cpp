// libFuzzer target for what replay works out from a trace before it touches
// a GPU: the trace model (launches, their code through the bind events,
// graph launches and the graphs they run), the checkpoint plan (each
// checkpoint's check, the timeline between them, the memory regions grouped
// for placement), the seq gaps damage left, the code images (which code an
// sm_90 GPU would run, the globals they declare) and the demands each kernel
// makes of a GPU. `kcap replay`, `bisect`, `extract` and `doctor` all start
// here, on traces that come from other hosts.
//
// FormatError and ReplayError are the acceptable failures (a trace error
// named for the user); any other exception, a crash, a leak or a sanitizer
// report is a bug. As in fuzz_reader.cpp, each input is also read with its
// checksums recomputed, so that mutations reach the messages.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoints.h"
#include "code_image.h"
#include "driver.h"
#include "errors.h"
#include "image_choice.h"
#include "input_file.h"
#include "memory_plan.h"
#include "message_check.h"
#include "portability.h"
#include "trace_model.h"
#include "trace_reader.h"

namespace {

using kcap::format::FormatError;
using kcap::replay::ReplayError;

// Code images larger than this are left out: the seeds' are far smaller, and
// reading one whole is the reader's business (fuzz_reader.cpp).
constexpr uint64_t kMaxImage = 16u << 20;

volatile uint64_t g_sink = 0;

// Runs `step`; a trace error it names is an answer, not a bug.
template <typename Step>
void guarded(Step&& step) {
  try {
    step();
  } catch (const FormatError&) {
  } catch (const ReplayError&) {}
}

void walkGraph(const kcap::replay::GraphBodyRun& body, const std::string& where, uint64_t& sink) {
  for (size_t node : kcap::replay::topologicalOrder(body, where)) sink += node;
  for (const auto& node : body.nodes) {
    for (const auto& inner : node.bodies) walkGraph(inner, node.path, sink);
  }
}

void images(kcap::format::TraceReader& reader, const kcap::replay::TraceModel& model, uint64_t& sink) {
  for (const auto& launch : model.launches()) {
    guarded([&] {
      const kcap::replay::CodeRef code = model.codeFor(launch);
      const auto image = code.load->get().getModuleLoad().getImage();
      if (image.getSize() == 0 || image.getSize() > kMaxImage) return;
      const std::vector<uint8_t> bytes = reader.readContent(image, kMaxImage);
      const kcap::image::Bytes view{bytes.data(), bytes.size()};
      const kcap::replay::ImageChoice choice = kcap::replay::chooseCode(view, 90, false);
      const kcap::replay::ImageChoice ptx = kcap::replay::chooseCode(view, 90, true);
      sink += choice.description.size() + choice.why.size() + ptx.ptx.size();
      sink += kcap::replay::imageContents(view).size();
      if (const auto identified = kcap::image::identify(view)) sink += kcap::image::globalNames(*identified).size();
    });
  }
}

void checkpoints(const kcap::format::TraceReader& reader, const kcap::replay::TraceModel& model, uint64_t& sink) {
  guarded([&] {
    const auto plan = kcap::replay::CheckpointPlan::build(model, reader);
    uint64_t after = 0;
    for (const auto& checkpoint : plan.checkpoints()) {
      sink += checkpoint.name().size() + checkpoint.damage.size() + checkpoint.bytes;
      sink += plan.eventsBetween(after, checkpoint.seq).size();
      const auto [first, last] = plan.launchesBetween(after, checkpoint.seq);
      sink += first + last;
      if (const auto gap = model.missingBetween(after, checkpoint.seq)) sink += gap->first;
      after = checkpoint.seq;
    }
    sink += plan.eventsBetween(after, UINT64_MAX).size();
    for (const auto& group : kcap::replay::planGroups(plan.regions(), uint64_t{2} << 20)) {
      sink += group.start + group.size;
    }
  });
}

void replayModel(const std::string& path) {
  std::unique_ptr<kcap::format::TraceReader> reader;
  try {
    reader = kcap::format::TraceReader::open(path);
  } catch (const FormatError&) {
    return;
  }
  uint64_t sink = 0;
  guarded([&] {
    const auto model = kcap::replay::TraceModel::load(*reader);
    uint64_t previous = 0;
    for (const auto& launch : model.launches()) {
      sink += kcap::format::launchParamProblem(launch.event()).size();
      sink += model.memoryOpsBetween(previous, launch.seq()).size();
      previous = launch.seq();
    }
    for (const auto& record : model.graphLaunchRecords()) {
      guarded([&] {
        const kcap::replay::GraphRun run = model.graphRun(record);
        walkGraph(run.root, "graph launch", sink);
      });
    }
    images(*reader, model, sink);
    checkpoints(*reader, model, sink);
    guarded([&] {
      for (const auto& demand : kcap::replay::kernelDemands(model)) {
        if (const auto limits = kcap::replay::limitsFor(90)) {
          sink += kcap::replay::refusals(demand, *limits).size();
        }
        sink += demand.sharedNeeded() + demand.clusterBlocks();
      }
    });
  });
  g_sink = sink;  // keeps the work observable, so it is not optimised away
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kcap::fuzz::readAsGivenAndFixed(data, size, replayModel);
  return 0;
}
