#include "schema_names.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <capnp/any.h>
#include <capnp/dynamic.h>

#include "event_visitor.h"
#include "struct_layout.h"

namespace kcap::format {

std::string enumName(capnp::EnumSchema schema, uint16_t value) {
  auto enumerants = schema.getEnumerants();
  for (auto e : enumerants) {
    if (e.getOrdinal() == value) return e.getProto().getName().cStr();
  }
  return "unknown(" + std::to_string(value) + ")";
}

namespace {

// A struct's union member names by discriminant value; nullptr where none.
struct UnionNames {
  std::vector<const char*> names;
  explicit UnionNames(capnp::StructSchema schema) {
    for (auto field : schema.getUnionFields()) {
      uint16_t d = field.getProto().getDiscriminantValue();
      if (names.size() <= d) names.resize(d + 1u, nullptr);
      names[d] = field.getProto().getName().cStr();
    }
  }
};

const UnionNames& eventUnion() {
  static const UnionNames u(capnp::Schema::from<schema::Event>());
  return u;
}

// Finds the Contents below an event. Per struct type it keeps the fields
// that may hold one, made once for every type reachable from Event (the
// schema is compiled in): an event is walked through those fields alone,
// each pointer read by its slot, and the schema is asked nothing per event.
class ContentWalker {
 public:
  using Visit = std::function<void(const std::string&, schema::Content::Reader)>;

  ContentWalker() : content_(capnp::Schema::from<schema::Content>().getProto().getId()) {
    event_ = planFor(capnp::Schema::from<schema::Event>());
  }

  void walkEvent(schema::Event::Reader event, std::string& path, const Visit& fn) const {
    walk(capnp::AnyStruct::Reader(event), *event_, path, fn);
  }

 private:
  struct Plan;
  // A field that may hold a Content: a pointer in its struct's pointer
  // section, a Content, a struct or a list (of lists) of them.
  struct Holder {
    uint32_t slot = 0;
    capnp::Type type;
    const char* name = nullptr;  // the compiled-in schema's text
    bool content = false;        // the struct it holds (or its lists' elements) is a Content
    const Plan* plan = nullptr;  // else that struct's plan
  };
  struct Plan {
    std::vector<Holder> fields;                       // outside the union
    uint32_t discriminantOffset = 0;                  // in 16-bit units of the data section
    std::vector<std::optional<Holder>> unionMembers;  // by discriminant value
  };

  // Plans live in the map's nodes, whose addresses never change: a plan
  // can name the plan of a type that is still being made (recursive types).
  const Plan* planFor(capnp::StructSchema schema) {
    if (const auto it = plans_.find(schema); it != plans_.end()) return &it->second;
    Plan& plan = plans_[schema];
    const auto node = schema.getProto().getStruct();
    plan.discriminantOffset = node.getDiscriminantOffset();
    plan.unionMembers.resize(node.getDiscriminantCount());
    for (auto field : schema.getFields()) {
      const capnp::Type type = field.getType();
      if (!mayHold(type)) continue;
      const auto proto = field.getProto();
      if (proto.isGroup()) {
        // A group's fields lie in its parent's sections, not behind a pointer.
        // The schema has none; one added fails every walk until it is handled.
        throw std::logic_error("kcap.capnp: the content walk has no plan for group " + std::string(proto.getName()));
      }
      Holder holder{proto.getSlot().getOffset(), type, proto.getName().cStr()};
      capnp::Type inner = type;
      while (inner.isList()) inner = inner.asList().getElementType();
      if (inner.asStruct().getProto().getId() == content_) {
        holder.content = true;
      } else {
        holder.plan = planFor(inner.asStruct());
      }
      const uint16_t discriminant = proto.getDiscriminantValue();
      if (discriminant == capnp::schema::Field::NO_DISCRIMINANT) {
        plan.fields.push_back(holder);
      } else if (discriminant < plan.unionMembers.size()) {
        plan.unionMembers[discriminant] = holder;
      }
    }
    return &plan;
  }

