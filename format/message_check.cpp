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
  KJ_IF_MAYBE(active, object.which()) { checkValue(object.get(*active)); }
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

}  // namespace kcap::format
