#include "message_check.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <capnp/any.h>
#include <capnp/dynamic.h>
#include <kj/debug.h>

#include "struct_layout.h"

namespace kcap::format {
namespace {

// Only pointers can be malformed (structs, lists, text, data): scalars and
// enums are read from the data section, which the segment's bounds already
// cover.
bool canBeMalformed(capnp::Type type) { return type.isStruct() || type.isList() || type.isText() || type.isData(); }

struct CheckPlan;

// One field a check reads: a pointer in the struct's pointer section, and
// what the schema says it holds.
struct CheckedField {
  uint32_t slot = 0;                // its index in the pointer section
  capnp::Type type;                 // a struct, a list, Text or Data
  const CheckPlan* plan = nullptr;  // a struct: the plan of its type; a list: of its struct elements
};

// Per struct type, what a check reads: the fields outside its
// union that can be malformed, and, by discriminant value, the union member
// that can (none: nothing to check). Made once for every type reachable
// from Event (the schema is compiled in): a check asks the schema nothing
// per event, and reads each pointer by its slot, as the generated code does.
struct CheckPlan {
  std::vector<CheckedField> fields;
  std::vector<bool> typedSlots;                           // by pointer slot: a field outside the union reads it
  uint32_t discriminantOffset = 0;                        // in 16-bit units of the data section
  std::vector<std::optional<CheckedField>> unionMembers;  // by discriminant value; empty: no union
};

class CheckPlans {
 public:
  CheckPlans() : event_(add(capnp::Schema::from<schema::Event>())) {}

  const CheckPlan& event() const { return *event_; }

 private:
  // Plans live in the map's nodes, whose addresses never change: a plan
  // can name the plan of a type that is still being made (recursive types).
  const CheckPlan* add(capnp::StructSchema schema) {
    if (const auto it = plans_.find(schema); it != plans_.end()) return &it->second;
    CheckPlan& plan = plans_[schema];
    const auto node = schema.getProto().getStruct();
    plan.discriminantOffset = node.getDiscriminantOffset();
    if (node.getDiscriminantCount() != 0) plan.unionMembers.resize(node.getDiscriminantCount());
    for (auto field : schema.getFields()) {
      const capnp::Type type = field.getType();
      if (!canBeMalformed(type)) continue;
      CheckedField checked = describe(field, type);
      const uint16_t discriminant = field.getProto().getDiscriminantValue();
      if (discriminant == capnp::schema::Field::NO_DISCRIMINANT) {
        plan.fields.push_back(checked);
        if (checked.slot >= plan.typedSlots.size()) plan.typedSlots.resize(checked.slot + 1);
        plan.typedSlots[checked.slot] = true;
      } else if (discriminant < plan.unionMembers.size()) {
        plan.unionMembers[discriminant] = checked;
      }
    }
    return &plan;
  }

  CheckedField describe(capnp::StructSchema::Field field, capnp::Type type) {
    const auto proto = field.getProto();
    if (proto.isGroup()) {
      // A group's fields lie in its parent's sections, not behind a pointer.
      // The schema has none; one added fails every read until it is handled.
      throw std::logic_error("kcap.capnp: the field check has no plan for group " + std::string(proto.getName()));
    }
    CheckedField checked;
    checked.slot = proto.getSlot().getOffset();
    checked.type = type;
    if (type.isStruct()) {
      checked.plan = add(type.asStruct());
    } else if (type.isList()) {
      addReachable(type.asList().getElementType(), checked);
    }
    return checked;
  }

  // The plan of the struct elements of a list, or of its lists' elements
  // (at whatever depth).
  void addReachable(capnp::Type element, CheckedField& list) {
    if (element.isStruct()) {
      list.plan = add(element.asStruct());
    } else if (element.isList()) {
      addReachable(element.asList().getElementType(), list);
    }
  }

