// The one place that reads the Event union: visitEvent hands the member an
// event holds to a visitor as its typed reader (schema::Launch::Reader,
// schema::Memcpy::Reader, ...), or an UnknownEvent for a member this schema
// does not know (a trace from a newer writer).
//
// A visitor is any callable overloaded for the readers it cares about; the
// usual way to build one is Overloaded{lambdas...}. A visitor without a
// generic fallback (`[](const auto&) {}`) must name every kind, UnknownEvent
// included, or it does not compile: when a member is added to the schema this
// file gains a case, and every exhaustive visitor is pointed at it. Every call
// of the visitor must return the same type, which visitEvent returns.
#pragma once

#include <cstdint>
#include <utility>

#include "kcap.capnp.h"

namespace kcap::format {

// A union member this schema lacks: `which` is its discriminant.
struct UnknownEvent {
  uint16_t which = 0;
};

// The union's discriminant, known to this schema or not: for counting and
// naming kinds (schema_names.h), not for dispatching on them.
inline uint16_t eventKind(schema::Event::Reader event) { return static_cast<uint16_t>(event.which()); }

// Whether a later writtenData event is to complete `event`: a Collective or
// Memcpy marked dataDeferred, an Alloc marked initialDeferred (the schema's
// WrittenData).
inline bool awaitsWrittenData(schema::Event::Reader event) {
  return (event.isCollective() && event.getCollective().getDataDeferred()) ||
         (event.isMemcpy() && event.getMemcpy().getDataDeferred()) ||
         (event.isAlloc() && event.getAlloc().getInitialDeferred());
}

template <typename... Handlers>
struct Overloaded : Handlers... {
  using Handlers::operator()...;
};
template <typename... Handlers>
Overloaded(Handlers...) -> Overloaded<Handlers...>;

template <typename Visitor>
decltype(auto) visitEvent(schema::Event::Reader event, Visitor&& visitor) {
  using Which = schema::Event::Which;
  // No default: the compiler names a member added to the schema but not here.
  switch (event.which()) {
    case Which::TRACE_BEGIN:
      return visitor(event.getTraceBegin());
    case Which::TRACE_END:
      return visitor(event.getTraceEnd());
    case Which::MODULE_LOAD:
      return visitor(event.getModuleLoad());
    case Which::MODULE_UNLOAD:
      return visitor(event.getModuleUnload());
    case Which::FUNCTION_BIND:
      return visitor(event.getFunctionBind());
    case Which::FUNCTION_ATTRIBUTE:
      return visitor(event.getFunctionAttribute());
    case Which::ALLOC:
      return visitor(event.getAlloc());
    case Which::FREE:
      return visitor(event.getFree());
    case Which::MEMCPY:
      return visitor(event.getMemcpy());
    case Which::MEMSET:
      return visitor(event.getMemset());
    case Which::SYNC:
      return visitor(event.getSync());
    case Which::LAUNCH:
      return visitor(event.getLaunch());
    case Which::LAUNCH_END:
      return visitor(event.getLaunchEnd());
    case Which::KERNEL_TIMING:
      return visitor(event.getKernelTiming());
    case Which::GRAPH_LAUNCH:
      return visitor(event.getGraphLaunch());
    case Which::API_ERROR:
      return visitor(event.getApiError());
    case Which::MESSAGE:
      return visitor(event.getMessage());
    case Which::TENSOR_MAP_ENCODE:
      return visitor(event.getTensorMapEncode());
    case Which::CHECKPOINT:
      return visitor(event.getCheckpoint());
    case Which::TRIGGER:
      return visitor(event.getTrigger());
    case Which::GRAPH_DEFINE:
      return visitor(event.getGraphDefine());
    case Which::GRAPH_NODE_UPDATE:
      return visitor(event.getGraphNodeUpdate());
    case Which::GRAPH_LAUNCH_END:
      return visitor(event.getGraphLaunchEnd());
    case Which::COLLECTIVE:
      return visitor(event.getCollective());
    case Which::WRITTEN_DATA:
      return visitor(event.getWrittenData());
  }
  return visitor(UnknownEvent{eventKind(event)});
}

}  // namespace kcap::format
