#include "message_check.h"

#include <capnp/dynamic.h>

namespace kcap::format {
namespace {

void checkValue(const capnp::DynamicValue::Reader& value);

void checkStruct(const capnp::DynamicStruct::Reader& object) {
  auto schema = object.getSchema();
  for (auto field : schema.getNonUnionFields()) checkValue(object.get(field));
  // Only the active union member is stored; an unknown one (a newer writer)
  // has nothing to check.
  KJ_IF_MAYBE (active, object.which()) {
    checkValue(object.get(*active));
  }
}

void checkValue(const capnp::DynamicValue::Reader& value) {
  switch (value.getType()) {
    case capnp::DynamicValue::STRUCT:
      checkStruct(value.as<capnp::DynamicStruct>());
      break;
    case capnp::DynamicValue::LIST:
      for (auto element : value.as<capnp::DynamicList>()) checkValue(element);
      break;
    case capnp::DynamicValue::TEXT:
      value.as<capnp::Text>();
      break;
    case capnp::DynamicValue::DATA:
      value.as<capnp::Data>();
      break;
    default:
      break;  // scalars and enums cannot be malformed
  }
}

}  // namespace

void checkEventFields(schema::Event::Reader event) { checkStruct(capnp::toDynamic(event)); }

std::string launchParamProblem(schema::Launch::Reader launch) {
  const uint64_t total = launch.getParams().size();
  const auto outside = [&](const std::string& what, uint64_t offset, uint64_t size) {
    return what + " at byte " + std::to_string(offset) + " (" + std::to_string(size) + " bytes) lies outside the " +
           std::to_string(total) + "-byte parameter buffer";
  };
  const auto layout = launch.getParamLayout();
  for (uint32_t i = 0; i < layout.size(); ++i) {
    const uint64_t offset = layout[i].getOffset(), size = layout[i].getSize();
    if (offset > total || size > total - offset) return outside("parameter " + std::to_string(i), offset, size);
  }
  const auto words = launch.getPointers();
  for (uint32_t i = 0; i < words.size(); ++i) {
    const uint64_t offset = words[i].getOffset();
    if (offset > total || total - offset < 8) return outside("pointer word " + std::to_string(i), offset, 8);
  }
  return {};
}

}  // namespace kcap::format