  std::unordered_map<capnp::StructSchema, CheckPlan, SchemaHash> plans_;
  const CheckPlan* event_;
};

// Immutable once made: no lock to read it. Never destroyed, so that a read
// from an exit handler (the shim's) still finds it.
const CheckPlans& checkPlans() {
  static const CheckPlans* const plans = new CheckPlans;
  return *plans;
}

void checkStruct(capnp::AnyStruct::Reader object, const CheckPlan& plan);

// Reading a list checks its pointer and its element size against the
// schema; reading each element of a list of pointers checks that pointer.
// `plan`: the plan of the struct elements, at whatever depth of lists.
void checkList(const capnp::DynamicList::Reader& list, const CheckPlan* plan) {
  const capnp::Type element = list.getSchema().getElementType();
  if (element.isStruct()) {
    for (auto item : list) checkStruct(item.as<capnp::DynamicStruct>().as<capnp::AnyStruct>(), *plan);
  } else if (element.isList()) {
    for (auto item : list) checkList(item.as<capnp::DynamicList>(), plan);
  } else if (element.isText() || element.isData()) {
    for (auto item : list) static_cast<void>(item);  // operator[] reads the element's pointer
  }
}

// Reads `value` as `type` says. A null pointer reads as the default:
// nothing to check.
void checkPointer(capnp::AnyPointer::Reader value, capnp::Type type, const CheckPlan* plan) {
  if (value.isNull()) return;
  if (type.isStruct()) {
    checkStruct(value.getAs<capnp::AnyStruct>(), *plan);
  } else if (type.isText()) {
    value.getAs<capnp::Text>();
  } else if (type.isData()) {
    value.getAs<capnp::Data>();
  } else if (type.isList()) {
    checkList(value.getAs<capnp::DynamicList>(type.asList()), plan);
  }
}

void checkField(capnp::AnyStruct::Reader object, const CheckedField& field) {
  const auto pointers = object.getPointerSection();
  if (field.slot >= pointers.size()) return;  // an older writer's smaller struct: the default
  checkPointer(pointers[field.slot], field.type, field.plan);
}

// A pointer no schema field types: a newer writer's field, an unknown union
// member, a slot the stored member does not use. No consumer reads it, but
// copying the struct (a summary keeping the trace's first event, extract
// writing an event out) copies every pointer and throws on a malformed one.
// Walked without a schema: each struct's and list's pointers in turn. The
// schema holds no interface, so a capability pointer is malformed too.
void checkUntyped(capnp::AnyPointer::Reader value) {
  switch (value.getPointerType()) {  // an unknown kind of pointer throws here
    case capnp::PointerType::NULL_:
      return;
    case capnp::PointerType::CAPABILITY:
      KJ_FAIL_REQUIRE("a capability pointer, which no field of the trace's schema holds");
    case capnp::PointerType::STRUCT:
      for (auto pointer : value.getAs<capnp::AnyStruct>().getPointerSection()) checkUntyped(pointer);
      return;
    case capnp::PointerType::LIST: {
      const auto list = value.getAs<capnp::AnyList>();
      if (list.getElementSize() == capnp::ElementSize::POINTER) {
        for (auto pointer : list.as<capnp::List<capnp::AnyPointer>>()) checkUntyped(pointer);
      } else if (list.getElementSize() == capnp::ElementSize::INLINE_COMPOSITE) {
        for (auto element : list.as<capnp::List<capnp::AnyStruct>>()) {
          for (auto pointer : element.getPointerSection()) checkUntyped(pointer);
        }
      }
      return;
    }
  }
}

void checkStruct(capnp::AnyStruct::Reader object, const CheckPlan& plan) {
  for (const CheckedField& field : plan.fields) checkField(object, field);
  // Only the active union member is stored; an unknown one (a newer
  // writer) has no field to check, only its pointers.
  const CheckedField* member = nullptr;
  if (!plan.unionMembers.empty()) {
    const uint16_t discriminant = unionDiscriminant(object, plan.discriminantOffset);
    if (discriminant < plan.unionMembers.size() && plan.unionMembers[discriminant]) {
      member = &*plan.unionMembers[discriminant];
      checkField(object, *member);
    }
  }
  const auto pointers = object.getPointerSection();
  for (uint32_t slot = 0; slot < pointers.size(); ++slot) {
    const bool typed =
        (slot < plan.typedSlots.size() && plan.typedSlots[slot]) || (member != nullptr && member->slot == slot);
    if (!typed) checkUntyped(pointers[slot]);
  }
}

}  // namespace

void checkEventFields(schema::Event::Reader event) {
  checkStruct(capnp::AnyStruct::Reader(event), checkPlans().event());
}

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
