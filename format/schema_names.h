// Names from the schema, found by reflection so that members added to it later
// are covered without code here: enumerant names, the Event union's member
// names, and a walk over every Content an event references.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <capnp/schema.h>

#include "kcap.capnp.h"

namespace kcap::format {

// The name of an enumerant, or "unknown(N)" for a value this schema lacks.
std::string enumName(capnp::EnumSchema schema, uint16_t value);
template <typename E>
std::string enumName(E value) {
  return enumName(capnp::Schema::from<E>(), static_cast<uint16_t>(value));
}

// The union member an event holds ("launch", "memcpy", ...) or nullptr when it
// is a member this schema does not know (a newer writer).
const char* eventTypeName(schema::Event::Reader event);
const char* eventTypeName(uint16_t which);
std::vector<std::string> eventTypeNames();  // every known member, schema order

// A graph node's kind ("kernel", "memcpy", ...; "unknown" for a member this
// schema lacks).
const char* graphNodeTypeName(schema::GraphNode::Reader node);

// Calls fn(path, content) for every Content the event references, wherever it
// sits (launch.pre[i].content, moduleLoad.image, memcpy.data, ...).
// `path` names the field, e.g. "launch.pre[2].content".
void forEachContent(schema::Event::Reader event,
                    const std::function<void(const std::string& path, schema::Content::Reader content)>& fn);

}  // namespace kcap::format
