#include "message_check.h"

#include <unordered_map>
#include <vector>

#include <capnp/dynamic.h>

namespace kcap::format {
namespace {

// Only pointers can be malformed (structs, groups, lists, text, data):
// scalars and enums are read from the data section, which the segment's
// bounds already cover.
bool canBeMalformed(capnp::Type type) { return type.isStruct() || type.isList() || type.isText() || type.isData(); }

// Per struct type, the fields a check reads: its non-union pointer fields,
// and which union members are pointers. Made once for every struct reachable
// from Event (the schema is compiled in), so that a check reads no scalar
// field and asks the schema nothing per event.
struct CheckPlan {
  std::vector<capnp::StructSchema::Field> fields;
  std::vector<bool> unionMemberChecked;  // by field index
};

struct SchemaHash {
  size_t operator()(const capnp::StructSchema& schema) const { return schema.hashCode(); }
};

class CheckPlans {
 public:
  CheckPlans() { add(capnp::Schema::from<schema::Event>()); }

  // nullptr for a struct type not reachable from Event (none is).
  const CheckPlan* find(const capnp::StructSchema& schema) const {
    const auto it = plans_.find(schema);
    return it == plans_.end() ? nullptr : &it->second;
  }

 private:
  void add(capnp::StructSchema schema) {
    if (plans_.count(schema) != 0) return;
    CheckPlan& plan = plans_[schema];
    const auto fields = schema.getFields();
    plan.unionMemberChecked.assign(fields.size(), false);
    for (auto field : fields) {
      const capnp::Type type = field.getType();
      if (!canBeMalformed(type)) continue;
      if (field.getProto().getDiscriminantValue() == capnp::schema::Field::NO_DISCRIMINANT) {
        plan.fields.push_back(field);
      } else {
        plan.unionMemberChecked[field.getIndex()] = true;
      }
      addReachable(type);
    }
  }

  void addReachable(capnp::Type type) {
    if (type.isStruct()) {
      add(type.asStruct());
    } else if (type.isList()) {
      addReachable(type.asList().getElementType());
    }
  }

  std::unordered_map<capnp::StructSchema, CheckPlan, SchemaHash> plans_;
};

// Immutable once made: no lock to read it. Never destroyed, so that a read
// from an exit handler (the shim's) still finds it.
const CheckPlans& checkPlans() {
  static const CheckPlans* const plans = new CheckPlans;
  return *plans;
}

void checkValue(const capnp::DynamicValue::Reader& value);

void checkStruct(const capnp::DynamicStruct::Reader& object) {
  const CheckPlan* plan = checkPlans().find(object.getSchema());
  if (plan == nullptr) [[unlikely]] {
    for (auto field : object.getSchema().getNonUnionFields()) checkValue(object.get(field));
  } else {
    for (const auto& field : plan->fields) checkValue(object.get(field));
  }
  // Only the active union member is stored; an unknown one (a newer writer)
  // has nothing to check.
  KJ_IF_MAYBE (active, object.which()) {
    if (plan == nullptr || plan->unionMemberChecked[active->getIndex()]) checkValue(object.get(*active));
  }
}

void checkValue(const capnp::DynamicValue::Reader& value) {
  switch (value.getType()) {
    case capnp::DynamicValue::STRUCT:
      checkStruct(value.as<capnp::DynamicStruct>());
      break;
    case capnp::DynamicValue::LIST: {
      const auto list = value.as<capnp::DynamicList>();  // checks the list pointer and its element size
      if (canBeMalformed(list.getSchema().getElementType())) {
        for (auto element : list) checkValue(element);
      }
      break;
    }
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