  // Whether values of this struct type can hold a Content somewhere below.
  bool mayHold(capnp::StructSchema schema) {
    uint64_t id = schema.getProto().getId();
    if (id == content_) return true;
    auto it = memo_.find(id);
    if (it != memo_.end()) return it->second;
    memo_[id] = false;  // cycle guard
    bool result = false;
    for (auto field : schema.getFields()) {
      if (mayHold(field.getType())) {
        result = true;
        break;
      }
    }
    memo_[id] = result;
    return result;
  }

  bool mayHold(capnp::Type type) {
    if (type.isStruct()) return mayHold(type.asStruct());
    if (type.isList()) return mayHold(type.asList().getElementType());
    return false;
  }

  void walk(capnp::AnyStruct::Reader s, const Plan& plan, std::string& path, const Visit& fn) const {
    for (const Holder& holder : plan.fields) visitField(s, holder, path, fn);
    if (plan.unionMembers.empty()) return;
    // Only the active union member is stored; an unknown one (a newer
    // writer) holds nothing to visit.
    const uint16_t discriminant = unionDiscriminant(s, plan.discriminantOffset);
    if (discriminant < plan.unionMembers.size() && plan.unionMembers[discriminant]) {
      visitField(s, *plan.unionMembers[discriminant], path, fn);
    }
  }

  void visitField(capnp::AnyStruct::Reader s, const Holder& holder, std::string& path, const Visit& fn) const {
    const auto pointers = s.getPointerSection();
    if (holder.slot >= pointers.size() || pointers[holder.slot].isNull()) return;  // not set
    const size_t mark = path.size();
    if (!path.empty()) path += '.';
    path += holder.name;
    const capnp::AnyPointer::Reader value = pointers[holder.slot];
    if (holder.type.isList()) {
      visitList(value.getAs<capnp::DynamicList>(holder.type.asList()), holder, path, fn);
    } else if (holder.content) {
      fn(path, value.getAs<schema::Content>());
    } else {
      walk(value.getAs<capnp::AnyStruct>(), *holder.plan, path, fn);
    }
    path.resize(mark);
  }

  void visitList(const capnp::DynamicList::Reader& list, const Holder& holder, std::string& path,
                 const Visit& fn) const {
    const bool ofLists = list.getSchema().getElementType().isList();
    for (unsigned i = 0; i < list.size(); ++i) {
      const size_t mark = path.size();
      path += "[" + std::to_string(i) + "]";
      const capnp::DynamicValue::Reader item = list[i];
      if (ofLists) {
        visitList(item.as<capnp::DynamicList>(), holder, path, fn);
      } else if (holder.content) {
        fn(path, item.as<capnp::DynamicStruct>().as<schema::Content>());
      } else {
        walk(item.as<capnp::DynamicStruct>().as<capnp::AnyStruct>(), *holder.plan, path, fn);
      }
      path.resize(mark);
    }
  }

  uint64_t content_;
  std::unordered_map<uint64_t, bool> memo_;
  std::unordered_map<capnp::StructSchema, Plan, SchemaHash> plans_;
  const Plan* event_ = nullptr;
};

}  // namespace

const char* eventTypeName(uint16_t which) {
  const auto& names = eventUnion().names;
  return which < names.size() ? names[which] : nullptr;
}

const char* eventTypeName(schema::Event::Reader event) { return eventTypeName(eventKind(event)); }

const char* graphNodeTypeName(schema::GraphNode::Reader node) {
  static const UnionNames u(capnp::Schema::from<schema::GraphNode>());
  const auto which = static_cast<uint16_t>(node.which());
  return which < u.names.size() && u.names[which] != nullptr ? u.names[which] : "unknown";
}

std::vector<std::string> eventTypeNames() {
  std::vector<std::string> out;
  for (const char* n : eventUnion().names) {
    if (n) out.emplace_back(n);
  }
  return out;
}

void forEachContent(schema::Event::Reader event,
                    const std::function<void(const std::string&, schema::Content::Reader)>& fn) {
  // One walker, immutable once made (no lock to read it), never destroyed:
  // thread_local objects and static ones go before or among the process's
  // exit handlers, and the shim reads events from one (its last checkpoint,
  // appended to a flight recorder's ring).
  static const ContentWalker* const walker = new ContentWalker;
  std::string path;
  walker->walkEvent(event, path, fn);
}

}  // namespace kcap::format
