#include "schema_names.h"

#include <mutex>
#include <unordered_map>
#include <vector>

#include <capnp/dynamic.h>

#include "event_visitor.h"

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
// that may hold one (made at the type's first visit), so that an event is
// walked through those alone: no other field is read, and the schema is
// asked nothing per event.
class ContentWalker {
 public:
  ContentWalker() : content_(capnp::Schema::from<schema::Content>().getProto().getId()) {}

  void walk(capnp::DynamicStruct::Reader s, std::string& path,
            const std::function<void(const std::string&, schema::Content::Reader)>& fn) {
    const Plan& plan = planFor(s.getSchema());
    for (const Holder& holder : plan.fields) visitField(s, holder, path, fn);
    KJ_IF_MAYBE (active, s.which()) {
      const auto it = plan.unionMembers.find(active->getIndex());
      if (it != plan.unionMembers.end()) visitField(s, it->second, path, fn);
    }
  }

 private:
  // A field that may hold a Content, with what visiting it needs.
  struct Holder {
    capnp::StructSchema::Field field;
    capnp::Type type;
    bool isGroup = false;
    const char* name = nullptr;  // the compiled-in schema's text
  };
  struct Plan {
    std::vector<Holder> fields;                         // non-union
    std::unordered_map<unsigned, Holder> unionMembers;  // by field index
  };
  struct SchemaHash {
    size_t operator()(const capnp::StructSchema& schema) const { return schema.hashCode(); }
  };

  const Plan& planFor(capnp::StructSchema schema) {
    const auto it = plans_.find(schema);
    if (it != plans_.end()) return it->second;
    Plan plan;
    for (auto field : schema.getFields()) {
      const capnp::Type type = field.getType();
      if (!mayHold(type)) continue;
      Holder holder{field, type, field.getProto().isGroup(), field.getProto().getName().cStr()};
      if (field.getProto().getDiscriminantValue() == capnp::schema::Field::NO_DISCRIMINANT) {
        plan.fields.push_back(holder);
      } else {
        plan.unionMembers.emplace(field.getIndex(), holder);
      }
    }
    return plans_.emplace(schema, std::move(plan)).first->second;
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

  void visitField(capnp::DynamicStruct::Reader s, const Holder& holder, std::string& path,
                  const std::function<void(const std::string&, schema::Content::Reader)>& fn) {
    if (!holder.isGroup && !s.has(holder.field)) return;
    size_t mark = path.size();
    if (!path.empty()) path += '.';
    path += holder.name;
    visitValue(s.get(holder.field), holder.type, path, fn);
    path.resize(mark);
  }

  void visitValue(capnp::DynamicValue::Reader value, capnp::Type type, std::string& path,
                  const std::function<void(const std::string&, schema::Content::Reader)>& fn) {
    if (type.isStruct()) {
      auto s = value.as<capnp::DynamicStruct>();
      if (type.asStruct().getProto().getId() == content_) {
        fn(path, s.as<schema::Content>());
      } else {
        walk(s, path, fn);
      }
    } else if (type.isList()) {
      auto list = value.as<capnp::DynamicList>();
      capnp::Type element = type.asList().getElementType();
      for (unsigned i = 0; i < list.size(); ++i) {
        size_t mark = path.size();
        path += "[" + std::to_string(i) + "]";
        visitValue(list[i], element, path, fn);
        path.resize(mark);
      }
    }
  }

  uint64_t content_;
  std::unordered_map<uint64_t, bool> memo_;
  std::unordered_map<capnp::StructSchema, Plan, SchemaHash> plans_;
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
  // One walker (its cache of which types hold contents), never destroyed:
  // thread_local objects and static ones go before or among the process's
  // exit handlers, and the shim reads events from one (its last checkpoint,
  // appended to a flight recorder's ring).
  static std::mutex* const mutex = new std::mutex;
  static ContentWalker* const walker = new ContentWalker;
  std::string path;
  const std::lock_guard lock(*mutex);
  walker->walk(capnp::toDynamic(event), path, fn);
}

}  // namespace kcap::format
