// What replay needs from a trace, read once: the launches, the code and
// memory events around them, in file order.
//
// Events are kept as compact copies of their messages (the reader's buffers
// do not outlive a callback), and looked up the way the schema says handles
// resolve: by the most recent event, before the launch, that bound them.
// Pure host code: no driver.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kcap.capnp.h"
#include "trace_reader.h"

namespace kcap::replay {

// One event, copied out of the reader.
class StoredEvent {
 public:
  explicit StoredEvent(schema::Event::Reader event);
  schema::Event::Reader get() const { return root_; }
  uint64_t seq() const { return root_.getSeq(); }

 private:
  kj::Array<capnp::word> words_;
  std::unique_ptr<capnp::FlatArrayMessageReader> message_;
  schema::Event::Reader root_;
};

struct LaunchRecord {
  uint64_t launchIndex = 0;
  std::shared_ptr<StoredEvent> launch;  // the Launch event
  std::shared_ptr<StoredEvent> end;     // its LaunchEnd; null when the trace has none (crash, fault)
  std::optional<uint64_t> recordedDurationNs;  // from kernelTiming (--timing)

  schema::Launch::Reader event() const { return launch->get().getLaunch(); }
  uint64_t seq() const { return launch->seq(); }
  bool hasPre() const { return event().getPre().size() != 0; }
  bool hasPost() const { return end != nullptr && end->get().getLaunchEnd().getPost().size() != 0; }
};

// A recorded code object the launch needs: the ModuleLoad, and the kernel.
struct CodeRef {
  std::shared_ptr<StoredEvent> load;  // ModuleLoad
  std::string kernelName;
  std::vector<std::shared_ptr<StoredEvent>> attributes;  // FunctionAttribute events that apply, in order
  // The FunctionBind events the launch handle resolved through, in the order
  // followed: the handle's own, then its CUkernel's (cuKernelGetFunction) or
  // its module's (cuLibraryGetModule). What `kcap extract` keeps.
  std::vector<std::shared_ptr<StoredEvent>> binds;
};

// The index (in the parameter layout) of the first parameter holding a
// pointer into [base, base + size), if any: names a compared range.
std::optional<uint32_t> parameterPointingInto(schema::Launch::Reader launch, uint64_t base, uint64_t size);

class TraceModel {
 public:
  // Reads every event. Problems the reader found stay in reader.problems().
  static TraceModel load(format::TraceReader& reader);

  const std::vector<LaunchRecord>& launches() const { return launches_; }
  const LaunchRecord* launch(uint64_t launchIndex) const;
  const StoredEvent* traceBegin() const { return traceBegin_.get(); }

  // The code of a launch: resolves its handle through FunctionBind events
  // (CUkernel -> library, CUfunction from cuKernelGetFunction -> its CUkernel)
  // to the ModuleLoad. Throws ReplayError naming what is missing.
  CodeRef codeFor(const LaunchRecord& launch) const;

  // Memory operations (memcpy and memset into device memory) with seq in
  // (afterSeq, beforeSeq), in order: what ran between two launches.
  std::vector<const StoredEvent*> memoryOpsBetween(uint64_t afterSeq, uint64_t beforeSeq) const;

 private:
  std::shared_ptr<StoredEvent> traceBegin_;
  std::vector<LaunchRecord> launches_;  // by launchIndex order (file order)
  std::map<uint64_t, size_t> byIndex_;  // launchIndex -> position in launches_
  // handle -> events that bound it, in seq order
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> loads_;       // ModuleLoad by module/library handle
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> binds_;       // FunctionBind by launch handle
  std::map<uint64_t, std::vector<std::shared_ptr<StoredEvent>>> attributes_;  // FunctionAttribute by handle
  std::vector<std::shared_ptr<StoredEvent>> memoryOps_;                        // Memcpy / Memset, seq order

  static std::shared_ptr<StoredEvent> latestBefore(const std::vector<std::shared_ptr<StoredEvent>>& events,
                                                   uint64_t seq);
};

}  // namespace kcap::replay
